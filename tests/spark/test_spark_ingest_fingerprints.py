"""The input check's fingerprints (``spark/ingest.py``): exact hash sums over real Spark rows.

The fingerprints are summed as longs of 16-bit pieces; the oracle here is the
plain decimal(38,0) sum the run records were first written with, so a kept
index's recorded fingerprints still match the same input. A changed text
changes both fingerprints; the same texts in another order change only the
sequence fingerprint.
"""

from __future__ import annotations

import hashlib

import pytest

from lshbloom_udf.spark.ingest import inspect_input
from lshbloom_udf.spark.keys import ROW_COL
from spark_support import jobs


def decimal_fingerprints(pinned, text_col: str) -> tuple[str, str]:
    """The fingerprints as decimal(38,0) sums: the formula runs were recorded with."""
    from pyspark.sql import functions as F

    dec = "decimal(38,0)"
    h = pinned.select(F.col(ROW_COL).alias("row"), F.xxhash64(F.col(text_col)).alias("h1"),
                      F.hash(F.col(text_col)).alias("h2"))
    h1, h2, row = F.col("h1"), F.col("h2"), F.col("row")
    r = h.agg(F.count(F.lit(1)).alias("n"), F.sum(h1.cast(dec)).alias("c1"), F.sum(h2.cast(dec)).alias("c2"),
              F.sum(F.xxhash64(row, h1).cast(dec)).alias("s1"), F.sum(F.hash(h2, row).cast(dec)).alias("s2")).collect()[0]
    content = hashlib.sha256(f"lshbloom-text-content:{r['n']}:{r['c1']}:{r['c2']}".encode()).hexdigest()[:32]
    sequence = hashlib.sha256(f"lshbloom-text-sequence:{r['n']}:{r['s1']}:{r['s2']}:{content}".encode()).hexdigest()[:32]
    return content, sequence


def pinned_frame(spark, texts: list[str]):
    rows = [(i, f"id-{i}", t) for i, t in enumerate(texts)]
    return spark.createDataFrame(rows, f"{ROW_COL} long, id string, text string").repartition(2)


TEXTS = [f"document {i} about {'alpha' if i % 3 else 'beta'} and {i * 7919 % 1000}" for i in range(3000)]


@pytest.mark.parametrize("n", [0, 1, 3000])
def test_fingerprints_equal_the_decimal_sums(spark, n):
    pinned = pinned_frame(spark, TEXTS[:n])
    facts = inspect_input(pinned, "text", "id")
    assert (facts.content_fingerprint, facts.sequence_fingerprint) == decimal_fingerprints(pinned, "text")
    assert (facts.documents, facts.null_ids, facts.distinct_ids) == (n, 0, n)


def test_a_changed_text_or_order_is_detected(spark):
    base = inspect_input(pinned_frame(spark, TEXTS), "text", None)
    changed = inspect_input(pinned_frame(spark, TEXTS[:-1] + [TEXTS[-1] + " edited"]), "text", None)
    assert changed.content_fingerprint != base.content_fingerprint
    assert changed.sequence_fingerprint != base.sequence_fingerprint
    swapped = TEXTS[1::-1] + TEXTS[2:]
    reordered = inspect_input(pinned_frame(spark, swapped), "text", None)
    assert reordered.content_fingerprint == base.content_fingerprint
    assert reordered.sequence_fingerprint != base.sequence_fingerprint


# Texts that reach every branch of the native sums: null, empty, ASCII, 1-3 tail bytes >= 0x80 (Spark's Murmur3
# sign-extends them), long, and bytes that are not UTF-8 (a Spark string keeps them as they were).
ODD = [None, "", "a", "ab", "abc", "abcd", "héllo wörld ☃ 漢字", "é", "x" * 5000, "ü" * 3]


def odd_frame(spark):
    from pyspark.sql import functions as F

    rows = [(((i % 3) << 40) + i, t.encode() if t is not None else None) for i, t in enumerate(ODD + TEXTS[:500])]
    rows.append(((2 << 40) + 10_000, b"not utf-8 \xff\xfe tail \xc3"))
    df = spark.createDataFrame(rows, f"{ROW_COL} long, raw binary")
    return df.select(ROW_COL, F.col("raw").cast("string").alias("text")).repartition(3)


def test_the_keys_stages_native_sums_equal_the_aggregation(spark):
    """What the driver pass's keys stage measures (ingest.InputSums, native) gives the aggregation's facts."""
    from lshbloom_udf.spark.ingest import InputSums

    pinned = odd_frame(spark).localCheckpoint()
    table = pinned.toArrow()
    half = table.num_rows // 2
    parts = [table.slice(0, half), table.slice(half)]  # sums of disjoint rows add up
    sums = sum((InputSums.of_batch(p.column("text").combine_chunks(), p.column(ROW_COL).combine_chunks())
                for p in parts), InputSums())
    assert sums.from_json(sums.to_json()) == sums
    facts, spark_facts = sums.facts(), inspect_input(pinned, "text", None)
    assert facts == spark_facts
    assert facts.documents == len(ODD) + 501 and facts.max_text_bytes == 5000


@pytest.mark.slow
def test_a_run_measured_by_its_keys_stage_records_the_aggregations_fingerprints(spark, tmp_path):
    """A fresh kept index without an id column takes the fingerprints from the keys stage; the same run with an
    id column (which aggregates before the pass) records the same ones, and running the input again on the first
    index finds it ingested (the aggregation, run then, matches the recorded fingerprints)."""
    import json
    import os

    from lshbloom_udf import deduplicate

    df = spark.createDataFrame([(f"id-{i}", t) for i, t in enumerate(ODD + TEXTS[:800])], "id string, text string")
    df = df.repartition(2).localCheckpoint()

    def recorded(index_dir):
        with open(os.path.join(index_dir, "manifest.json")) as f:
            return [(r["content_fingerprint"], r["sequence_fingerprint"]) for r in json.load(f)["runs"]]

    streamed, aggregated = str(tmp_path / "streamed"), str(tmp_path / "aggregated")
    before = set(jobs(spark))
    s1 = deduplicate(df, index_dir=streamed, return_summary=True, progress=False)
    steps = {d for j, d in jobs(spark).items() if j not in before}
    assert "lshbloom: check input" not in steps and "lshbloom: pin" in steps  # no aggregation of its own
    s2 = deduplicate(df, id_col="id", index_dir=aggregated, return_summary=True, progress=False)
    flags = [r["is_duplicate"] for r in s1.df.orderBy("id").collect()]
    assert flags == [r["is_duplicate"] for r in s2.df.orderBy("id").collect()]
    assert recorded(streamed) == recorded(aggregated) and len(recorded(streamed)) == 1
    fingerprints = [(s.summary["index"]["content_fingerprint"], s.summary["index"]["sequence_fingerprint"])
                    for s in (s1, s2)]
    assert fingerprints[0] == fingerprints[1] == recorded(streamed)[0]
    again = deduplicate(df, index_dir=streamed, return_summary=True, progress=False)
    assert again.summary["index"].get("reproduced") is True
    assert [r["is_duplicate"] for r in again.df.orderBy("id").collect()] == flags
