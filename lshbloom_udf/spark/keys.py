"""Executor side: row ids for the pinned input, and the band keys of its rows.

The run first pins its input with a row id column (:func:`row_id`):
``partition index << POS_BITS | position in partition``, deterministic for the
pinned rows and consecutive within a partition, so that a chunk of keys is
named by its first id and length. Every function here that computes keys is a
``mapInArrow`` function over (row id, text) batches: the native code sees whole
Arrow batches, never one Python object per document.

- :func:`keys_mapper`: (row id, keys, active) rows, for passes that shuffle or
  join keys in Spark (:data:`KEYED_SCHEMA`);
- :func:`packer`: keyed chunks for ``toLocalIterator`` (:data:`PACKED_SCHEMA`);
- :mod:`lshbloom_udf.spark.passes.driver.stream` sends the same chunks to the driver over a socket.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Union

import numpy as np

from lshbloom_udf import hooks
from lshbloom_udf.common import default_parallelism, spark_context
from lshbloom_udf.errors import InternalError
from lshbloom_udf.minhash import KeySpec

if TYPE_CHECKING:
    from pyspark import Broadcast

    # An array as ship() sends it: a broadcast variable, or (Spark Connect) the array itself.
    Shipped = Union[Broadcast[np.ndarray], np.ndarray]

ROW_COL = "_lshb_row"
KEYS_COL = "_lshb_keys"
ACTIVE_COL = "_lshb_active"
DUP_COL = "_lshb_dup"
INTERNAL_COLS = (ROW_COL, KEYS_COL, ACTIVE_COL, DUP_COL)
POS_BITS = 40
PACKED_SCHEMA = "pid int, start long, n long, keys binary, active binary"
KEYED_SCHEMA = f"{ROW_COL} long, {KEYS_COL} binary, {ACTIVE_COL} boolean"


def row_id():
    """The row id column of the pinned input: ``partition << POS_BITS | position in the partition``."""
    from pyspark.sql import functions as F

    position = F.monotonically_increasing_id().bitwiseAND(F.lit((1 << 33) - 1))  # its low 33 bits
    return F.shiftleft(F.spark_partition_id().cast("long"), POS_BITS).bitwiseOR(position).alias(ROW_COL)

# Arrow batches into the keys stage: Spark's defaults (10,000 rows, 256 MB) make
# batches of tens of megabytes for long documents (kilobytes each), and then the
# JVM writing a batch and Python hashing the previous one hardly overlap. The
# bytes bound keeps batches of long documents small; the rows bound lets short
# ones (a few hundred bytes) come a few thousand at a time, which saves the
# per-batch work.
# Upper limits only: a smaller value the session already has is kept.
ARROW_MAX_RECORDS_PER_BATCH = 8192
ARROW_MAX_BYTES_PER_BATCH = 4 << 20


class ArrowBatchLimits:
    """Lower the session's Arrow batch limits for the keys stage, then restore them."""

    KEYS = (
        ("spark.sql.execution.arrow.maxRecordsPerBatch", ARROW_MAX_RECORDS_PER_BATCH),
        ("spark.sql.execution.arrow.maxBytesPerBatch", ARROW_MAX_BYTES_PER_BATCH),
    )

    def __init__(self, spark):
        self.spark = spark
        self.saved: list = []

    def __enter__(self):
        for key, limit in self.KEYS:
            try:
                old = self.spark.conf.get(key, None)
                current = int(str(old).rstrip("bB")) if old is not None else 0
            except Exception:  # an unknown key (older Spark) or an unparsable value: leave it alone
                continue
            if current <= 0 or current > limit:
                self.spark.conf.set(key, str(limit))
                self.saved.append((key, old))
        return self

    def __exit__(self, *exc):
        for key, old in self.saved:
            if old is None:
                self.spark.conf.unset(key)
            else:
                self.spark.conf.set(key, old)
        return False


def task_start(task_hook, stage: str):
    """The task's context, after the ``task-start`` hook (if one was shipped) ran."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if task_hook is not None and ctx is not None:
        task_hook(stage=stage, partition=ctx.partitionId(), attempt=ctx.attemptNumber())
    return ctx


def with_row_ids(batches):
    """``(batch, its row ids as int64)`` of each non-empty Arrow batch of (row id, ...)."""
    for batch in batches:
        if batch.num_rows:
            yield batch, np.asarray(batch.column(batch.schema.get_field_index(ROW_COL)).to_numpy(
                zero_copy_only=False), dtype=np.int64)


def keyed_batches(batches, text_col: str, spec: KeySpec, threads: int, skip=None):
    """(row ids, band keys ``(n, b)`` uint64, active flags) of each Arrow batch of (row id, text, ...).

    ``skip`` (:func:`ship`'s sorted row ids, or None): rows not keyed, inactive with zero keys (the run's exact
    copies, :mod:`lshbloom_udf.spark.exact`: decided without the pass)."""
    skip = shipped_value(skip)
    for batch, rows in with_row_ids(batches):
        text = batch.column(batch.schema.get_field_index(text_col))
        skipped = is_in(rows, skip) if skip is not None else None
        if skipped is None or not skipped.any():
            keys, active = _band_keys(text, threads, spec)
            yield rows, keys.reshape(len(rows), -1), np.asarray(active, dtype=np.bool_)
            continue
        yield rows, *_keys_of_others(text, skipped, threads, spec)


def _keys_of_others(text, skipped: np.ndarray, threads: int, spec: KeySpec):
    """(keys, active) of a batch's texts where only the rows not ``skipped`` are keyed (the others: zero, inactive)."""
    import pyarrow as pa

    keyed_at = np.flatnonzero(~skipped)
    keys = np.zeros((len(skipped), spec.b), dtype=np.uint64)
    active = np.zeros(len(skipped), dtype=np.bool_)
    if len(keyed_at):
        some_keys, some_active = _band_keys(text.filter(pa.array(~skipped)), threads, spec)
        keys[keyed_at] = some_keys.reshape(len(keyed_at), -1)
        active[keyed_at] = np.asarray(some_active, dtype=np.bool_)
    return keys, active


@dataclass(frozen=True)
class TaskThreads:
    """Native threads for each task of a stage over the pinned rows' partitions.

    A task keys with the cores Spark gave it (``spark.task.cpus``), unless its
    partition holds more than a core's share of the rows: an input in fewer
    non-empty partitions than cores (one Parquet row group, a micro-batch of
    one file) would otherwise key on one core while the others wait. Such a
    task gets its share of the cores (``by_partition[p]``, from the pin's
    per-partition counts, :func:`thread_plan`), at most its executor's.
    """

    by_partition: tuple = ()

    def of(self, ctx) -> int:
        given = max(1, int(ctx.cpus())) if ctx is not None else 1
        if ctx is None or ctx.partitionId() >= len(self.by_partition):
            return given
        return max(given, min(self.by_partition[ctx.partitionId()], os.cpu_count() or 1))


# A pinned input in at most this many partitions per core is counted by partition (an aggregation, dearer
# than a count), so that a partition with more than a core's share of the rows can get more threads; with more,
# the cores have other partitions to work on.
FEW_PARTITIONS_PER_CORE = 4


def count_pinned(pinned) -> tuple:
    """The pinned rows' number (the job that fills a lazy local checkpoint) and their partitions'
    :class:`TaskThreads`. Under Spark Connect (no partition count on this side) a plain count."""
    from pyspark.sql import functions as F

    spark = pinned.sparkSession
    cores = default_parallelism(spark)
    sc = spark_context(spark)
    partitions = pinned.rdd.getNumPartitions() if sc is not None else 0
    if sc is None or partitions > FEW_PARTITIONS_PER_CORE * cores:
        return pinned.count(), TaskThreads()
    counts = [0] * partitions
    for p, n in pinned.groupBy(F.spark_partition_id()).count().collect():
        counts[p] = n
    # A local master's one executor has every core; on a cluster, an executor its spark.executor.cores.
    local = sc.master.startswith("local")
    executor_cores = cores if local else int(spark.conf.get("spark.executor.cores", str(cores)))
    return sum(counts), thread_plan(counts, cores, executor_cores)


def thread_plan(counts: list, cores: int, executor_cores: int) -> TaskThreads:
    """The :class:`TaskThreads` of partitions holding ``counts[p]`` rows on ``cores`` cores in all: partition
    ``p``'s task gets ``round(cores · counts[p] / total)`` threads, 1 to ``executor_cores``."""
    total = sum(counts)
    shares = [max(1, min(executor_cores, round(cores * c / total))) for c in counts] if total else []
    return TaskThreads(tuple(shares)) if any(t > 1 for t in shares) else TaskThreads()


def is_in(rows: np.ndarray, sorted_rows: np.ndarray) -> np.ndarray:
    """Which of ``rows`` are in ``sorted_rows`` (sorted int64 row ids)."""
    if not len(sorted_rows):
        return np.zeros(len(rows), dtype=bool)
    pos = np.searchsorted(sorted_rows, rows)
    return (pos < len(sorted_rows)) & (sorted_rows[np.minimum(pos, len(sorted_rows) - 1)] == rows)


def ship(spark, value):
    """``value`` for the executors' functions: a broadcast variable in a classic session (a task then carries a
    reference, not a copy: large arrays in a closure make tasks over Spark's 1,000 KiB advisory size); the value
    itself under Spark Connect (no broadcast variables there). :func:`shipped_value` reads either."""
    sc = spark_context(spark)
    return value if sc is None or value is None else sc.broadcast(value)


def shipped_value(shipped):
    """What :func:`ship` shipped (on an executor)."""
    from pyspark import Broadcast

    return shipped.value if isinstance(shipped, Broadcast) else shipped


def _selected(batches, among: Optional[np.ndarray], inside: bool):
    """The Arrow batches' rows whose row id is (``inside``) or is not in the sorted ``among``; all if it is None."""
    import pyarrow as pa

    among = shipped_value(among)
    for batch in batches:
        if among is None:
            yield batch
            continue
        ids = batch.column(batch.schema.get_field_index(ROW_COL)).to_numpy(zero_copy_only=False)
        keep = is_in(np.asarray(ids, dtype=np.int64), among)
        yield batch.filter(pa.array(keep if inside else ~keep))


def selected_mapper(among: Optional[np.ndarray], inside: bool = True):
    """The ``mapInArrow`` function keeping the rows whose row id is (``inside``) or is not among the sorted
    ``among`` (or :func:`ship`'s broadcast of them), of any frame with :data:`ROW_COL`."""

    def select(batches):
        yield from _selected(batches, among, inside)

    return select


def keys_mapper(text_col: str, spec: KeySpec, among: Optional[np.ndarray] = None, inside: bool = True,
                skip=None, threads: TaskThreads = TaskThreads()):
    """The ``mapInArrow`` function giving (row id, band keys, active) per pinned row (:data:`KEYED_SCHEMA`).

    ``spec``: how rows are keyed (``IndexParams.key_spec``). The keys are a binary of
    ``8 b`` bytes: ``b`` little-endian uint64. ``among`` (sorted int64 row ids,
    or :func:`ship`'s broadcast of them): only the rows among them (``inside``),
    or only the others, are keyed. ``skip``: rows given inactive and unkeyed (:func:`keyed_batches`).
    ``threads``: the pinned partitions' :class:`TaskThreads`.
    """
    width = 8 * spec.b
    task_hook = hooks.task_hook()  # shipped with the task: executors are other processes

    def compute(batches):
        import pyarrow as pa

        ctx = task_start(task_hook, "keys")
        selected = _selected(batches, among, inside)
        for rows, keys, active in keyed_batches(selected, text_col, spec, threads.of(ctx), skip):
            n = len(rows)
            offsets = np.arange(n + 1, dtype=np.int32) * np.int32(width)
            key_arr = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(keys)])
            yield pa.RecordBatch.from_arrays(
                [pa.array(rows, pa.int64()), key_arr, pa.array(active, pa.bool_())],
                names=[ROW_COL, KEYS_COL, ACTIVE_COL])

    return compute


def _band_keys(text, threads: int, spec: KeySpec):
    try:
        keys, active = spec.keys(text, threads)
    except ValueError as e:
        if "invalid UTF-8" not in str(e):
            raise
        # Spark strings may hold invalid UTF-8 (read from bytes as they were): the keys are
        # made from the text decoded as Python's errors="replace" does (U+FFFD); the row's
        # own text is passed through unchanged.
        keys, active = spec.keys(_replace_invalid_utf8(text), threads)
    return np.ascontiguousarray(keys, dtype=np.uint64), active


def _replace_invalid_utf8(text):
    """A string array whose invalid UTF-8 sequences are replaced by U+FFFD (``bytes.decode(errors="replace")``)."""
    import pyarrow as pa

    raw = text.cast(pa.large_binary() if pa.types.is_large_string(text.type) else pa.binary())
    return pa.array([None if v is None else v.decode("utf-8", "replace") for v in raw.to_pylist()],
                    type=pa.large_string())


def chunks(keyed, chunk_rows: int):
    """Consecutive rows of :func:`keyed_batches` (or :func:`recorded_batches`) regrouped in chunks of at most
    ``chunk_rows`` documents.

    Yields ``(first row id, keys (n, b), active (n,), ...)``: each of the batches' per-row arrays, cut and joined
    alike; row ids must be consecutive within the partition (the driver pass names a chunk's rows by its first id
    and length).
    """
    parts: list = []
    start, n = None, 0
    for rows, *arrays in keyed:
        if rows[-1] - rows[0] != len(rows) - 1 or (start is not None and rows[0] != start + n):
            raise InternalError("internal error: row ids are not consecutive within a partition")
        done = 0
        while done < len(rows):
            if start is None:
                start = int(rows[done])
            take = min(len(rows) - done, chunk_rows - n)
            parts.append([a[done : done + take] for a in arrays])
            n += take
            done += take
            if n >= chunk_rows:
                yield start, *_joined(parts)
                parts, start, n = [], None, 0
    if n:
        yield start, *_joined(parts)


def _joined(parts):
    if len(parts) == 1:
        return [np.ascontiguousarray(a) for a in parts[0]]
    return [np.concatenate(column) for column in zip(*parts)]


def packer(text_col: str, spec: KeySpec, chunk_rows: int, skip=None, threads: TaskThreads = TaskThreads()):
    """The ``mapInArrow`` function of the Spark transfer (:data:`PACKED_SCHEMA`): pinned rows -> keyed chunks.

    One output row per ``chunk_rows`` documents of a partition; the driver
    reads them with ``toLocalIterator`` (Spark Connect, or ``key_transfer=spark``); ``skip``: rows left unkeyed
    (:func:`keyed_batches`).
    """
    task_hook = hooks.task_hook()  # shipped with the task: executors are other processes

    def pack(batches):
        import pyarrow as pa

        ctx = task_start(task_hook, "keys")
        pid = ctx.partitionId() if ctx is not None else 0
        keyed = keyed_batches(batches, text_col, spec, threads.of(ctx), skip)
        for start, keys, active in chunks(keyed, chunk_rows):
            yield pa.RecordBatch.from_pydict(
                {
                    "pid": pa.array([pid], pa.int32()),
                    "start": pa.array([start], pa.int64()),
                    "n": pa.array([len(active)], pa.int64()),
                    "keys": pa.array([keys.tobytes()], pa.binary()),
                    "active": pa.array([active.tobytes()], pa.binary()),
                }
            )

    return pack


def unpack_keyed(batch, width: int):
    """(row ids, key bytes, active flags) of a batch of :data:`KEYED_SCHEMA` rows (row, keys, active)."""
    import pyarrow as pa

    n = batch.num_rows
    rows = batch.column(0).to_numpy(zero_copy_only=False)
    key_arr = batch.column(1)
    active = batch.column(2).to_numpy(zero_copy_only=False).astype(np.bool_)
    off_type = np.int64 if pa.types.is_large_binary(key_arr.type) else np.int32
    bufs = key_arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=off_type, count=n + 1, offset=key_arr.offset * np.dtype(off_type).itemsize)
    if key_arr.null_count or not np.all(np.diff(offsets) == width):
        raise InternalError("internal error: band keys of unexpected width")
    return rows, memoryview(bufs[2])[int(offsets[0]) : int(offsets[-1])], active
