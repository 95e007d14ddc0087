"""On the driver: the sequential pass (keep-first or any-earlier) over every document's band keys.

The keys arrive in chunks of consecutive rows, partition after partition, by
one of two transfers: the socket stream (:mod:`lshbloom_udf.spark.stream`,
keys computed by all executors while the pass runs) or, under Spark Connect
and with ``key_transfer="spark"``, ``toLocalIterator`` over
:func:`~lshbloom_udf.spark.keys.packer`'s chunks (:func:`spark_chunks`). The
index decides each chunk in native code
(:meth:`~lshbloom_udf.index.LSHBloomIndex.query_insert`). Progress (documents,
docs/s, ETA) goes to the ``lshbloom_udf`` logger.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from lshbloom_udf import hooks
from lshbloom_udf.common import col, local_rows
from lshbloom_udf.errors import InternalError
from lshbloom_udf.litter import fast_temp_base, make_temp_dir
from lshbloom_udf.log import logger
from lshbloom_udf.minhash import KeySpec
from lshbloom_udf.spark.keys import PACKED_SCHEMA, ROW_COL, TaskThreads, packer

WAITING_INTERVAL = 10.0


class Progress:
    """Documents done, docs/s and ETA, logged every ``interval`` seconds from the pass's first second.

    A timer thread writes the line, so it shows while the first keys are still
    being computed; :meth:`update` only records the counts. Disabled: nothing.
    """

    def __init__(self, total: int, enabled: bool = True, interval: float = 1.0):
        self.total = total
        self.enabled = enabled
        self.interval = interval
        self.start = time.monotonic()
        self.done = 0
        self.duplicates = 0
        self.lines = 0
        self._stop = threading.Event()
        self._thread = None
        if enabled:
            self._thread = threading.Thread(target=self._tick, name="lshbloom-progress", daemon=True)
            self._thread.start()

    def _tick(self) -> None:
        last_done, last_line = -1, 0.0
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            # A line per interval while documents are decided; while nothing moves (Spark starting, the first keys
            # computed), one every WAITING_INTERVAL seconds.
            if self.done != last_done or now - last_line >= WAITING_INTERVAL:
                last_done, last_line = self.done, now
                self._log(final=False)

    def update(self, done: int, duplicates: int) -> None:
        self.done, self.duplicates = done, duplicates

    def close(self) -> None:
        """Stop the timer; one final line if any was written (a pass shorter than ``interval`` writes none)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if self.lines:
            self._log(final=True)

    def _log(self, final: bool) -> None:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        done = self.done
        rate = done / elapsed
        if final:
            eta = f"done in {elapsed:.1f} s"
        elif rate > 0:
            eta = "ETA " + _hms((self.total - done) / rate)
        else:
            eta = "ETA ? (waiting for the first keys)"
        pct = 100.0 * done / self.total if self.total else 100.0
        logger.info("%s/%s documents (%.1f%%), %s duplicates, %s docs/s, %s", f"{done:,}", f"{self.total:,}", pct,
                    f"{self.duplicates:,}", f"{rate:,.0f}", eta)
        self.lines += 1


def _hms(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def temporary_index_dir(params, bloom: str) -> str:
    """A fresh directory for a temporary index: in /dev/shm when the index fits there with room to spare."""
    from lshbloom_udf.index import backend

    index_bytes = backend(bloom).index_bytes(params.capacity, params.p_band, params.b)
    return make_temp_dir("index", fast_temp_base(int(index_bytes * 1.25)))


@dataclass
class PassOutcome:
    """What the driver pass decided: the duplicates' row ids and the counts."""

    duplicate_rows: list = field(default_factory=list)
    duplicates: int = 0
    empty: int = 0
    documents: int = 0
    # Seconds from the pass's start to its first keys: Spark's start-up and the first chunk's keys (0: not measured).
    first_keys_seconds: float = 0.0
    # The duplicates' band keys, aligned with duplicate_rows, when the pass was asked for them (verification's).
    duplicate_keys: list = field(default_factory=list)
    # The candidates of verification's template sample (verify.templates.sample_candidates), when asked for.
    sample_rows: list = field(default_factory=list)

    def rows(self) -> np.ndarray:
        return np.concatenate(self.duplicate_rows) if self.duplicate_rows else np.zeros(0, dtype=np.int64)

    def sampled(self) -> Optional[np.ndarray]:
        """The template sample's candidate rows the pass found (None: it was not asked to)."""
        return np.concatenate(self.sample_rows) if self.sample_rows else None

    def keys(self, b: int) -> np.ndarray:
        """The duplicates' band keys, ``(len(rows()), b)`` uint64 (the pass kept them: ``keep_keys``)."""
        return np.concatenate(self.duplicate_keys) if self.duplicate_keys else np.zeros((0, b), dtype=np.uint64)


def spark_chunks(pinned, text_col: str, spec: KeySpec, chunk_rows: int, skip=None,
                 threads: TaskThreads = TaskThreads()):
    """``(first row id, keys (n, b), active)`` chunks in row order, through ``toLocalIterator``.

    Each partition's keys are computed by one task when the pass reaches it
    (the next one is prefetched) and travel as one task result.
    """
    b = spec.b
    mapper = packer(text_col, spec, chunk_rows, skip, threads)
    packed = pinned.select(ROW_COL, col(text_col)).mapInArrow(mapper, PACKED_SCHEMA)
    for row in local_rows(packed):
        n = int(row["n"])
        keys = np.frombuffer(row["keys"], dtype="<u8").reshape(n, b)
        yield int(row["start"]), keys, np.frombuffer(row["active"], dtype=np.bool_)


def run_driver_pass(chunks, index, documents: int, progress: bool, insert_rule: str = "first",
                    keep_keys: bool = False, started: Optional[float] = None,
                    sample_below: Optional[int] = None) -> PassOutcome:
    """Decide every chunk of ``chunks`` (``(first row id, keys, active)``, in row order) with ``index`` under the
    rule ``insert_rule`` (``first``: keep-first, ``all``: any-earlier;
    :meth:`~lshbloom_udf.index.LSHBloomIndex.decide`);
    ``keep_keys``: also keep the duplicates' keys (``F·b``, for verification's candidates). ``started``: when the
    keys' job began (``time.monotonic()``; default now), from which ``first_keys_seconds`` counts.
    ``sample_below``: also note the rows that are candidates of verification's template sample
    (:func:`~lshbloom_udf.spark.verify.templates.sample_candidates`), so that it needs no scan of its own."""
    from lshbloom_udf.spark.verify.templates import sample_candidates

    outcome = PassOutcome()
    bar = Progress(documents, enabled=progress)
    try:
        t0 = time.monotonic() if started is None else started
        for start, keys, active in chunks:
            if not outcome.first_keys_seconds:
                outcome.first_keys_seconds = time.monotonic() - t0
            n = len(active)
            hits = np.flatnonzero(index.decide(keys, active, insert_rule))
            if hits.size:
                outcome.duplicate_rows.append(hits.astype(np.int64) + np.int64(start))
                if keep_keys:
                    outcome.duplicate_keys.append(np.array(keys[hits], dtype=np.uint64))
            if sample_below is not None:
                outcome.sample_rows.append(sample_candidates(np.arange(start, start + n, dtype=np.int64), sample_below))
            outcome.duplicates += int(hits.size)
            outcome.empty += int(n - np.count_nonzero(active))
            outcome.documents += n
            bar.update(outcome.documents, outcome.duplicates)
            hooks.fire("driver-pass", done=outcome.documents)
    finally:
        bar.close()
    if outcome.documents != documents:
        raise InternalError(f"internal error: driver pass saw {outcome.documents} documents, expected {documents}")
    return outcome
