"""Cluster sizes: how many removed documents each kept one stood for (the summary's ``verify.clusters``).

A removed document's source is the earliest verified kept document
(``duplicate_of``), in this run or in an earlier run of a kept index. A kept
document of this run gets ``duplicate_count`` (spark/join.py): the removed
documents of this run that name it. An earlier run's kept document is not
rewritten: its count across runs is its ``duplicate_count`` in its own run's
output plus the rows of later runs' outputs whose ``duplicate_of`` names it;
this summary counts the latter (``earlier_runs``).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from lshbloom_udf.common import col
from lshbloom_udf.spark.keys import ROW_COL

# How many of the largest groups the summary names; the similarity histogram's bins over [0, 1].
LARGEST = 10
SIMILARITY_BINS = 40


def group_sizes(counts: np.ndarray) -> dict:
    """Kept documents by the size of their group (kept + removed): ``{"2": n, "3-4": n, "5-8": n, ...}``."""
    sizes = counts + 1
    out = {}
    low = 2
    while len(sizes) and low <= sizes.max():
        high = 2 * low - 2 if low > 2 else 2
        n = int(np.count_nonzero((sizes >= low) & (sizes <= high)))
        if n:
            out[str(low) if low == high else f"{low}-{high}"] = n
        low = high + 1
    return out


def _largest(keys: np.ndarray, counts: np.ndarray) -> list[tuple]:
    top = np.lexsort((keys, -counts))[:LARGEST]
    return [(keys[i], int(counts[i])) for i in top]


def cluster_summary(verified, crossrun=None, pinned=None, id_column: Optional[str] = None) -> dict:
    """The groups of ``verified``: their sizes, the largest of this run (by ``id_column`` when ``pinned`` is given to
    look the ids up, else by row id) and the removed documents whose source is an earlier run's."""
    from lshbloom_udf.spark.join import duplicate_counts

    rows, counts = duplicate_counts(verified)
    largest = _largest(rows, counts)
    names = _ids_of([r for r, _ in largest], pinned, id_column) if pinned is not None and id_column else {}
    out = {
        "kept_with_duplicates": len(rows),
        "group_sizes": group_sizes(counts),
        "largest": [{"duplicate_of": names.get(int(r), int(r)), "duplicate_count": n} for r, n in largest],
        "earlier_runs": int(np.count_nonzero(verified.of_rows <= -2)),
        "similarity": similarity_histogram(verified),
    }
    earlier = verified.of_rows[verified.of_rows <= -2]
    if crossrun is not None and len(earlier):
        # One source per flag (``-2 - j`` names the j-th flag's): the same earlier document under several codes.
        values = crossrun.source_values(earlier)
        sources, n = np.unique(values[values != None].astype(str), return_counts=True)  # noqa: E711 (element-wise)
        out["largest_earlier"] = [{"duplicate_of": str(sources[i]), "duplicate_count": int(n[i])}
                                  for i in np.lexsort((sources, -n))[:LARGEST]]
    return out


def similarity_histogram(verified) -> dict:
    """The removed documents with a source by the measure that verified them: counts of SIMILARITY_BINS equal bins
    of their similarity (the last bin holds 1.0)."""
    from lshbloom_udf.spark.verify.rule import MEASURES

    known = verified.of_rows != -1
    bins = np.minimum((verified.similarity[known] * SIMILARITY_BINS).astype(np.int64), SIMILARITY_BINS - 1)
    measures = verified.measure[known]
    return {MEASURES[m]: np.bincount(bins[measures == m], minlength=SIMILARITY_BINS).tolist()
            for m in sorted(set(measures.tolist()))}


def _ids_of(rows: list, pinned, id_column: str) -> dict:
    """``id_column`` of the pinned ``rows`` (a few: one small job)."""
    from pyspark.sql import functions as F

    if not rows:
        return {}
    found = pinned.filter(F.col(ROW_COL).isin([int(r) for r in rows])).select(ROW_COL, col(id_column)).collect()
    return {int(r[0]): r[1] for r in found}
