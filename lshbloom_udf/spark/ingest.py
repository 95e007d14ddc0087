"""What a run checks about its input once it is keyed: unique ids, and whether a kept index already ingested it.

A kept index records each committed run with two fingerprints of its keyed
documents (docs/reliability.md): the *content* fingerprint depends only on
the multiset of (band keys, active) rows, the *sequence* fingerprint also on
each document's place in the processing order. The same content with the same
sequence reproduces the earlier run's flags; the same content in another
order cannot be reproduced and is refused (:class:`AlreadyIngestedError`)
unless the user forces a new ingestion.
"""

from __future__ import annotations

import hashlib
from typing import Optional

from lshbloom_udf.errors import AlreadyIngestedError, DedupInputError
from lshbloom_udf.spark.keys import ACTIVE_COL, KEYS_COL, ROW_COL


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def col(name: str):
    from pyspark.sql import functions as F

    return F.col(quote(name))


def check_unique_ids(keyed, id_col: str) -> None:
    from pyspark.sql import functions as F

    nulls = keyed.where(col(id_col).isNull()).limit(1).count()
    if nulls:
        raise DedupInputError(f"id column {id_col!r} has null values; every row needs an id")
    dups = (
        keyed.groupBy(col(id_col).alias("id"))
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


def fingerprints(keyed) -> tuple[str, str]:
    """(content, sequence) fingerprints of the keyed documents."""
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


def prior_run(txn, keyed, documents: int, params, force_new_ingest: bool,
              insert: str = "first") -> tuple[Optional[dict], str, str]:
    """(the committed run that already ingested these documents or None, content fp, sequence fp).

    Raises :class:`AlreadyIngestedError` when that run's flags cannot be
    reproduced (other order or partitioning, or another decision rule
    ``insert``) and ``force_new_ingest`` is off.
    """
    content_fp, sequence_fp = fingerprints(keyed)
    prior = txn.find_run(content_fp, params)
    if prior is not None and not force_new_ingest and prior.get("insert", "first") != insert:
        raise AlreadyIngestedError(
            f"{txn.path}: these {documents:,} documents were already ingested by run {prior['run_id']} under the "
            f"decision rule insert={prior.get('insert', 'first')!r}; its flags are not those of insert={insert!r}, "
            "and ingesting them again would flag every one as a duplicate of itself. Use that run's output, or "
            "force a new ingestion with --force-new-ingest (force_new_ingest=True)."
        )
    if prior is not None and not force_new_ingest and prior.get("sequence_fingerprint") != sequence_fp:
        raise AlreadyIngestedError(
            f"{txn.path}: these {documents:,} documents were already ingested by run {prior['run_id']} "
            f"(committed {prior.get('committed_at', '?')}, output {prior.get('output')}), in another order or "
            "partitioning, so that run's flags cannot be reproduced here and ingesting them again would flag "
            "every one as a duplicate of itself. Use that run's output, or force a new ingestion with "
            "--force-new-ingest (force_new_ingest=True)."
        )
    return prior, content_fp, sequence_fp
