"""Verification's similarities (:mod:`lshbloom_udf.spark.verify`): the exact ``|S_d ∩ S_e|``, ``|S_d|``,
``|S_e|`` of the candidate pairs, computed natively (:func:`lshbloom_udf._native.indexed_overlaps` on the driver,
:func:`lshbloom_udf._native.shingle_overlaps` on the executors).

Only the texts of the documents in a candidate pair are read (a semi-join of
the pinned input with their row ids), and with round 1's those of every flagged
document (round 2's documents), so that round 2 reads none; those travel while round 1's candidates are found
(:class:`TextPrefetch`). When they are few enough
(``verify_driver_bytes``, derived from the driver's memory unless given: :mod:`lshbloom_udf.memory`) they come
to the driver and every pair is computed there: a Spark job a fetch, one collect when a bound of their bytes (from
the sizes the input check measured) fits the one-collect budget, else a stream of partitions each within half of
it. Otherwise the pairs are joined with the texts on the executors and computed there (:func:`similarity_mapper`).
The texts held are counted as the Python ``str`` objects they become (:func:`~lshbloom_udf.memory.str_cost`).
"""

from __future__ import annotations

import logging
import os
from typing import Optional

import numpy as np

from lshbloom_udf.common import collect_arrow, iter_arrow
from lshbloom_udf.memory import DriverMemory, str_cost
from lshbloom_udf.spark.frames import local_frame, row_frame
from lshbloom_udf.spark.keys import ROW_COL
from lshbloom_udf.spark.verify.rule import Shingling, VerifiedPairs, VerifyRule
from lshbloom_udf.spark.verify.spark_source import F_ROW, K_ROW
from lshbloom_udf.spark.verify.templates import SAMPLE_MASK, flagged_sample, kept_sample, sample_below

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
                 driver_text_bytes: Optional[int], held: Optional[dict] = None, also=None) -> VerifiedPairs:
    """The candidate pairs ``rule`` verifies, with their similarity and measure (the module's docs).

    ``driver_text_bytes``: the texts' budget on the driver (``verify_driver_bytes``, their
    :func:`~lshbloom_udf.memory.str_cost`; None: ``texts_of.memory``'s); past it the pairs are computed on the
    executors. Where they were computed is appended to ``texts_of.places``. ``held``: texts an earlier call
    brought to the driver (``{row id: text}``), reused and added to: round 2's documents were round 1's flagged
    ones, so its texts are mostly there already. ``also``: rows whose texts
    come to the driver with these (round 1 brings every flagged row's: round 2 then reads nothing).
    """
    f_rows, k_rows = cand
    budget = _driver_budget(texts_of, driver_text_bytes)
    if not len(f_rows):
        return VerifiedPairs(f_rows, k_rows, np.zeros(0, np.float64), np.zeros(0, np.int8))
    held = {} if held is None else held
    involved = np.unique(np.concatenate([f_rows, k_rows]))
    wanted = involved if also is None else np.union1d(involved, np.asarray(also, np.int64))
    missing = np.fromiter((r for r in wanted.tolist() if r not in held), np.int64)
    if not len(missing) or budget and _driver_texts(texts_of, missing, broadcast_limit, budget, held):
        log.debug("verification: %d candidate pairs over %d texts on the driver", len(f_rows), len(held))
        texts_of.places.append("driver")
        return _on_driver(f_rows, k_rows, held, shingling, rule, texts_of.memory)
    log.info("verification: the candidates' texts pass the driver's budget for them (verify_driver_bytes %s, as "
             "Python strings): similarities on the executors (more driver memory keeps them on the driver, several "
             "times faster)", budget)
    held.clear()  # over the budget: the texts stay on the executors, every one of them
    texts_of.places.append("executors")
    texts, text_col = _texts_frame(texts_of, involved, broadcast_limit)
    return _on_executors(texts_of, f_rows, k_rows, texts, text_col, shingling, rule)


def _driver_budget(texts_of, driver_text_bytes: Optional[int]) -> int:
    """The texts' budget on the driver (:func:`similarities`): 0 when a text may be longer than a streamed
    partition (the driver's JVM cannot take it in bounds)."""
    if texts_of.longest is not None and texts_of.longest > texts_of.memory.partition:
        return 0
    return texts_of.memory.texts if driver_text_bytes is None else driver_text_bytes


class TextPrefetch:
    """The texts of ``rows`` brought into ``held`` on another thread, within :func:`similarities`'s budget: round 1
    knows its flagged documents before its candidates, so their texts travel (executors, a Spark job) while the
    candidates are found (the driver: the spool's scan). :meth:`join` waits for it and raises what it raised;
    :func:`similarities` then brings only what is still missing, or, past the budget, computes on the executors."""

    def __init__(self, texts_of, rows: np.ndarray, held: dict, broadcast_limit: int,
                 driver_text_bytes: Optional[int]):
        from pyspark import InheritableThread

        self.error: Optional[BaseException] = None
        budget = _driver_budget(texts_of, driver_text_bytes)

        def run() -> None:
            try:
                if budget and len(rows):
                    _driver_texts(texts_of, rows, broadcast_limit, budget, held)
            except BaseException as e:  # raised again by join(), on the caller's thread
                self.error = e

        # The session: Spark Connect's thread needs it (its tags), a classic one ignores it.
        self.thread = InheritableThread(target=run, name="lshbloom-verify-texts", daemon=True, session=texts_of.spark)
        self.thread.start()

    def join(self, raise_error: bool = True) -> None:
        self.thread.join()
        if raise_error and self.error is not None:
            raise self.error


# The UTF-8 bytes of texts decoded at a time: the held texts' budget is checked before each slice is kept, so it is
# passed by at most one slice's strings (a collect's batch can be a whole partition).
DECODE_SLICE_BYTES = 8 << 20
# A stream's partitions: round-robin rows split a bound of B bytes into ceil(SPREAD * B / partition budget) of them,
# SPREAD leaving room for rows of unequal lengths (a partition's expected bytes are then 2/3 of its budget).
SPREAD = 1.5
# A verified pair as the executors return it: two int64 row ids, a float64 similarity, an int8 measure.
PAIR_RESULT_BYTES = 25


def _texts_frame(texts_of, rows: np.ndarray, broadcast_limit: int):
    """(DataFrame of the (row id, text) of ``rows``, the text column's name). The rows are broadcast (no shuffle of
    the pinned texts) up to ``broadcast_limit`` or what one collect holds of them (``memory.broadcast_rows``),
    whichever is more: at 10^7 documents verification wants the texts of half of them."""
    small = len(rows) <= max(broadcast_limit, texts_of.memory.broadcast_rows)
    texts = texts_of(row_frame(texts_of.spark, rows, small), small)
    return texts, [c for c in texts.columns if c != ROW_COL][0]


def _driver_texts(texts_of, rows: np.ndarray, broadcast_limit: int, budget: int, held: dict) -> bool:
    """Add ``{row id: text}`` of ``rows`` to ``held`` on the driver; False once ``held`` would pass ``budget``
    (:func:`~lshbloom_udf.memory.str_cost` of each text). The rows arrive as Arrow batches, not one by one
    (:func:`_arrow_batches`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    memory = texts_of.memory
    texts, text_col = _texts_frame(texts_of, rows, broadcast_limit)
    size = sum(map(str_cost, held.values()))
    bound = texts_of.at_most(len(rows))
    batches = _arrow_batches(texts, bound, memory)
    for batch in batches:
        raw = batch.column(text_col).cast(pa.binary())
        lengths = pc.fill_null(pc.binary_length(raw), 0).to_numpy(zero_copy_only=False)
        cuts = np.flatnonzero(np.diff(np.cumsum(lengths) // DECODE_SLICE_BYTES)) + 1
        for lo, hi in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(lengths)].tolist()):
            decoded = list(map(_decoded, raw.slice(lo, hi - lo).to_pylist()))
            size += sum(map(str_cost, decoded))
            if size > budget:
                getattr(batches, "close", lambda: None)()  # ends a stream's transfer of the remaining partitions
                return False
            held.update(zip(batch.column(ROW_COL).slice(lo, hi - lo).to_pylist(), decoded))
    return True


def _arrow_batches(frame, bound: Optional[int], memory: DriverMemory):
    """``frame``'s rows on the driver as Arrow batches: in one collect when ``bound`` (of their bytes) is known and
    within the one-collect budget (``memory.collect``), else a partition at a time
    (:func:`~lshbloom_udf.common.iter_arrow`), ``frame`` first spread over partitions of at most ``memory.partition``
    bytes each (:data:`SPREAD`) when ``bound`` is known and passes it. One collect skips the Python workers
    that re-pack a stream (~2x faster at 10^6 documents)."""
    if bound is not None and bound <= memory.collect:
        return iter(collect_arrow(frame).to_batches())
    if bound is not None and bound > memory.partition:
        frame = frame.repartition(max(2, -(-int(SPREAD * bound) // max(1, memory.partition))))
    return iter_arrow(frame)


def held_texts(texts_of, rows: np.ndarray, held: dict, broadcast_limit: int) -> dict:
    """``held`` with the texts of ``rows`` added where missing (the template rule's suspects: a few pairs' texts,
    read even past ``verify_driver_bytes`` when round 1 left every text on the executors)."""
    missing = np.fromiter((r for r in rows.tolist() if r not in held), np.int64)
    if len(missing):
        _driver_texts(texts_of, missing, broadcast_limit, 1 << 62, held)  # a few pairs' texts: past the budget
    return held


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


def _on_executors(texts_of, f_rows, k_rows, texts, text_col: str, shingling: Shingling,
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


class TextsSource:
    """``texts_of`` for :func:`verify_flags`: the (row id, text) of some rows of the pinned input, read without
    shuffling every text (a broadcast semi-join when ``small``); ``spark`` its session. ``longest``, ``total``: the
    longest text's and all texts' UTF-8 bytes (the input check measures them), None if unknown. ``memory``: the
    driver's (:class:`~lshbloom_udf.memory.DriverMemory`; default: derived from the session now). ``places``: where
    each call of :func:`similarities` computed them (``driver`` or ``executors``), for the summary."""

    def __init__(self, pinned, text_col: str, longest: Optional[int] = None, total: Optional[int] = None,
                 documents: Optional[int] = None, memory: Optional[DriverMemory] = None):
        self.pinned, self.text_col, self.spark = pinned, text_col, pinned.sparkSession
        self.longest, self.total, self.documents = longest, total, documents
        self.memory = DriverMemory.of_session(self.spark) if memory is None else memory
        self.places: list = []

    def at_most(self, rows: int) -> Optional[int]:
        """An upper bound of the UTF-8 bytes of ``rows`` of the texts (None: unknown)."""
        if self.longest is None or self.total is None:
            return None
        return min(rows * self.longest, self.total)

    def __call__(self, rows, small: bool):
        from pyspark.sql import functions as F

        from lshbloom_udf.common import col

        return self.pinned.join(F.broadcast(rows) if small else rows, ROW_COL, "left_semi").select(
            ROW_COL, col(self.text_col))

    def sample_texts(self, flagged: np.ndarray, top_up: int) -> tuple[list, list]:
        """The texts of the template rule's sample (:func:`~lshbloom_udf.spark.verify.templates.kept_sample`) and of
        its ``top_up`` flagged candidates (:func:`~lshbloom_udf.spark.verify.templates.flagged_sample`), the candidates
        found by a scan of the pinned rows with Spark's ``xxhash64``: the rows a driver pass would have noted."""
        import pyarrow as pa
        from pyspark.sql import functions as F

        from lshbloom_udf.common import col

        documents = self.pinned.count() if self.documents is None else self.documents
        below = sample_below(documents)
        frame = self.pinned
        if below <= SAMPLE_MASK:
            frame = frame.where(F.xxhash64(F.col(ROW_COL)).bitwiseAND(F.lit(SAMPLE_MASK).cast("long")) < below)
        frame = frame.select(ROW_COL, col(self.text_col))
        texts: dict = {}
        bound = self.at_most(int(below / (SAMPLE_MASK + 1) * documents * 1.5) + 64)
        for batch in _arrow_batches(frame, bound, self.memory):
            texts.update(zip(batch.column(0).to_pylist(), map(_decoded, batch.column(1).cast(pa.binary()).to_pylist())))
        candidates = np.fromiter(texts, np.int64, len(texts))
        return ([texts[r] for r in kept_sample(candidates, flagged).tolist()],
                [texts[r] for r in flagged_sample(candidates, flagged, top_up).tolist()])
