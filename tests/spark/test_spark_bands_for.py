"""Bands that follow the decision, in real runs (issue 33, item 4; the rule: lshbloom_udf/bands.py).

- Without verification (and no threshold given) the run bands for verify_threshold: b x r in the summary and in
  the index are those for 0.4, and the pass decides exactly as keep-first over exact sets of those band keys would.
  On a planted set (sources, near-copies at J ~0.9, siblings sharing a window at J 0.25-0.35) that decides as the
  exact Jaccard >= 0.4 rule on every document away from the S-curve's rise, and flags fewer of the siblings than
  the permissive bands would (the trap: 11.8 % flagged of 10^7 where 1 % were planted).
- ``verify=False`` against a kept index banded for verification is refused before any Spark work, naming the
  settings; given ``threshold`` explicitly, the index's bands decide.
"""

from __future__ import annotations

import json
import random

import pytest

from lshbloom_udf import deduplicate
from lshbloom_udf.config import DEFAULTS, DedupConfig
from lshbloom_udf.errors import IndexMismatchError
from lshbloom_udf.index.params import P_VERIFIED
from lshbloom_udf.lsh import optimal_params
from verify_support import band_keys, jaccard, pass_flags, shingles

# Word 3-grams, so that the exact reference's shingles (verify_support.shingles) are the product's.
WORDS = dict(shingle="words", ngram=3, normalize="all")
T_V = DEFAULTS["verify_threshold"]


def planted(seed: int = 7, sources: int = 60) -> list[tuple[str, str]]:
    """(text, kind): each source (120 random words), then maybe its near-copy (2 words replaced) and a sibling
    sharing a window of it (the rest its own words: J 0.25-0.35 with it)."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(20000)]
    docs = []
    for _ in range(sources):
        words = [rng.choice(vocab) for _ in range(120)]
        docs.append((" ".join(words), "source"))
        if rng.random() < 0.5:
            copy = list(words)
            for i in rng.sample(range(120), 2):
                copy[i] = rng.choice(vocab)
            docs.append((" ".join(copy), "near_copy"))
        if rng.random() < 0.7:
            keep = rng.randint(56, 64)  # ~0.46-0.53 of the source: J ~0.28-0.35 in 3-grams
            start = rng.randint(0, 120 - keep)
            docs.append((" ".join(words[start:start + keep] + [rng.choice(vocab) for _ in range(120 - keep)]),
                         "sibling"))
    return docs


def test_without_verification_the_bands_are_for_verify_threshold_and_decide_as_exact_sets(spark):
    docs = planted()
    texts, kinds = [t for t, _ in docs], [k for _, k in docs]
    df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "pos long, text string").coalesce(2)
    out, summary = deduplicate(df, verify=False, order_by="pos", progress=False, return_summary=True, **WORDS)
    flags = [r["is_duplicate"] for r in out.orderBy("pos").collect()]

    b, r = optimal_params(T_V, DEFAULTS["num_perm"])
    p = summary["params"]
    assert (p["threshold"], p["b"], p["r"]) == (T_V, b, r) and p["b"] != 64
    assert p["bands_for"] == "verify_threshold (verification off: the bands decide)"
    config = DedupConfig().replace(verify=False, **WORDS)
    # The pass: keep-first over exact sets of the 0.4 bands' keys.
    pairs, active = band_keys(texts, config)
    assert flags == pass_flags(pairs, active, "first")
    # The exact Jaccard rule at 0.4, keep-first: every document away from the S-curve's rise (J 0.2-0.6 with an
    # earlier kept one) is decided as it says.
    sets = [shingles(t, WORDS["ngram"], WORDS["normalize"]) for t in texts]
    kept: list[int] = []
    for i, s in enumerate(sets):
        best = max((jaccard(s, sets[j]) for j in kept), default=0.0)
        if not 0.2 <= best < 0.6:
            assert flags[i] == (best >= T_V), (i, kinds[i], best)
        if not flags[i]:
            kept.append(i)
    assert all(f for f, k in zip(flags, kinds) if k == "near_copy") and not any(
        f for f, k in zip(flags, kinds) if k == "source")
    # The trap it avoids: the verification's permissive bands, deciding alone, flag more of the siblings.
    permissive = DedupConfig().replace(verify=False, threshold=DEFAULTS["threshold"], **WORDS)
    loose = pass_flags(*band_keys(texts, permissive), "first")
    siblings = [i for i, k in enumerate(kinds) if k == "sibling"]
    assert sum(flags[i] for i in siblings) < sum(loose[i] for i in siblings), (
        sum(flags[i] for i in siblings), sum(loose[i] for i in siblings), len(siblings))


def test_no_verify_against_a_kept_index_banded_for_verification_is_refused_then_given_threshold_decides(
        spark, tmp_path):
    docs = planted(seed=3, sources=12)
    df = spark.createDataFrame([(i, t) for i, (t, _) in enumerate(docs)], "pos long, text string").coalesce(1)
    index = str(tmp_path / "index")
    first = deduplicate(df, index_dir=index, progress=False, return_summary=True, **WORDS)
    assert first.summary["params"]["b"] == 64 and first.summary["params"]["threshold"] == DEFAULTS["threshold"]
    manifest = json.load(open(f"{index}/manifest.json"))
    with pytest.raises(IndexMismatchError, match=r"banded for threshold 0\.3 .*verification.*drop --no-verify.*"
                                                 r"--threshold 0\.3"):
        deduplicate(df, index_dir=index, verify=False, progress=False, **WORDS)
    assert json.load(open(f"{index}/manifest.json")) == manifest  # refused before any change
    more = spark.createDataFrame([(i, t) for i, (t, _) in enumerate(planted(seed=4, sources=12))],
                                 "pos long, text string").coalesce(1)
    # Its filters were sized for the rate verification absorbs: final flags there are refused unless that rate is
    # given (lshbloom_udf/bands.py, check_kept_rate).
    with pytest.raises(IndexMismatchError, match=r"sized for p_effective 0\.01.*no verification.*--p-effective 0\.01"):
        deduplicate(more, index_dir=index, verify=False, threshold=DEFAULTS["threshold"], progress=False, **WORDS)
    again = deduplicate(more, index_dir=index, verify=False, threshold=DEFAULTS["threshold"], progress=False,
                        return_summary=True, p_effective=P_VERIFIED, **WORDS)
    s = again.summary
    assert (s["params"]["b"], s["params"]["bands_for"], s["run"]) == (64, "threshold (given)", "index grown")
    assert "threshold 0.3 for threshold (given)" in again.summary_text()
