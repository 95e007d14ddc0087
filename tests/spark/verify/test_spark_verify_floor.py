"""containment_min_jaccard: containment verifies a pair only where its Jaccard reaches the floor too.

    d stays flagged  ⇔  J(d, e) >= verify_threshold  or  (C(d, e) >= containment_threshold and J(d, e) >= floor)

A truncation keeping a share f of its source has J ≈ f and C = 1: the floor (0.3 by default) keeps it. A small
templated page whose text is mostly a larger sibling's template has C high and J low: the floor refuses it (the
English false matches of containment alone, docs/evaluation.md §0). The references are exact and set-based
(tests/verify_support.py); the runs are real Spark (local[2]).
"""

from __future__ import annotations

import numpy as np
import pytest
from verify_support import band_keys, containment, jaccard, pass_flags, reference_verify, shingles

from lshbloom_udf import deduplicate
from lshbloom_udf.config import DedupConfig, load_config
from lshbloom_udf.errors import ConfigError
from lshbloom_udf.spark.verify.rule import CONTAINMENT, JACCARD, VerifyRule

# Bands for T = 0.3 at 128 permutations (they propose both pairs below), word 4-grams, a strict Jaccard so that
# containment decides, and the default containment threshold and floor.
PERMISSIVE = dict(threshold=0.3, num_perm=128, shingle="words", ngram=4, normalize="all", insert="all")
T_J = 0.9


def _words(n: int, offset: int, tag: str) -> list[str]:
    return [f"{tag}{(7 * i + offset) % 997}" for i in range(n)]


def sibling_texts() -> list[str]:
    """A page (a 60-word template and 120 words of its own), a smaller sibling (50 template words and 12 of its
    own: C = 0.80, J = 0.25) and a truncation of the page keeping half of it (C = 1, J = 0.49)."""
    template, own = _words(60, 0, "t"), _words(120, 1, "b")
    return [" ".join(template + own), " ".join(template[:50] + _words(12, 2, "s")), " ".join((template + own)[:90])]


def test_the_rule_counts_at_the_floor():
    """judge() from the three counts: the floor is inclusive, None removes it, Jaccard alone ignores it."""
    rule = VerifyRule(0.9, 0.7, 0.3)
    # |S_d ∩ S_e|, |S_d|, |S_e|: C = 0.75 and J = 30/110 < 0.3; C = 33/40 and J = 33/110 = 0.3; J = 1 (a copy)
    common, size_d, size_e = np.array([30, 33, 50]), np.array([40, 40, 50]), np.array([100, 103, 50])
    passes, sim, measure = rule.judge(common, size_d, size_e)
    assert passes.tolist() == [False, True, True]
    assert sim[1] == 33 / 40 and measure.tolist()[1:] == [CONTAINMENT, JACCARD]
    assert VerifyRule(0.9, 0.7, None).judge(common, size_d, size_e)[0].tolist() == [True, True, True]
    assert VerifyRule(0.9, None, 0.3).judge(common, size_d, size_e)[0].tolist() == [False, False, True]


def test_the_rule_takes_the_declared_default():
    assert VerifyRule(0.4, 0.7).containment_min_jaccard == DedupConfig().containment_min_jaccard == 0.3


def test_a_templated_sibling_stays_and_a_truncation_goes(spark):
    texts = sibling_texts()
    config = DedupConfig().replace(**PERMISSIVE)
    pairs, active = band_keys(texts, config)
    assert not pairs[1].isdisjoint(pairs[0]) and not pairs[2].isdisjoint(pairs[0])  # both are candidates
    sets = [shingles(t, config.ngram, config.normalize) for t in texts]
    assert containment(sets[1], sets[0]) >= config.containment_threshold > jaccard(sets[2], sets[0])
    assert jaccard(sets[1], sets[0]) < config.containment_min_jaccard <= jaccard(sets[2], sets[0])
    flags = pass_flags(pairs, active, config.insert_rule)
    expected = reference_verify(sets, pairs, flags, T_J, config.containment_threshold, config.containment_min_jaccard)
    without_floor = reference_verify(sets, pairs, flags, T_J, config.containment_threshold, None)
    assert set(without_floor) - set(expected) == {1}  # the floor, and only it, keeps the sibling

    df = spark.createDataFrame([(i, f"d{i}", t) for i, t in enumerate(texts)], "pos long, id string, text string")
    out, summary = deduplicate(df.coalesce(1), id_col="id", verify=True, verify_threshold=T_J, duplicate_of=True,
                               progress=False, return_summary=True, **PERMISSIVE)
    rows = out.orderBy("pos").collect()
    assert [(r["is_duplicate"], r["duplicate_of"], r["similarity_measure"]) for r in rows] == [
        (False, None, None), (False, None, None), (True, "d0", "containment")]
    assert {i: (v.of, v.measure) for i, v in expected.items()} == {2: (0, "containment")}
    assert rows[2]["similarity"] == containment(sets[2], sets[0]) == 1.0
    v = summary["verify"]
    assert (v["containment_threshold"], v["containment_min_jaccard"], v["by_containment"]) == (0.7, 0.3, 1)


def test_the_setting_is_checked_and_is_a_toml_key(tmp_path):
    with pytest.raises(ConfigError, match="containment_min_jaccard bounds the containment branch"):
        DedupConfig().replace(containment_threshold=None, containment_min_jaccard=0.2)
    with pytest.raises(ConfigError, match="containment_min_jaccard bounds the containment branch"):
        DedupConfig().replace(verify=False, containment_threshold=None, containment_min_jaccard=0.2)
    with pytest.raises(ConfigError, match=r"containment_min_jaccard must be a number in \(0, 1\]"):
        DedupConfig().replace(containment_min_jaccard=1.5)
    assert DedupConfig().replace(containment_min_jaccard=None).containment_min_jaccard is None
    assert DedupConfig().replace(containment_threshold=None).containment_min_jaccard == 0.3  # inert without C
    path = tmp_path / "c.toml"
    path.write_text("[dedup]\ncontainment_min_jaccard = 0.25\n")
    assert DedupConfig.from_settings(load_config(str(path))).containment_min_jaccard == 0.25


def test_an_explicit_floor_reaches_verification(spark):
    texts = sibling_texts()
    df = spark.createDataFrame([(i, f"d{i}", t) for i, t in enumerate(texts)], "pos long, id string, text string")
    out = deduplicate(df.coalesce(1), id_col="id", verify=True, verify_threshold=T_J, containment_min_jaccard=0.2,
                      progress=False, **PERMISSIVE).orderBy("pos").collect()
    assert [r["is_duplicate"] for r in out] == [False, True, True]  # 0.2 <= J = 0.25: the sibling goes too
