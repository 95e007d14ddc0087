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
