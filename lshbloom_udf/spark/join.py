"""Stage 5, join: the decisions joined back to the pinned rows (lazy: Spark runs it when the result is used).

The duplicates' row ids come back as a small DataFrame built from Arrow and
are joined to the pinned input by row id (the input is not read again):
``flag`` mode is a left join giving the boolean flag column, ``filter`` an
anti join, ``duplicates`` a semi join. When the duplicates are few enough to
broadcast (``broadcast_limit``) the join keeps the pinned rows' order;
otherwise the output is sorted back by row id.
"""

from __future__ import annotations

import numpy as np

from lshbloom_udf.common import col
from lshbloom_udf.spark.frames import local_frame, row_frame
from lshbloom_udf.spark.keys import DUP_COL, ROW_COL


def join_decisions(pinned, columns, duplicate_rows: np.ndarray, config, verified=None):
    """The ``columns`` of ``pinned`` with the decisions of ``duplicate_rows`` applied as ``config.mode`` says
    (and ``duplicate_count`` from ``verified`` when the config asks for it)."""
    from pyspark.sql import functions as F

    small = len(duplicate_rows) <= config.broadcast_limit
    dups = row_frame(pinned.sparkSession, duplicate_rows, small)
    if small:
        dups = F.broadcast(dups)
    out = [col(c) for c in columns]
    if config.mode == "flag":
        joined = pinned.join(dups.withColumn(DUP_COL, F.lit(True)), ROW_COL, "left")
        out.append(F.coalesce(F.col(DUP_COL), F.lit(False)).alias(config.flag_column))
    else:
        joined = pinned.join(dups, ROW_COL, "left_anti" if config.mode == "filter" else "left_semi")
    if config.duplicate_count:
        joined, count = with_counts(joined, verified, config)
        out.append(count)
    if not small:
        joined = joined.orderBy(ROW_COL)
    return joined.select(*out)


COUNT_COL = "duplicate_count"


def duplicate_counts(verified) -> tuple[np.ndarray, np.ndarray]:
    """The kept rows that removed rows of this run name (sorted row ids) and how many name each."""
    in_run = verified.of_rows[verified.of_rows >= 0]
    rows, counts = np.unique(in_run, return_counts=True)
    return rows.astype(np.int64), counts.astype(np.int64)


def with_counts(joined, verified, config):
    """``joined`` with the counts of :func:`duplicate_counts` joined by row id, and the ``duplicate_count`` column
    to select: the count (0 if none) on kept rows, null on removed ones (``DUP_COL`` set: mode ``flag``)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    rows, counts = duplicate_counts(verified)
    schema = T.StructType([T.StructField(ROW_COL, T.LongType(), False), T.StructField(COUNT_COL, T.LongType(), False)])
    small = len(rows) <= config.broadcast_limit
    frame = local_frame(joined.sparkSession, {ROW_COL: rows, COUNT_COL: counts}, schema, small)
    joined = joined.join(F.broadcast(frame) if small else frame, ROW_COL, "left")
    count = F.coalesce(F.col(COUNT_COL), F.lit(0).cast("long"))
    if config.mode == "flag":
        count = F.when(F.col(DUP_COL).isNull(), count)
    return joined, count.alias(COUNT_COL)


SOURCE_COLS = ("duplicate_of", "similarity", "similarity_measure")
ROW_ID_COL = "row_id"


def join_sources(pinned, columns, verified, config, crossrun=None):
    """Like :func:`join_decisions` (modes ``flag`` and ``duplicates``) for the duplicates of ``verified``
    (:class:`~lshbloom_udf.spark.verify.rule.Verified`), with the columns ``duplicate_of``, ``similarity`` and
    ``similarity_measure`` of each (null for the rows kept, and where ``of_rows`` is -1: not verifiable).

    ``duplicate_of`` is the kept document's ``id_column`` value, or without
    one its row id; then the output also has a column ``row_id`` (every row's).
    ``crossrun`` (:class:`~lshbloom_udf.spark.verify.crossrun.CrossRun`): the earlier runs' documents that ``of_rows``
    ``<= -2`` name (their id, or that run's row id, cast to the column's type).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from lshbloom_udf.spark.verify.rule import MEASURES

    of, prior = "_lshb_of", "_lshb_prior"
    schema = T.StructType([T.StructField(ROW_COL, T.LongType(), False), T.StructField(of, T.LongType(), True),
                           T.StructField(SOURCE_COLS[1], T.DoubleType(), True),
                           T.StructField(SOURCE_COLS[2], T.StringType(), True),
                           T.StructField(prior, T.StringType(), True)])
    rows, in_run = verified.rows, verified.of_rows >= 0
    earlier = (crossrun.source_values(verified.of_rows) if crossrun is not None
               else np.full(len(rows), None, dtype=object))
    known = in_run | (earlier != None)  # noqa: E711 (element-wise)
    null = np.array(None, dtype=object)  # what np.where makes of None (numpy's stubs take no None there)

    def nullable(values):  # None where the source is unknown (an object array: local_frame keeps the Nones)
        return np.where(known, np.asarray(values, dtype=object), null)

    names = np.array(MEASURES, dtype=object)[np.where(known, verified.measure, 0)]
    spark = pinned.sparkSession
    small = len(rows) <= config.broadcast_limit
    of_values = np.where(in_run, np.asarray(verified.of_rows.tolist(), dtype=object), null)
    dups = local_frame(spark, {ROW_COL: rows, of: of_values,
                               SOURCE_COLS[1]: nullable(verified.similarity.tolist()),
                               SOURCE_COLS[2]: nullable(names), prior: earlier}, schema, small)
    hint = F.broadcast if small else (lambda d: d)
    out = [col(c) for c in columns]
    id_col = config.id_column
    if id_col is None:
        dups = dups.select(ROW_COL, F.coalesce(F.col(of), F.col(prior).cast("long")).alias(SOURCE_COLS[0]),
                           *SOURCE_COLS[1:])
        out.append(F.col(ROW_COL).alias(ROW_ID_COL))
    else:
        of_ids = (pinned.select(F.col(ROW_COL).alias(of), col(id_col).alias(SOURCE_COLS[0]))
                  .join(hint(dups.select(of)), of, "left_semi"))
        id_type = pinned.schema[id_col].dataType
        dups = dups.join(hint(of_ids), of, "left").select(
            ROW_COL, F.coalesce(F.col(SOURCE_COLS[0]), F.col(prior).cast(id_type)).alias(SOURCE_COLS[0]),
            *SOURCE_COLS[1:])
    joined = pinned.join(hint(dups.withColumn(DUP_COL, F.lit(True))), ROW_COL,
                         "left" if config.mode == "flag" else "inner")
    if config.mode == "flag":
        out.append(F.coalesce(F.col(DUP_COL), F.lit(False)).alias(config.flag_column))
    if config.duplicate_count:
        joined, count = with_counts(joined, verified, config)
        out.append(count)
    if not small:
        joined = joined.orderBy(ROW_COL)
    return joined.select(*out, *(F.col(c) for c in SOURCE_COLS))
