"""On the driver: the sequential pass (keep-first or any-earlier) over every document's band keys.

The keys arrive in chunks of consecutive rows, partition after partition, by
one of two transfers: the socket stream (:mod:`lshbloom_udf.spark.passes.driver.stream`,
keys computed by all executors while the pass runs) or, under Spark Connect
and with ``key_transfer="spark"``, ``toLocalIterator`` over
:func:`~lshbloom_udf.spark.keys.packer`'s chunks (:func:`spark_chunks`). The
index decides each chunk in native code
(:meth:`~lshbloom_udf.index.LSHBloomIndex.query_insert`). Progress (documents,
docs/s, ETA) goes to the ``lshbloom_udf`` logger (:mod:`~lshbloom_udf.spark.passes.driver.progress`).
"""

from __future__ import annotations

import time
from typing import Optional

import numpy as np

from lshbloom_udf import hooks
from lshbloom_udf.common import col, local_rows
from lshbloom_udf.errors import InternalError
from lshbloom_udf.minhash import KeySpec
from lshbloom_udf.spark.keys import PACKED_SCHEMA, ROW_COL, TaskThreads, packer
from lshbloom_udf.spark.passes.base import PassOutcome
from lshbloom_udf.spark.passes.driver.progress import Progress


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
                    sample_below: Optional[int] = None) -> tuple[PassOutcome, Optional[np.ndarray]]:
    """Decide every chunk of ``chunks`` (``(first row id, keys, active)``, in row order) with ``index`` under the
    rule ``insert_rule`` (``first``: keep-first, ``all``: any-earlier;
    :meth:`~lshbloom_udf.index.LSHBloomIndex.decide`);
    ``keep_keys``: also keep the duplicates' keys (``F·b``, for verification's candidates). ``started``: when the
    keys' job began (``time.monotonic()``; default now), from which ``first_keys_seconds`` counts.
    ``sample_below``: also note the rows that are candidates of verification's template sample
    (:func:`~lshbloom_udf.spark.verify.templates.sample_candidates`), so that it needs no scan of its own.
    Returns the outcome and those candidates (None: not asked for, or no chunk)."""
    from lshbloom_udf.spark.verify.templates import sample_candidates

    outcome = PassOutcome()
    sampled: list = []
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
                sampled.append(sample_candidates(np.arange(start, start + n, dtype=np.int64), sample_below))
            outcome.duplicates += int(hits.size)
            outcome.empty += int(n - np.count_nonzero(active))
            outcome.documents += n
            bar.update(outcome.documents, outcome.duplicates)
            hooks.fire("driver-pass", done=outcome.documents)
    finally:
        bar.close()
    if outcome.documents != documents:
        raise InternalError(f"internal error: driver pass saw {outcome.documents} documents, expected {documents}")
    return outcome, np.concatenate(sampled) if sampled else None
