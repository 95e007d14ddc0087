"""The candidates' texts for verification (:class:`TextsSource`): which rows are read, how, and what the driver holds.

Only the texts of the documents in a candidate pair are read (a semi-join of
the pinned input with their row ids), and with round 1's those of every flagged
document (round 2's documents), so that round 2 reads none; those travel while round 1's candidates are found
(:class:`TextPrefetch`). When they are few enough
(``verify_driver_bytes``, derived from the driver's memory unless given: :mod:`lshbloom_udf.memory`) they come
to the driver and stay there for both rounds (:attr:`TextsSource.held`): a Spark job a fetch, one collect when a
bound of their bytes (from the sizes the input check measured) fits the one-collect budget, else a stream of
partitions each within half of it. Otherwise the similarities are computed on the executors
(:mod:`~lshbloom_udf.spark.verify.similarity`). The texts held are counted as the Python ``str`` objects they become
(:func:`~lshbloom_udf.memory.str_cost`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from lshbloom_udf.common import col, collect_arrow, iter_arrow
from lshbloom_udf.memory import DriverMemory, str_cost
from lshbloom_udf.spark.frames import row_frame
from lshbloom_udf.spark.keys import ROW_COL
from lshbloom_udf.spark.verify.templates import SAMPLE_MASK, flagged_sample, kept_sample, sample_below

# The UTF-8 bytes of texts decoded at a time: the held texts' budget is checked before each slice is kept, so it is
# passed by at most one slice's strings (a collect's batch can be a whole partition).
DECODE_SLICE_BYTES = 8 << 20
# A stream's partitions: round-robin rows split a bound of B bytes into ceil(SPREAD * B / partition budget) of them,
# SPREAD leaving room for rows of unequal lengths (a partition's expected bytes are then 2/3 of its budget).
SPREAD = 1.5


def decoded(raw):
    """A text from its UTF-8 bytes (None stays None)."""
    # Spark strings may hold invalid UTF-8: decoded as the keys stage decodes them (errors="replace").
    return None if raw is None else raw.decode("utf-8", "replace")


class TextsSource:
    """The (row id, text) of some rows of the pinned input, read without shuffling every text (a broadcast semi-join
    when ``small``: :meth:`__call__`); ``spark`` its session. ``longest``, ``total``: the longest text's and all
    texts' UTF-8 bytes (the input check measures them), None if unknown. ``memory``: the driver's
    (:class:`~lshbloom_udf.memory.DriverMemory`; default: derived from the session now). ``broadcast_limit``: row ids
    broadcast at most (or what one collect holds of them, ``memory.broadcast_rows``, if more).
    ``driver_text_bytes``: the texts the driver may hold (``verify_driver_bytes``, their
    :func:`~lshbloom_udf.memory.str_cost`; None: ``memory``'s). ``held``: the texts on the driver (``{row id:
    text}``), kept for both rounds: round 2's documents were round 1's flagged ones. ``places``: where each call of
    :func:`~lshbloom_udf.spark.verify.similarity.similarities` computed them (``driver`` or ``executors``), for the
    summary."""

    def __init__(self, pinned, text_col: str, longest: Optional[int] = None, total: Optional[int] = None,
                 documents: Optional[int] = None, memory: Optional[DriverMemory] = None, *, broadcast_limit: int = 0,
                 driver_text_bytes: Optional[int] = None):
        self.pinned, self.text_col, self.spark = pinned, text_col, pinned.sparkSession
        self.longest, self.total, self.documents = longest, total, documents
        self.memory = DriverMemory.of_session(self.spark) if memory is None else memory
        self.broadcast_limit, self.driver_text_bytes = broadcast_limit, driver_text_bytes
        self.held: dict = {}
        self.places: list = []

    def at_most(self, rows: int) -> Optional[int]:
        """An upper bound of the UTF-8 bytes of ``rows`` of the texts (None: unknown)."""
        if self.longest is None or self.total is None:
            return None
        return min(rows * self.longest, self.total)

    def __call__(self, rows, small: bool):
        from pyspark.sql import functions as F

        return self.pinned.join(F.broadcast(rows) if small else rows, ROW_COL, "left_semi").select(
            ROW_COL, col(self.text_col))

    @property
    def budget(self) -> int:
        """The texts' budget on the driver: 0 when a text may be longer than a streamed partition (the driver's JVM
        cannot take it in bounds)."""
        if self.longest is not None and self.longest > self.memory.partition:
            return 0
        return self.memory.texts if self.driver_text_bytes is None else self.driver_text_bytes

    def frame_of(self, rows: np.ndarray):
        """(DataFrame of the (row id, text) of ``rows``, the text column's name). The rows are broadcast (no shuffle
        of the pinned texts) up to ``broadcast_limit`` or what one collect holds of them (``memory.broadcast_rows``),
        whichever is more: verification may want the texts of a large share of the documents."""
        small = len(rows) <= max(self.broadcast_limit, self.memory.broadcast_rows)
        texts = self(row_frame(self.spark, rows, small), small)
        return texts, [c for c in texts.columns if c != ROW_COL][0]

    def bring(self, rows: np.ndarray, budget: int) -> bool:
        """Add the texts of ``rows`` to :attr:`held`; False once it would pass ``budget``
        (:func:`~lshbloom_udf.memory.str_cost` of each text). The rows arrive as Arrow batches, not one by one
        (:func:`_arrow_batches`)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        frame, text_col = self.frame_of(rows)
        size = sum(map(str_cost, self.held.values()))
        batches = _arrow_batches(frame, self.at_most(len(rows)), self.memory)
        for batch in batches:
            raw = batch.column(text_col).cast(pa.binary())
            lengths = pc.fill_null(pc.binary_length(raw), 0).to_numpy(zero_copy_only=False)
            cuts = np.flatnonzero(np.diff(np.cumsum(lengths) // DECODE_SLICE_BYTES)) + 1
            for lo, hi in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(lengths)].tolist()):
                strings = list(map(decoded, raw.slice(lo, hi - lo).to_pylist()))
                size += sum(map(str_cost, strings))
                if size > budget:
                    getattr(batches, "close", lambda: None)()  # ends a stream's transfer of the remaining partitions
                    return False
                self.held.update(zip(batch.column(ROW_COL).slice(lo, hi - lo).to_pylist(), strings))
        return True

    def held_with(self, rows: np.ndarray) -> dict:
        """:attr:`held` with the texts of ``rows`` added where missing (the template rule's suspects: a few pairs'
        texts, read even past ``verify_driver_bytes`` when round 1 left every text on the executors)."""
        missing = np.fromiter((r for r in rows.tolist() if r not in self.held), np.int64)
        if len(missing):
            self.bring(missing, 1 << 62)  # a few pairs' texts: past the budget
        return self.held

    def sample_texts(self, flagged: np.ndarray, top_up: int) -> tuple[list, list]:
        """The texts of the template rule's sample (:func:`~lshbloom_udf.spark.verify.templates.kept_sample`) and of
        its ``top_up`` flagged candidates (:func:`~lshbloom_udf.spark.verify.templates.flagged_sample`), the
        candidates found by a scan of the pinned rows with Spark's ``xxhash64``: the rows a driver pass would have
        noted."""
        import pyarrow as pa
        from pyspark.sql import functions as F

        documents = self.pinned.count() if self.documents is None else self.documents
        below = sample_below(documents)
        frame = self.pinned
        if below <= SAMPLE_MASK:
            frame = frame.where(F.xxhash64(F.col(ROW_COL)).bitwiseAND(F.lit(SAMPLE_MASK).cast("long")) < below)
        frame = frame.select(ROW_COL, col(self.text_col))
        texts: dict = {}
        bound = self.at_most(int(below / (SAMPLE_MASK + 1) * documents * 1.5) + 64)
        for batch in _arrow_batches(frame, bound, self.memory):
            texts.update(zip(batch.column(0).to_pylist(), map(decoded, batch.column(1).cast(pa.binary()).to_pylist())))
        candidates = np.fromiter(texts, np.int64, len(texts))
        return ([texts[r] for r in kept_sample(candidates, flagged).tolist()],
                [texts[r] for r in flagged_sample(candidates, flagged, top_up).tolist()])


class TextPrefetch:
    """The texts of ``rows`` brought into ``texts_of.held`` on another thread, within its budget: round 1 knows its
    flagged documents before its candidates, so their texts travel (executors, a Spark job) while the candidates are
    found (the driver: the spool's scan). :meth:`join` waits for it and raises what it raised;
    :func:`~lshbloom_udf.spark.verify.similarity.similarities` then brings only what is still missing, or, past the
    budget, computes on the executors."""

    def __init__(self, texts_of: TextsSource, rows: np.ndarray):
        from pyspark import InheritableThread

        self.error: Optional[BaseException] = None
        budget = texts_of.budget

        def run() -> None:
            try:
                if budget and len(rows):
                    texts_of.bring(rows, budget)
            except BaseException as e:  # raised again by join(), on the caller's thread
                self.error = e

        # The session: Spark Connect's thread needs it (its tags), a classic one ignores it.
        self.thread = InheritableThread(target=run, name="lshbloom-verify-texts", daemon=True, session=texts_of.spark)
        self.thread.start()

    def join(self, raise_error: bool = True) -> None:
        self.thread.join()
        if raise_error and self.error is not None:
            raise self.error


def _arrow_batches(frame, bound: Optional[int], memory: DriverMemory):
    """``frame``'s rows on the driver as Arrow batches: in one collect when ``bound`` (of their bytes) is known and
    within the one-collect budget (``memory.collect``), else a partition at a time
    (:func:`~lshbloom_udf.common.iter_arrow`), ``frame`` first spread over partitions of at most ``memory.partition``
    bytes each (:data:`SPREAD`) when ``bound`` is known and passes it. One collect skips the Python workers
    that re-pack a stream."""
    if bound is not None and bound <= memory.collect:
        return iter(collect_arrow(frame).to_batches())
    if bound is not None and bound > memory.partition:
        frame = frame.repartition(max(2, -(-int(SPREAD * bound) // max(1, memory.partition))))
    return iter_arrow(frame)
