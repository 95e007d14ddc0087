"""Native threads per call (Spark passes the task's cores): results never depend on the thread count."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lshbloom_udf import _native, arrow_band_keys, signatures, text_band_keys
from lshbloom_udf.sample import build_sample


@pytest.fixture(scope="module")
def texts():
    docs = [d["text"] for d in build_sample(num_docs=700, duplicate_fraction=0.2, seed=4)]
    docs[5:5] = [None, "", " \t "]
    return docs


@pytest.mark.parametrize("threads", [2, 3, 16])
def test_thread_count_does_not_change_results(texts, threads):
    np.testing.assert_array_equal(signatures(texts, threads=threads), signatures(texts))
    k1, h1 = text_band_keys(texts, 42, 6)
    k2, h2 = text_band_keys(texts, 42, 6, threads=threads)
    np.testing.assert_array_equal(k1, k2)
    np.testing.assert_array_equal(h1, h2)
    for typ in (pa.string(), pa.large_string()):
        k3, h3 = arrow_band_keys(pa.array(texts, typ), 42, 6, threads=threads)
        np.testing.assert_array_equal(k1[h1], k3[h3])
        np.testing.assert_array_equal(h1, h3)


def test_bad_thread_count_is_refused(texts):
    with pytest.raises(ValueError, match="threads"):
        text_band_keys(texts, 42, 6, threads=0)


def test_empty_input_with_threads():
    keys, has = text_band_keys([], 42, 6, threads=4)
    assert keys.shape == (0, 42) and has.shape == (0,)
    assert _native.simd_backend() in ("avx512", "avx2", "generic")


# -- tasks over the pinned partitions (spark.keys.TaskThreads) ---------------------------------------------------


def test_thread_plan_gives_a_crowded_partition_its_share_of_the_cores():
    from lshbloom_udf.spark.keys import TaskThreads, thread_plan

    assert thread_plan([100_000, 0], 2, 2) == TaskThreads((2, 1))  # one row group: both cores on it
    assert thread_plan([50, 50], 2, 2) == TaskThreads()  # balanced: a core each, as Spark gives
    assert thread_plan([90, 10, 0, 0], 8, 4) == TaskThreads((4, 1, 1, 1))  # at most an executor's cores
    assert thread_plan([10] * 64, 8, 8) == TaskThreads()
    assert thread_plan([0, 0], 2, 2) == TaskThreads()


def _threads_per_task(pinned, threads):
    """What each task over ``pinned`` is given: [(partition, rows, threads)]."""

    def report(batches):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        rows = sum(b.num_rows for b in batches)
        yield pa.RecordBatch.from_pydict({"p": pa.array([ctx.partitionId()], pa.int32()),
                                          "rows": pa.array([rows], pa.int64()),
                                          "threads": pa.array([threads.of(ctx)], pa.int32())})

    return sorted(tuple(r) for r in pinned.mapInArrow(report, "p int, rows long, threads int").collect())


def test_a_pinned_input_in_one_partition_is_keyed_on_every_core(spark):
    """An input in one partition (one Parquet row group, a micro-batch of one file) in local[2]: its task keys on
    both cores; two balanced partitions get one each; the counts are the pin's rows."""
    from pyspark import StorageLevel

    from lshbloom_udf.spark.keys import count_pinned

    assert spark.sparkContext.defaultParallelism == 2
    for partitions, expected in ((1, [(0, 1000, 2)]), (2, [(0, 500, 1), (1, 500, 1)])):
        pinned = spark.range(1000).repartition(partitions).localCheckpoint(
            eager=False, storageLevel=StorageLevel.MEMORY_AND_DISK_DESER)
        rows, threads = count_pinned(pinned)
        assert rows == 1000
        assert [(p, n, t) for p, n, t in _threads_per_task(pinned, threads)] == expected
