"""What a run report shows, gathered from the run's summary and its output (typed values for :mod:`.html`).

The summary gives the counts, the index and the stage seconds; the output the
rest, in a few Spark jobs over its narrow columns: the removed documents'
similarity by measure, the duplicate rate by a group column, the largest
groups, and a sample of removed documents beside the kept document each
duplicates (the texts of the sample only). What an output cannot show (mode
``filter`` keeps no removed row; without ``duplicate_of`` nothing names the kept
document) is said in :attr:`ReportFacts.notes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from lshbloom_udf.common import col
from lshbloom_udf.errors import DedupInputError

# Similarity histogram bins over [0, 1].
BINS = 40
# Groups of the group column shown (the largest by documents), and the largest clusters.
GROUPS = 30
CLUSTERS = 10
# Removed documents shown beside their kept document.
PAIRS = 6


@dataclass(frozen=True)
class Pair:
    """A removed document and the kept document it duplicates (``kept_text`` None: an earlier run's)."""

    removed_id: str
    kept_id: str
    similarity: Optional[float]
    measure: Optional[str]
    removed_text: str
    kept_text: Optional[str]


@dataclass(frozen=True)
class Group:
    """One value of the group column: its documents in the output and those removed."""

    value: str
    documents: int
    removed: int


@dataclass(frozen=True)
class ReportFacts:
    """Everything the report shows: ``summary`` (the run's), and what the output added."""

    summary: Mapping
    similarity: Mapping[str, tuple] = field(default_factory=dict)  # measure -> counts of BINS bins
    group_column: Optional[str] = None
    groups: tuple = ()  # Group, the largest first
    clusters: tuple = ()  # (duplicate_of, removed documents naming it), the largest first
    pairs: tuple = ()  # Pair
    notes: tuple = ()


def gather(summary: Mapping, output, by: Optional[str] = None, pairs: int = PAIRS) -> ReportFacts:
    """The facts of the run that wrote ``output`` (a DataFrame of its rows, as the run returned or wrote them) and
    ``summary``; ``by``: a column of the output to give the duplicate rate by."""
    from pyspark.sql import functions as F

    mode, flag = summary.get("mode", "flag"), summary.get("flag_column", "is_duplicate")
    if by is not None and by not in output.columns:
        raise DedupInputError(f"report-by column {by!r} not found; the output has columns {output.columns}")
    if mode == "flag" and flag not in output.columns:
        raise DedupInputError(f"the output has no flag column {flag!r} (columns {output.columns}): "
                              "is it the output of this summary's run?")
    notes = []
    removed = {"flag": F.col(flag), "duplicates": F.lit(True), "filter": F.lit(False)}[mode]
    sources = "duplicate_of" in output.columns
    if mode == "filter":
        notes.append("mode filter: the output holds the kept documents only, so similarities, groups and pairs "
                     "come from the summary or are not shown (run with --mode flag to see them)")
    elif not sources:
        notes.append("the output has no duplicate_of column: similarities, the largest groups and the pairs need "
                     "it (run with --duplicate-of)")
    key = summary.get("id_column") or "row_id"
    narrow = [c for c in dict.fromkeys([key, by, "duplicate_of", "similarity", "similarity_measure"])
              if c is not None and c in output.columns]
    slim = output.select(*(col(c) for c in narrow), removed.alias("_removed")).cache()
    try:
        facts = ReportFacts(summary, group_column=by, notes=tuple(notes))
        if mode != "filter" and sources:
            facts = _with_sources(facts, slim, output, key, pairs, mode == "flag")
        if by is not None:
            facts = _with_groups(facts, slim, by)
        return facts
    finally:
        slim.unpersist()


def _with_sources(facts: ReportFacts, slim, output, key: str, pairs: int, kept_rows: bool) -> ReportFacts:
    """The similarity histogram, the largest groups and the pairs, from the rows naming their kept document."""
    from dataclasses import replace

    from pyspark.sql import functions as F

    gone = slim.filter(F.col("_removed") & F.col("duplicate_of").isNotNull())
    bins = F.least(F.floor(F.col("similarity") * BINS), F.lit(BINS - 1)).cast("int")
    histogram: dict = {}
    for r in gone.groupBy("similarity_measure", bins.alias("bin")).count().collect():
        histogram.setdefault(r["similarity_measure"], [0] * BINS)[r["bin"]] += r["count"]
    largest = (gone.groupBy("duplicate_of").count().orderBy(F.desc("count"), F.asc("duplicate_of"))
               .limit(CLUSTERS).collect())
    clusters = tuple((str(r["duplicate_of"]), int(r["count"])) for r in largest)
    return replace(facts, similarity={m: tuple(c) for m, c in sorted(histogram.items())}, clusters=clusters,
                   pairs=_pairs(gone, output, key, facts.summary.get("text_column", "text"), pairs, kept_rows))


def _pairs(gone, output, key: str, text: str, n: int, kept_rows: bool) -> tuple:
    """``n`` removed documents (the same ones every time: the least hashes of their key) beside their kept one
    (its text where the output holds it: mode ``flag``, and a source of this run)."""
    from pyspark.sql import functions as F

    if text not in output.columns:
        return ()
    picked = gone.orderBy(F.xxhash64(col(key)), col(key)).limit(n).collect()
    if not picked:
        return ()
    wanted = [r[key] for r in picked] + ([r["duplicate_of"] for r in picked] if kept_rows else [])
    texts = {str(r[0]): r[1] for r in output.filter(col(key).isin(wanted)).select(col(key), col(text)).collect()}
    return tuple(Pair(str(r[key]), str(r["duplicate_of"]), r["similarity"], r["similarity_measure"],
                      texts.get(str(r[key])) or "", texts.get(str(r["duplicate_of"]))) for r in picked)


def _with_groups(facts: ReportFacts, slim, by: str) -> ReportFacts:
    """The documents and removed documents of the largest groups of ``by``."""
    from dataclasses import replace

    from pyspark.sql import functions as F

    rows = (slim.groupBy(col(by).cast("string").alias("value"))
            .agg(F.count(F.lit(1)).alias("documents"), F.sum(F.col("_removed").cast("long")).alias("removed"))
            .orderBy(F.desc("documents"), F.asc("value")).limit(GROUPS).collect())
    return replace(facts, groups=tuple(Group("(null)" if r["value"] is None else r["value"], int(r["documents"]),
                                             int(r["removed"] or 0)) for r in rows))
