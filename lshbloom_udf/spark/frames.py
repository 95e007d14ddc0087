"""DataFrames of the driver's numpy arrays (row ids, decided columns), sent to the executors.

A module of its own: the join of the decisions (:mod:`~lshbloom_udf.spark.join`), verification
(:mod:`~lshbloom_udf.spark.verify`) and the records (:mod:`~lshbloom_udf.spark.records`) all build them, and the join
uses verification's measures, so neither may hold them for the other without a cycle.
"""

from __future__ import annotations

import numpy as np

from lshbloom_udf.common import spark_context
from lshbloom_udf.spark.keys import ROW_COL

# Rows a task of a driver-made frame carries at most: Spark warns about tasks over 1,000 KiB (TaskSetManager), and
# a frame built from local data in one piece ships it all inside the plan of every task that reads it.
SLICE_BYTES = 256 << 10


def local_frame(spark, columns: dict, schema, small: bool = False):
    """A DataFrame of the driver's numpy ``columns`` (name -> array, aligned, as ``schema`` orders them).

    In a classic session the arrays go to the executors as an RDD of slices of
    at most :data:`SLICE_BYTES` (each task carries its slice, no plan carries
    them all); under Spark Connect the client can only send them as Arrow in the plan.
    ``small`` (few enough to broadcast): sent as Arrow in a classic session too,
    since a broadcast collects the frame on the driver anyway, and Arrow needs
    no Python tasks to build its rows.
    """
    import pyarrow as pa

    names = [f.name for f in schema.fields]
    arrays = [np.asarray(columns[n]) for n in names]
    n = len(arrays[0]) if arrays else 0
    if n == 0:
        return spark.createDataFrame([], schema)
    sc = spark_context(spark)  # None under Spark Connect: Arrow is its only way in
    if sc is None or small:
        return spark.createDataFrame(pa.table(dict(zip(names, arrays))), schema)
    width = sum(a.itemsize for a in arrays) or 1
    step = max(1, SLICE_BYTES // width)
    slices = [[a[i:i + step] for a in arrays] for i in range(0, n, step)]
    rdd = sc.parallelize(slices, len(slices)).flatMap(lambda part: zip(*(a.tolist() for a in part)))
    return spark.createDataFrame(rdd, schema)


def row_frame(spark, rows: np.ndarray, small: bool = False):
    """A one-column DataFrame of row ids (:func:`local_frame`: no per-row Python objects on the driver)."""
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField(ROW_COL, T.LongType(), False)])
    return local_frame(spark, {ROW_COL: np.asarray(rows, np.int64)}, schema, small)


def among_rows(pinned, among: np.ndarray):
    """The pinned rows whose row id is in ``among``: a semi-join with them, broadcast."""
    from pyspark.sql import functions as F

    return pinned.join(F.broadcast(row_frame(pinned.sparkSession, among, small=True)), ROW_COL, "left_semi")
