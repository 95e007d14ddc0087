"""Exact copies: documents whose text is byte-identical to an earlier one's, decided before the pass (``exact_copies``).

A byte-identical copy ``d`` of an earlier document ``f`` has ``f``'s shingles,
signature and band keys, so without this step it pays shingling, MinHash, the
pass and verification to reach a decision known in advance:

- the pass flags it: ``f`` was inserted (kept), or ``f`` was flagged because
  one of its keys was in the index, and ``d`` has that key too; ``d`` is never
  inserted, so leaving it out of the pass changes no other document's decision;
- verification keeps its flag: against ``f`` (Jaccard 1) when ``f`` stays kept
  (in round 1, or round 2 when verification unflagged ``f``), and otherwise by
  the candidate that verifies ``f`` (``d`` shares all of ``f``'s keys).

So :func:`find_exact_copies` groups the pinned rows by a 128-bit hash of their
text (Spark's ``xxhash64`` under two seeds, one aggregation over the pinned
rows) and names each group's earliest row; the later rows are the copies of
those first rows that have a letter or digit (asked of them alone). The
keys stage leaves them out (:func:`lshbloom_udf.spark.keys.keyed_batches`:
inactive, not shingled), and :meth:`ExactCopies.resolve` adds them to the
verified flags: ``duplicate_of`` the first occurrence, ``similarity`` 1,
``similarity_measure`` ``exact``; or, where verification flagged the first
occurrence itself, its own source, similarity and measure (``duplicate_of``
always names a document that is kept).

The hash is of the text as stored, not of its normalized form: copies that
differ only in case or punctuation are near-duplicates the pass and
verification decide as before. Texts without a letter or digit are left to the
pass: they may have no shingles (empty documents are never flagged).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import numpy as np

from lshbloom_udf.common import col, collect_arrow
from lshbloom_udf.spark.frames import among_rows
from lshbloom_udf.spark.keys import ROW_COL, is_in, ship

if TYPE_CHECKING:
    from lshbloom_udf.spark.keys import Shipped

# The second 64 bits: Spark's xxhash64 of (this, text) is the text's xxhash64 seeded by this string's hash.
SECOND_SEED = "lshbloom exact copies"
# A text with none of these may have no shingles (an empty document): the pass decides it.
HAS_SHINGLES = r"[\p{L}\p{N}]"
_FIRST = "_lshb_first"


@dataclass(frozen=True)
class ExactCopies:
    """The run's exact copies: ``rows`` (sorted int64 row ids) and ``firsts`` (aligned: each copy's earliest
    byte-identical row); ``shipped`` the rows as the executors read them (:func:`~lshbloom_udf.spark.keys.ship`)."""

    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    firsts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    shipped: Optional[Shipped] = None

    def __len__(self) -> int:
        return len(self.rows)

    def with_flags(self, flagged_rows: np.ndarray) -> np.ndarray:
        """The pass's flagged rows and the copies, sorted: the flags the pass would have given with the copies."""
        return np.union1d(np.asarray(flagged_rows, dtype=np.int64), self.rows)

    def resolve(self, verified) -> None:
        """Add the copies to ``verified`` (:class:`~lshbloom_udf.spark.verify.rule.Verified`): each as a duplicate of
        its first occurrence when that stays kept (similarity 1, measure exact), else of what the first occurrence
        duplicates."""
        from lshbloom_udf.spark.verify.rule import EXACT

        if not len(self.rows):
            return
        n = len(self.rows)
        of_rows, similarity = self.firsts.copy(), np.ones(n, np.float64)
        measure = np.full(n, EXACT, np.int8)
        flagged_first = is_in(self.firsts, verified.rows)
        at = np.searchsorted(verified.rows, self.firsts[flagged_first])
        of_rows[flagged_first] = verified.of_rows[at]
        similarity[flagged_first] = verified.similarity[at]
        measure[flagged_first] = verified.measure[at]
        verified.pass_flagged += n
        verified._set(*(np.concatenate(pair) for pair in ((verified.rows, self.rows), (verified.of_rows, of_rows),
                                                          (verified.similarity, similarity),
                                                          (verified.measure, measure))))


def text_hash_columns(text_col: str, names=("_lshb_h1", "_lshb_h2")) -> list:
    """The two columns (int64) of a text's 128-bit hash: Spark's ``xxhash64`` of it under two seeds."""
    from pyspark.sql import functions as F

    text = col(text_col)
    return [F.xxhash64(text).alias(names[0]), F.xxhash64(F.lit(SECOND_SEED), text).alias(names[1])]


def find_exact_copies(pinned, text_col: str) -> ExactCopies:
    """The pinned rows whose text equals an earlier row's (by a 128-bit hash), with their first occurrence."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    text = col(text_col)
    first = F.min(ROW_COL).over(Window.partitionBy("_lshb_h1", "_lshb_h2")).alias(_FIRST)
    # Every non-empty text is hashed; only the copies' first occurrences are asked whether they have a letter or
    # digit (the rows of a group share their text): the regex over every text would decode each to a Java string,
    # which costs more than the hashes (docs/benchmarks.md, "The fixed stages at 10⁶").
    hashed = pinned.where(F.octet_length(text) > 0).select(ROW_COL, *text_hash_columns(text_col))  # nor null
    copies = hashed.select(ROW_COL, first).where(F.col(ROW_COL) != F.col(_FIRST))
    table = collect_arrow(copies)
    rows = np.asarray(table.column(ROW_COL).to_numpy(), dtype=np.int64)
    firsts = np.asarray(table.column(_FIRST).to_numpy(), dtype=np.int64)
    if len(rows):
        keep = is_in(firsts, _with_letters(pinned, text_col, np.unique(firsts)))
        rows, firsts = rows[keep], firsts[keep]
    order = np.argsort(rows, kind="stable")
    rows, firsts = rows[order], firsts[order]
    return ExactCopies(rows, firsts, ship(pinned.sparkSession, rows) if len(rows) else None)


def _with_letters(pinned, text_col: str, among: np.ndarray) -> np.ndarray:
    """The sorted row ids of ``among`` (sorted) whose text has a letter or digit (:data:`HAS_SHINGLES`)."""
    # Broadcast: these are at most the copies, whose row ids the driver holds and ships anyway (ExactCopies).
    table = collect_arrow(among_rows(pinned, among).where(col(text_col).rlike(HAS_SHINGLES)).select(ROW_COL))
    return np.sort(np.asarray(table.column(ROW_COL).to_numpy(), dtype=np.int64))

