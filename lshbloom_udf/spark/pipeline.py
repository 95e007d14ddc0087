"""One deduplication run, stage by stage, with its index transaction (if any) already open.

1. :meth:`DedupRun.pin` — the input, with a row id, pinned on the executors
   (``localCheckpoint`` by default): it is read once, and the rows the driver
   pass decides are the rows the join returns, even over a nondeterministic
   input.
2. :meth:`DedupRun.check_input` — one aggregation over the pinned rows: their
   number, fingerprints and the ids' uniqueness; whether a kept index already
   ingested these documents (:mod:`lshbloom_udf.spark.ingest`); with ``exact_copies``, a second one finds the
   byte-identical copies, decided before the pass (:mod:`lshbloom_udf.spark.exact`). When nothing
   needs them before the pass (no id column, no committed run to compare with),
   the pin's own job counts the rows, the driver pass's keys stage measures the
   texts it reads anyway (the same sums), and the aggregation runs only if the
   pass did not (:meth:`DedupRun.check_after_pass`).
3. :meth:`DedupRun.decide` — the pass the settings name
   (:mod:`lshbloom_udf.spark.passes`: the driver pass, the sharded pass, or the
   earlier run's stored flags when it is reproduced) over the pinned rows'
   band keys: a frozen :class:`~lshbloom_udf.spark.passes.PassResult`.
4. :meth:`DedupRun.verify` — with ``verify``, the flags checked against the
   documents' Jaccard similarity (:mod:`lshbloom_udf.spark.verify`).
5. :meth:`DedupRun.join` — the decisions joined back to the pinned rows
   (:mod:`lshbloom_udf.spark.join`).

Each stage produces its value once (:class:`InputCheck`, :class:`InputMeasure`,
the ``PassResult`` and ``ScanResult``, the verified flags): :class:`DedupRun` refuses
to assign one of :data:`STAGE_VALUES` a second time, so no later stage changes it.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Optional

import numpy as np

from lshbloom_udf import hooks
from lshbloom_udf.common import col
from lshbloom_udf.errors import DedupInputError, InternalError
from lshbloom_udf.index import run_params
from lshbloom_udf.index.run_record import RunRecord
from lshbloom_udf.log import console_progress, ensure_visible, step
from lshbloom_udf.memory import DriverMemory
from lshbloom_udf.spark.clusters import cluster_summary
from lshbloom_udf.spark.exact import ExactCopies, find_exact_copies
from lshbloom_udf.spark.ids import check_id_hashes, check_ids, hashes_fit
from lshbloom_udf.spark.ingest import InputCheck, InputMeasure, inspect_input, prior_run
from lshbloom_udf.spark.join import join_decisions
from lshbloom_udf.spark.keys import KEYED_SCHEMA, ROW_COL, TaskThreads, count_pinned, keys_mapper, row_id
from lshbloom_udf.spark.order import ordered
from lshbloom_udf.spark.passes import Decided, Decider, PassInput, PassResult, ScanRequest, ScanResult, select_pass
from lshbloom_udf.spark.passes.driver.decide import streams
from lshbloom_udf.spark.passes.driver.sender import RecordFields
from lshbloom_udf.spark.result import DedupResult, RunReport, check_bands

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# The values the stages produce, each once: DedupRun refuses to assign one a second time (a later stage never
# changes an earlier one's). The class attributes below are their values before the stage (or when it is skipped).
STAGE_VALUES = frozenset({
    "_pinned", "pinned_rows", "threads", "checked", "measured_before", "measured_after", "measure_later", "ids_later",
    "repeats", "copies", "crossrun", "verify_memory", "clusters", "records", "paragraph_outcome",
})



class DedupRun:
    """One run: pin → check → decide → verify → join, each stage's value produced once (:data:`STAGE_VALUES`)."""

    _pinned: Optional[DataFrame] = None  # pin()'s
    pinned_rows: Optional[int] = None  # counted by the pin's own job (a local checkpoint)
    threads = TaskThreads()  # native threads per task over the pinned partitions, from their counts
    checked = InputCheck()
    measured_before = InputMeasure()  # check_input's (empty when the pass measures the input)
    measured_after: Optional[InputMeasure] = None  # check_after_pass's, when the pass (or the run after it) measured
    measure_later = False  # the pass measures the input (or the run does, after it)
    ids_later = False  # the ids are checked after the pass (from its keys stage's hashes, or aggregated)
    repeats: Optional[RunRecord] = None  # under force_new_ingest, the committed run this one ingests again
    copies: Optional[ExactCopies] = None  # the exact copies, decided before the pass (None: not looked for)
    # Verification against the earlier runs' records (lshbloom_udf.spark.verify.crossrun), and this run's records.
    crossrun = None
    records: Optional[dict] = None
    verify_memory: Optional[dict] = None  # the driver's memory and budgets verification used (the summary)
    clusters: Optional[dict] = None  # the groups verification found (lshbloom_udf.spark.clusters; the summary)
    paragraph_outcome = None  # the paragraph stage's (lshbloom_udf.spark.paragraphs.ParagraphOutcome)

    def __init__(self, df, config, params, txn, run_info: Optional[dict], t_start: float):
        self.df, self.config, self.params, self.txn = df, config, params, txn
        self.run_info = run_info
        # The settings' warnings, logged now, before any Spark work; the summary reports them.
        self.warnings = tuple(check_bands(config, params))
        self.index_dir = txn.path if txn is not None else None
        self.seconds: dict = {}
        self._t = t_start
        self._t_start = t_start

    def __setattr__(self, name: str, value) -> None:
        if name in STAGE_VALUES and name in self.__dict__:
            raise InternalError(f"internal error: the run's {name} was already produced; a stage sets it once")
        super().__setattr__(name, value)

    def _lap(self, stage: str) -> None:
        now = time.monotonic()
        self.seconds[stage] = now - self._t
        self._t = now

    @property
    def pinned(self) -> DataFrame:
        """The input with its row id, pinned on the executors (:meth:`pin`, the first stage)."""
        if self._pinned is None:
            raise InternalError("internal error: the run used its input before pinning it")
        return self._pinned

    def step(self, name: str):
        """A step of the run: its Spark jobs described ``lshbloom: <name>``, logged at start and end."""
        return step(self.df.sparkSession, name, show=self.config.progress)

    def execute(self) -> DedupResult:
        if self.config.progress:
            ensure_visible()
        with console_progress(self.df.sparkSession, self.config.progress):
            with self.step("pin"):
                self.pin()
            with self.step("check input"):
                self.check_input()
            if self.config.exact_copies and self.documents > 1 and (self.prior is None or self.config.force_new_ingest):
                with self.step("exact copies"):
                    self.copies = find_exact_copies(self.pinned, self.config.text_column)
                    self._lap("exact_copies")
            DriverMemory.of_session(self.df.sparkSession).require(self.documents)  # said now, not as a JVM OOM later
            given = self.pass_input()
            pass_ = select_pass(given)
            with self.step(pass_.title):
                decided, scanned = self.decide(pass_, given)
            try:
                return self._after_pass(pass_, decided, scanned)
            finally:
                scanned.close()  # the record spool, verification's candidate source

    def _after_pass(self, pass_: Decider, decided: PassResult, scanned: ScanResult) -> DedupResult:
        """Verify, record and join what the pass decided, with what its keys scan took."""
        if self.measure_later or self.ids_later:
            self.check_after_pass(scanned)
        verified = None
        if self.config.verify:
            with self.step("verify"):
                verified = self.verify(decided.rows(), decided.index.to_dict(), scanned)
        dup_rows = self.copies.with_flags(decided.rows()) if self.copies else decided.rows()
        if self.config.paragraph_spec is not None:
            with self.step("paragraphs"):
                self.paragraph_stage(verified.rows if verified is not None else dup_rows, decided)
        if self.index_dir is not None and decided.stats is not None:  # a run the index will record
            with self.step("records"):
                final = verified.rows if verified is not None else dup_rows
                self.write_records(final, self.documents - len(final) - self.empty(decided), scanned.records)
        result_df = self.join(dup_rows, verified)
        self._lap("join_plan")
        self.seconds["total"] = self._t - self._t_start
        return self.result(pass_, decided, dup_rows, verified, result_df)

    def result(self, pass_: Decider, decided: PassResult, dup_rows, verified, result_df) -> DedupResult:
        """The run's DataFrame, the report its summary is made of, and its record (what the index's manifest will
        keep of it)."""
        record = self.run_record(decided)
        index = decided.index
        if self.measure_later and self.measured.fingerprints is not None:  # the pass's report came before them
            index = index.replace(content_fingerprint=self.measured.fingerprints[0],
                                  sequence_fingerprint=self.measured.fingerprints[1])
        duplicates = self.pass_duplicates(decided) if verified is None else len(verified.rows)
        outcome, spec = self.paragraph_outcome, self.config.paragraph_spec
        if outcome is not None:  # the emptied documents are flagged with the duplicates
            duplicates += len(outcome.emptied_rows)
        report = RunReport(
            self.config, decided.params, self.documents, duplicates, self.empty(decided), index,
            {**self.seconds, **{k: v for k, v in decided.seconds.items() if v is not None}}, pass_.name,
            decided.outcome.first_keys_seconds, self.verify_summary(verified) if verified is not None else None,
            self.warnings, len(self.copies) if self.copies is not None else None,
            outcome.summary(spec) if outcome is not None else None,
        )
        pairs = outcome.recorded() if outcome is not None and record is not None else None
        return DedupResult(result_df, report, _run=record, _duplicates=dup_rows if record is not None else None,
                           _paragraph_pairs=pairs, reproduced_from=decided.index.reproduced_from)

    def pass_duplicates(self, decided: PassResult) -> int:
        """The pass's flags with the exact copies (which it would have flagged: lshbloom_udf.spark.exact)."""
        return decided.duplicates + (len(self.copies) if self.copies else 0)

    def empty(self, decided: PassResult) -> int:
        """The documents without shingles: those the pass found inactive, but for the exact copies it did not key."""
        return decided.empty - (len(self.copies) if self.copies else 0)

    # -- stages 4 and 5: verify, join (lshbloom_udf/spark/verify/, spark/join.py) -------

    @property
    def verify_rule(self):
        from lshbloom_udf.spark.verify import TemplateRule, VerifyRule

        c = self.config
        return VerifyRule(c.verify_threshold or self.params.threshold, c.containment_threshold,
                          c.containment_min_jaccard, TemplateRule(c.template_max_df) if c.template_max_df else None)

    def verify(self, dup_rows, index_info: dict, scanned: ScanResult):
        """The pass's flags verified: the run's record keeps the pass's own (the index's content follows them).
        From the keys scan (``scanned``): the template sample's candidates (None: verification finds them), the
        record fields (the flags' sketches across runs) and the kept keys (None: they are keyed again)."""
        from lshbloom_udf.spark.verify import Shingling, SparkCandidates, TextsSource, crossrun_for, verify_flags

        c, p = self.config, self.params
        prior = crossrun_for(self.txn, index_info, self.pinned, c, p, self.verify_rule, scanned.records)
        self.crossrun = prior if prior not in (True, False) else None
        own = scanned.candidates is None  # the scan's source is closed with the scan (execute)
        source = scanned.candidates or SparkCandidates(self.keyed_frame, p.b, self.pinned.sparkSession)
        memory = DriverMemory.of_session(self.pinned.sparkSession)  # now: what the pass left available
        budget = memory.texts_budget(c.verify_driver_bytes)
        texts = TextsSource(self.pinned, c.text_column, *self.measured.text_sizes, self.documents, memory=memory,
                            broadcast_limit=c.broadcast_limit, driver_text_bytes=budget)
        self.verify_memory = {**memory.summary(budget), "similarities": texts.places}
        try:
            verified = verify_flags(
                source, texts, dup_rows,
                shingling=Shingling.of(p), rule=self.verify_rule,
                prior_documents=prior, sample_rows=scanned.template_sample,
                exact_rows=self.copies.rows if self.copies else None,
            )
        finally:
            if own:
                source.close()
        if self.copies:
            self.copies.resolve(verified)
        named = c.duplicate_count or c.duplicate_of  # the largest groups by id: a small job, in this step
        self.clusters = cluster_summary(verified, self.crossrun, self.pinned if named else None, c.id_column)
        self._lap("verify")
        return verified

    def verify_summary(self, verified) -> dict:
        """Verification's summary part, with what it did across runs (``cross_run``; None: no earlier run)."""
        from lshbloom_udf.spark.verify import UNVERIFIABLE

        out = verified.summary(self.verify_rule)
        out["unverifiable"] = int(np.count_nonzero(verified.of_rows == UNVERIFIABLE))
        out["cross_run"] = self.crossrun.summary(self.records) if self.crossrun is not None else None
        out["memory"] = self.verify_memory
        out["clusters"] = self.clusters
        return out

    def write_records(self, flagged_rows, kept: int, spool=None) -> None:
        """This run's records: a sketch of each of the ``kept`` documents it kept, beside the index
        (lshbloom_udf.index.records); from the pass's ``spool`` of them when it left one."""
        from lshbloom_udf.spark.records import write_records

        c = self.config
        self.records = write_records(self.txn, self.pinned, c.text_column, c.id_column, self.params.key_spec,
                                     flagged_rows, kept, self.threads, spool)
        self._lap("records")

    def join(self, dup_rows, verified):
        from lshbloom_udf.spark.join import join_sources

        columns = self.df.columns
        pinned = self.pinned
        if self.paragraph_outcome is not None:  # the paragraph stage's columns, its emptied documents flagged
            pinned, columns = self.paragraph_output(columns)
            dup_rows = np.union1d(verified.rows if verified is not None else dup_rows,
                                  self.paragraph_outcome.emptied_rows)
            return join_decisions(pinned, columns, dup_rows, self.config, verified)
        if verified is None:
            return join_decisions(pinned, columns, dup_rows, self.config)
        if not self.config.duplicate_of:
            return join_decisions(pinned, columns, verified.rows, self.config, verified)
        return join_sources(pinned, columns, verified, self.config, self.crossrun)

    # -- the paragraph stage (lshbloom_udf/spark/paragraphs.py) ---------------------------

    def paragraph_stage(self, duplicate_rows, decided: PassResult) -> None:
        """Decide the kept documents' paragraphs (``paragraphs`` annotate or remove): against the kept index's
        filter in a run it will record; as the committed run decided them in a run that reproduces it."""
        from lshbloom_udf.spark.paragraphs import reproduced_paragraphs, run_paragraph_stage

        c = self.config
        if decided.index.reproduced and self.prior is not None:
            self.paragraph_outcome = reproduced_paragraphs(self.txn, self.prior, c.paragraph_spec)
        else:
            kept = self.txn if self.index_dir is not None and decided.stats is not None else None
            self.paragraph_outcome = run_paragraph_stage(self.pinned, c, self.documents, duplicate_rows, kept)
        self._lap("paragraphs")

    def paragraph_output(self, columns):
        """The pinned rows with the paragraph stage's output columns, and the columns to select."""
        from lshbloom_udf.spark.paragraphs import COUNT_COL, REMOVED_COL, paragraph_output

        c = self.config
        if self.paragraph_outcome is None:
            raise InternalError("internal error: the paragraph output before the paragraph stage")
        out = paragraph_output(self.pinned, c.text_column, c.paragraph_spec, c.paragraphs,
                               self.paragraph_outcome)
        return out, [*columns, *([REMOVED_COL] if c.paragraphs == "annotate" else []), COUNT_COL]

    # -- stage 1: pin ----------------------------------------------------------------

    def pin(self) -> None:
        from pyspark import StorageLevel

        c = self.config
        source = ordered(self.df, c.order_by, c.id_column)
        pinned = source.select(*[col(name) for name in source.columns], row_id())
        if c.checkpoint == "local":
            # Deserialized: caching rows as they are is faster than serializing them (same memory, spills to disk).
            # Lazy, then counted: the count is the job that fills the checkpoint (what eager=True runs, uncounted).
            pinned = pinned.localCheckpoint(eager=False, storageLevel=StorageLevel.MEMORY_AND_DISK_DESER)
            self.pinned_rows, self.threads = count_pinned(pinned)
        else:
            pinned = pinned.checkpoint(eager=True)
        self._pinned = pinned
        hooks.fire("after-pin")
        self._lap("pin")

    def keyed_frame(self, among=None, inside: bool = True):
        """The pinned rows' (row id, band keys, active), computed on the executors when Spark runs it;
        ``among`` (sorted row ids): only those rows (``inside``) or only the others; the exact copies (once found)
        inactive and unkeyed."""
        text = self.config.text_column
        mapper = keys_mapper(text, self.params.key_spec, among, inside, self.copies.shipped if self.copies else None,
                             self.threads)
        return self.pinned.select(ROW_COL, col(text)).mapInArrow(mapper, KEYED_SCHEMA)

    # -- stage 2: check_input (checks on the pinned input) ------------------------------

    def check_input(self) -> None:
        c = self.config
        if self.pinned_rows is not None and (c.force_new_ingest or not self._may_have_ingested()):
            # Nothing to check before the pass: its keys stage measures the input and hashes the ids
            # (check_after_pass; under force_new_ingest the earlier run it repeats, if any, is found then).
            self.checked = InputCheck(self.pinned_rows)
            self.measure_later = bool(self.pinned_rows) and (self.index_dir is not None or c.verify)
            self.ids_later = bool(self.pinned_rows) and c.id_column is not None
            self._lap("id_check")
            return
        # The committed runs may hold this input: its fingerprints now; its ids from the pass's hashes if it sends them.
        self.ids_later = c.id_column is not None and self._pass_hashes_ids()
        facts = inspect_input(self.pinned, c.text_column, None if self.ids_later else c.id_column)
        if c.id_column is not None and not self.ids_later:
            check_ids(self.pinned, c.id_column, facts)
        prior = fingerprints = None
        if self.index_dir is not None and facts.documents:
            prior = prior_run(self.txn, facts, self.params, c.force_new_ingest, insert_rule=c.insert_rule)
            fingerprints = (facts.content_fingerprint, facts.sequence_fingerprint)
        self.checked = InputCheck(facts.documents, prior)
        self.measured_before = InputMeasure(fingerprints, (facts.max_text_bytes, facts.text_bytes))
        self._lap("id_check")

    def _may_have_ingested(self) -> bool:
        """Whether the kept index holds committed runs (one may have ingested this input: the fingerprints are
        needed before the pass)."""
        return self.txn is not None and bool(self.txn.runs())

    def check_after_pass(self, scanned: ScanResult) -> None:
        """What :meth:`check_input` left to the pass: the input's fingerprints and text sizes (its keys stage's sums,
        or one aggregation) and the ids (its keys stage's hashes, or the same aggregation)."""
        c = self.config
        id_col = c.id_column if self.ids_later and scanned.id_hashes is None else None
        facts = scanned.input_sums.facts() if scanned.input_sums is not None else None
        if id_col is not None or (self.measure_later and facts is None):
            with self.step("check input"):
                facts = inspect_input(self.pinned, c.text_column, id_col)
        if id_col is not None:
            check_ids(self.pinned, id_col, facts)
        elif self.ids_later and scanned.id_hashes is not None:  # (id_col is None: the pass sent them)
            check_id_hashes(self.pinned, c.id_column, scanned.id_hashes)
        if self.measure_later:
            if facts is None:  # the pass's sums, or measured above
                raise InternalError("internal error: the input was not measured after the pass")
            if facts.documents != self.documents:
                raise InternalError(f"internal error: the input measured {facts.documents} documents, "
                                    f"the pin counted {self.documents}")
            self.measured_after = InputMeasure.of(facts, self.index_dir is not None)
            if c.force_new_ingest and self._may_have_ingested():  # the record says whether it was a re-ingestion
                self.repeats = prior_run(self.txn, facts, self.params, True, insert_rule=c.insert_rule)
        self._lap("id_check")  # ~0 from the pass's sums and hashes; an aggregation's time after a pass without them

    @property
    def documents(self) -> int:
        return self.checked.documents

    @property
    def prior(self) -> Optional[RunRecord]:
        return self.checked.prior

    @property
    def measured(self) -> InputMeasure:
        """The input's fingerprints and text sizes: measured after the pass when it took them, else before."""
        return self.measured_after if self.measured_after is not None else self.measured_before

    # -- stage 3: decide --------------------------------------------------------------

    def pass_input(self) -> PassInput:
        """What the pass is given; the index sized for this input (or ``expected_docs``)."""
        c = self.config
        capacity = c.expected_docs if c.expected_docs is not None else max(self.documents, 1)
        try:
            params = dataclasses.replace(self.params, capacity=capacity)
        except ValueError as e:
            raise DedupInputError(str(e)) from None
        scan = ScanRequest(
            skip=self.copies.shipped if self.copies else None, threads=self.threads, measure_input=self.measure_later,
            hash_ids=c.id_column if self.ids_later and self._hashes_fit(self.documents) else None,
            template_sample_below=self.template_sample_below(),
            records=RecordFields(c.id_column is not None) if self.index_dir is not None else None)
        return PassInput(c, params, self.documents, self.pinned, self.keyed_frame, self.txn, self.checked.prior,
                         self.measured.fingerprints, scan)

    def template_sample_below(self) -> Optional[int]:
        """The template sample's bound when verification will want it (verify.templates.sample_below), else None."""
        from lshbloom_udf.spark.verify.templates import sample_below

        c = self.config
        return sample_below(self.documents) if c.verify and c.template_max_df else None

    def _hashes_fit(self, documents: int) -> bool:
        """Whether the driver may check the ids from their hashes (spark/ids.py), by its memory."""
        return hashes_fit(documents, DriverMemory.of_session(self.df.sparkSession))

    def _pass_hashes_ids(self) -> bool:
        """Whether the pass will send the ids' hashes: the driver pass over the socket stream, while they fit."""
        c = self.config
        return (c.pass_mode == "driver" and streams(self.df.sparkSession, c.key_transfer)
                and self._hashes_fit(self.pinned_rows or 0))

    def decide(self, pass_: Decider, given: PassInput) -> Decided:
        """The pass's decisions (flags, counts and the summary's index part) and what its keys scan took."""
        decided = pass_.decide(given)
        self._lap(pass_.timer)
        return decided

    def run_record(self, decided: PassResult) -> Optional[RunRecord]:
        """What the index's manifest will record of this run (None: no kept index changes)."""
        if self.index_dir is None or decided.stats is None:
            return None
        c = self.config
        content_fp, sequence_fp = self.measured.fingerprints or (None, None)
        return RunRecord(
            documents=self.documents, duplicates=self.pass_duplicates(decided),
            inserted=decided.stats["inserted"] - decided.index.inserted_before, params=run_params(decided.params),
            content_fingerprint=content_fp, sequence_fingerprint=sequence_fp, empty_documents=self.empty(decided),
            mode=c.mode, insert=c.insert_rule, pass_mode=c.pass_mode, id_column=c.id_column,
            order_by=tuple(str(o) for o in c.order_by) if c.order_by else None,
            forced_new_ingest=bool(c.force_new_ingest and (self.prior or self.repeats) is not None),
            committed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            records={k: v for k, v in self.records.items() if k != "seconds"} if self.records else None,
            paragraphs=self.paragraph_outcome.record(c.paragraph_spec) if self.paragraph_outcome else None,
            **(self.run_info or {}),
        )
