"""The sharded pass (docs/algorithm.md §4b, docs/architecture.md): the any-earlier decisions made on the executors,
band-key shard by shard.

Under any-earlier (``insert = "all"``) a document ``k`` is a duplicate when

    ∃ band i, document j < k (active):  key(j, i) = key(k, i)

(up to Bloom false positives). Every key is inserted, whatever its document's
fate, so the test of key ``(k, i)`` depends only on the earlier keys of band
``i`` that are *equal* to it: bands are independent, and so are disjoint key
ranges within a band. The pass therefore splits band ``i``'s keys into ``S``
shards by a well-mixed hash, ``shard = i·S + (mix(key) · S) >> 64``, shuffles
the ``(row, key)`` pairs to their shard, in processing order, and
test-and-sets the shard's own filter in that order (the native blocked or
cuckoo filter's ``add``: "was present"). A document is a duplicate when any of its
``b`` keys hits; the hit rows are deduplicated on the driver. No process holds
more than one shard's filter at a time.

The pairs travel packed: each input task cuts up to :data:`BLOB_KEYS` keys
(several Arrow batches of consecutive rows) into one blob per shard — its
rows (int64) then its keys (uint64), in row order — so the shuffle moves a
few large rows instead of one Spark row per key. A partition of the keyed
input is a contiguous range of the processing order (row ids increase with
it), so a shard's blobs never interleave: sorted by their first row they
are the shard's keys in processing order (checked while deciding).

Sizing: a band's filter for ``n`` documents at rate ``p_band`` (the same rate
as the driver pass) is split in ``S`` filters for ``n/S`` keys each, so the
index has the driver pass's size (up to per-shard rounding and the slack
below); ``S`` is the least count whose shard fits ``shard_memory`` bytes. The
keys per shard are Binomial(n, 1/S): each shard is sized for
``n/S + 4·sqrt(n/S)`` keys, so that none overfills in practice.

Executor memory per task: one shard filter (≤ ``shard_memory``) plus Spark's
sort buffers (which spill). The driver holds only the hit row ids.
"""

from __future__ import annotations

import os
import shutil
from typing import Iterator, Optional

import numpy as np

from lshbloom_udf import hooks
from lshbloom_udf.common import GOLDEN, default_parallelism, mix64, unique_rows
from lshbloom_udf.errors import InternalError
from lshbloom_udf.index.generations import SealAndGrow
from lshbloom_udf.index.shards import SHARD_BLOOM, ShardPlan, plan_shards, shard_bloom, shard_keys  # noqa: F401
from lshbloom_udf.litter import fast_temp_base, make_temp_dir
from lshbloom_udf.spark.keys import ACTIVE_COL, KEYS_COL, ROW_COL, ArrowBatchLimits, task_start, unpack_keyed

SHARD_COL, FIRST_COL = "shard", "first"
# one blob: a shard's keys from one input chunk (first = its first row id, count = its keys, data = rows then keys);
# a stored filter's part: first = -1 - (generation * MAX_PARTS + part), count = its key count, data = the part's bytes
EXPLODED_SCHEMA = f"{SHARD_COL} int, {FIRST_COL} long, count long, data binary"
# keys one explode task packs at a time (~40 bytes each while cutting them)
BLOB_KEYS = 1 << 21
# kind 0: hit row ids of one shard (int64 bytes); kind 1: one part of one generation of a shard's filter
DECIDED_SCHEMA = "kind byte, band int, shard int, generation int, part int, count long, data binary"
HITS, FILTER = 0, 1
# A filter travels and is stored in parts: a single Spark value of a whole shard filter (up to shard_memory) makes
# the JVM allocate several times its size in one piece (row copies, Parquet pages and their compression buffers),
# which ran a 10 GB heap out of memory at 10^7 documents.
FILTER_PART_BYTES = 4 << 20
MAX_PARTS = 1 << 24


def shard_of(keys: np.ndarray, shards_per_band: int) -> np.ndarray:
    """``(mix(key) · S) >> 64`` per key, as int32: a well-mixed hash (splitmix64's finalizer), independent of the
    Bloom filter's own (which mixes the key with a per-band seed)."""
    z = mix64(keys.astype(np.uint64) + GOLDEN)
    return ((z >> np.uint64(32)) * np.uint64(shards_per_band) >> np.uint64(32)).astype(np.int32)


def exploder(b: int, shards_per_band: int, blob_keys: int = BLOB_KEYS):
    """``mapInArrow`` function: (row, keys, active) batches → per chunk of ~``blob_keys`` keys, one blob per shard."""
    width = 8 * b
    band_base = (np.arange(b, dtype=np.int32) * shards_per_band)[None, :]

    def explode(batches):
        chunk, pending = [], 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            rows, data, active = unpack_keyed(batch, width)
            keys = np.frombuffer(data, dtype=np.uint64).reshape(-1, b)[active]
            if len(keys):
                chunk.append((np.asarray(rows, dtype=np.int64)[active], keys))
                pending += keys.size
            if pending >= blob_keys:
                yield _blobs(chunk, b, band_base, shards_per_band)
                chunk, pending = [], 0
        if chunk:
            yield _blobs(chunk, b, band_base, shards_per_band)

    return explode


def _blobs(chunk: list, b: int, band_base: np.ndarray, shards_per_band: int):
    """One Arrow batch: a blob per shard of the chunk's keys, each in row order.

    Band by band: with one shard per band the band's column is its blob; with
    more, a stable sort of the column by shard (a linear-time radix sort on
    16-bit shard numbers, which S nearly always fits) keeps each shard's rows
    in order.
    """
    import pyarrow as pa

    rows = np.concatenate([r for r, _ in chunk])
    keys = np.concatenate([k for _, k in chunk])
    shard_ids, firsts, counts, blobs = [], [], [], []
    for band in range(b):
        column = np.ascontiguousarray(keys[:, band])
        if shards_per_band == 1:
            parts = [(int(band_base[0, band]), rows, column)]
        else:
            local = shard_of(column, shards_per_band)
            order = np.argsort(local.astype(np.int16) if shards_per_band < 1 << 15 else local, kind="stable")
            local, band_rows, column = local[order], rows[order], column[order]
            cuts = [0, *(np.flatnonzero(np.diff(local)) + 1).tolist(), len(local)]
            parts = [(int(band_base[0, band] + local[lo]), band_rows[lo:hi], column[lo:hi])
                     for lo, hi in zip(cuts[:-1], cuts[1:])]
        for shard, part_rows, part_keys in parts:
            shard_ids.append(shard)
            firsts.append(int(part_rows[0]))
            counts.append(len(part_rows))
            blobs.append(part_rows.tobytes() + part_keys.tobytes())
    return pa.RecordBatch.from_arrays(
        [pa.array(shard_ids, pa.int32()), pa.array(firsts, pa.int64()), pa.array(counts, pa.int64()),
         pa.array(blobs, pa.binary())],
        names=[SHARD_COL, FIRST_COL, "count", "data"],
    )


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


def decided_frame(keyed, plan: ShardPlan, stored=None, keep_filters: bool = False, blob_keys: int = BLOB_KEYS,
                  part_bytes: int = FILTER_PART_BYTES):
    """The sharded pass as one lazy DataFrame of :data:`DECIDED_SCHEMA` rows over the keyed rows ``keyed``.

    ``stored``: the index's filters (shard, generation, part, count, data; a
    format-1 index has no part: one part each), merged into each shard's
    stream ahead of its keys; ``part_bytes``: the size of the parts the filters
    are emitted in. ``keep_filters``: also emit
    every shard's filters after the run (the index's next version). Run its
    action inside :class:`~lshbloom_udf.spark.keys.ArrowBatchLimits` (blobs
    and filters are large rows).
    """
    from pyspark.sql import functions as F

    exploded = keyed.select(ROW_COL, KEYS_COL, ACTIVE_COL).mapInArrow(
        exploder(plan.b, plan.shards_per_band, blob_keys), EXPLODED_SCHEMA)
    if stored is not None:
        part = F.col("part").cast("long") if "part" in stored.columns else F.lit(0)
        exploded = exploded.unionByName(stored.select(
            F.col("shard").cast("int").alias(SHARD_COL),
            (F.lit(-1) - (F.col("generation").cast("long") * F.lit(MAX_PARTS) + part)).alias(FIRST_COL),
            F.col("count").cast("long").alias("count"),
            F.col("data"),
        ))
    cores = default_parallelism(keyed.sparkSession)
    # Each task decides its shards one after the other: memory is one shard's filter whatever the count.
    partitions = max(1, min(plan.shards, 2 * cores))
    return (
        exploded.repartition(partitions, SHARD_COL)
        .sortWithinPartitions(SHARD_COL, FIRST_COL)
        .mapInArrow(decider(plan, keep_filters, part_bytes), DECIDED_SCHEMA)
    )


def sharded_duplicates(keyed, params, shard_memory: int, blob_keys: int = BLOB_KEYS) -> np.ndarray:
    """The rows the sharded pass flags (any-earlier) over ``keyed`` (``_lshb_row``, ``_lshb_keys``,
    ``_lshb_active``), with a temporary index sized by ``params`` — what ``PassOutcome.rows()`` gives."""
    plan = plan_shards(params, shard_memory)
    with ArrowBatchLimits(keyed.sparkSession):
        frame = decided_frame(keyed, plan, blob_keys=blob_keys)
        return unique_rows(r[0] for r in frame.select("data").collect())
