"""``lshbloom check-index DIR``: the full check of a kept index, either kind, without running a job."""

from __future__ import annotations

import os

from lshbloom_udf.index.transaction import IndexTransaction


def _is_sharded(path: str) -> bool:
    from lshbloom_udf.spark.sharded_index import MANIFEST_PREFIX, MANIFEST_SUFFIX

    return "://" in path or (os.path.isdir(path) and any(
        n.startswith(MANIFEST_PREFIX) and n.endswith(MANIFEST_SUFFIX) for n in os.listdir(path)))


def check_index(path: str) -> str:
    """Check every file of the index at ``path``; a one-line report, or the error naming the damaged file.

    A driver-pass index: every band file against its checksum and every run's
    duplicates against their SHA-256 (the exclusive lock is taken, so a
    crashed run's commit is finished first). A sharded index: every filter
    part of the committed version against its checksum (a local Spark
    session reads them).
    """
    if _is_sharded(path):
        return _check_sharded(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path}: no such index directory")
    txn = IndexTransaction(path)
    try:
        done = txn.verify()
    finally:
        txn.close()
    if not done["band_files"]:
        return f"{path}: no index here yet (nothing to check)"
    sums = "checksums match" if done["checksums"] else "no checksums yet (written before them; its next commit records them)"
    return f"{path}: ok: {done['band_files']} band files ({sums}), {done['runs']} run record(s) verified"


def _check_sharded(path: str) -> str:
    from pyspark.sql import SparkSession

    from lshbloom_udf.spark.sharded_index import ShardedTransaction

    spark = SparkSession.getActiveSession() or SparkSession.builder.master("local[1]").appName(
        "lshbloom-check-index").getOrCreate()
    done = ShardedTransaction(path, spark).verify()
    if not done.get("checksums", True):
        return f"{path}: filter parts written before checksums: not verified (the next run records them)"
    return f"{path}: ok: {done['filter_parts']} filter part(s) match their checksums"
