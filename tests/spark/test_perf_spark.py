"""Spark-side performance settings: the blocked backend in deduplicate(), Arrow batch limits, threads per task."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from lshbloom_udf import DedupInputError
from lshbloom_udf import deduplicate as _deduplicate
from spark_support import REFERENCE, datasketch_flags, sample_docs

SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("text", T.StringType())])
ARROW_KEYS = ("spark.sql.execution.arrow.maxRecordsPerBatch", "spark.sql.execution.arrow.maxBytesPerBatch")


@pytest.fixture(scope="module")
def docs_df(spark):
    docs = sample_docs()
    return spark.createDataFrame([(d["id"], d["text"]) for d in docs], SCHEMA).orderBy("id")


def test_blocked_backend_gives_the_reference_decisions(docs_df, spark):
    before = {k: spark.conf.get(k, None) for k in ARROW_KEYS}
    out, summary = _deduplicate(docs_df, order_by="id", bloom="blocked", return_summary=True, progress=False, **REFERENCE)
    rows = sorted(out.collect(), key=lambda r: r["id"])
    theirs = datasketch_flags([r["text"] for r in rows], config=REFERENCE)
    assert [r["is_duplicate"] for r in rows] == theirs
    assert summary["index"]["bytes_on_disk"] > 0
    # The keys stage's Arrow batch limits are the session's again afterwards.
    assert {k: spark.conf.get(k, None) for k in ARROW_KEYS} == before


def test_a_smaller_arrow_batch_setting_is_kept(docs_df, spark):
    spark.conf.set(ARROW_KEYS[0], "100")
    try:
        out = _deduplicate(docs_df, order_by="id", progress=False, **REFERENCE)
        assert out.count() == docs_df.count()
        assert spark.conf.get(ARROW_KEYS[0]) == "100"
    finally:
        spark.conf.unset(ARROW_KEYS[0])


@pytest.mark.filterwarnings("ignore::lshbloom_udf.index.CapacityWarning")
def test_blocked_backend_keeps_an_index_across_runs(docs_df, spark, tmp_path):
    """A kept blocked index remembers the first run's documents, and its capacity is enforced."""
    from lshbloom_udf import IndexFullError, IndexMismatchError, LSHBloomIndex

    index_dir = str(tmp_path / "ix")
    rows = docs_df.collect()
    half = len(rows) // 2
    first = spark.createDataFrame(rows[:half], SCHEMA)
    second = spark.createDataFrame(rows[half:], SCHEMA)
    out1, s1 = _deduplicate(first, order_by="id", bloom="blocked", index_dir=index_dir, expected_docs=len(rows),
                            return_summary=True, progress=False, **REFERENCE)
    flags1 = [r["is_duplicate"] for r in out1.orderBy("id").collect()]
    out2, s2 = _deduplicate(second, order_by="id", bloom="blocked", index_dir=index_dir, return_summary=True,
                            progress=False, **REFERENCE)
    flags2 = [r["is_duplicate"] for r in out2.orderBy("id").collect()]
    theirs = datasketch_flags([r["text"] for r in sorted(rows, key=lambda r: r["id"])], config=REFERENCE)
    assert flags1 + flags2 == theirs
    assert s2["index"]["backend"] == "blocked" and s2["index"]["inserted_before"] == s1["index"]["inserted_total"]
    with LSHBloomIndex.open(index_dir, read_only=True) as index:
        empty = s1["empty_documents"] + s2["empty_documents"]
        assert index.bloom == "blocked" and index.inserted == len(rows) - sum(theirs) - empty == s2["index"]["inserted_total"]
    # Asking for the compatible backend on it is an error naming both, not a silent new index.
    with pytest.raises(IndexMismatchError, match="blocked Bloom filters, asked for pybloomfiltermmap3"):
        _deduplicate(second, index_dir=index_dir, bloom="pybloomfiltermmap3", **REFERENCE)
    with pytest.raises(DedupInputError, match="bloom must be"):
        _deduplicate(docs_df, bloom="quotient", **REFERENCE)
    # Capacity: a fixed blocked index sized for too few documents refuses the run and is left unchanged.
    small = str(tmp_path / "small")
    _deduplicate(first, bloom="blocked", index_dir=small, expected_docs=half, growth="fixed", progress=False, **REFERENCE)
    with pytest.raises(IndexFullError):
        _deduplicate(second, bloom="blocked", index_dir=small, progress=False, **REFERENCE)
    with LSHBloomIndex.open(small, read_only=True) as index:
        assert index.inserted == half - sum(flags1) - s1["empty_documents"]
