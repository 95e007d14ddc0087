"""LSHBloom deduplication of a Spark DataFrame.

The run has three stages:

1. **Keys (executors, in parallel).** A ``mapInArrow`` function turns the text
   column of each Arrow batch into ``b`` band keys per document with
   :func:`~lshbloom_udf.minhash.arrow_band_keys` (native code, no Python loop
   per document) and tags every row with a deterministic row id,
   ``partition index << 40 | position in partition``. The result (the input's
   columns, or only the id column with ``id_col``, plus the row id and the keys)
   is checkpointed (``localCheckpoint`` by default), so that the row ids the
   driver sees and the row ids the join sees are the same rows even when Spark
   would otherwise recompute a nondeterministic input (a ``repartition``, a
   read of many files, ...).
2. **Driver pass (sequential).** Each partition's keys are packed into a few
   rows (one per ``chunk_rows`` documents: the ``(n, b)`` uint64 buffer, the
   ``active`` mask, the first row id and ``n``) and streamed to the driver in
   partition order with ``toLocalIterator(prefetchPartitions=True)``. The
   driver runs the keep-first ``query_insert`` of
   :class:`~lshbloom_udf.index.LSHBloomIndex` over them, showing progress on
   stderr.
3. **Join.** The row ids (or, with ``id_col``, the ids) of the duplicates come
   back as a small DataFrame (``createDataFrame`` from Arrow) and are joined to
   the checkpointed rows (or to the input, on ``id_col``): a left join giving
   the boolean ``is_duplicate`` column in ``flag`` mode, an anti join in
   ``filter`` mode, a semi join in ``duplicates`` mode. When the duplicates are
   few enough to broadcast (``broadcast_limit``), the join keeps the input's
   order; otherwise, without ``id_col``, the output is sorted back by row id.

Documents whose text is null or empty have no shingles: they are never
queried nor inserted and come out with ``is_duplicate = false``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

import numpy as np

from lshbloom_udf.config import CHECKPOINTS, DEFAULTS, MODES
from lshbloom_udf import hooks
from lshbloom_udf.index import (
    BLOOM_FORMAT,
    AlreadyIngestedError,
    IndexMismatchError,
    IndexParams,
    IndexTransaction,
    LSHBloomIndex,
    _check_bloom,
    _check_expected,
    _params_from_manifest,
    run_params,
    validate_bloom,
)
from lshbloom_udf.blocked import blocked_index_bytes
from lshbloom_udf.sizing import bloom_file_bytes, human_bytes, validate_capacity, validate_p_effective

ROW_COL = "_lshb_row"
KEYS_COL = "_lshb_keys"
ACTIVE_COL = "_lshb_active"
DUP_COL = "_lshb_dup"
INTERNAL_COLS = (ROW_COL, KEYS_COL, ACTIVE_COL, DUP_COL)
# Row id = partition index << POS_BITS | position within the partition.
POS_BITS = 40
# Documents per packed row of the driver pass (b=42: 100k docs = 33.6 MB).
CHUNK_ROWS = 100_000
# Up to this many duplicates, the join broadcasts them (and keeps the input order).
BROADCAST_LIMIT = 2_000_000
# Arrow batches into the keys stage: documents are long (kilobytes each), so
# Spark's default 10,000 rows per batch means tens of megabytes per batch and no
# overlap between the JVM writing a batch and Python hashing the previous one.
# These are upper limits only: a smaller value the session already has is kept.
ARROW_MAX_RECORDS_PER_BATCH = 1024
ARROW_MAX_BYTES_PER_BATCH = 16 << 20


class _arrow_batch_limits:
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

__all__ = ["DedupInputError", "DedupResult", "deduplicate", "format_summary", "DEFAULTS"]


class DedupInputError(ValueError):
    """The input DataFrame or the parameters cannot be deduplicated as asked."""


@dataclass
class DedupResult:
    """What :func:`deduplicate` returns with ``return_summary=True``: the DataFrame and the run's summary."""

    df: Any
    summary: dict = field(default_factory=dict)
    # With defer_commit=True: the open IndexTransaction and what commit() records.
    transaction: Any = field(default=None, repr=False)
    _run: Optional[dict] = field(default=None, repr=False)
    _duplicates: Any = field(default=None, repr=False)
    _owns_transaction: bool = field(default=False, repr=False)

    def __iter__(self):
        return iter((self.df, self.summary))

    def commit(self, outputs: Sequence[tuple] = ()) -> Optional[dict]:
        """Commit a ``defer_commit=True`` run: the staged index, its run record and ``outputs`` (tmp, final) together.

        Returns the run record (``None`` for a reproduced run, which changes
        no index). Releases the index lock if :func:`deduplicate` took it.
        """
        if self.transaction is None:
            raise ValueError("nothing to commit: the run was not made with defer_commit=True and an index_dir")
        try:
            record = self.transaction.commit(self._run, self._duplicates, outputs)
            if record is not None:
                self.summary["index"]["run_id"] = record["run_id"]
            return record
        finally:
            self.close()

    def close(self) -> None:
        """Abort what was not committed (the staged index, registered temporary outputs)."""
        if self.transaction is not None:
            if self._owns_transaction:
                self.transaction.close()
            else:
                self.transaction.abort()
            self.transaction = None

    def summary_text(self) -> str:
        return format_summary(self.summary)


# --------------------------------------------------------------------------
# parameters


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _col(name: str):
    from pyspark.sql import functions as F

    return F.col(_quote(name))


def _validate_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise DedupInputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def resolve_params(
    threshold: float,
    num_perm: int,
    ngram: int,
    normalize: Any,
    seed: int,
    scheme: str,
    p_effective: float,
    bands: Optional[Sequence[int]],
    capacity: int = 1,
    band_key: str = DEFAULTS["band_key"],
) -> IndexParams:
    """Validated :class:`IndexParams` (bad values raise :class:`DedupInputError` naming the parameter)."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 < float(threshold) <= 1.0:
        raise DedupInputError(f"threshold must be a number in (0, 1], got {threshold!r}")
    _validate_int("num_perm", num_perm, 2)
    _validate_int("ngram", ngram, 1)
    if bands is not None:
        bands = tuple(bands)
        if len(bands) != 2:
            raise DedupInputError(f"bands must be a pair (b, r), got {bands!r}")
        _validate_int("bands b", bands[0])
        _validate_int("bands r", bands[1])
    try:
        validate_p_effective(p_effective)
        return IndexParams.for_threshold(
            capacity,
            float(threshold),
            int(num_perm),
            bands=bands,
            scheme=scheme,
            seed=seed,
            ngram=int(ngram),
            normalize=normalize if normalize is not None else "none",
            p_effective=float(p_effective),
            band_key=band_key,
        )
    except (ValueError, TypeError) as e:
        raise DedupInputError(str(e)) from None


# --------------------------------------------------------------------------
# executor side


def _keys_mapper(text_col: str, sig_kwargs: dict, b: int, keep_cols: Optional[Sequence[str]]):
    """The ``mapInArrow`` function of stage 1: row id + band keys + active mask per batch."""

    width = 8 * b
    task_hook = hooks.task_hook()  # shipped with the task: executors are other processes

    def compute(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        from lshbloom_udf.minhash import arrow_band_keys

        ctx = TaskContext.get()
        if task_hook is not None and ctx is not None:
            task_hook(stage="keys", partition=ctx.partitionId(), attempt=ctx.attemptNumber())
        base = (ctx.partitionId() if ctx is not None else 0) << POS_BITS
        # Native threads per task = the cores Spark gave the task (spark.task.cpus).
        threads = max(1, int(ctx.cpus())) if ctx is not None else 1
        pos = 0
        for batch in batches:
            n = batch.num_rows
            text = batch.column(batch.schema.get_field_index(text_col))
            try:
                keys, active = arrow_band_keys(text, threads=threads, **sig_kwargs)
            except ValueError as e:
                if "invalid UTF-8" not in str(e):
                    raise
                # Spark strings may hold invalid UTF-8 (read from bytes as they were): the keys are
                # made from the text decoded as Python's errors="replace" does (U+FFFD); the row's
                # own text is passed through unchanged.
                keys, active = arrow_band_keys(_replace_invalid_utf8(text), threads=threads, **sig_kwargs)
            keys = np.ascontiguousarray(keys, dtype=np.uint64)
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


def _replace_invalid_utf8(text):
    """A string array whose invalid UTF-8 sequences are replaced by U+FFFD (``bytes.decode(errors="replace")``)."""
    import pyarrow as pa

    raw = text.cast(pa.large_binary() if pa.types.is_large_string(text.type) else pa.binary())
    return pa.array([None if v is None else v.decode("utf-8", "replace") for v in raw.to_pylist()], type=pa.large_string())


def _packer(b: int, chunk_rows: int):
    """The ``mapInArrow`` function feeding the driver pass: one row per chunk of a partition's keys."""

    width = 8 * b
    task_hook = hooks.task_hook()  # shipped with the task: executors are other processes

    def pack(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if task_hook is not None and ctx is not None:
            task_hook(stage="pack", partition=ctx.partitionId(), attempt=ctx.attemptNumber())
        pid = ctx.partitionId() if ctx is not None else 0
        keys_parts: list = []
        act_parts: list = []
        state = {"start": None, "n": 0}

        def flush():
            out = pa.RecordBatch.from_pydict(
                {
                    "pid": pa.array([pid], pa.int32()),
                    "start": pa.array([state["start"]], pa.int64()),
                    "n": pa.array([state["n"]], pa.int64()),
                    "keys": pa.array([b"".join(keys_parts)], pa.binary()),
                    "active": pa.array([b"".join(act_parts)], pa.binary()),
                }
            )
            keys_parts.clear()
            act_parts.clear()
            state["start"], state["n"] = None, 0
            return out

        for batch in batches:
            n = batch.num_rows
            if n == 0:
                continue
            rows = batch.column(0).to_numpy(zero_copy_only=False)
            key_arr = batch.column(1)
            active = batch.column(2).to_numpy(zero_copy_only=False).astype(np.bool_)
            if pa.types.is_large_binary(key_arr.type):
                off_type = np.int64
            else:
                off_type = np.int32
            bufs = key_arr.buffers()
            offsets = np.frombuffer(bufs[1], dtype=off_type, count=n + 1, offset=key_arr.offset * np.dtype(off_type).itemsize)
            if key_arr.null_count or not np.all(np.diff(offsets) == width):
                raise RuntimeError("internal error: band keys of unexpected width")
            data = memoryview(bufs[2])[int(offsets[0]) : int(offsets[-1])]
            done = 0
            while done < n:
                if state["start"] is None:
                    state["start"] = int(rows[done])
                take = min(n - done, chunk_rows - state["n"])
                expect = state["start"] + state["n"]
                if rows[done] != expect or rows[done + take - 1] != expect + take - 1:
                    raise RuntimeError("internal error: row ids are not consecutive within a partition")
                keys_parts.append(bytes(data[done * width : (done + take) * width]))
                act_parts.append(active[done : done + take].tobytes())
                state["n"] += take
                done += take
                if state["n"] >= chunk_rows:
                    yield flush()
        if state["n"]:
            yield flush()

    return pack


PACKED_SCHEMA = "pid int, start long, n long, keys binary, active binary"


# --------------------------------------------------------------------------
# driver side


class _Progress:
    """Documents done, docs/s and ETA on stderr, at most every ``interval`` seconds."""

    def __init__(self, total: int, enabled: bool = True, interval: float = 2.0, stream=None):
        self.total = total
        self.enabled = enabled
        self.interval = interval
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.monotonic()
        self.last = self.start
        self.printed = False

    def update(self, done: int, duplicates: int, final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not final and now - self.last < self.interval:
            return
        if final and not self.printed:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        rate = done / elapsed
        if final:
            eta = "done"
        elif rate > 0:
            eta = "ETA " + _hms((self.total - done) / rate)
        else:
            eta = "ETA ?"
        pct = 100.0 * done / self.total if self.total else 100.0
        print(
            f"lshbloom: {done:,}/{self.total:,} documents ({pct:.1f}%), {duplicates:,} duplicates, "
            f"{rate:,.0f} docs/s, {eta}",
            file=self.stream,
            flush=True,
        )
        self.printed = True


def _hms(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _temp_index_dir(params: IndexParams, bloom: str) -> str:
    """A fresh directory for a temporary index: in /dev/shm when the index fits there with room to spare."""
    if bloom == "blocked":
        need = blocked_index_bytes(params.capacity, params.p_band, params.b)
    else:
        need = params.b * bloom_file_bytes(params.capacity, params.p_band)
    base = None
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        try:
            if need * 1.25 + (64 << 20) < shutil.disk_usage("/dev/shm").free:
                base = "/dev/shm"
        except OSError:
            pass
    return tempfile.mkdtemp(prefix="lshbloom-index-", dir=base)


def _check_columns(df, text_col: str, id_col: Optional[str], flag_col: str, order_by) -> None:
    from pyspark.sql import types as T

    names = df.columns
    if text_col not in names:
        raise DedupInputError(f"text column {text_col!r} not found; the input has columns {names}")
    dtype = df.schema[text_col].dataType
    if not isinstance(dtype, T.StringType):
        raise DedupInputError(
            f"text column {text_col!r} has type {dtype.simpleString()}, not string; "
            "cast it or pick another column with text_col / --text-column"
        )
    if id_col is not None and id_col not in names:
        raise DedupInputError(f"id column {id_col!r} not found; the input has columns {names}")
    clash = [c for c in names if c in INTERNAL_COLS]
    if clash:
        raise DedupInputError(f"input columns {clash} clash with lshbloom's internal column names")
    if flag_col in names:
        raise DedupInputError(f"the input already has a column {flag_col!r}; choose another flag column name")
    for c in order_by or ():
        if isinstance(c, str) and c not in names:
            raise DedupInputError(f"order-by column {c!r} not found; the input has columns {names}")


def _check_unique_ids(keyed, id_col: str) -> None:
    from pyspark.sql import functions as F

    nulls = keyed.where(_col(id_col).isNull()).limit(1).count()
    if nulls:
        raise DedupInputError(f"id column {id_col!r} has null values; every row needs an id")
    dups = (
        keyed.groupBy(_col(id_col).alias("id"))
        .agg(F.count(F.lit(1)).alias("n"))
        .where(F.col("n") > 1)
        .orderBy(F.col("n").desc(), F.col("id"))
        .limit(11)
        .collect()
    )
    if dups:
        shown = ", ".join(f"{r['id']!r} ({r['n']} rows)" for r in dups[:10])
        more = " and more" if len(dups) > 10 else ""
        raise DedupInputError(f"id column {id_col!r} is not unique: duplicated ids {shown}{more}")


def _normalize_order_by(order_by) -> Optional[list]:
    if order_by is None:
        return None
    if isinstance(order_by, (str,)) or not isinstance(order_by, (list, tuple)):
        return [order_by]
    return list(order_by)


def deduplicate(
    df,
    text_col: str = DEFAULTS["text_column"],
    id_col: Optional[str] = DEFAULTS["id_column"],
    mode: str = DEFAULTS["mode"],
    threshold: float = DEFAULTS["threshold"],
    num_perm: int = DEFAULTS["num_perm"],
    ngram: int = DEFAULTS["ngram"],
    normalize: Union[bool, str, Sequence[str], None] = DEFAULTS["normalize"],
    seed: int = DEFAULTS["seed"],
    scheme: str = DEFAULTS["scheme"],
    band_key: str = DEFAULTS["band_key"],
    p_effective: Optional[float] = None,
    expected_docs: Optional[int] = DEFAULTS["expected_docs"],
    index_dir: Optional[str] = DEFAULTS["index_dir"],
    order_by: Union[str, Sequence, None] = DEFAULTS["order_by"],
    bands: Optional[Sequence[int]] = DEFAULTS["bands"],
    flag_col: str = DEFAULTS["flag_column"],
    checkpoint: str = DEFAULTS["checkpoint"],
    progress: bool = True,
    return_summary: bool = False,
    chunk_rows: int = CHUNK_ROWS,
    broadcast_limit: int = BROADCAST_LIMIT,
    force_new_ingest: bool = False,
    defer_commit: bool = False,
    transaction: Optional[IndexTransaction] = None,
    run_info: Optional[dict] = None,
    bloom: str = DEFAULTS["bloom"],
):
    """Near-duplicate detection with LSHBloom over the string column ``text_col`` of ``df``.

    ``bloom="blocked"`` uses the blocked Bloom backend (one cache line per key
    per band, :mod:`lshbloom_udf.blocked`: faster, larger, not readable by
    datasketch); the default ``"pybloomfiltermmap3"`` is the datasketch-compatible
    file format. A new index in ``index_dir`` gets this backend; an existing one
    must have it.

    Decisions are "keep first" in input order (partition by partition, row by
    row) or in ``order_by`` order: a document is a duplicate when one of its
    ``b`` band keys was seen in an earlier kept document (or in the index at
    ``index_dir`` from a previous run).

    Modes: ``"flag"`` returns every row of ``df`` once with a boolean column
    ``flag_col`` (default ``is_duplicate``); ``"filter"`` returns the rows kept;
    ``"duplicates"`` returns the rows removed. Rows with null or empty text are
    never duplicates.

    ``id_col``: a unique, non-null column to join the decisions back on (checked;
    duplicated ids are an error). Without it a deterministic internal row id is
    used and the input's columns are checkpointed with it.

    ``p_effective`` and ``expected_docs`` size a *new* index (defaults
    ``DEFAULTS["p_effective"]`` and the number of input rows); an existing
    index at ``index_dir`` keeps its own sizing unless they are given, in which
    case they must match it. Every other parameter must match an existing index
    (:class:`~lshbloom_udf.index.IndexMismatchError` otherwise).

    The driver pass runs when this function is called; the returned DataFrame
    is lazy only in its final join. With ``return_summary=True`` returns a
    :class:`DedupResult` ``(df, summary)``.

    Reliability (docs/reliability.md): with ``index_dir`` the run holds the
    index's exclusive lock from its start to its commit, works on a staging
    copy of the index and commits it (with a record of the run in the
    manifest's ``runs``) only at the end: an exception or a crash leaves the
    index as it was. If a committed run already ingested the same documents
    (same content fingerprint and parameters), the run does not insert them
    again: when the processing order is the same too it reproduces that run's
    flags from the index's ``runs/`` folder, otherwise it raises
    :class:`~lshbloom_udf.index.AlreadyIngestedError`;
    ``force_new_ingest=True`` ingests them anyway (then they are all flagged
    as duplicates of themselves). ``defer_commit=True`` (with
    ``return_summary=True``) leaves the commit to
    :meth:`DedupResult.commit`, so that an output can be committed with the
    index (the spark-submit job does this). ``transaction``: an
    :class:`~lshbloom_udf.index.IndexTransaction` the caller opened on
    ``index_dir`` (the caller keeps it). ``run_info``: extra fields for the
    run record (e.g. the input and output paths).
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    t_start = time.monotonic()
    if mode not in MODES:
        raise DedupInputError(f"mode must be one of {MODES}, got {mode!r}")
    if checkpoint not in CHECKPOINTS:
        raise DedupInputError(f"checkpoint must be one of {CHECKPOINTS}, got {checkpoint!r}")
    sizing_given = expected_docs is not None or p_effective is not None
    if expected_docs is not None:
        _validate_int("expected_docs", expected_docs, 1)
    if index_dir is not None:
        if not isinstance(index_dir, (str, os.PathLike)) or not str(index_dir):
            raise DedupInputError(f"index_dir must be a directory path, got {index_dir!r}")
        index_dir = os.fspath(index_dir)
        if "://" in index_dir or index_dir.startswith(("dbfs:", "file:")):
            raise DedupInputError(
                f"index_dir must be a local path on the driver (the index is memory-mapped there), got {index_dir!r}"
            )
    if transaction is not None:
        if index_dir is not None and os.path.abspath(os.fspath(index_dir)) != os.path.abspath(transaction.path):
            raise DedupInputError(f"index_dir {index_dir!r} is not the transaction's directory {transaction.path!r}")
        index_dir = transaction.path
    if defer_commit and (index_dir is None or not return_summary):
        raise DedupInputError("defer_commit needs an index_dir and return_summary=True")
    p_eff = DEFAULTS["p_effective"] if p_effective is None else p_effective
    params = resolve_params(threshold, num_perm, ngram, normalize, seed, scheme, p_eff, bands, band_key=band_key)
    _validate_int("chunk_rows", chunk_rows, 1)
    try:
        validate_bloom(bloom)
    except ValueError as e:
        raise DedupInputError(str(e)) from None
    order_cols = _normalize_order_by(order_by)
    _check_columns(df, text_col, id_col, flag_col, order_cols)

    # The index's lock is held from here to the commit; an incompatible index fails before any Spark work.
    txn = None
    if index_dir is not None:
        txn = transaction if transaction is not None else IndexTransaction(index_dir)
    try:
        if txn is not None:
            manifest = txn.manifest()
            if manifest is not None:
                _check_bloom(index_dir, manifest, bloom)
                _check_expected(index_dir, _params_from_manifest(manifest), _expected(params, sizing_given, expected_docs))
        result = _deduplicate_locked(
            df, txn, text_col, id_col, mode, params, sizing_given, expected_docs, order_cols, flag_col, checkpoint,
            progress, chunk_rows, broadcast_limit, force_new_ingest, run_info, t_start, bloom=bloom,
        )
    except BaseException:
        if txn is not None:
            if transaction is None:
                txn.close()
            else:
                txn.abort()
        raise
    if txn is not None:
        if defer_commit:
            result.transaction, result._owns_transaction = txn, transaction is None
        else:
            try:
                record = txn.commit(result._run, result._duplicates)
                if record is not None:
                    result.summary["index"]["run_id"] = record["run_id"]
            finally:
                if transaction is None:
                    txn.close()
                else:
                    txn.abort()
    return result if return_summary else result.df


def _fingerprints(keyed) -> tuple[str, str]:
    """(content, sequence) fingerprints of the keyed documents.

    The content fingerprint depends only on the multiset of (band keys,
    active) rows, not on how Spark partitioned them; the sequence fingerprint
    also on each document's row id (its place in the processing order).
    """
    import hashlib

    from pyspark.sql import functions as F

    dec = "decimal(38,0)"
    row = keyed.agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.xxhash64(F.col(KEYS_COL), F.col(ACTIVE_COL)).cast(dec)).alias("c1"),
        F.sum(F.hash(F.col(KEYS_COL), F.col(ACTIVE_COL)).cast(dec)).alias("c2"),
        F.sum(F.xxhash64(F.col(ROW_COL), F.col(KEYS_COL), F.col(ACTIVE_COL)).cast(dec)).alias("s1"),
        F.sum(F.hash(F.col(KEYS_COL), F.col(ROW_COL)).cast(dec)).alias("s2"),
    ).collect()[0]
    content = hashlib.sha256(f"lshbloom-content:{row['n']}:{row['c1']}:{row['c2']}".encode()).hexdigest()[:32]
    sequence = hashlib.sha256(f"lshbloom-sequence:{row['n']}:{row['s1']}:{row['s2']}:{content}".encode()).hexdigest()[:32]
    return content, sequence


def _deduplicate_locked(
    df, txn, text_col, id_col, mode, params, sizing_given, expected_docs, order_cols, flag_col, checkpoint,
    progress, chunk_rows, broadcast_limit, force_new_ingest, run_info, t_start, bloom=BLOOM_FORMAT,
) -> DedupResult:
    """The body of :func:`deduplicate`, with the index's transaction (if any) open."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    spark = df.sparkSession
    index_dir = txn.path if txn is not None else None

    # ---- stage 1: keys + row ids, checkpointed
    source = df.orderBy(*order_cols) if order_cols else df
    keep_cols = None if id_col is None else [id_col]
    if keep_cols is not None:
        source = source.select(*[_col(c) for c in dict.fromkeys([id_col, text_col])])
    out_fields = [f for f in source.schema.fields if keep_cols is None or f.name in keep_cols]
    from pyspark.sql import types as T

    keyed_schema = T.StructType(
        out_fields
        + [
            T.StructField(ROW_COL, T.LongType(), False),
            T.StructField(KEYS_COL, T.BinaryType(), False),
            T.StructField(ACTIVE_COL, T.BooleanType(), False),
        ]
    )
    sig_kwargs = params.signature_kwargs()
    b = sig_kwargs.pop("b")
    r = sig_kwargs.pop("r")
    keyed = source.mapInArrow(_keys_mapper(text_col, dict(b=b, r=r, **sig_kwargs), b, keep_cols), keyed_schema)
    with _arrow_batch_limits(spark):
        if checkpoint == "local":
            # Deserialized: caching rows as they are is faster than serializing them (same memory, spills to disk).
            keyed = keyed.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK_DESER)
        else:
            keyed = keyed.checkpoint(eager=True)
    documents = keyed.count()
    hooks.fire("after-keys", documents=documents)
    t_keys = time.monotonic()
    if id_col is not None:
        _check_unique_ids(keyed, id_col)
    content_fp = sequence_fp = prior = None
    if index_dir is not None and documents:
        content_fp, sequence_fp = _fingerprints(keyed)
        prior = txn.find_run(content_fp, params)
        if prior is not None and not force_new_ingest and prior.get("sequence_fingerprint") != sequence_fp:
            raise AlreadyIngestedError(
                f"{index_dir}: these {documents:,} documents were already ingested by run {prior['run_id']} "
                f"(committed {prior.get('committed_at', '?')}, output {prior.get('output')}), in another order or "
                "partitioning, so that run's flags cannot be reproduced here and ingesting them again would flag "
                "every one as a duplicate of itself. Use that run's output, or force a new ingestion with "
                "--force-new-ingest (force_new_ingest=True)."
            )
    reproduce = prior is not None and not force_new_ingest
    t_checked = time.monotonic()

    # ---- stage 2: the driver pass
    capacity = int(expected_docs) if expected_docs is not None else max(documents, 1)
    try:
        params = dataclasses.replace(params, capacity=capacity)
    except ValueError as e:
        raise DedupInputError(str(e)) from None
    temporary = index_dir is None
    skip_index = reproduce or (
        documents == 0 and not sizing_given and (temporary or not LSHBloomIndex.exists(index_dir))
    )
    path = None if skip_index else (_temp_index_dir(params, bloom) if temporary else index_dir)
    dup_parts: list = []
    duplicates = empty = 0
    index_info: dict = {"path": None if temporary else index_dir, "kept": not temporary}
    if content_fp is not None:
        index_info.update(content_fingerprint=content_fp, sequence_fingerprint=sequence_fp)
    try:
        if reproduce:
            dup_parts.append(txn.load_duplicates(prior))
            duplicates = int(prior["duplicates"])
            empty = int(prior.get("empty_documents", 0))
            index_info.update(
                reproduced=True,
                run_id=prior["run_id"],
                reproduced_from=prior["run_id"],
                inserted_before=int(prior["inserted_total"]) - int(prior["inserted"]),
                inserted_total=int((txn.manifest() or {}).get("inserted", 0)),
                reused=True,
            )
            if len(dup_parts[0]) != duplicates:
                raise RuntimeError(f"{index_dir}: run {prior['run_id']} records {duplicates} duplicates but stores {len(dup_parts[0])}")
        elif not skip_index:
            if temporary:
                index = LSHBloomIndex.create(path, params, bloom=bloom)
            else:
                index = txn.stage(params, sizing_given, bloom)
            index_info["inserted_before"] = index.inserted
            index_info["backend"] = index.bloom
            index_info["reused"] = index.inserted > 0 and not temporary
            index_params = index.params
            try:
                progress_bar = _Progress(documents, enabled=progress)
                done = 0
                packed = keyed.select(ROW_COL, KEYS_COL, ACTIVE_COL).mapInArrow(_packer(b, chunk_rows), PACKED_SCHEMA)
                for row in packed.toLocalIterator(prefetchPartitions=True):
                    n = int(row["n"])
                    keys = np.frombuffer(row["keys"], dtype=np.uint64).reshape(n, b)
                    active = np.frombuffer(row["active"], dtype=np.bool_)
                    flags = index.query_insert(keys, active)
                    hits = np.flatnonzero(flags)
                    if hits.size:
                        dup_parts.append(hits.astype(np.int64) + np.int64(row["start"]))
                    duplicates += int(hits.size)
                    empty += int(n - np.count_nonzero(active))
                    done += n
                    progress_bar.update(done, duplicates)
                    hooks.fire("driver-pass", done=done)
                progress_bar.update(done, duplicates, final=True)
                if done != documents:
                    raise RuntimeError(f"internal error: driver pass saw {done} documents, expected {documents}")
                index.sync()
                stats = index.stats()
            finally:
                if temporary:
                    index.close()
            index_info.update(
                bytes_on_disk=stats["bytes_on_disk"],
                inserted_total=stats["inserted"],
                capacity=index_params.capacity,
                p_effective=index_params.p_effective,
                p_band=stats["p_band"],
                expected_false_positive=stats["expected_false_positive"],
                location="/dev/shm" if os.path.realpath(path).startswith("/dev/shm") else os.path.dirname(os.path.realpath(path)),
            )
            if stats["inserted"] > index_params.capacity:
                print(
                    f"lshbloom: warning: the index holds {stats['inserted']:,} documents, more than its capacity "
                    f"{index_params.capacity:,}; its false-positive rate is now {stats['expected_false_positive']:.3g} "
                    f"(sized for {index_params.p_effective:.3g}). Use a larger --expected-docs for a new index.",
                    file=sys.stderr,
                )
        else:
            index_info.update(bytes_on_disk=0, inserted_total=0, inserted_before=0, reused=False)
    finally:
        if temporary and path is not None:
            shutil.rmtree(path, ignore_errors=True)
    t_pass = time.monotonic()
    run_record = None
    if index_dir is not None and not skip_index:
        run_record = {
            **(run_info or {}),
            "content_fingerprint": content_fp,
            "sequence_fingerprint": sequence_fp,
            "params": run_params(params),
            "documents": documents,
            "duplicates": duplicates,
            "empty_documents": empty,
            "inserted": stats["inserted"] - index_info["inserted_before"],
            "mode": mode,
            "id_column": id_col,
            "order_by": [str(c) for c in order_cols] if order_cols else None,
            "forced_new_ingest": bool(force_new_ingest and prior is not None),
            "committed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }

    # ---- stage 3: join the decisions back
    dup_rows = np.concatenate(dup_parts) if dup_parts else np.zeros(0, dtype=np.int64)
    dups = _row_frame(spark, dup_rows)
    small = len(dup_rows) <= broadcast_limit
    if small:
        dups = F.broadcast(dups)
    if id_col is None:
        base = keyed.drop(KEYS_COL, ACTIVE_COL)
        key = ROW_COL
    else:
        dup_ids = keyed.select(ROW_COL, _col(id_col)).join(dups, ROW_COL, "left_semi").select(_col(id_col))
        if small:
            dup_ids = F.broadcast(dup_ids)
        dups = dup_ids
        base = df
        key = id_col
    columns = [_col(c) for c in df.columns]
    if mode == "flag":
        joined = base.join(dups.withColumn(DUP_COL, F.lit(True)), key, "left")
        if id_col is None and not small:
            joined = joined.orderBy(ROW_COL)
        result = joined.select(*columns, F.coalesce(F.col(DUP_COL), F.lit(False)).alias(flag_col))
    else:
        joined = base.join(dups, key, "left_anti" if mode == "filter" else "left_semi")
        if id_col is None and not small:
            joined = joined.orderBy(ROW_COL)
        result = joined.select(*columns)
    t_end = time.monotonic()

    summary = {
        "documents": documents,
        "empty_documents": empty,
        "duplicates": duplicates,
        "kept": documents - duplicates,
        "duplicate_rate": duplicates / documents if documents else 0.0,
        "mode": mode,
        "text_column": text_col,
        "id_column": id_col,
        "order_by": [str(c) for c in order_cols] if order_cols else None,
        "params": {
            "threshold": params.threshold,
            "num_perm": params.num_perm,
            "b": params.b,
            "r": params.r,
            "ngram": params.ngram,
            "normalize": params.normalize,
            "seed": params.seed,
            "scheme": params.scheme,
            "band_key": params.band_key,
        },
        "index": index_info,
        "seconds": {
            "keys": round(t_keys - t_start, 3),
            "id_check": round(t_checked - t_keys, 3),
            "driver_pass": round(t_pass - t_checked, 3),
            "join_plan": round(t_end - t_pass, 3),
            "total": round(t_end - t_start, 3),
        },
        "docs_per_second": documents / max(t_end - t_start, 1e-9),
    }
    out = DedupResult(result, summary)
    out._run, out._duplicates = run_record, (dup_rows if run_record is not None else None)
    return out


def _expected(params: IndexParams, sizing_given: bool, expected_docs: Optional[int]) -> dict:
    expected = dataclasses.asdict(params)
    expected["capacity"] = expected_docs if expected_docs is not None else None
    if not sizing_given:
        expected["p_effective"] = None
    return expected


def _row_frame(spark, rows: np.ndarray):
    """A one-column DataFrame of row ids, built from Arrow (no per-row Python objects)."""
    import pyarrow as pa
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField(ROW_COL, T.LongType(), False)])
    if len(rows) == 0:
        return spark.createDataFrame([], schema)
    return spark.createDataFrame(pa.table({ROW_COL: pa.array(rows, pa.int64())}), schema)


def format_summary(summary: dict) -> str:
    """The summary of a run as text."""
    idx = summary.get("index", {})
    s = summary.get("seconds", {})
    p = summary.get("params", {})
    where = idx.get("path") or f"temporary ({idx.get('location', '-')}, removed)"
    lines = [
        f"documents          {summary['documents']:,}  (empty/null text: {summary['empty_documents']:,})",
        f"duplicates         {summary['duplicates']:,}  ({100 * summary['duplicate_rate']:.2f}%)",
        f"kept               {summary['kept']:,}",
        f"parameters         threshold {p.get('threshold')}, num_perm {p.get('num_perm')}, b x r {p.get('b')} x {p.get('r')}, "
        f"ngram {p.get('ngram')}, normalize {p.get('normalize')}, seed {p.get('seed')}, scheme {p.get('scheme')}, band key {p.get('band_key', 'sum')}",
        f"index              {where}: {human_bytes(idx.get('bytes_on_disk', 0))} of {idx.get('backend', BLOOM_FORMAT)} filters, "
        f"{idx.get('inserted_total', 0):,} documents inserted in all"
        + (f" ({idx['inserted_before']:,} before this run)" if idx.get("inserted_before") else ""),
        "seconds            " + ", ".join(f"{k} {v:.2f}" for k, v in s.items()),
        f"rate               {summary['docs_per_second']:,.0f} docs/s",
    ]
    if math.isfinite(idx.get("expected_false_positive", 0.0) or 0.0) and idx.get("expected_false_positive"):
        lines.insert(5, f"index FP rate now  {idx['expected_false_positive']:.3g} (sized for p_effective {idx.get('p_effective'):.3g})")
    return "\n".join(lines)


__all__ += ["IndexMismatchError"]
