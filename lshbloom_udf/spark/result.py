"""What a run returns: :class:`DedupResult` (the DataFrame, the summary, the commit still to do) and the summary
text."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

from lshbloom_udf.index.run_record import RunRecord
from lshbloom_udf.log import logger
from lshbloom_udf.sizing import human_bytes

if TYPE_CHECKING:
    import numpy as np
    from pyspark.sql import DataFrame

    from lshbloom_udf.config import DedupConfig
    from lshbloom_udf.index.kept import KeptIndex
    from lshbloom_udf.index.params import IndexParams
    from lshbloom_udf.spark.passes.base import IndexReport


@dataclass(frozen=True)
class RunReport:
    """What a run's stages produced that its summary reports; :func:`build_summary` makes the dict of it.

    ``index`` is the pass's :class:`~lshbloom_udf.spark.passes.IndexReport`,
    ``verify`` verification's part (None: not verified), ``warnings`` those
    the settings gave before the run started.
    """

    config: DedupConfig
    params: IndexParams  # as the pass used them
    documents: int
    duplicates: int
    empty: int
    index: IndexReport
    seconds: Mapping
    pass_label: str = "driver"
    first_keys_seconds: float = 0.0
    verify: Optional[Mapping] = None
    warnings: tuple = ()
    exact: Optional[int] = None  # the exact copies found before the pass (None: not looked for)
    paragraphs: Optional[Mapping] = None  # the paragraph stage's counts (None: paragraphs off)


@dataclass(frozen=True)
class JobReport:
    """What the job adds to a run's summary: its files and its own timings."""

    input: str
    output: str
    output_format: str
    summary_path: str
    seconds: Mapping


@dataclass
class DedupResult:
    """A run's DataFrame and summary; with ``defer_commit`` also its open index transaction.

    Iterates as ``(df, summary)``. The summary is a JSON-ready dict, every
    field of which docs/summary.md explains, built from the run's
    :class:`RunReport` and, once committed, its run record;
    :meth:`summary_text` formats it.
    """

    df: DataFrame
    report: RunReport
    # With defer_commit=True: the open IndexTransaction and what commit() records.
    transaction: Optional[KeptIndex] = field(default=None, repr=False)
    _run: Optional[RunRecord] = field(default=None, repr=False)
    _duplicates: Optional[np.ndarray] = field(default=None, repr=False)
    _paragraph_pairs: Optional[np.ndarray] = field(default=None, repr=False)  # what the paragraph stage removed
    _owns_transaction: bool = field(default=False, repr=False)
    # The committed run whose flags this run reproduced (None: the run decided), as the pass reported it.
    reproduced_from: Optional[str] = field(default=None, repr=False)
    # The run record the commit wrote (None: not committed, or nothing to record).
    record: Optional[RunRecord] = field(default=None, repr=False)

    def __iter__(self):
        return iter((self.df, self.summary))

    @property
    def summary(self) -> dict:
        return build_summary(self.report, self.record)

    def commit(self, outputs: Sequence[tuple] = (), also_record: Optional[Mapping] = None) -> Optional[RunRecord]:
        """Commit a ``defer_commit=True`` run: the staged index, its run record and ``outputs`` (tmp, final) together.

        ``also_record``: fields the record gets besides the run's (what the
        caller made of the run's result, e.g. a streamed batch's stored flags).
        Returns the run record (``None`` for a reproduced run, which changes
        no index). Releases the index lock if the run took it.
        """
        if self.transaction is None:
            raise ValueError("nothing to commit: the run was not made with defer_commit=True and an index_dir")
        run = self._run.replace(**also_record) if self._run is not None and also_record else self._run
        try:
            self.record = self.transaction.commit(run, self._duplicates, outputs, self._paragraph_pairs)
            return self.record
        finally:
            self.close()

    def close(self) -> None:
        """Abort what was not committed (the staged index, registered temporary outputs)."""
        if self.transaction is not None:
            if self._owns_transaction:
                self.transaction.close()
            else:
                self.transaction.abort()
            self.transaction = None

    def summary_text(self) -> str:
        return format_summary(self.summary)


# A decision stage that waited for its first keys more than this share of its time measured Spark's start-up
# (scheduling, Python workers, the first chunk's keys), not the product's throughput (docs/benchmarks.md has that).
# The sharded pass cannot tell when its first keys came: below SMALL_RUN documents its rate is start-up-bound.
STARTUP_SHARE = 0.5
SMALL_RUN = 100_000
DECISION_STAGES = {"driver": "driver_pass", "sharded": "sharded_pass", "reproduced": "reproduce"}


def build_summary(report: RunReport, record: Optional[RunRecord] = None, job: Optional[JobReport] = None) -> dict:
    """The run's summary (every field: docs/summary.md): ``report``'s, the committed ``record``'s run id, the job's
    files and timings."""
    config, params = report.config, report.params
    index = report.index.replace(run_id=record.run_id) if record is not None else report.index
    seconds = {**report.seconds, **({"first_keys": report.first_keys_seconds} if report.first_keys_seconds else {})}
    decision = seconds.get(DECISION_STAGES.get(report.pass_label, ""), 0.0)
    if report.first_keys_seconds:
        startup_bound = report.first_keys_seconds > STARTUP_SHARE * decision
    else:
        startup_bound = report.documents < SMALL_RUN
    documents, duplicates = report.documents, report.duplicates
    summary = {
        "documents": documents,
        "empty_documents": report.empty,
        "duplicates": duplicates,
        "exact_duplicates": report.exact,
        "kept": documents - duplicates,
        "duplicate_rate": duplicates / documents if documents else 0.0,
        "mode": config.mode,
        "pass": report.pass_label,
        "insert": config.insert_rule,
        "run": run_kind(index.to_dict()),
        "text_column": config.text_column,
        "id_column": config.id_column,
        "flag_column": config.flag_column,
        "order_by": [str(c) for c in config.order_by] if config.order_by else None,
        "keep": keep_order(config),
        "params": {**_params_part(params), "bands_for": config.bands_for.text},
        "index": index.to_dict(),
        "seconds": {k: round(v, 3) for k, v in {**seconds, **(job.seconds if job else {})}.items()},
        # Over the decision stage only (the documents it decided), not the run's start-up.
        "docs_per_second": documents / decision if decision > 0 else None,
        "startup_bound": startup_bound,
    }
    if report.verify is not None:
        summary["verify"] = dict(report.verify)
    if report.paragraphs is not None:
        summary["paragraphs"] = dict(report.paragraphs)
    if report.warnings:
        summary["warnings"] = list(report.warnings)
    if job is not None:
        summary.update(input=job.input, output=job.output, output_format=job.output_format,
                       summary_path=job.summary_path)
    return summary


def keep_order(config) -> dict:
    """The summary's ``keep``: the sort that decides which copy survives (lshbloom_udf.spark.order)."""
    return {"first_of": [str(c) for c in config.order_by] if config.order_by else "input order",
            "ties": ([config.id_column] if config.id_column else []) + ["input position"],
            "earlier_runs": "stay kept" if config.index_dir is not None else None}


def _params_part(params) -> dict:
    """The summary's ``params``: the keying settings and where the bands' S-curve rises."""
    return {
        "threshold": params.threshold,
        "bands_threshold": bands_threshold(params.b, params.r),
        "num_perm": params.num_perm,
        "b": params.b,
        "r": params.r,
        "ngram": params.ngram,
        "shingle": params.shingle,
        "normalize": params.normalize,
        "seed": params.seed,
        "scheme": params.scheme,
        "band_key": params.band_key,
    }


# |bands' threshold - threshold| above which explicit bands warn (check_bands).
BANDS_TOLERANCE = 0.05


def check_bands(config, params) -> list[str]:
    """Explicit ``bands`` whose S-curve rises far from ``threshold``: the warning (logged once per setting), or []."""
    if config.bands is None:
        return []
    rises = bands_threshold(params.b, params.r)
    if abs(rises - params.threshold) <= BANDS_TOLERANCE:
        return []
    message = (f"bands b x r = {params.b} x {params.r} flag pairs from Jaccard ~{rises:.2f} ((1/b)^(1/r)), not the "
               f"threshold {params.threshold}: drop bands to use the optimum for the threshold, or set a threshold "
               "near the bands'")
    key = (params.b, params.r, params.threshold, params.num_perm)
    if key not in _WARNED:
        _WARNED.add(key)
        logger.warning(message)
    return [message]


_WARNED: set = set()


def _bands_for_text(params: Mapping) -> str:
    """The summary text's note of which setting's threshold the bands serve, and why."""
    bands_for = params.get("bands_for")
    return f" for {bands_for}" if bands_for else ""


def bands_threshold(b: int, r: int) -> float:
    """Where the S-curve ``1 - (1 - s^r)^b`` of ``b`` bands of ``r`` rows rises: ``(1/b)^(1/r)``."""
    return round((1.0 / b) ** (1.0 / r), 4)


def run_kind(index_info: dict) -> str:
    """What the run did to its index: temporary, new index, index grown, or reproduced."""
    if index_info.get("reproduced"):
        return "reproduced"
    if not index_info.get("kept"):
        return "temporary index"
    return "index grown" if index_info.get("inserted_before") else "new index"


_PASS_TEXT = {"driver": "driver pass (the whole index in the driver)",
              "sharded": "sharded pass (band-key shards on the executors)",
              "reproduced": "none: reproduced an earlier run"}


def format_summary(summary: dict) -> str:
    """The summary of a run as text."""
    idx = summary.get("index", {})
    p = summary.get("params", {})
    lines = [
        f"documents          {summary['documents']:,}  (empty/null text: {summary['empty_documents']:,})",
        f"duplicates         {summary['duplicates']:,}  ({100 * summary['duplicate_rate']:.2f}%){_exact_text(summary)}",
        f"kept               {summary['kept']:,}",
        f"run                {_run_text(summary)}",
        f"pass               {_PASS_TEXT.get(summary.get('pass', 'driver'), summary.get('pass'))}",
        f"parameters         threshold {p.get('threshold')}{_bands_for_text(p)}, num_perm {p.get('num_perm')}, "
        f"b x r {p.get('b')} x {p.get('r')}, ngram {p.get('ngram')} {p.get('shingle', 'words')}, "
        f"normalize {p.get('normalize')}, seed {p.get('seed')}, scheme {p.get('scheme')}, "
        f"band key {p.get('band_key', 'sum')}",
        f"index              {_index_text(idx)}",
        "seconds            " + ", ".join(f"{k} {v:.2f}" for k, v in summary.get("seconds", {}).items()),
        f"rate               {_rate_text(summary)}",
    ]
    for warning in summary.get("warnings", ()):
        lines.insert(-2, f"warning            {warning}")
    if math.isfinite(idx.get("expected_false_positive", 0.0) or 0.0) and idx.get("expected_false_positive"):
        lines.insert(-2, f"index FP rate now  {idx['expected_false_positive']:.3g} "
                         f"(sized for p_effective {idx.get('p_effective'):.3g})")
    v = summary.get("verify")
    if v:
        lines.insert(3, _verify_text(v, summary, idx))
    return "\n".join(lines)


def _exact_text(summary: dict) -> str:
    exact = summary.get("exact_duplicates")
    return "" if exact is None else f", of which exact copies {exact:,}"


def _run_text(summary: dict) -> str:
    idx = summary.get("index", {})
    kind = summary.get("run", run_kind(idx))
    if kind == "reproduced":
        return (f"reproduced run {idx.get('reproduced_from')}: a committed run ingested these documents in this order; "
                "its flags are returned and nothing is inserted (force_new_ingest to ingest them again)")
    if kind == "index grown":
        return f"index grown: {idx.get('inserted_before', 0):,} documents from earlier runs, this run's added"
    if kind == "new index":
        return "new index: the first run of the kept index"
    return "temporary index: sized for this input, removed after the run"


def _index_text(idx: dict) -> str:
    backend = idx.get("backend", "?")
    total = f"{idx.get('inserted_total', 0):,} documents inserted in all"
    before = f" ({idx['inserted_before']:,} before this run)" if idx.get("inserted_before") else ""
    if idx.get("reproduced"):
        return f"{idx.get('path')}: {backend} filters, unchanged by this run ({total})"
    if idx.get("kept"):
        where = idx.get("path")
    elif str(idx.get("location", "")).startswith("executors"):
        where = "temporary (shards on the executors, removed)"
    else:
        where = f"temporary (in {idx.get('location', '-')}, removed)"
    return f"{where}: {human_bytes(idx.get('bytes_on_disk', 0))} of {backend} filters, {total}{before}"


def _rate_text(summary: dict) -> str:
    stage = DECISION_STAGES.get(summary.get("pass", "driver"), "driver_pass")
    seconds = summary.get("seconds", {}).get(stage)
    rate = summary.get("docs_per_second")
    if summary.get("pass") == "reproduced" or not rate or seconds is None:
        return "not measured (no pass ran)"
    first = summary.get("seconds", {}).get("first_keys")
    waited = f", {first:.2f} s of it before the first keys" if first else ""
    text = (f"{rate:,.0f} docs/s over the {stage.replace('_', ' ')} ({summary['documents']:,} documents in "
            f"{seconds:.2f} s{waited})")
    if summary.get("startup_bound"):
        text += "; at this size Spark's start-up dominates: not the product's throughput (docs/benchmarks.md)"
    return text


def _verify_rule_text(v: dict) -> str:
    rule = f"exact Jaccard below {v['threshold']}"
    if v.get("containment_threshold") is not None:
        rule += f" and containment below {v['containment_threshold']}"
    return rule


def _verify_text(v: dict, summary: dict, idx: dict) -> str:
    text = (f"verified           the pass flagged {v['pass_flagged']:,}; verification removed {v['unflagged']:,} "
            f"of those flags ({_verify_rule_text(v)} with every earlier kept candidate)")
    if v.get("by_containment"):
        text += f"; {v['by_containment']:,} kept flagged by containment"
    if v.get("unverifiable"):
        text += f"; {v['unverifiable']:,} stay flagged unverified (only earlier runs without records explain them)"
    cross = v.get("cross_run")
    if cross:
        text += (f"\n                   across runs: {cross['looked_up']:,} flags judged against "
                 f"the {cross['records_held']:,} records of {cross['records_runs']} earlier run(s) "
                 f"({cross['records_read']:,} read): "
                 f"{cross['verified']:,} name an earlier run's document, {cross['unflagged']:,} unflagged "
                 f"({cross['seconds']:.1f} s); this run's records: "
                 f"{cross['records_written']:,} ({human_bytes(cross['record_bytes'])})")
    text += _clusters_text(v.get("clusters"))
    if idx.get("inserted_total") is not None and not idx.get("reproduced"):
        inserted = idx.get("inserted_total", 0) - idx.get("inserted_before", 0)
        if summary.get("insert") == "all":
            exact = summary.get("exact_duplicates")
            but = f" but the {exact:,} exact copies" if exact else ""
            text += (f"\n                   the pass inserted every document with shingles{but} ({inserted:,}, "
                     "any-earlier): verification decides keep-first over its candidates, so the index also holds "
                     "the removed ones")
        else:
            text += (f"\n                   the index follows the pass's decisions: it inserted the {inserted:,} "
                     f"documents the pass kept, so kept ({summary['kept']:,}) exceeds inserted by the "
                     f"{v['unflagged']:,} unflagged (and empty documents are never inserted)")
    return text


def _clusters_text(clusters: Optional[Mapping]) -> str:
    if not clusters or not clusters.get("kept_with_duplicates") and not clusters.get("earlier_runs"):
        return ""
    sizes = ", ".join(f"{k}: {n:,}" for k, n in clusters["group_sizes"].items())
    largest = ", ".join(f"{g['duplicate_of']} ({g['duplicate_count']})" for g in clusters["largest"][:3])
    text = (f"\n                   groups: {clusters['kept_with_duplicates']:,} kept documents have removed copies "
            f"(by group size {sizes or '-'}; largest {largest or '-'})")
    if clusters.get("earlier_runs"):
        text += f"; {clusters['earlier_runs']:,} removed documents are copies of earlier runs' documents"
    return text
