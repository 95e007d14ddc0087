"""Verification's similarities (:mod:`lshbloom_udf.spark.verify`): the exact ``|S_d ∩ S_e|``, ``|S_d|``,
``|S_e|`` of the candidate pairs, computed natively (:func:`lshbloom_udf._native.indexed_overlaps` on the driver,
:func:`lshbloom_udf._native.shingle_overlaps` on the executors).

On the driver when the candidates' texts fit its budget (:class:`~lshbloom_udf.spark.verify.texts.TextsSource`
brings them), else the pairs are joined with the texts on the executors and computed there
(:func:`similarity_mapper`).
"""

from __future__ import annotations

import logging
import os

import numpy as np

from lshbloom_udf.common import collect_arrow, iter_arrow
from lshbloom_udf.memory import DriverMemory
from lshbloom_udf.spark.frames import local_frame
from lshbloom_udf.spark.keys import ROW_COL
from lshbloom_udf.spark.verify.rule import Shingling, VerifiedPairs, VerifyRule
from lshbloom_udf.spark.verify.spark_source import F_ROW, K_ROW
from lshbloom_udf.spark.verify.texts import TextsSource, decoded

log = logging.getLogger(__name__)

SIM, MEASURE = "_lshb_sim", "_lshb_measure"
TEXT_F, TEXT_K = "_lshb_ftext", "_lshb_ktext"
# A verified pair as the executors return it: two int64 row ids, a float64 similarity, an int8 measure.
PAIR_RESULT_BYTES = 25


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
            f_text = [decoded(t) for t in batch.column(2).cast(pa.binary()).to_pylist()]
            k_text = [decoded(t) for t in batch.column(3).cast(pa.binary()).to_pylist()]
            passes, sim, measure = rule.judge(*overlaps(f_text, k_text, shingling).T)
            if passes.any():
                keep = pa.array(passes)
                yield pa.RecordBatch.from_arrays(
                    [batch.column(0).filter(keep), batch.column(1).filter(keep), pa.array(sim[passes], pa.float64()),
                     pa.array(measure[passes], pa.int8())], names=[F_ROW, K_ROW, SIM, MEASURE])

    return run


def similarities(cand, *, texts_of: TextsSource, shingling: Shingling, rule: VerifyRule,
                 also=None) -> VerifiedPairs:
    """The candidate pairs ``rule`` verifies, with their similarity and measure (the module's docs).

    On the driver while the texts fit ``texts_of.budget``, past it on the executors. Where they were computed is
    appended to ``texts_of.places``. ``texts_of.held``: texts an earlier call brought to the driver, reused and added
    to: round 2's documents were round 1's flagged ones, so its texts are mostly there already. ``also``: rows whose
    texts come to the driver with these (round 1 brings every flagged row's: round 2 then reads nothing).
    """
    f_rows, k_rows = cand
    budget = texts_of.budget
    if not len(f_rows):
        return VerifiedPairs(f_rows, k_rows, np.zeros(0, np.float64), np.zeros(0, np.int8))
    held = texts_of.held
    involved = np.unique(np.concatenate([f_rows, k_rows]))
    wanted = involved if also is None else np.union1d(involved, np.asarray(also, np.int64))
    missing = np.fromiter((r for r in wanted.tolist() if r not in held), np.int64)
    if not len(missing) or budget and texts_of.bring(missing, budget):
        log.debug("verification: %d candidate pairs over %d texts on the driver", len(f_rows), len(held))
        texts_of.places.append("driver")
        return _on_driver(f_rows, k_rows, held, shingling, rule, texts_of.memory)
    log.info("verification: the candidates' texts pass the driver's budget for them (verify_driver_bytes %s, as "
             "Python strings): similarities on the executors (more driver memory keeps them on the driver, several "
             "times faster)", budget)
    held.clear()  # over the budget: the texts stay on the executors, every one of them
    texts_of.places.append("executors")
    texts, text_col = texts_of.frame_of(involved)
    return _on_executors(texts_of, f_rows, k_rows, texts, text_col, shingling, rule)


def _on_driver(f_rows, k_rows, texts: dict, shingling: Shingling, rule: VerifyRule,
               memory: DriverMemory) -> VerifiedPairs:
    """The verified pairs, counted on the driver's cores (the executors are idle meanwhile) by
    :func:`~lshbloom_udf._native.indexed_overlaps`: sorted by the later document, whose set is built once for its
    candidates; an earlier text in three pairs or more (a template's anchor) shingled once, the most frequent first,
    within ``memory.shingle_cache``."""
    from lshbloom_udf import _native

    order = np.lexsort((k_rows, f_rows))
    f_rows, k_rows = f_rows[order], k_rows[order]
    rows = np.unique(np.concatenate([f_rows, k_rows]))
    lefts, rights = (np.searchsorted(rows, r).astype(np.uint32) for r in (f_rows, k_rows))
    sizes = _native.indexed_overlaps([texts[r] for r in rows.tolist()], lefts, rights, shingling.ngram,
                                     shingling.normalize_mask, shingling.unit, os.cpu_count() or 1,
                                     memory.shingle_cache)
    passes, sim, measure = rule.judge(*sizes.T)
    return VerifiedPairs.of(f_rows[passes], k_rows[passes], sim[passes].astype(np.float64),
                            measure[passes].astype(np.int8))


def _on_executors(texts_of: TextsSource, f_rows, k_rows, texts, text_col: str, shingling: Shingling,
                  rule: VerifyRule) -> VerifiedPairs:
    """The verified pairs, computed on the executors; brought in one collect while every candidate pair's result
    fits the one-collect budget, else streamed a partition at a time."""
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    spark = texts_of.spark
    schema = T.StructType([T.StructField(F_ROW, T.LongType(), False), T.StructField(K_ROW, T.LongType(), False)])
    pairs = local_frame(spark, {F_ROW: f_rows, K_ROW: k_rows}, schema)
    tf = texts.select(F.col(ROW_COL).alias(F_ROW), F.col(text_col).alias(TEXT_F))
    tk = texts.select(F.col(ROW_COL).alias(K_ROW), F.col(text_col).alias(TEXT_K))
    joined = pairs.join(tf, F_ROW).join(tk, K_ROW).select(F_ROW, K_ROW, TEXT_F, TEXT_K)
    sims = joined.mapInArrow(similarity_mapper(shingling, rule),
                             f"{F_ROW} long, {K_ROW} long, {SIM} double, {MEASURE} byte")
    if len(f_rows) * PAIR_RESULT_BYTES <= texts_of.memory.collect:
        table = collect_arrow(sims)
    else:
        table = pa.Table.from_batches(list(iter_arrow(sims)), schema=pa.schema(
            [(F_ROW, pa.int64()), (K_ROW, pa.int64()), (SIM, pa.float64()), (MEASURE, pa.int8())]))
    return VerifiedPairs.of(*(table.column(c).to_numpy().astype(t) for c, t in
                              ((F_ROW, np.int64), (K_ROW, np.int64), (SIM, np.float64), (MEASURE, np.int8))))
