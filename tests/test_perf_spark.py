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


def test_blocked_backend_refuses_a_kept_index(docs_df, tmp_path):
    with pytest.raises(DedupInputError, match="temporary index only"):
        _deduplicate(docs_df, index_dir=str(tmp_path / "ix"), bloom="blocked", **REFERENCE)
    with pytest.raises(DedupInputError, match="bloom must be"):
        _deduplicate(docs_df, bloom="cuckoo", **REFERENCE)
