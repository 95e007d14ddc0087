"""A micro-batch's decisions kept by identity, so that a batch Spark replays gets them back in any row order.

A kept index's run record reproduces a run by row id, which depends on the
order of the rows: a micro-batch that Spark replays after a failure may bring
the same rows in another order (another file listing, another split). So a
streamed run also stores its *flagged* rows by identity, in one Parquet file
committed with the index (:data:`FLAGS_DIR`):

- with an id column: each flagged row's id (and, with ``duplicate_of``, the
  row's ``duplicate_of``, ``similarity`` and ``similarity_measure``);
- without one: each flagged text's 128-bit hash (the exact-copy hash, two seeded ``xxhash64``) and
  how many of its copies were flagged. Copies of one text are
  interchangeable: a replay flags that many of them, the last ones in its
  own order (their texts are the same; other columns of the copies may be
  swapped, which is why an id column is the exact choice);
- with ``paragraphs`` (an id column required): also the rows that lost paragraphs, each row's id, whether it was
  flagged and its removed paragraphs' spans (a stream decides paragraphs in ``annotate`` and outputs the mode
  asked: :func:`with_mode`).

:func:`replayed` applies the stored decisions to the replayed batch's rows:
the same rows flagged, nothing decided, nothing inserted.
"""

from __future__ import annotations

import hashlib
import os
from typing import Optional

from lshbloom_udf.common import col
from lshbloom_udf.errors import IndexCorruptError
from lshbloom_udf.index.paths import OUTPUT_TMP_SUFFIX

# Where a streamed run's flags live in the index directory: streams/<query id>/batch-<n>.flags.parquet
FLAGS_DIR = "streams"
H1, H2, COPIES, FLAGGED, IS_FLAG = "_lshb_h1", "_lshb_h2", "_lshb_copies", "_lshb_flagged", "_lshb_is_flag"
_RANK, _ORDER, _MARK = "_lshb_rank", "_lshb_order", "_lshb_mark"


def flags_path(index_dir: str, query_id: str, batch_id: int) -> str:
    """Where the flags of ``query_id``'s micro-batch ``batch_id`` are committed."""
    return os.path.join(os.path.abspath(index_dir), FLAGS_DIR, query_id, f"batch-{batch_id}.flags.parquet")


def text_hashes(text_col: str) -> list:
    """The two 64-bit hashes of a text that identify it (Spark columns :data:`H1`, :data:`H2`): the exact-copy
    hash (:func:`lshbloom_udf.spark.exact.text_hash_columns`)."""
    from lshbloom_udf.spark.exact import text_hash_columns

    return text_hash_columns(text_col, (H1, H2))


def flagged_table(result_df, config, sources: tuple):
    """The stored decisions (an Arrow table) of a streamed run's ``result_df`` (flag mode): its flagged rows, with
    ``sources`` (the ``duplicate_of`` columns, or none); with paragraphs, also the rows that lost paragraphs."""
    from pyspark.sql import functions as F

    from lshbloom_udf.spark.paragraphs import COUNT_COL, REMOVED_COL

    flag = F.col(config.flag_column)
    if config.paragraphs != "off":  # check_stream_config: with an id column
        lost = result_df.where(flag | (F.col(COUNT_COL) > 0))
        return lost.select(col(config.id_column), flag.alias(IS_FLAG), F.col(REMOVED_COL)).toArrow()
    flagged_df = result_df.where(flag)
    if config.id_column is not None:
        return flagged_df.select(col(config.id_column), *(F.col(c) for c in sources)).toArrow()
    counts = flagged_df.select(*text_hashes(config.text_column)).groupBy(H1, H2).agg(F.count(F.lit(1)).alias(FLAGGED))
    return counts.toArrow()


def write_flags(table, final: str) -> tuple[str, str]:
    """Write ``table`` to ``final``'s temporary (``<final>.lshbloom-tmp``, fsynced); (temporary, SHA-256)."""
    import pyarrow.parquet as pq

    tmp = final + OUTPUT_TMP_SUFFIX
    os.makedirs(os.path.dirname(final), exist_ok=True)
    pq.write_table(table, tmp)
    return tmp, _sha256(tmp)


def read_flags(final: str, sha256: Optional[str], what: str):
    """The stored decisions at ``final``, checked against the SHA-256 the run record holds."""
    import pyarrow.parquet as pq

    if not os.path.isfile(final):
        raise IndexCorruptError(f"{final}: the flags of {what} are missing; restore the index from a backup")
    if sha256 is not None and _sha256(final) != sha256:
        raise IndexCorruptError(f"{final}: corrupt (its SHA-256 differs from the one {what}'s run record holds)")
    return pq.read_table(final)


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def replayed(batch_df, table, config, sources: tuple):
    """``batch_df`` with the flag column (``config.flag_column``) and ``sources`` of the stored decisions."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    spark, flag = batch_df.sparkSession, config.flag_column
    marks = F.broadcast(spark.createDataFrame(table).withColumn(_MARK, F.lit(True)))
    columns = [col(c) for c in batch_df.columns]
    if config.id_column is not None:
        joined = batch_df.join(marks, on=config.id_column, how="left")
        is_flagged = F.col(_MARK).isNotNull()
    else:
        hashed = batch_df.select("*", *text_hashes(config.text_column), F.monotonically_increasing_id().alias(_ORDER))
        copies = Window.partitionBy(H1, H2)
        ranked = hashed.withColumn(_RANK, F.row_number().over(copies.orderBy(_ORDER))) \
                       .withColumn(COPIES, F.count(F.lit(1)).over(copies))
        joined = ranked.join(marks, on=[H1, H2], how="left").orderBy(_ORDER)
        is_flagged = F.col(_MARK).isNotNull() & (F.col(_RANK) > F.col(COPIES) - F.col(FLAGGED))
    if config.paragraphs == "off":
        return joined.select(*columns, is_flagged.alias(flag), *(F.col(c) for c in sources))
    from lshbloom_udf.spark.paragraphs import COUNT_COL, REMOVED_COL

    spans = F.coalesce(F.col(REMOVED_COL), F.array().cast("array<array<int>>"))
    return joined.select(*columns, spans.alias(REMOVED_COL), F.size(spans).cast("int").alias(COUNT_COL),
                         (is_flagged & F.col(IS_FLAG)).alias(flag), *(F.col(c) for c in sources))


def with_mode(flagged_df, config, sources: tuple):
    """A flag-mode frame (the input's columns, the flag, ``sources``; with paragraphs, annotate's columns) as
    ``config.mode`` and ``config.paragraphs`` want it."""
    from pyspark.sql import functions as F

    if config.paragraphs == "remove":
        from lshbloom_udf.spark.paragraphs import without_annotated

        flagged_df = without_annotated(flagged_df, config.text_column, config.paragraph_spec)
    flag = F.col(config.flag_column)
    others = [F.col(f"`{c}`") for c in flagged_df.columns if c != config.flag_column and c not in sources]
    if config.mode == "flag":
        return flagged_df
    if config.mode == "filter":
        return flagged_df.where(~flag).select(*others)
    return flagged_df.where(flag).select(*others, *(F.col(c) for c in sources))
