"""exact_copies: byte-identical copies decided before the pass give the decisions the pass and verification give
without it, and say so (similarity_measure "exact", the summary's exact_duplicates)."""

from __future__ import annotations

import random

import pytest
from pyspark.sql import types as T

from lshbloom_udf import deduplicate
from evaluation import generator as G
from evaluation.synthetic import synthetic_sources

SCHEMA = T.StructType([T.StructField("pos", T.LongType()), T.StructField("id", T.StringType()),
                       T.StructField("text", T.StringType())])


@pytest.fixture(scope="module")
def corpus():
    """A stream with near copies and distinct documents, then byte-identical copies of some of its documents
    (kept ones and flagged ones alike), of empty and punctuation-only texts; ``exact``: the ids whose text equals
    an earlier row's (and has a letter)."""
    sources, _ = G.prepare_sources(synthetic_sources(260, seed=5), min_words=50)
    stream = G.make_stream(sources, 300, 0.3, seed=7)
    texts = [d.text for d in stream.docs] + ["", "", "  ...  ", "  ...  ", None, None]
    rng = random.Random(11)
    for _ in range(150):  # copies of earlier rows, later in the stream
        texts.append(texts[rng.randrange(len(texts))])
    texts.append(texts[0].upper())  # not byte-identical: the pass decides it
    rows = [(i, f"d{i}", t) for i, t in enumerate(texts)]
    seen, exact = set(), set()
    for i, t in enumerate(texts):
        if t is not None and t in seen and any(c.isalnum() for c in t):
            exact.add(f"d{i}")
        seen.add(t)
    return rows, exact


def run(spark, rows, **settings):
    df = spark.createDataFrame(rows, SCHEMA).repartitionByRange(3, "pos").sortWithinPartitions("pos")
    out, summary = deduplicate(df, id_column="id", progress=False, return_summary=True,
                               **{"duplicate_of": True, **settings})
    return {r["id"]: r for r in out.collect()}, summary


def test_exact_copies_same_decisions_and_said(spark, corpus):
    rows, exact = corpus
    fast, fast_summary = run(spark, rows)
    slow, slow_summary = run(spark, rows, exact_copies=False)
    assert {i for i, r in fast.items() if r["is_duplicate"]} == {i for i, r in slow.items() if r["is_duplicate"]}
    assert exact and exact <= {i for i, r in fast.items() if r["is_duplicate"]}
    # The copies are said "exact", and only they; each names a kept document.
    assert {i for i, r in fast.items() if r["similarity_measure"] == "exact"} <= exact
    said_exact = {i for i, r in fast.items() if r["similarity_measure"] == "exact"}
    for i in exact - said_exact:  # a copy of a flagged document: its source's source and measure
        assert fast[i]["similarity_measure"] in ("jaccard", "containment")
    for i, r in fast.items():
        if r["is_duplicate"]:
            assert r["duplicate_of"] is not None and not fast[r["duplicate_of"]]["is_duplicate"]
        if r["similarity_measure"] == "exact":
            assert r["similarity"] == 1.0
            assert fast[r["duplicate_of"]]["text"] == r["text"]
    assert len(said_exact) > len(exact) // 2
    assert not any(r["similarity_measure"] == "exact" for r in slow.values())
    assert fast_summary["exact_duplicates"] == len(exact)
    assert slow_summary["exact_duplicates"] is None
    assert (fast_summary["duplicates"], fast_summary["empty_documents"]) == (
        slow_summary["duplicates"], slow_summary["empty_documents"])
    # The copies never reached the pass or verification.
    assert fast_summary["verify"]["pass_flagged"] == slow_summary["verify"]["pass_flagged"]
    assert fast_summary["verify"]["candidate_pairs"] < slow_summary["verify"]["candidate_pairs"]
    # The pass (any-earlier under verification: it inserts every document it sees) saw every document but them.
    assert slow_summary["index"]["inserted_total"] - fast_summary["index"]["inserted_total"] == len(exact)


@pytest.mark.slow
@pytest.mark.parametrize("settings", [dict(verify=False, duplicate_of=False), dict(pass_mode="sharded")])
def test_exact_copies_other_paths(spark, corpus, settings):
    rows, exact = corpus
    fast, fast_summary = run(spark, rows, **settings)
    slow, slow_summary = run(spark, rows, exact_copies=False, **settings)
    assert {i for i, r in fast.items() if r["is_duplicate"]} == {i for i, r in slow.items() if r["is_duplicate"]}
    assert exact <= {i for i, r in fast.items() if r["is_duplicate"]}
    assert fast_summary["exact_duplicates"] == len(exact)
    assert fast_summary["empty_documents"] == slow_summary["empty_documents"]


@pytest.mark.parametrize("exact", [True, False])
def test_copies_of_an_earlier_run_are_exact_by_its_records(spark, corpus, tmp_path, exact):
    """A kept index: the second run's byte-identical copies of documents the first run kept are verified against
    the first run's records as exact (similarity 1), whatever exact_copies is; its near copies by estimate."""
    rows, _ = corpus
    first = [(i, f"a{i}", t) for i, t in enumerate(r[2] for r in rows[:150])]
    index = str(tmp_path / "index")
    kept_first, _ = run(spark, first, index_dir=index, exact_copies=exact)
    kept_ids = [i for i, r in kept_first.items() if not r["is_duplicate"] and r["text"] and r["text"].strip()]
    text_of = {r[1]: r[2] for r in first}
    second = [(i, f"b{i}", text_of[k]) for i, k in enumerate(kept_ids[:20])]
    second += [(20 + i, f"n{i}", text_of[k][: int(len(text_of[k]) * 0.9)]) for i, k in enumerate(kept_ids[20:30])]
    out, summary = run(spark, second, index_dir=index, exact_copies=exact)
    for i, k in enumerate(kept_ids[:20]):
        r = out[f"b{i}"]
        assert r["is_duplicate"] and r["duplicate_of"] == k and r["similarity_measure"] == "exact", r
        assert r["similarity"] == 1.0
    near = [out[f"n{i}"] for i in range(10)]
    assert all(r["is_duplicate"] and r["similarity_measure"] != "exact" for r in near)
    assert summary["verify"]["cross_run"]["verified"] == 30
    assert summary["exact_duplicates"] == (0 if exact else None)  # within the run: none
