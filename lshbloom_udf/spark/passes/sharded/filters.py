"""The shard filters of the sharded pass (:mod:`~lshbloom_udf.spark.passes.sharded.shuffle` brings each shard's keys
to one task): per shard, its Bloom filter generations on an executor's disk, test-and-set in row order.

Executor memory per task: one shard filter (≤ ``shard_memory``) plus Spark's sort buffers (which spill).
"""

from __future__ import annotations

import os
import shutil
from typing import Iterator, Optional

import numpy as np

from lshbloom_udf import hooks
from lshbloom_udf.errors import InternalError
from lshbloom_udf.index.generations import SealAndGrow
from lshbloom_udf.index.shards import ShardPlan
from lshbloom_udf.litter import fast_temp_base, make_temp_dir
from lshbloom_udf.spark.keys import task_start

# kind 0: hit row ids of one shard (int64 bytes); kind 1: one part of one generation of a shard's filter
DECIDED_SCHEMA = "kind byte, band int, shard int, generation int, part int, count long, data binary"
HITS, FILTER = 0, 1
# A filter travels and is stored in parts: a single Spark value of a whole shard filter (up to shard_memory) makes
# the JVM allocate several times its size in one piece (row copies, Parquet pages and their compression buffers),
# more than a heap holds once the shards' filters are large (benchmarks/log.md, "The sharded pass").
FILTER_PART_BYTES = 4 << 20
MAX_PARTS = 1 << 24


class ShardFilters(SealAndGrow):
    """One shard's filter generations, as memory-mapped files in an executor's temporary directory.

    ``stored`` maps generation → (the bytes of that generation's filter file,
    its key count), from the index; without it the shard starts empty. The newest generation
    is writable; a growing index seals it when its keys reach its capacity.
    """

    def __init__(self, plan: ShardPlan, shard: int, directory: str, stored: dict):
        from lshbloom_udf.index import backend

        self.plan, self.shard, self.directory = plan, shard, directory
        self.band = shard // plan.shards_per_band
        self.backend = backend(plan.bloom)
        self.files: list = []
        if sorted(stored) != list(range(len(stored))):
            raise InternalError(f"internal error: shard {shard} has generations {sorted(stored)}")
        for g in range(max(len(stored), 1)):
            self._open(g, stored[g][0] if g in stored else None, writable=g >= len(stored) - 1)

    def _path(self, g: int) -> str:
        return os.path.join(self.directory, f"shard-{self.shard}-g{g}.{self.backend.extension}")

    def _open(self, g: int, data: Optional[bytes], writable: bool) -> None:
        path = self._path(g)
        if data is None:
            self.backend.create_file(path, self.plan.shard_capacity(g), self.plan.p_band(g), self.band, g)
        else:
            with open(path, "wb") as f:
                f.write(data)
        self.files.append(self.backend.file_class.open(path, writable))

    def test_set(self, keys: np.ndarray) -> np.ndarray:
        """Per key, in order: was it present (earlier keys count)? Every key is added to the newest generation."""
        return self.test_insert(keys)

    # -- SealAndGrow's steps ------------------------------------------------------------

    def _sealed_hits(self, keys: np.ndarray):
        return (sealed.contains(keys) for sealed in self.files[:-1])

    def _query_newest(self, keys: np.ndarray) -> np.ndarray:
        return self.files[-1].contains(keys)

    def _test_insert_newest(self, keys: np.ndarray) -> np.ndarray:
        return self.files[-1].add(keys)

    def _room(self) -> int:
        return self.plan.shard_capacity(len(self.files) - 1) - self.files[-1].elem_count

    def _grows(self) -> bool:
        return self.plan.growth == "grow"

    def _past_capacity(self, incoming: int) -> None:
        """A fixed index past its capacity goes on (its rate rises; the driver warns), as the driver pass's
        temporary index cannot be overfilled: the slack of shard_keys() makes this rare."""

    def add_generation(self) -> None:
        self.files[-1].sync()
        self._open(len(self.files), None, writable=True)

    def batches(self, part_bytes: int) -> Iterator:
        """The shard's generations as kind-1 rows (the files' bytes, in parts), for the index's next version."""
        for g, f in enumerate(self.files):
            f.sync()
            with open(self._path(g), "rb") as fh:
                data = fh.read()
            for part, start in enumerate(range(0, max(len(data), 1), part_bytes)):
                yield _batch(FILTER, self.band, self.shard, g, f.elem_count, data[start : start + part_bytes], part)

    def close(self) -> None:
        for f in self.files:
            f.close()
        for g in range(len(self.files)):
            os.remove(self._path(g))
        self.files = []


def _batch(kind: int, band: int, shard: int, generation: int, count: int, data: bytes, part: int = 0):
    import pyarrow as pa

    return pa.RecordBatch.from_arrays(
        [pa.array([kind], pa.int8()), pa.array([band], pa.int32()), pa.array([shard], pa.int32()),
         pa.array([generation], pa.int32()), pa.array([part], pa.int32()), pa.array([count], pa.int64()),
         pa.array([data], pa.binary())],
        names=["kind", "band", "shard", "generation", "part", "count", "data"],
    )


class _ShardTask:
    """One decide task's state: the shard it is on, that shard's stored filters and open filters."""

    def __init__(self, plan: ShardPlan, keep_filters: bool, directory: str, part_bytes: int = FILTER_PART_BYTES):
        self.plan, self.keep_filters, self.directory, self.part_bytes = plan, keep_filters, directory, part_bytes
        self.S = plan.shards_per_band
        self.shard: Optional[int] = None
        self.stored: dict = {}  # generation -> (key count, {part: bytes})
        self.filters: Optional[ShardFilters] = None
        self.last_row = -1

    def blob(self, shard: int, first: int, count: int, data: bytes) -> Iterator:
        """Decide one blob (or take one stored filter) of ``shard``; yields the hit rows' batch, if any."""
        if shard != self.shard:
            yield from self.finish()
            self.shard, self.last_row = shard, -1
        if first < 0:  # a part of a stored filter: they sort ahead of the shard's keys
            generation, part = divmod(-1 - first, MAX_PARTS)
            self.stored.setdefault(generation, (count, {}))[1][part] = data
            return
        rows = np.frombuffer(data, dtype="<i8", count=count)
        keys = np.frombuffer(data, dtype="<u8", count=count, offset=8 * count)
        if rows[0] <= self.last_row:
            raise InternalError("internal error: the keyed rows of two partitions interleave in processing order; "
                               "the sharded pass needs each partition to be a contiguous range of row ids")
        self.last_row = int(rows[-1])
        if self.filters is None:
            whole = {g: (b"".join(parts[p] for p in sorted(parts)), count) for g, (count, parts) in self.stored.items()}
            self.stored = {}
            self.filters = ShardFilters(self.plan, shard, self.directory, whole)
        hits = rows[self.filters.test_set(keys)]
        if hits.size:
            yield _batch(HITS, shard // self.S, shard, -1, int(hits.size), hits.astype("<i8").tobytes())

    def finish(self) -> Iterator:
        """The shard is done: with ``keep_filters`` its filters (a shard without keys: its stored ones) as rows."""
        if self.shard is None:
            return
        if self.keep_filters and self.filters is not None:
            yield from self.filters.batches(self.part_bytes)
        elif self.keep_filters:
            for g, (count, parts) in sorted(self.stored.items()):
                for part, data in sorted(parts.items()):
                    yield _batch(FILTER, self.shard // self.S, self.shard, g, count, data, part)
        self.close()
        self.shard, self.stored = None, {}

    def close(self) -> None:
        if self.filters is not None:
            self.filters.close()
            self.filters = None


def decider(plan: ShardPlan, keep_filters: bool, part_bytes: int = FILTER_PART_BYTES):
    """``mapInArrow`` function over blobs and stored filters sorted by (shard, first): per shard, test-and-set its
    filter in row order and yield the rows that hit (kind 0); with ``keep_filters`` also yield every shard's
    filters (kind 1), in parts of ``part_bytes``. Stored filters arrive first in their shard, in parts, as
    ``first = -1 - (generation · MAX_PARTS + part)``."""
    task_hook = hooks.task_hook()  # shipped with the task: executors are other processes

    def decide(batches):
        directory = make_temp_dir("shards", fast_temp_base(2 * plan.shard_bytes(), spark_local=True))
        task = _ShardTask(plan, keep_filters, directory, part_bytes)
        try:
            task_start(task_hook, "shard")  # once the task's directory exists, as in any crash of a task
            for batch in batches:
                shards, firsts, counts = (batch.column(i).to_numpy(zero_copy_only=False) for i in range(3))
                data = batch.column(3)
                for j in range(batch.num_rows):
                    yield from task.blob(int(shards[j]), int(firsts[j]), int(counts[j]), data[j].as_py())
            yield from task.finish()
        finally:
            task.close()
            shutil.rmtree(directory, ignore_errors=True)

    return decide
