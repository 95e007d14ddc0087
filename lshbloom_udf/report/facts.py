"""What a run report shows, gathered from the run's summary and its output (typed values for :mod:`.html`).

The summary gives the counts, the removed documents' similarity by measure and
the largest groups (``verify.clusters``: computed on the driver from the
verified flags), the index and the stage seconds. The output gives the rest, in
one Spark job each over the columns it needs: the duplicate rate by a group
column, and a sample of removed documents beside the kept document each
duplicates (the texts of the sample only). What a run cannot show (no
verification; mode ``filter``; no ``duplicate_of``) is said in
:attr:`ReportFacts.notes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Optional

from lshbloom_udf.common import col
from lshbloom_udf.errors import DedupInputError

# Groups of the group column shown (the largest by documents).
GROUPS = 30
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
    similarity: Mapping[str, tuple] = field(default_factory=dict)  # measure -> counts of equal bins over [0, 1]
    group_column: Optional[str] = None
    groups: tuple = ()  # Group, the largest first
    clusters: tuple = ()  # (duplicate_of, removed documents of this run naming it), the largest first
    earlier_clusters: tuple = ()  # the same for earlier runs' kept documents
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
    clusters = (summary.get("verify") or {}).get("clusters") or {}
    notes = []
    if not summary.get("verify"):
        notes.append("the run did not verify its flags: similarities and groups need verification (--verify)")
    if mode != "flag" or "duplicate_of" not in output.columns:
        notes.append("removed documents are shown beside their kept one from an output of mode flag with "
                     "duplicate_of (--mode flag --duplicate-of)")
    facts = ReportFacts(summary, similarity={m: tuple(c) for m, c in clusters.get("similarity", {}).items()},
                        group_column=by, notes=tuple(notes),
                        clusters=tuple((str(g["duplicate_of"]), g["duplicate_count"])
                                       for g in clusters.get("largest", ())),
                        earlier_clusters=tuple((str(g["duplicate_of"]), g["duplicate_count"])
                                               for g in clusters.get("largest_earlier", ())))
    removed = {"flag": F.col(flag), "duplicates": F.lit(True), "filter": F.lit(False)}[mode]
    key = summary.get("id_column") or "row_id"
    if mode == "flag" and "duplicate_of" in output.columns and pairs > 0:
        gone = output.filter(removed & F.col("duplicate_of").isNotNull())
        facts = replace(facts, pairs=_pairs(gone, output, key, summary.get("text_column", "text"), pairs))
    if by is not None:
        facts = _with_groups(facts, output.select(col(by), removed.alias("_removed")), by)
    return facts


def _pairs(gone, output, key: str, text: str, n: int) -> tuple:
    """``n`` removed documents (the same ones every time: the least hashes of their key) beside their kept one
    (its text where the output holds it: a source of this run)."""
    from pyspark.sql import functions as F

    if text not in output.columns:
        return ()
    picked = (gone.select(col(key), "duplicate_of", "similarity", "similarity_measure")
              .orderBy(F.xxhash64(col(key)), col(key)).limit(n).collect())
    if not picked:
        return ()
    wanted = [r[key] for r in picked] + [r["duplicate_of"] for r in picked]
    texts = {str(r[0]): r[1] for r in output.filter(col(key).isin(wanted)).select(col(key), col(text)).collect()}
    return tuple(Pair(str(r[key]), str(r["duplicate_of"]), r["similarity"], r["similarity_measure"],
                      texts.get(str(r[key])) or "", texts.get(str(r["duplicate_of"]))) for r in picked)


def _with_groups(facts: ReportFacts, slim, by: str) -> ReportFacts:
    """The documents and removed documents of the largest groups of ``by``."""
    from pyspark.sql import functions as F

    rows = (slim.groupBy(col(by).cast("string").alias("value"))
            .agg(F.count(F.lit(1)).alias("documents"), F.sum(F.col("_removed").cast("long")).alias("removed"))
            .orderBy(F.desc("documents"), F.asc("value")).limit(GROUPS).collect())
    return replace(facts, groups=tuple(Group("(null)" if r["value"] is None else r["value"], int(r["documents"]),
                                             int(r["removed"] or 0)) for r in rows))
