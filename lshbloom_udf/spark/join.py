"""Stage 4: the decisions joined back to the pinned rows (lazy: Spark runs it when the result is used).

The duplicates' row ids come back as a small DataFrame built from Arrow and
are joined to the pinned input by row id (the input is not read again):
``flag`` mode is a left join giving the boolean flag column, ``filter`` an
anti join, ``duplicates`` a semi join. When the duplicates are few enough to
broadcast (``broadcast_limit``) the join keeps the pinned rows' order;
otherwise the output is sorted back by row id.
"""

from __future__ import annotations

import numpy as np

from lshbloom_udf.spark.ingest import col
from lshbloom_udf.spark.keys import DUP_COL, ROW_COL


def row_frame(spark, rows: np.ndarray):
    """A one-column DataFrame of row ids, built from Arrow (no per-row Python objects)."""
    import pyarrow as pa
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField(ROW_COL, T.LongType(), False)])
    if len(rows) == 0:
        return spark.createDataFrame([], schema)
    return spark.createDataFrame(pa.table({ROW_COL: pa.array(rows, pa.int64())}), schema)


def join_decisions(pinned, columns, duplicate_rows: np.ndarray, config):
    """The ``columns`` of ``pinned`` with the decisions of ``duplicate_rows`` applied as ``config.mode`` says."""
    from pyspark.sql import functions as F

    dups = row_frame(pinned.sparkSession, duplicate_rows)
    small = len(duplicate_rows) <= config.broadcast_limit
    if small:
        dups = F.broadcast(dups)
    out = [col(c) for c in columns]
    if config.mode == "flag":
        joined = pinned.join(dups.withColumn(DUP_COL, F.lit(True)), ROW_COL, "left")
        out.append(F.coalesce(F.col(DUP_COL), F.lit(False)).alias(config.flag_column))
    else:
        joined = pinned.join(dups, ROW_COL, "left_anti" if config.mode == "filter" else "left_semi")
    if not small:
        joined = joined.orderBy(ROW_COL)
    return joined.select(*out)
