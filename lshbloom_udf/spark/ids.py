"""Unique ids: a run given an id column refuses null or repeated ids, naming them.

Two ways, the same answer:

- **From the keys stage** (the driver pass over the socket stream): each task
  sends its partition's 64-bit hashes of the ids (Spark's ``xxhash64``) after
  its keys (:mod:`lshbloom_udf.spark.passes.driver.sender`), and the driver
  sorts them all (:class:`IdHashes`: 16 bytes a document while sorted, 160 MB
  at 10⁷; only while that fits the arrays' share of the driver's memory,
  :func:`hashes_fit`). A hash seen twice
  makes its ids *suspects*: two equal ids, or two ids of one hash (about
  ``n²/2⁶⁵`` pairs: 3·10⁻⁶ at 10⁷). Only the suspects' rows are then counted
  by id in Spark (:func:`check_id_hashes`), so the check is exact without a
  shuffle of every id.
- **One aggregation** (:func:`check_ids`, with the input's fingerprints,
  ``count_distinct``: a shuffle of every id), where no keys stage sends hashes
  (the sharded pass, Spark Connect) or the check must come before the pass (a
  kept index whose committed runs this input may repeat).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lshbloom_udf.common import col
from lshbloom_udf.errors import DedupInputError

# The keys stage's column of the rows' id hashes (null where the id is).
ID_HASH_COL = "_lshb_id_hash"
# Repeated ids an error names.
NAMED = 10
# The driver's bytes a document while its id hashes are sorted (the hashes and their sorted copy).
DRIVER_BYTES_PER_ID = 16


def hashes_fit(documents: int, memory) -> bool:
    """Whether the driver may sort ``documents`` id hashes within ``memory``'s (a
    :class:`~lshbloom_udf.memory.DriverMemory`) arrays budget; else the ids are aggregated in Spark."""
    return documents * DRIVER_BYTES_PER_ID <= memory.arrays


def id_hash_column(id_col: str):
    """``xxhash64`` of the id, null where the id is null (:data:`ID_HASH_COL`)."""
    from pyspark.sql import functions as F

    return F.when(col(id_col).isNotNull(), F.xxhash64(col(id_col))).alias(ID_HASH_COL)


def batch_id_hashes(batch) -> np.ndarray:
    """The non-null id hashes of an Arrow batch with :data:`ID_HASH_COL` (int64)."""
    hashes = batch.column(batch.schema.get_field_index(ID_HASH_COL))
    if hashes.null_count:
        hashes = hashes.drop_null()
    return np.asarray(hashes.to_numpy(zero_copy_only=False), dtype=np.int64)


@dataclass
class IdHashes:
    """The id hashes of the partitions the keys stage sent whole (one attempt each), with their documents."""

    parts: list = field(default_factory=list)
    documents: int = 0

    def add(self, hashes: np.ndarray, documents: int) -> None:
        """A partition's ``documents`` rows, of which ``hashes`` are the non-null ids' hashes."""
        self.parts.append(hashes)
        self.documents += documents

    @property
    def nulls(self) -> int:
        return self.documents - sum(len(p) for p in self.parts)

    def suspects(self) -> np.ndarray:
        """The sorted hashes seen more than once."""
        if not self.parts:
            return np.zeros(0, np.int64)
        hashes = np.sort(np.concatenate(self.parts))
        repeated = hashes[1:][hashes[1:] == hashes[:-1]]
        return np.unique(repeated)


def check_id_hashes(pinned, id_col: str, hashes: IdHashes) -> None:
    """Refuse null or repeated ids (:class:`DedupInputError`) from the keys stage's :class:`IdHashes`: only the
    suspects' rows are counted by id in Spark."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from lshbloom_udf.spark.frames import local_frame

    if hashes.nulls:
        raise _null_ids(id_col)
    suspects = hashes.suspects()
    if not len(suspects):
        return
    schema = T.StructType([T.StructField(ID_HASH_COL, T.LongType(), False)])
    frame = local_frame(pinned.sparkSession, {ID_HASH_COL: suspects}, schema, True)
    rows = pinned.select(col(id_col).alias("id"), id_hash_column(id_col)).join(F.broadcast(frame), ID_HASH_COL,
                                                                            "left_semi")
    _refuse_repeated(rows, id_col)


def check_ids(pinned, id_col: str, facts) -> None:
    """Refuse null or repeated ids (:class:`DedupInputError`) from :func:`~lshbloom_udf.spark.ingest.inspect_input`'s
    facts, naming the repeated ones."""
    if facts.null_ids:
        raise _null_ids(id_col)
    if facts.distinct_ids != facts.documents:
        _refuse_repeated(pinned.select(col(id_col).alias("id")), id_col)


def _null_ids(id_col: str) -> DedupInputError:
    return DedupInputError(f"id column {id_col!r} has null values; every row needs an id")


def _refuse_repeated(rows, id_col: str) -> None:
    """Raise naming the ids of ``rows`` (a column ``id``) that repeat; nothing if none does."""
    from pyspark.sql import functions as F

    dups = (
        rows.groupBy("id")
        .agg(F.count(F.lit(1)).alias("n"))
        .where(F.col("n") > 1)
        .orderBy(F.col("n").desc(), F.col("id"))
        .limit(NAMED + 1)
        .collect()
    )
    if not dups:
        return
    shown = ", ".join(f"{r['id']!r} ({r['n']} rows)" for r in dups[:NAMED])
    more = " and more" if len(dups) > NAMED else ""
    raise DedupInputError(f"id column {id_col!r} is not unique: duplicated ids {shown}{more}")
