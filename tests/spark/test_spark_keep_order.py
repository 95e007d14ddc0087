"""The keep order: ``--order-by`` SQL sort expressions, ties broken by the id, the same output in any
partitioning and row order, and each group's highest-scoring member kept (a reference in Python)."""

from __future__ import annotations

import random

import pytest

from lshbloom_udf.errors import ConfigError, DedupInputError
from lshbloom_udf.setting import order_by, split_sort_list
from lshbloom_udf.spark import deduplicate
from test_spark_job import _load_job, run_job


def grouped_docs(groups: int = 30, seed: int = 5) -> list[dict]:
    """``groups`` families of 1-5 near-copies (a 300-word text, each copy with a different last word) that share
    no words with another family; scores 1-3, so that a family often has tied top scores."""
    rnd = random.Random(seed)
    docs = []
    for g in range(groups):
        base = " ".join(f"g{g}w{rnd.randrange(10_000)}" for _ in range(300))
        for m in range(rnd.randint(1, 5)):
            docs.append({"id": len(docs), "group": g, "score": rnd.randint(1, 3), "text": f"{base} end{m}"})
    ids = list(range(len(docs)))
    rnd.shuffle(ids)  # ids unrelated to the input order
    for d, i in zip(docs, ids):
        d["id"] = i
    return docs


def reference_kept(docs) -> set:
    """Per family the member of highest score, ties to the lowest id."""
    best: dict = {}
    for d in docs:
        key = (-d["score"], d["id"])
        if d["group"] not in best or key < best[d["group"]][0]:
            best[d["group"]] = (key, d["id"])
    return {i for _, i in best.values()}


def test_sort_lists_split_at_top_level_commas():
    assert split_sort_list("score DESC, coalesce(a, b) ASC NULLS LAST,`x,y`") == [
        "score DESC", "coalesce(a, b) ASC NULLS LAST", "`x,y`"]
    assert order_by("order_by", ["a DESC, b", "c"]) == ("a DESC", "b", "c")
    for bad in ("a,,b", "f(a", "a)", "'open"):
        with pytest.raises(ConfigError, match="order_by"):
            order_by("order_by", bad)


def test_an_expression_that_does_not_resolve_is_named(spark):
    df = spark.createDataFrame([(1, "a b c")], "id long, text string")
    with pytest.raises(DedupInputError, match=r"order-by expression 'nope DESC' does not resolve.*columns \['id', 'text'\]"):
        deduplicate(df, order_by="nope DESC", progress=False)
    with pytest.raises(DedupInputError, match=r"'-len'.*'name DESC' sorts descending"):
        deduplicate(df, order_by="-len", progress=False)


@pytest.mark.slow
def test_score_desc_on_the_command_line_keeps_each_familys_best_in_any_partitioning(spark, tmp_path, capsys):
    job = _load_job()
    docs = grouped_docs()
    expected = reference_kept(docs)
    df = spark.createDataFrame([(d["id"], d["group"], d["score"], d["text"]) for d in docs],
                               "id long, group long, score long, text string")
    outputs = []
    for parts in (1, 3, 7):
        for rows in ("id", "reversed"):
            src = str(tmp_path / f"in-{parts}-{rows}")
            ordered = df.orderBy("id") if rows == "id" else df.orderBy(df.id.desc())
            ordered.repartition(parts).write.parquet(src) if parts > 1 else ordered.coalesce(1).write.parquet(src)
            out = str(tmp_path / f"out-{parts}-{rows}")
            code, _, err = run_job(job, ["--input", src, "--input-format", "parquet", "--output", out, "--mode", "filter", "--id-column", "id",
                                         "--output-format", "parquet", "--order-by", "score DESC", "--quiet"], capsys)
            assert code == 0, err
            outputs.append({r["id"] for r in spark.read.parquet(out).select("id").collect()})
    assert all(o == expected for o in outputs), [len(o ^ expected) for o in outputs]
    # Ties inside a family exist, so the id decided some of them.
    assert any(sum(1 for d in docs if d["group"] == g and d["score"] == max(e["score"] for e in docs if e["group"] == g)) > 1
               for g in {d["group"] for d in docs})


def test_expressions_in_the_api_and_a_secondary_key(spark):
    docs = grouped_docs(groups=12, seed=9)
    df = spark.createDataFrame([(d["id"], d["group"], d["score"], d["text"]) for d in docs],
                               "id long, group long, score long, text string")
    # score ascending, then the highest id: the reference of that order
    kept = {r["id"] for r in deduplicate(df, mode="filter", order_by="score ASC, id * -1", progress=False).collect()}
    best: dict = {}
    for d in docs:
        key = (d["score"], -d["id"])
        if d["group"] not in best or key < best[d["group"]][0]:
            best[d["group"]] = (key, d["id"])
    assert kept == {i for _, i in best.values()}


def _family_frame(spark, docs):
    return spark.createDataFrame([(d["id"], d["group"], d["score"], d["text"]) for d in docs],
                                 "id long, group long, score long, text string")


def test_the_transformer_takes_the_same_order(spark, tmp_path):
    from lshbloom_udf.ml import LSHBloomDeduplicator

    docs = grouped_docs(groups=10, seed=3)
    dedup = LSHBloomDeduplicator(idCol="id", orderBy="score DESC", progress=False)
    dedup.write().overwrite().save(str(tmp_path / "t"))
    loaded = LSHBloomDeduplicator.load(str(tmp_path / "t"))
    rows = loaded.transform(_family_frame(spark, docs).repartition(3)).collect()
    assert {r["id"] for r in rows if not r["is_duplicate"]} == reference_kept(docs)


def test_a_stream_micro_batch_keeps_its_best_with_counts(spark, tmp_path):
    import json

    from lshbloom_udf.spark.streaming import StreamDedup

    docs = grouped_docs(groups=10, seed=4)
    landing = tmp_path / "in"
    landing.mkdir()
    with open(landing / "f0.json", "w", encoding="utf-8") as f:
        for d in reversed(docs):
            f.write(json.dumps(d) + "\n")
    captured: list = []
    writer = StreamDedup(str(tmp_path / "index"), sink=lambda df, batch_id: captured.extend(df.collect()),
                         id_col="id", order_by="score DESC", duplicate_count=True, progress=False)
    stream = spark.readStream.schema("id long, group long, score long, text string").json(str(landing))
    writer.start(stream, str(tmp_path / "ck"), trigger={"availableNow": True}).awaitTermination()
    kept = {r["id"]: r["duplicate_count"] for r in captured if not r["is_duplicate"]}
    assert set(kept) == reference_kept(docs)
    family = {d["id"]: d["group"] for d in docs}
    assert kept == {i: sum(1 for d in docs if d["group"] == family[i]) - 1 for i in kept}
