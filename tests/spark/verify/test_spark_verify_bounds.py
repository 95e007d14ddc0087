"""Verification's candidates are bounded (lshbloom_udf/spark/verify/sources.py, "Bounds"): on a family of pages made
from one template, every page shares band keys with a large share of the family, yet each flagged page is checked
against at most CANDIDATES_PER_DOCUMENT earlier ones per round.

The stream: pages that share a header and a footer (about half of each page) around their own text, near-copies of
some of them planted later, and unrelated documents. The flags and their sources equal the exact set-based
reference with the same bounds (tests/verify_support.py); every planted copy is found and no distinct page is
flagged; and the bound binds: without it round 2 would pair many times more documents.
"""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql import types as T
from verify_support import Bounds, Template, band_keys, pass_flags, reference_verify, template_family

from evaluation.shingling import Shingling, shingles
from lshbloom_udf import deduplicate
from lshbloom_udf.config import DedupConfig
from lshbloom_udf.spark.verify.sources import CANDIDATES_PER_DOCUMENT

SCHEMA = T.StructType([T.StructField("pos", T.LongType()), T.StructField("id", T.StringType()),
                       T.StructField("text", T.StringType()), T.StructField("kind", T.StringType())])
DEFAULT_SHINGLES = Shingling("mixed", 11, ("dehyphen", "nfkc", "lower", "punct"))


@pytest.fixture(scope="module")
def family():
    return template_family(300, 8, seed=5)


def test_template_family_candidates_are_bounded_and_decide_as_the_reference(spark, family):
    rows = [(i, f"d{i}", text, kind) for i, (text, kind) in enumerate(family)]
    df = spark.createDataFrame(rows, SCHEMA).coalesce(1).repartitionByRange(3, "pos").sortWithinPartitions("pos")
    out, summary = deduplicate(df, id_col="id", duplicate_of=True, progress=False, return_summary=True)
    got = {r["pos"]: r for r in out.collect()}
    v = summary["verify"]

    config = DedupConfig()
    texts = [t for t, _ in family]
    pairs, active = band_keys(texts, config)
    flags = pass_flags(pairs, active, config.insert_rule)
    sets = [shingles(t, DEFAULT_SHINGLES) for t in texts]
    expected = reference_verify(sets, pairs, flags, config.verify_threshold, config.containment_threshold,
                                config.containment_min_jaccard, Template(config.template_max_df), Bounds())
    assert {i for i, r in got.items() if r["is_duplicate"]} == set(expected)
    for i, verdict in expected.items():
        assert got[i]["duplicate_of"] == f"d{verdict.of}"
        assert got[i]["similarity"] == pytest.approx(verdict.similarity, abs=1e-12)
    kinds = [k for _, k in family]
    assert {i for i, k in enumerate(kinds) if k == "copy"} == set(expected)  # every copy, no distinct page

    # Most pages are flagged by the template's keys, and round 1 unflags them: round 2 has the family to pair.
    assert v["pass_flagged"] > 200 and v["unflagged"] > 200
    assert v["candidate_pairs"] <= 2 * CANDIDATES_PER_DOCUMENT * v["pass_flagged"]
    round1_unflagged = [i for i, f in enumerate(flags) if f and not _verified_in_round1(expected, i)]
    unbounded = _pairs_sharing_a_key(pairs, round1_unflagged)
    assert unbounded > 4 * v["candidate_pairs"]  # the bound binds, and the summary counts what it left out
    assert v["candidates_beyond_bound"] > 0


def _verified_in_round1(expected, i) -> bool:
    return i in expected and expected[i].round == 1


def _pairs_sharing_a_key(pairs, among) -> int:
    holders: dict = {}
    for i in among:
        for p in pairs[i]:
            holders.setdefault(p, []).append(i)
    return len({(j, i) for members in holders.values() for n, j in enumerate(members) for i in members[:n]})


def test_bounds_reference_ranks_a_true_source_before_template_anchors():
    """A copy of a late page shares many bands with it in small buckets; the template's buckets offer only their
    first anchors, which share a band or two: the source is a candidate however many pages came before."""
    docs = template_family(120, 1, seed=9)
    config = DedupConfig()
    texts = [t for t, _ in docs]
    pairs, _ = band_keys(texts, config)
    copy = len(docs) - 1
    source = next(i for i, (t, k) in enumerate(docs) if k == "page" and
                  len(pairs[i] & pairs[copy]) == max(len(pairs[j] & pairs[copy]) for j in range(copy)))
    assert source in Bounds().round2(copy, pairs, list(range(len(docs))))
    assert len(Bounds().round2(copy, pairs, list(range(len(docs))))) <= CANDIDATES_PER_DOCUMENT
    assert np.mean([len(pairs[i] & pairs[copy]) for i in range(copy) if i != source]) < 3
