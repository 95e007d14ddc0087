"""Cluster sizes: ``duplicate_count`` on kept rows equals the rows whose ``duplicate_of`` names them, in one run and
across runs of a kept index (the summary's ``verify.clusters``)."""

from __future__ import annotations

from collections import Counter

import pytest

from lshbloom_udf.errors import ConfigError
from lshbloom_udf.spark import deduplicate
from spark_support import sample_docs


def _frame(spark, docs):
    return spark.createDataFrame([(d["id"], d["text"]) for d in docs], "id string, text string")


def test_duplicate_count_equals_the_rows_naming_each_kept_row(spark):
    df = _frame(spark, sample_docs())
    result = deduplicate(df, id_col="id", duplicate_of=True, duplicate_count=True, order_by="id", progress=False,
                         return_summary=True)
    rows = result.df.collect()
    named = Counter(r["duplicate_of"] for r in rows if r["is_duplicate"])
    assert named, "the sample has near-duplicates"
    for r in rows:
        if r["is_duplicate"]:
            assert r["duplicate_count"] is None
        else:
            assert r["duplicate_count"] == named.get(r["id"], 0), r["id"]
    clusters = result.summary["verify"]["clusters"]
    assert clusters["kept_with_duplicates"] == len(named)
    assert sum(int(k.split("-")[0]) <= n + 1 <= int(k.split("-")[-1]) for k in clusters["group_sizes"]
               for n in named.values()) == len(named)
    top = max(named.values())
    assert clusters["largest"][0]["duplicate_count"] == top and named[clusters["largest"][0]["duplicate_of"]] == top
    # mode filter: the kept rows only, the same counts
    kept = deduplicate(df, id_col="id", mode="filter", duplicate_count=True, order_by="id", progress=False).collect()
    assert {r["id"]: r["duplicate_count"] for r in kept} == {r["id"]: r["duplicate_count"] for r in rows
                                                            if not r["is_duplicate"]}


def test_across_runs_the_summary_counts_the_earlier_sources(spark, tmp_path):
    docs = [d for d in sample_docs() if d["text"]]
    index = str(tmp_path / "index")
    first = deduplicate(_frame(spark, docs[:250]), id_col="id", duplicate_of=True, duplicate_count=True,
                        index_dir=index, progress=False).collect()
    second = deduplicate(_frame(spark, docs[250:]), id_col="id", duplicate_of=True, duplicate_count=True,
                         index_dir=index, progress=False, return_summary=True)
    first_ids = {r["id"] for r in first if not r["is_duplicate"]}
    out = second.df.collect()
    earlier = Counter(r["duplicate_of"] for r in out if r["is_duplicate"] and r["duplicate_of"] in first_ids)
    assert earlier, "the second half has copies of the first"
    clusters = second.summary["verify"]["clusters"]
    assert clusters["earlier_runs"] == sum(earlier.values())
    assert {(e["duplicate_of"], e["duplicate_count"]) for e in clusters["largest_earlier"]} <= set(earlier.items())
    assert clusters["largest_earlier"][0]["duplicate_count"] == max(earlier.values())
    # this run's kept rows count this run's removed rows only
    here = Counter(r["duplicate_of"] for r in out if r["is_duplicate"] and r["duplicate_of"] not in first_ids)
    assert all(r["duplicate_count"] == here.get(r["id"], 0) for r in out if not r["is_duplicate"])


def test_duplicate_count_needs_verification_and_kept_rows():
    from lshbloom_udf.config import DedupConfig

    with pytest.raises(ConfigError, match="duplicate_count needs verify"):
        DedupConfig(duplicate_count=True, verify=False)
    with pytest.raises(ConfigError, match="nothing to show in mode 'duplicates'"):
        DedupConfig(duplicate_count=True, mode="duplicates")
