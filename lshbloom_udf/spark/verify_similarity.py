"""Verification's similarities (:mod:`lshbloom_udf.spark.verify`): the exact ``|S_d ∩ S_e|``, ``|S_d|``,
``|S_e|`` of the candidate pairs, computed natively (:func:`lshbloom_udf._native.shingle_overlaps`).

Only the texts of the documents in a candidate pair are read (a semi-join of
the pinned input with their row ids). When they are few enough
(``verify_driver_bytes`` in all, a setting) they come to the driver and every pair is
computed there: one Spark job. Otherwise the pairs are joined with the texts
on the executors and computed there (:func:`similarity_mapper`).
"""

from __future__ import annotations

import logging
import os
from typing import Optional

import numpy as np

from lshbloom_udf.spark.keys import ROW_COL
from lshbloom_udf.spark.verify import Shingling, VerifiedPairs, VerifyRule
from lshbloom_udf.common import collect_arrow, iter_arrow
from lshbloom_udf.spark.verify_candidates import F_ROW, K_ROW

log = logging.getLogger(__name__)

SIM, MEASURE = "_lshb_sim", "_lshb_measure"
TEXT_F, TEXT_K = "_lshb_ftext", "_lshb_ktext"


def overlaps(lefts, rights, shingling: Shingling, threads: int = 1) -> np.ndarray:
    """``(|S_l ∩ S_r|, |S_l|, |S_r|)`` of aligned lists of texts, shape (n, 3): :func:`shingle_set`'s sets,
    intersected natively (exact, the shingles' bytes compared) on ``threads`` threads."""
    from lshbloom_udf import _native

    return _native.shingle_overlaps(lefts, rights, shingling.ngram, shingling.normalize_mask, shingling.unit, threads)


def similarity_mapper(shingling: Shingling, rule: VerifyRule):
    """(flagged row, kept row, similarity, measure code) of each pair of texts that ``rule`` verifies.

    ``J`` and ``C`` both come from one intersection of the two shingle sets.
    """

    def run(batches):
        import pyarrow as pa

        for batch in batches:
            # Sorted by the earlier text: the native side shingles a kept document once for its consecutive copies.
            order = pa.array(np.argsort(batch.column(1).to_numpy(zero_copy_only=False), kind="stable"))
            batch = batch.take(order)
            f_text = [_decoded(t) for t in batch.column(2).cast(pa.binary()).to_pylist()]
            k_text = [_decoded(t) for t in batch.column(3).cast(pa.binary()).to_pylist()]
            passes, sim, measure = rule.judge(*overlaps(f_text, k_text, shingling).T)
            if passes.any():
                keep = pa.array(passes)
                yield pa.RecordBatch.from_arrays(
                    [batch.column(0).filter(keep), batch.column(1).filter(keep), pa.array(sim[passes], pa.float64()),
                     pa.array(measure[passes], pa.int8())], names=[F_ROW, K_ROW, SIM, MEASURE])

    return run


def _decoded(raw):
    # Spark strings may hold invalid UTF-8: decoded as the keys stage decodes them (errors="replace").
    return None if raw is None else raw.decode("utf-8", "replace")


def similarities(cand, *, texts_of, shingling: Shingling, rule: VerifyRule, broadcast_limit: int,
                 driver_text_bytes: int, held: Optional[dict] = None) -> VerifiedPairs:
    """The candidate pairs ``rule`` verifies, with their similarity and measure (the module's docs).

    ``driver_text_bytes``: the texts' budget on the driver (``verify_driver_bytes``); past it the pairs are
    computed on the executors. ``held``: texts an earlier call brought to the driver (``{row id: text}``), reused and added to: round 2's
    documents were round 1's flagged ones, so its texts are mostly there already.
    """
    from lshbloom_udf.spark.join import row_frame

    f_rows, k_rows = cand
    if not len(f_rows):
        return VerifiedPairs(f_rows, k_rows, np.zeros(0, np.float64), np.zeros(0, np.int8))
    held = {} if held is None else held
    involved = np.unique(np.concatenate([f_rows, k_rows]))
    missing = np.fromiter((r for r in involved.tolist() if r not in held), np.int64)
    small = len(missing) <= broadcast_limit
    texts = texts_of(row_frame(texts_of.spark, missing, small), small)
    text_col = [c for c in texts.columns if c != ROW_COL][0]
    if not len(missing) or _driver_texts(texts, text_col, driver_text_bytes, held):
        log.debug("verification: %d candidate pairs over %d texts on the driver", len(f_rows), len(held))
        return _on_driver(f_rows, k_rows, held, shingling, rule)
    log.info("verification: the candidates' texts pass verify_driver_bytes (%s): similarities on the executors "
             "(a larger budget keeps them on the driver, several times faster)", driver_text_bytes)
    held.clear()  # over the budget: the texts stay on the executors, every one of them
    small = len(involved) <= broadcast_limit
    texts = texts_of(row_frame(texts_of.spark, involved, small), small)
    return _on_executors(texts_of.spark, f_rows, k_rows, texts, text_col, shingling, rule)


def _driver_texts(texts, text_col: str, budget: int, held: dict) -> bool:
    """Add ``{row id: text}`` of ``texts`` to ``held`` on the driver; False once ``held`` passes ``budget`` bytes
    (UTF-8). The rows arrive as Arrow batches (:func:`~lshbloom_udf.common.iter_arrow`), not one by one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    size = sum(0 if t is None else len(t.encode("utf-8", "replace")) for t in held.values())
    batches = iter_arrow(texts)
    for batch in batches:
        raw = batch.column(text_col).cast(pa.binary())
        size += int(pc.sum(pc.binary_length(raw)).as_py() or 0)
        if size > budget:
            batches.close()  # ends the transfer of the remaining partitions
            return False
        held.update(zip(batch.column(ROW_COL).to_pylist(), map(_decoded, raw.to_pylist())))
    return True


def _on_driver(f_rows, k_rows, texts: dict, shingling: Shingling, rule: VerifyRule) -> VerifiedPairs:
    # Sorted by the earlier text: the native side shingles a kept document once for its consecutive copies.
    order = np.argsort(k_rows, kind="stable")
    f_rows, k_rows = f_rows[order], k_rows[order]
    # The executors are idle meanwhile: the driver's cores are verification's.
    sizes = overlaps([texts[r] for r in f_rows.tolist()], [texts[r] for r in k_rows.tolist()], shingling,
                     threads=os.cpu_count() or 1)
    passes, sim, measure = rule.judge(*sizes.T)
    return VerifiedPairs.of(f_rows[passes], k_rows[passes], sim[passes].astype(np.float64),
                            measure[passes].astype(np.int8))


def _on_executors(spark, f_rows, k_rows, texts, text_col: str, shingling: Shingling, rule: VerifyRule) -> VerifiedPairs:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from lshbloom_udf.spark.join import local_frame

    schema = T.StructType([T.StructField(F_ROW, T.LongType(), False), T.StructField(K_ROW, T.LongType(), False)])
    pairs = local_frame(spark, {F_ROW: f_rows, K_ROW: k_rows}, schema)
    tf = texts.select(F.col(ROW_COL).alias(F_ROW), F.col(text_col).alias(TEXT_F))
    tk = texts.select(F.col(ROW_COL).alias(K_ROW), F.col(text_col).alias(TEXT_K))
    joined = pairs.join(tf, F_ROW).join(tk, K_ROW).select(F_ROW, K_ROW, TEXT_F, TEXT_K)
    sims = joined.mapInArrow(similarity_mapper(shingling, rule),
                             f"{F_ROW} long, {K_ROW} long, {SIM} double, {MEASURE} byte")
    table = collect_arrow(sims)
    return VerifiedPairs.of(*(table.column(c).to_numpy().astype(t) for c, t in
                              ((F_ROW, np.int64), (K_ROW, np.int64), (SIM, np.float64), (MEASURE, np.int8))))


class texts_source:
    """``texts_of`` for :func:`verify_flags`: the (row id, text) of some rows of the pinned input, read without
    shuffling every text (a broadcast semi-join when ``small``); ``spark`` its session."""

    def __init__(self, pinned, text_col: str):
        self.pinned, self.text_col, self.spark = pinned, text_col, pinned.sparkSession

    def __call__(self, rows, small: bool):
        from pyspark.sql import functions as F

        from lshbloom_udf.common import col

        return self.pinned.join(F.broadcast(rows) if small else rows, ROW_COL, "left_semi").select(
            ROW_COL, col(self.text_col))
