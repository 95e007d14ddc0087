"""Executor side: band keys per document (stage 1) and the packed chunks the driver pass reads (stage 2).

Both are ``mapInArrow`` functions: the native code sees whole Arrow batches,
never one Python object per document. A row id is
``partition index << POS_BITS | position in partition``: deterministic for a
checkpointed input, and consecutive within a partition, so the driver pass can
name a chunk's rows by its first id and length.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from lshbloom_udf import hooks

ROW_COL = "_lshb_row"
KEYS_COL = "_lshb_keys"
ACTIVE_COL = "_lshb_active"
DUP_COL = "_lshb_dup"
INTERNAL_COLS = (ROW_COL, KEYS_COL, ACTIVE_COL, DUP_COL)
POS_BITS = 40
PACKED_SCHEMA = "pid int, start long, n long, keys binary, active binary"

# Arrow batches into the keys stage: documents are long (kilobytes each), so
# Spark's default 10,000 rows per batch means tens of megabytes per batch and no
# overlap between the JVM writing a batch and Python hashing the previous one.
# These are upper limits only: a smaller value the session already has is kept.
ARROW_MAX_RECORDS_PER_BATCH = 1024
ARROW_MAX_BYTES_PER_BATCH = 16 << 20


class arrow_batch_limits:
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


def _task_start(task_hook, stage: str):
    """The task's context, after the ``task-start`` hook (if one was shipped) ran."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if task_hook is not None and ctx is not None:
        task_hook(stage=stage, partition=ctx.partitionId(), attempt=ctx.attemptNumber())
    return ctx


def keys_mapper(text_col: str, key_kwargs: dict, keep_cols: Optional[Sequence[str]]):
    """The ``mapInArrow`` function of stage 1: the kept columns + row id + band keys + active mask per batch.

    ``key_kwargs`` are :func:`~lshbloom_udf.minhash.arrow_band_keys`'s
    settings (``IndexParams.signature_kwargs()``); ``keep_cols`` None keeps
    every input column.
    """
    width = 8 * key_kwargs["b"]
    task_hook = hooks.task_hook()  # shipped with the task: executors are other processes

    def compute(batches):
        import pyarrow as pa

        ctx = _task_start(task_hook, "keys")
        base = (ctx.partitionId() if ctx is not None else 0) << POS_BITS
        # Native threads per task = the cores Spark gave the task (spark.task.cpus).
        threads = max(1, int(ctx.cpus())) if ctx is not None else 1
        pos = 0
        for batch in batches:
            n = batch.num_rows
            text = batch.column(batch.schema.get_field_index(text_col))
            keys, active = _band_keys(text, threads, key_kwargs)
            rows = pa.array(np.arange(base + pos, base + pos + n, dtype=np.int64), type=pa.int64())
            offsets = np.arange(n + 1, dtype=np.int32) * np.int32(width)
            key_arr = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(keys)])
            act_arr = pa.array(np.asarray(active, dtype=bool), type=pa.bool_())
            if keep_cols is None:
                arrays, names = list(batch.columns), list(batch.schema.names)
            else:
                idx = [batch.schema.get_field_index(c) for c in keep_cols]
                arrays, names = [batch.column(i) for i in idx], list(keep_cols)
            yield pa.RecordBatch.from_arrays(
                arrays + [rows, key_arr, act_arr], names=names + [ROW_COL, KEYS_COL, ACTIVE_COL]
            )
            pos += n

    return compute


def _band_keys(text, threads: int, key_kwargs: dict):
    from lshbloom_udf.minhash import arrow_band_keys

    try:
        keys, active = arrow_band_keys(text, threads=threads, **key_kwargs)
    except ValueError as e:
        if "invalid UTF-8" not in str(e):
            raise
        # Spark strings may hold invalid UTF-8 (read from bytes as they were): the keys are
        # made from the text decoded as Python's errors="replace" does (U+FFFD); the row's
        # own text is passed through unchanged.
        keys, active = arrow_band_keys(_replace_invalid_utf8(text), threads=threads, **key_kwargs)
    return np.ascontiguousarray(keys, dtype=np.uint64), active


def _replace_invalid_utf8(text):
    """A string array whose invalid UTF-8 sequences are replaced by U+FFFD (``bytes.decode(errors="replace")``)."""
    import pyarrow as pa

    raw = text.cast(pa.large_binary() if pa.types.is_large_string(text.type) else pa.binary())
    return pa.array([None if v is None else v.decode("utf-8", "replace") for v in raw.to_pylist()], type=pa.large_string())


class _Chunk:
    """One packed chunk of a partition's consecutive rows: its first row id, keys and active flags."""

    def __init__(self, pid: int):
        self.pid = pid
        self.start: Optional[int] = None
        self.n = 0
        self.keys: list = []
        self.active: list = []

    def add(self, first_row: int, keys: bytes, active: bytes, n: int) -> None:
        if self.start is None:
            self.start = first_row
        elif first_row != self.start + self.n:
            raise RuntimeError("internal error: row ids are not consecutive within a partition")
        self.keys.append(keys)
        self.active.append(active)
        self.n += n

    def batch(self):
        import pyarrow as pa

        return pa.RecordBatch.from_pydict(
            {
                "pid": pa.array([self.pid], pa.int32()),
                "start": pa.array([self.start], pa.int64()),
                "n": pa.array([self.n], pa.int64()),
                "keys": pa.array([b"".join(self.keys)], pa.binary()),
                "active": pa.array([b"".join(self.active)], pa.binary()),
            }
        )


def packer(b: int, chunk_rows: int):
    """The ``mapInArrow`` function feeding the driver pass: one row per ``chunk_rows`` documents of a partition."""
    width = 8 * b
    task_hook = hooks.task_hook()  # shipped with the task: executors are other processes

    def pack(batches):
        ctx = _task_start(task_hook, "pack")
        chunk = _Chunk(ctx.partitionId() if ctx is not None else 0)
        for batch in batches:
            n = batch.num_rows
            if n == 0:
                continue
            rows, data, active = _unpack_keyed(batch, width)
            if rows[-1] - rows[0] != n - 1:
                raise RuntimeError("internal error: row ids are not consecutive within a partition")
            done = 0
            while done < n:
                take = min(n - done, chunk_rows - chunk.n)
                chunk.add(int(rows[done]), bytes(data[done * width : (done + take) * width]),
                          active[done : done + take].tobytes(), take)
                done += take
                if chunk.n >= chunk_rows:
                    yield chunk.batch()
                    chunk = _Chunk(chunk.pid)
        if chunk.n:
            yield chunk.batch()

    return pack


def _unpack_keyed(batch, width: int):
    """(row ids, key bytes, active flags) of a batch of (row, keys, active)."""
    import pyarrow as pa

    n = batch.num_rows
    rows = batch.column(0).to_numpy(zero_copy_only=False)
    key_arr = batch.column(1)
    active = batch.column(2).to_numpy(zero_copy_only=False).astype(np.bool_)
    off_type = np.int64 if pa.types.is_large_binary(key_arr.type) else np.int32
    bufs = key_arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=off_type, count=n + 1, offset=key_arr.offset * np.dtype(off_type).itemsize)
    if key_arr.null_count or not np.all(np.diff(offsets) == width):
        raise RuntimeError("internal error: band keys of unexpected width")
    return rows, memoryview(bufs[2])[int(offsets[0]) : int(offsets[-1])], active
