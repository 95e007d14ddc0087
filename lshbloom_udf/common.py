"""Small helpers several modules share, each declared once.

- the session's kind: :func:`spark_context` (``None`` under Spark Connect),
  :func:`hadoop_jvm`, :func:`default_parallelism`; :func:`stop_session`;
- column names: :func:`quote`, :func:`col`;
- results on the driver: :func:`collect_arrow`, :func:`unique_rows`;
- :func:`mix64`, splitmix64's finalizer (a well-mixed 64-bit hash);
- :func:`over_capacity_warning`, the index's one message when it holds more
  documents than it was sized for.

Nothing here imports pyspark at import time: the core modules use it too.
"""

from __future__ import annotations

import threading
from typing import Iterable, Optional

import numpy as np

# ---------------------------------------------------------------------------
# the session


def spark_context(spark):
    """The session's SparkContext, or None: a Spark Connect session has none on this side."""
    try:
        return spark.sparkContext
    except Exception:  # pyspark.errors PySparkNotImplementedError and friends under Connect
        return None


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (no SparkContext, no JVM on this side)."""
    return spark_context(spark) is None


def hadoop_jvm(spark):
    """``(jvm, Hadoop configuration)`` of a classic session's driver, or None under Spark Connect."""
    sc = spark_context(spark)
    if sc is None:
        return None
    try:
        return sc._jvm, sc._jsc.hadoopConfiguration()
    except AttributeError:  # no JVM on this side
        return None


def default_parallelism(spark) -> int:
    """The session's core count (Spark Connect: its shuffle partitions, the closest it exposes)."""
    sc = spark_context(spark)
    if sc is not None:
        return sc.defaultParallelism
    return int(spark.conf.get("spark.sql.shuffle.partitions", "200"))


def stop_session(spark) -> None:
    """``spark.stop()``, without waiting for PySpark's accumulator server to notice it.

    That server handles one connection at a time on its own thread and checks
    for a stop only between polls (1 s on a connection the JVM keeps open, then
    0.5 s in its serve loop): ``SparkContext.stop`` waits 0.5-1.5 s for it, with
    nothing left to do. Its stop is asked for here and awaited on a daemon thread: the
    loop ends at its next poll, after this returns.
    """
    sc = spark_context(spark)
    server = getattr(sc, "_accumulatorServer", None) if sc is not None else None
    if server is not None and hasattr(server, "server_shutdown"):
        sc._accumulatorServer = None
        server.server_shutdown = True  # what its own shutdown() sets first: its handler's poll loop ends on it
        threading.Thread(target=server.shutdown, name="lshbloom-accumulator-stop", daemon=True).start()
    spark.stop()


# ---------------------------------------------------------------------------
# columns


def quote(name: str) -> str:
    """A column name as Spark SQL reads it literally (dots and backticks included)."""
    return "`" + name.replace("`", "``") + "`"


def col(name: str):
    """The column named ``name`` exactly (not a nested field path)."""
    from pyspark.sql import functions as F

    return F.col(quote(name))


# ---------------------------------------------------------------------------
# results on the driver


def collect_arrow(df):
    """A DataFrame's rows on the driver as a pyarrow Table (``toArrow`` where PySpark has it)."""
    import pyarrow as pa

    if hasattr(df, "toArrow"):
        return df.toArrow()
    return pa.Table.from_pandas(df.toPandas(), preserve_index=False)


def local_rows(df):
    """A DataFrame's rows on the driver, a partition at a time (the next one prefetched).

    A classic session streams them through its RDD: ``DataFrame.toLocalIterator`` runs the whole stream inside
    one SQL execution, whose driver JVM keeps every partition it served until the stream ends (Spark 4.3: 300
    partitions of 3.3 MB filled a 1 GiB driver; ``tests/spark/test_spark_local_rows.py``); ``df.rdd``'s iterator serves
    the same pickled rows and holds only the partitions in flight. Spark Connect has no RDD: its own iterator.
    """
    if is_connect(df.sparkSession):
        return df.toLocalIterator(prefetchPartitions=True)
    return df.rdd.toLocalIterator(prefetchPartitions=True)


# The most bytes of rows one streamed blob carries (Spark rows stay far below their 2 GB limit; a longer row
# travels alone).
ARROW_BLOB_BYTES = 64 << 20


def iter_arrow(df):
    """A DataFrame's rows on the driver as pyarrow RecordBatches, a partition at a time.

    :func:`local_rows` of Arrow IPC blobs (each about :data:`ARROW_BLOB_BYTES` of rows): the driver holds
    one blob at a time, and rows are not turned into Python ``Row`` objects one by one. Closing the generator
    ends the transfer of the remaining partitions.
    """
    import pyarrow as pa

    it = local_rows(df.mapInArrow(_arrow_blobs, "ipc binary"))
    try:
        for row in it:
            yield from pa.ipc.open_stream(row["ipc"]).read_all().to_batches()
    finally:
        getattr(it, "close", lambda: None)()


def _arrow_blobs(batches):
    """mapInArrow: each batch as Arrow IPC blobs of about ARROW_BLOB_BYTES of rows each (one row more at most)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for batch in batches:
        sizes = np.full(batch.num_rows, 16, np.int64)
        for column in batch.columns:
            if pa.types.is_string(column.type) or pa.types.is_binary(column.type):
                sizes += pc.fill_null(pc.binary_length(column), 0).to_numpy(zero_copy_only=False)
        part = np.cumsum(sizes) // ARROW_BLOB_BYTES  # a new blob where the running size passes a multiple
        cuts = np.flatnonzero(np.diff(part)) + 1
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, batch.num_rows]):
            if hi > lo:
                yield _blob(batch.slice(int(lo), int(hi - lo)))


def _blob(batch):
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return pa.RecordBatch.from_pydict({"ipc": pa.array([sink.getvalue().to_pybytes()], pa.binary())})


def unique_rows(blobs: Iterable[bytes]) -> np.ndarray:
    """The distinct row ids of little-endian int64 ``blobs``, sorted (a document hits in up to b shards)."""
    parts = [np.frombuffer(b, dtype="<i8") for b in blobs]
    return np.unique(np.concatenate(parts)).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)


# ---------------------------------------------------------------------------
# hashing

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer over uint64 values: independent of the Bloom filters' own hashing."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


# ---------------------------------------------------------------------------
# the index


def over_capacity_warning(inserted: int, capacity: int, now: Optional[float], sized_for: float,
                          what: str = "the index", advice: str = "") -> str:
    """The message when an index holds more documents than its capacity (its false-positive rate rose)."""
    rate = f"now {now:.3g}" if now is not None else "now above p_effective"
    return (f"{what} holds {inserted:,} documents, more than its capacity {capacity:,}; its false-positive rate is "
            f"{rate}{f' (sized for {sized_for:.3g})' if now is not None else ''}. Use a larger --expected-docs for a "
            f"new index{advice}.")
