"""Stage 3: the decisions joined back to the input (lazy: Spark runs it when the result is used).

The duplicates' row ids come back as a small DataFrame built from Arrow. With
``id_column`` they are turned into ids and joined to the input itself;
otherwise they are joined to the checkpointed keyed rows (which carry the
input's columns). ``flag`` mode is a left join giving the boolean flag column,
``filter`` an anti join, ``duplicates`` a semi join. When the duplicates are
few enough to broadcast (``broadcast_limit``) the join keeps the input's
order; otherwise, without ``id_column``, the output is sorted back by row id.
"""

from __future__ import annotations

import numpy as np

from lshbloom_udf.spark.ingest import col
from lshbloom_udf.spark.keys import ACTIVE_COL, DUP_COL, KEYS_COL, ROW_COL


def row_frame(spark, rows: np.ndarray):
    """A one-column DataFrame of row ids, built from Arrow (no per-row Python objects)."""
    import pyarrow as pa
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField(ROW_COL, T.LongType(), False)])
    if len(rows) == 0:
        return spark.createDataFrame([], schema)
    return spark.createDataFrame(pa.table({ROW_COL: pa.array(rows, pa.int64())}), schema)


def join_decisions(df, keyed, duplicate_rows: np.ndarray, config):
    """``df`` with the decisions of ``duplicate_rows`` applied as ``config.mode`` says."""
    from pyspark.sql import functions as F

    dups = row_frame(df.sparkSession, duplicate_rows)
    small = len(duplicate_rows) <= config.broadcast_limit
    if small:
        dups = F.broadcast(dups)
    id_col = config.id_column
    if id_col is None:
        base, key = keyed.drop(KEYS_COL, ACTIVE_COL), ROW_COL
    else:
        dups = keyed.select(ROW_COL, col(id_col)).join(dups, ROW_COL, "left_semi").select(col(id_col))
        if small:
            dups = F.broadcast(dups)
        base, key = df, id_col
    sort_back = id_col is None and not small
    columns = [col(c) for c in df.columns]
    if config.mode == "flag":
        joined = base.join(dups.withColumn(DUP_COL, F.lit(True)), key, "left")
        if sort_back:
            joined = joined.orderBy(ROW_COL)
        return joined.select(*columns, F.coalesce(F.col(DUP_COL), F.lit(False)).alias(config.flag_column))
    joined = base.join(dups, key, "left_anti" if config.mode == "filter" else "left_semi")
    if sort_back:
        joined = joined.orderBy(ROW_COL)
    return joined.select(*columns)


SOURCE_COLS = ("duplicate_of", "similarity")
ROW_ID_COL = "row_id"


def join_sources(df, keyed, rows: np.ndarray, of_rows: np.ndarray, similarity: np.ndarray, config):
    """Like :func:`join_decisions` (modes ``flag`` and ``duplicates``), with the columns ``duplicate_of`` and
    ``similarity`` of each duplicate (null for the rows kept, and where ``of_rows`` is -1: not verifiable).

    ``duplicate_of`` is the kept document's ``id_column`` value, or without
    one its row id; then the output also has a column ``row_id`` (every row's).
    """
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    spark = df.sparkSession
    of = "_lshb_of"
    schema = T.StructType([T.StructField(ROW_COL, T.LongType(), False), T.StructField(of, T.LongType(), True),
                           T.StructField(SOURCE_COLS[1], T.DoubleType(), True)])
    known = of_rows >= 0
    table = pa.table({ROW_COL: pa.array(rows, pa.int64()), of: pa.array(of_rows, pa.int64(), mask=~known),
                      SOURCE_COLS[1]: pa.array(similarity, pa.float64(), mask=~known)})
    dups = spark.createDataFrame(table, schema) if len(rows) else spark.createDataFrame([], schema)
    small = len(rows) <= config.broadcast_limit
    hint = F.broadcast if small else (lambda d: d)
    id_col = config.id_column
    columns = [col(c) for c in df.columns]
    if id_col is None:
        base, key = keyed.drop(KEYS_COL, ACTIVE_COL), ROW_COL
        dups = dups.withColumnRenamed(of, SOURCE_COLS[0])
        columns.append(F.col(ROW_COL).alias(ROW_ID_COL))
    else:
        ids = keyed.select(ROW_COL, col(id_col))
        of_ids = (keyed.select(F.col(ROW_COL).alias(of), col(id_col).alias(SOURCE_COLS[0]))
                  .join(hint(dups.select(of)), of, "left_semi"))
        dups = (ids.join(hint(dups), ROW_COL).join(hint(of_ids), of, "left")
                .select(col(id_col), SOURCE_COLS[0], SOURCE_COLS[1]))
        base, key = df, id_col
    joined = base.join(hint(dups.withColumn(DUP_COL, F.lit(True))), key, "left" if config.mode == "flag" else "inner")
    if id_col is None and not small:
        joined = joined.orderBy(ROW_COL)
    flag = [F.coalesce(F.col(DUP_COL), F.lit(False)).alias(config.flag_column)] if config.mode == "flag" else []
    return joined.select(*columns, *flag, F.col(SOURCE_COLS[0]), F.col(SOURCE_COLS[1]))
