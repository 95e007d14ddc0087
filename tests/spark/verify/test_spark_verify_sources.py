"""Verification's two candidate sources (lshbloom_udf/spark/verify/sources.py) and its native parts.

- The kept key spool (socket stream, candidates on the driver) and the Spark
  path (keys computed again, Spark joins) give the same candidate pairs and the
  same verified output on the same input, with and without a round 2, with no
  flag and with no document; also when the spool is too large to keep (the
  run falls back to the Spark path); over retried keys tasks (a real
  spark-submit): tests/spark/passes/test_spark_stream.py. Similarities computed on the executors (texts over the
  driver's budget) equal those computed on the driver.
- The spool is gone after a verified run.
- The Spark path's rounds on the driver, by Spark joins, and without its filter past the driver's budget give
  the same output; Arrow batches stream every row of every partition to the driver.

The matching itself, without Spark: tests/spark/verify/test_core_verify_candidates.py.
"""

from __future__ import annotations

import os
import tempfile

import pytest

from lshbloom_udf import deduplicate
from lshbloom_udf.spark.verify import sources as verify_sources
from spark_support import sample_docs

SOURCE_COLS = ("is_duplicate", "duplicate_of", "similarity", "similarity_measure")


@pytest.fixture(scope="module")
def docs():
    return list(sample_docs(300, seed=23))


def _frame(spark, docs, partitions: int = 5):
    df = spark.createDataFrame([(d["id"], d["text"]) for d in docs], "id string, text string")
    return df.repartitionByRange(partitions, "id").sortWithinPartitions("id")


def _verified(spark, docs, transfer: str, **settings):
    out, summary = deduplicate(_frame(spark, docs), id_col="id", key_transfer=transfer, duplicate_of=True,
                               chunk_rows=16, progress=False, return_summary=True, **settings)
    rows = {r["id"]: tuple(r[c] for c in SOURCE_COLS) for r in out.collect()}
    return rows, summary["verify"]


# A strict verify threshold unflags most flags in round 1, so round 2 has work; the defaults' rule has little.
@pytest.mark.parametrize("settings", [{}, {"verify_threshold": 0.9, "containment_threshold": None}])
def test_the_spool_and_the_spark_path_verify_alike(spark, docs, settings):
    spool, s_spool = _verified(spark, docs, "socket", **settings)
    keyed, s_keyed = _verified(spark, docs, "spark", **settings)
    assert "bloom" not in s_spool["stages"] and "bloom" in s_keyed["stages"]  # each took its own source
    assert spool == keyed
    for key in ("pass_flagged", "kept_flagged", "candidate_pairs", "unflagged", "by_containment", "candidates_beyond_bound"):
        assert s_spool[key] == s_keyed[key], key
    assert s_spool["kept_flagged"] > 10 and s_spool["unflagged"] > 0
    if settings:
        assert "round2" in s_spool["stages"]


@pytest.mark.slow
def test_the_spark_paths_rounds_on_the_driver_equal_its_spark_joins(spark, docs, monkeypatch):
    """The Spark path matches round 1's kept pairs and runs round 2 natively on the driver while the flagged
    documents' keys fit its arrays budget, by Spark joins past it, and without its filter or broadcast row ids past
    one collect of the driver: the same pairs, the same output."""
    from lshbloom_udf.spark.verify import spark_source

    settings = {"verify_threshold": 0.9, "containment_threshold": None}
    calls: list = []
    for name in ("match_kept", "shared_key_pairs"):
        real = getattr(spark_source, name)
        monkeypatch.setattr(spark_source, name, lambda *a, _real=real, _name=name: calls.append(_name) or _real(*a))
    on_driver, s_driver = _verified(spark, docs, "spark", **settings)
    assert calls == ["match_kept", "shared_key_pairs"]  # both rounds had documents, and ran on the driver
    # round 1's flagged documents past the budget, round 2's within it: round 2 brings its keys to the driver
    answers = iter([False, True])
    monkeypatch.setattr(spark_source.SparkCandidates, "_on_driver", lambda self, documents: next(answers))
    calls.clear()
    mixed, s_mixed = _verified(spark, docs, "spark", **settings)
    assert calls == ["shared_key_pairs"]
    monkeypatch.setattr(spark_source.SparkCandidates, "_on_driver", lambda self, documents: False)  # past any budget
    calls.clear()
    by_join, s_join = _verified(spark, docs, "spark", **settings)
    assert not calls
    # past the driver's collect budget: no Bloom filter (every kept pair joined), the row ids semi-joined as a frame
    from lshbloom_udf.memory import DriverMemory

    monkeypatch.setattr(spark_source.SparkCandidates, "_filter_fits", lambda self, documents: False)
    monkeypatch.setattr(DriverMemory, "broadcast_rows", property(lambda self: 0))
    unbounded, s_unbounded = _verified(spark, docs, "spark", **settings)
    assert "bloom" in s_unbounded["stages"] and not calls
    assert on_driver == mixed == by_join == unbounded
    for key in ("kept_flagged", "candidate_pairs", "unflagged", "candidates_beyond_bound"):
        assert s_driver[key] == s_mixed[key] == s_join[key] == s_unbounded[key], key


def test_no_flag_and_no_document(spark, docs):
    distinct = [d for d in docs if d["source"] < 0][:1] + [{"id": f"d{i}", "text": f"word{i} " * 30}
                                                          for i in range(40)]
    rows, s = _verified(spark, distinct, "socket")
    assert s["pass_flagged"] == 0 and s["candidate_pairs"] == 0 and not any(r[0] for r in rows.values())
    empty = spark.createDataFrame([], "id string, text string")
    out, summary = deduplicate(empty, id_col="id", duplicate_of=True, progress=False, return_summary=True)
    assert out.count() == 0 and summary["verify"]["pass_flagged"] == 0


@pytest.mark.slow
def test_a_spool_too_large_for_its_disk_falls_back_to_the_spark_path(spark, docs, monkeypatch, caplog):
    want, _ = _verified(spark, docs, "spark")
    monkeypatch.setattr(verify_sources, "SPOOL_SHARE_OF_FREE", 0.0)
    with caplog.at_level("INFO", logger="lshbloom_udf"):
        got, s = _verified(spark, docs, "socket")
    assert "bloom" in s["stages"] and got == want
    assert "verification computes the band keys again" in caplog.text


def test_similarities_on_the_executors_equal_those_on_the_driver(spark, docs, caplog):
    want, s_want = _verified(spark, docs, "socket", verify_threshold=0.9, containment_threshold=0.8)
    with caplog.at_level("INFO", logger="lshbloom_udf"):  # every candidate text over the budget
        got, s_got = _verified(spark, docs, "socket", verify_threshold=0.9, containment_threshold=0.8,
                               verify_driver_bytes=0)
    assert "similarities on the executors" in caplog.text
    assert got == want and s_got["candidate_pairs"] == s_want["candidate_pairs"]


def test_the_spool_is_removed_after_a_verified_run(spark, docs, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _verified(spark, docs, "socket")
    assert [p for p in os.listdir(tmp_path) if p.startswith("lshbloom-keys-")] == []


# -- the driver's pieces, against quadratic references ------------------------------------------------


def test_iter_arrow_brings_every_row_of_every_partition(spark):
    from lshbloom_udf.common import iter_arrow

    df = spark.createDataFrame([(i, None if i % 5 == 0 else f"text {i}") for i in range(2000)], "r long, t string")
    rows = {}
    for batch in iter_arrow(df.repartition(3)):
        rows.update(zip(batch.column("r").to_pylist(), batch.column("t").to_pylist()))
    assert rows == {i: None if i % 5 == 0 else f"text {i}" for i in range(2000)}
