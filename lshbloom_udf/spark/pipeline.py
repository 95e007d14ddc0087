"""One deduplication run, stage by stage, with its index transaction (if any) already open.

1. :meth:`DedupRun.pin` — the input, with a row id, pinned on the executors
   (``localCheckpoint`` by default): it is read once, and the rows the driver
   pass decides are the rows the join returns, even over a nondeterministic
   input.
2. :meth:`DedupRun.check_input` — one aggregation over the pinned rows: their
   number, fingerprints and the ids' uniqueness; whether a kept index already
   ingested these documents (:mod:`lshbloom_udf.spark.ingest`).
3. :meth:`DedupRun.decide` — the band keys, computed on the executors and
   streamed to the driver pass while they are computed
   (:mod:`lshbloom_udf.spark.stream`; ``toLocalIterator`` under Spark Connect),
   into a temporary index or the transaction's staging copy; or the earlier
   run's stored flags when it is reproduced.
4. The decisions joined back to the pinned rows (:mod:`lshbloom_udf.spark.join`).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
from typing import Optional

from lshbloom_udf import hooks
from lshbloom_udf.errors import DedupInputError
from lshbloom_udf.index import LSHBloomIndex, manifest_bloom, run_params
from lshbloom_udf.log import console_progress, ensure_visible, logger, step
from lshbloom_udf.spark.driver_pass import PassOutcome, run_driver_pass, spark_chunks, temporary_index_dir
from lshbloom_udf.spark.ingest import FINGERPRINT, check_ids, col, inspect_input, prior_run
from lshbloom_udf.spark.join import join_decisions
from lshbloom_udf.spark.keys import KEYED_SCHEMA, ROW_COL, arrow_batch_limits, keys_mapper, row_id
from lshbloom_udf.spark.result import DedupResult, build_summary
from lshbloom_udf.spark.stream import SENT_SCHEMA, KeyStream, stream_mapper
from lshbloom_udf.spark.verify_sources import keep_spool, spool_source


class DedupRun:
    """The state one run carries from stage to stage."""

    def __init__(self, df, config, params, txn, run_info: Optional[dict], t_start: float):
        self.df, self.config, self.params, self.txn = df, config, params, txn
        self.run_info = run_info
        self.index_dir = txn.path if txn is not None else None
        self.seconds: dict = {}
        self._t = t_start
        self._t_start = t_start
        self.pinned = None
        self.documents = 0
        self.prior: Optional[dict] = None
        self.fingerprints: Optional[tuple[str, str]] = None
        # Verification's candidate source when the pass left one (the kept key spool); closed after verification.
        self.candidates = None

    def _lap(self, stage: str) -> None:
        now = time.monotonic()
        self.seconds[stage] = now - self._t
        self._t = now

    def step(self, name: str):
        """A step of the run: its Spark jobs described ``lshbloom: <name>``, logged at start and end."""
        return step(self.df.sparkSession, name, show=self.config.progress)

    def execute(self) -> DedupResult:
        try:
            return self._execute()
        finally:
            if self.candidates is not None:  # the run failed before verification released it
                self.candidates.close()

    def _execute(self) -> DedupResult:
        if self.config.progress:
            ensure_visible()
        with console_progress(self.df.sparkSession, self.config.progress):
            with self.step("pin"):
                self.pin()
            with self.step("check input"):
                self.check_input()
            with self.step(self.pass_name):
                outcome, index_info, stats = self.decide()
            record = self.run_record(outcome, index_info, stats)
            dup_rows = outcome.rows()
            verified = None
            if self.config.verify:
                with self.step("verify"):
                    verified = self.verify(dup_rows, index_info)
            result_df = self.join(dup_rows, verified)
        self._lap("join_plan")
        self.seconds["total"] = self._t - self._t_start
        duplicates = outcome.duplicates if verified is None else len(verified.rows)
        summary = build_summary(self.config, self.params, self.documents, duplicates, outcome.empty,
                                index_info, self.seconds, self.pass_label, outcome.first_keys_seconds)
        if verified is not None:
            summary["verify"] = verified.summary(self.verify_rule)
        return DedupResult(result_df, summary, _run=record, _duplicates=dup_rows if record is not None else None)

    @property
    def pass_label(self) -> str:
        """The decision stage's name in the summary: driver, sharded, or reproduced (no pass ran)."""
        return "reproduced" if self.reproduce else self.config.pass_mode

    @property
    def pass_name(self) -> str:
        return {"reproduced": "reproduce the earlier run's flags", "sharded": "keys + sharded pass"}.get(
            self.pass_label, "keys + driver pass")

    # -- verification and the join (lshbloom_udf/spark/verify.py) ----------------------

    @property
    def verify_rule(self):
        from lshbloom_udf.spark.verify import VerifyRule

        return VerifyRule(self.config.verify_threshold or self.params.threshold, self.config.containment_threshold)

    def verify(self, dup_rows, index_info: dict):
        """The pass's flags verified: the run's record keeps the pass's own (the index's content follows them)."""
        from lshbloom_udf.minhash import normalization_mask
        from lshbloom_udf.spark.verify import Shingling, verify_flags
        from lshbloom_udf.spark.verify_similarity import texts_source
        from lshbloom_udf.spark.verify_sources import SparkCandidates

        c, p = self.config, self.params
        source = self.candidates or SparkCandidates(self.keyed_frame, p.b, self.pinned.sparkSession)
        self.candidates = None  # this stage owns it now
        try:
            verified = verify_flags(
                source, texts_source(self.pinned, c.text_column), dup_rows,
                shingling=Shingling(p.ngram, normalization_mask(p.normalize), p.shingle), rule=self.verify_rule,
                prior_documents=bool(index_info.get("inserted_before")), broadcast_limit=c.broadcast_limit,
            )
        finally:
            source.close()
        self._lap("verify")
        return verified

    def join(self, dup_rows, verified):
        from lshbloom_udf.spark.join import join_sources

        columns = self.df.columns
        if verified is None:
            return join_decisions(self.pinned, columns, dup_rows, self.config)
        if not self.config.duplicate_of:
            return join_decisions(self.pinned, columns, verified.rows, self.config)
        return join_sources(self.pinned, columns, verified, self.config)

    # -- stage 1 -------------------------------------------------------------------

    def pin(self) -> None:
        from pyspark import StorageLevel

        c = self.config
        source = self.df.orderBy(*c.order_by) if c.order_by else self.df
        pinned = source.select(*[col(name) for name in source.columns], row_id())
        if c.checkpoint == "local":
            # Deserialized: caching rows as they are is faster than serializing them (same memory, spills to disk).
            pinned = pinned.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK_DESER)
        else:
            pinned = pinned.checkpoint(eager=True)
        self.pinned = pinned
        hooks.fire("after-pin")
        self._lap("pin")

    def keyed_frame(self, among=None, inside: bool = True):
        """The pinned rows' (row id, band keys, active), computed on the executors when Spark runs it;
        ``among`` (sorted row ids): only those rows (``inside``) or only the others."""
        text = self.config.text_column
        mapper = keys_mapper(text, self.params.signature_kwargs(), among, inside)
        return self.pinned.select(ROW_COL, col(text)).mapInArrow(mapper, KEYED_SCHEMA)

    # -- checks on the pinned input ---------------------------------------------------

    def check_input(self) -> None:
        c = self.config
        facts = inspect_input(self.pinned, c.text_column, c.id_column)
        self.documents = facts.documents
        if c.id_column is not None:
            check_ids(self.pinned, c.id_column, facts)
        if self.index_dir is not None and self.documents:
            self.prior = prior_run(self.txn, facts, self.params, c.force_new_ingest, keyed=self.keyed_frame,
                                   insert=c.decision_rule)
            self.fingerprints = (facts.content_fingerprint, facts.sequence_fingerprint)
        self._lap("id_check")

    @property
    def reproduce(self) -> bool:
        return self.prior is not None and not self.config.force_new_ingest

    # -- stage 2 ---------------------------------------------------------------------

    def decide(self) -> tuple[PassOutcome, dict, Optional[dict]]:
        """(decisions, the summary's index part, the index's stats or None)."""
        c = self.config
        capacity = c.expected_docs if c.expected_docs is not None else max(self.documents, 1)
        try:
            self.params = dataclasses.replace(self.params, capacity=capacity)
        except ValueError as e:
            raise DedupInputError(str(e)) from None
        temporary = self.index_dir is None
        info: dict = {"path": self.index_dir, "kept": not temporary}
        if self.fingerprints is not None:
            info.update(content_fingerprint=self.fingerprints[0], sequence_fingerprint=self.fingerprints[1])
        stats = None
        if self.reproduce:
            outcome = self._reproduced(info)
        elif self.documents == 0 and not c.sizing_given and (temporary or not LSHBloomIndex.exists(self.index_dir)):
            outcome = PassOutcome()
            info.update(bytes_on_disk=0, inserted_total=0, inserted_before=0, reused=False)
        elif c.pass_mode == "sharded":
            from lshbloom_udf.spark.sharded import run_sharded

            from pyspark import StorageLevel

            # Computed once: the pass counts the active documents, then shuffles their keys.
            keyed = self.keyed_frame().persist(StorageLevel.MEMORY_AND_DISK)
            try:
                outcome, stats, self.params = run_sharded(keyed, self.params, c, self.documents, self.txn, info)
            finally:
                keyed.unpersist()
        elif temporary:
            # Sized for exactly this input (or expected_docs): it never needs another generation.
            self.params = dataclasses.replace(self.params, growth="fixed")
            path = temporary_index_dir(self.params, c.new_index_bloom)
            try:
                with LSHBloomIndex.create(path, self.params, bloom=c.new_index_bloom) as index:
                    index.plan_inserts(self.documents)  # filled as planned, not "near capacity" (any-earlier: to N)
                    outcome, stats = self._pass(index, info, path)
            finally:
                shutil.rmtree(path, ignore_errors=True)
        else:
            manifest = self.txn.manifest()
            bloom = c.bloom or (manifest_bloom(manifest) if manifest is not None else c.new_index_bloom)
            outcome, stats = self._pass(self.txn.stage(self.params, c.sizing_given, bloom), info, self.index_dir)
        self._lap({"driver": "driver_pass", "sharded": "sharded_pass"}.get(self.pass_label, "reproduce"))
        return outcome, info, stats

    def _pass(self, index, info: dict, path: str) -> tuple[PassOutcome, dict]:
        info.update(inserted_before=index.inserted, backend=index.bloom,
                    reused=index.inserted > 0 and info["kept"])
        outcome = self._driver_pass(index)
        index.sync()
        stats = index.stats()
        real = os.path.realpath(path)
        info.update(
            bytes_on_disk=stats["bytes_on_disk"],
            inserted_total=stats["inserted"],
            capacity=index.params.capacity,
            p_effective=index.params.p_effective,
            p_band=stats["p_band"],
            expected_false_positive=stats["expected_false_positive"],
            location="/dev/shm" if real.startswith("/dev/shm") else os.path.dirname(real),
        )
        if stats["inserted"] > stats["capacity_now"]:  # a fixed index past its capacity (a grown one grew)
            logger.warning(
                f"the index holds {stats['inserted']:,} documents, more than its capacity "
                f"{index.params.capacity:,}; its false-positive rate is now {stats['expected_false_positive']:.3g} "
                f"(sized for {index.params.p_effective:.3g}). Use a larger --expected-docs for a new index."
            )
        return outcome, stats

    def _driver_pass(self, index) -> PassOutcome:
        c = self.config
        spark, text, kwargs = self.pinned.sparkSession, c.text_column, self.params.signature_kwargs()
        with arrow_batch_limits(spark):
            if not self._streams(spark):
                return run_driver_pass(spark_chunks(self.pinned, text, kwargs, c.chunk_rows), index, self.documents,
                                       c.progress, c.decision_rule)
            # Under verification the stream keeps its spool for verification's candidates (verify_sources).
            keep = c.verify and keep_spool(tempfile.gettempdir(), self.documents, index.params.b, c.chunk_rows)
            stream = KeyStream(spark, index.params.b, keep=keep)
            try:
                mapper = stream_mapper(text, kwargs, c.chunk_rows, stream.address, stream.token)
                stream.start(self.pinned.select(ROW_COL, col(text)).mapInArrow(mapper, SENT_SCHEMA))
                partitions = self.pinned.rdd.getNumPartitions()
                outcome = run_driver_pass(stream.chunks(partitions), index, self.documents, c.progress, c.decision_rule,
                                          keep_keys=keep)
                self.candidates = spool_source(stream, partitions, outcome)
            finally:
                if self.candidates is None:
                    stream.close()
            self.seconds["keys"] = stream.job_seconds
            return outcome

    def _streams(self, spark) -> bool:
        """Whether the keys go to the driver over the socket stream (a classic session) or ``toLocalIterator``."""
        try:
            classic = spark.sparkContext is not None
        except Exception:  # a Spark Connect session has no SparkContext on this side
            classic = False
        if self.config.key_transfer == "socket" and not classic:
            raise DedupInputError(
                "key_transfer='socket' needs a classic Spark session: over Spark Connect the executors cannot reach "
                "this process. Use key_transfer='auto' (the default) or 'spark'."
            )
        return classic if self.config.key_transfer == "auto" else self.config.key_transfer == "socket"

    def _reproduced(self, info: dict) -> PassOutcome:
        """The flags of the committed run that ingested these documents in this order."""
        prior = self.prior
        rows = self.txn.load_duplicates(prior)
        outcome = PassOutcome([rows], int(prior["duplicates"]), int(prior.get("empty_documents", 0)), self.documents)
        if len(rows) != outcome.duplicates:
            raise RuntimeError(
                f"{self.index_dir}: run {prior['run_id']} records {outcome.duplicates} duplicates but stores {len(rows)}"
            )
        info.update(
            reproduced=True,
            run_id=prior["run_id"],
            reproduced_from=prior["run_id"],
            inserted_before=int(prior["inserted_total"]) - int(prior["inserted"]),
            inserted_total=int((self.txn.manifest() or {}).get("inserted", 0)),
            reused=True,
            backend=self._stored_backend(),
        )
        return outcome

    def _stored_backend(self) -> str:
        """The kept index's Bloom backend, as its manifest records it (a sharded index: always blocked shards)."""
        if self.config.pass_mode == "sharded":
            from lshbloom_udf.spark.sharded import SHARD_BLOOM

            return SHARD_BLOOM
        manifest = self.txn.manifest()
        return manifest_bloom(manifest) if manifest is not None else "?"

    def run_record(self, outcome: PassOutcome, info: dict, stats: Optional[dict]) -> Optional[dict]:
        """What the index's manifest will record of this run (None: no kept index changes)."""
        if self.index_dir is None or stats is None:
            return None
        c = self.config
        content_fp, sequence_fp = self.fingerprints or (None, None)
        return {
            **(self.run_info or {}),
            "fingerprint": FINGERPRINT,
            "content_fingerprint": content_fp,
            "sequence_fingerprint": sequence_fp,
            "params": run_params(self.params),
            "documents": self.documents,
            "duplicates": outcome.duplicates,
            "empty_documents": outcome.empty,
            "inserted": stats["inserted"] - info["inserted_before"],
            "mode": c.mode,
            "insert": c.decision_rule,
            "pass": c.pass_mode,
            "id_column": c.id_column,
            "order_by": [str(o) for o in c.order_by] if c.order_by else None,
            "forced_new_ingest": bool(c.force_new_ingest and self.prior is not None),
            "committed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }

