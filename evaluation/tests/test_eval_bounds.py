"""The study's verification decides with the job's bounded candidates (lshbloom_udf/spark/verify/sources.py, "Bounds").

Reference: tests/verify_support.py's ``reference_verify`` and ``Bounds``, plain Python over sets written from the
definition (docs/algorithm.md §8, "Bounded candidates"). Streams: a template family (pages sharing a long header and
footer around their own text, plus near and noisy copies), where the bounds bind, and a stream of partial copies,
where they do not.
"""

import random

import numpy as np
import pytest

from evaluation.shingling import Shingling
from evaluation.study.candidates import BOUNDED, Bounds, pass_decisions, shingle_split, split_band_keys, verify
from evaluation.study.multilingual import DEHYPHEN
from evaluation.study.verified import verify_decisions
from lshbloom_udf.config import DedupConfig
from lshbloom_udf.minhash import text_band_keys
from lshbloom_udf.spark.verify.sources import ANCHORS_PER_BUCKET, CANDIDATES_PER_DOCUMENT
from verify_support import Bounds as ReferenceBounds
from verify_support import Template, pass_flags, partial_copy_stream, reference_verify, shingles

UNBOUNDED = ReferenceBounds(anchors=10**9, per_document=10**9)  # the reference with bounds no stream reaches
# (study bounds, reference bounds): the product's, and tighter ones that bind in round 1 too
BOUND_PAIRS = [(BOUNDED, ReferenceBounds()), (Bounds(anchors=1, per_document=2), ReferenceBounds(1, 2))]
WORDS = DedupConfig().replace(shingle="words", ngram=4, normalize="all", threshold=0.3, num_perm=256,
                              scheme="affine32", containment_threshold=None, verify_threshold=None)


def template_family(pages: int, copies: int, seed: int) -> list[str]:
    """``pages`` pages of one template (a 150-word header and a 100-word footer around 200 words of their own:
    siblings at word-4-gram Jaccard ~0.38), and ``copies`` copies of earlier documents (copies of copies too) with
    2-20 % of the words replaced, most after their source, some before it."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(5000)]
    header, footer = ([rng.choice(vocab) for _ in range(n)] for n in (150, 100))
    docs = [" ".join(header + [rng.choice(vocab) for _ in range(200)] + footer) for _ in range(pages)]
    for _ in range(copies):
        at = rng.randrange(len(docs))
        rate = rng.choice((0.02, 0.1, 0.2))
        copy = " ".join(w if rng.random() > rate else "zz" for w in docs[at].split())
        docs.insert(rng.randrange(at + 1, len(docs) + 1) if rng.random() < 0.8 else rng.randrange(0, at + 1), copy)
    return docs


def word_stream(texts: list[str]):
    """The band keys, their (band, key) sets, the pass's keep-first flags and the word 4-gram sets of ``texts``."""
    keys, active = text_band_keys(texts, **WORDS.index_params().signature_kwargs())
    pairs = [{(band, int(k)) for band, k in enumerate(row)} if has else set() for row, has in zip(keys, active)]
    flags = pass_flags(pairs, active, "first")
    return keys, np.asarray(active, bool), pairs, flags, [frozenset(shingles(t, 4, "all")) for t in texts]


def round2_binds(pairs, flags, verdicts, bounds: ReferenceBounds) -> tuple[int, int]:
    """(the largest round-2 bucket among the round-1-unflagged documents, the most anchors a document of them has
    before the cut): the bounds bind when these exceed ``anchors`` and ``per_document``."""
    among = [i for i, f in enumerate(flags) if f and not (i in verdicts and verdicts[i].round == 1)]
    largest = anchored = 0
    for i in among:
        found = set()
        for p in pairs[i]:
            holders = [u for u in among if p in pairs[u]]
            largest = max(largest, len(holders))
            found |= {c for c in holders[:bounds.anchors or ANCHORS_PER_BUCKET] if c < i}
        anchored = max(anchored, len(found))
    return largest, anchored


@pytest.fixture(scope="module")
def family():
    return word_stream(template_family(90, 30, seed=1))


@pytest.mark.parametrize("mine,ref", BOUND_PAIRS, ids=["product", "tight"])
def test_bounded_verification_is_the_reference_on_a_template_family(family, mine, ref):
    """verified.verify_decisions (the §7b study) with the bounds = reference_verify with the same bounds, on a
    stream where they bind; with ``bounds=None`` = the reference unbounded."""
    keys, active, pairs, flags, sets = family
    expected = reference_verify(sets, pairs, flags, 0.45, 0.7, bounds=ref)
    largest, anchored = round2_binds(pairs, flags, expected, ref)
    assert largest > (ref.anchors or ANCHORS_PER_BUCKET) and anchored > (ref.per_document or CANDIDATES_PER_DOCUMENT)
    assert sum(flags) > 80 and expected  # the family is flagged by its template; copies verify
    if ref.per_document:  # the tight bounds cut round 1 too
        kept = [i for i, f in enumerate(flags) if not f]
        assert max(len(UNBOUNDED.round1(i, pairs, kept)) for i in np.flatnonzero(flags)) > ref.per_document
    got = verify_decisions(keys, active, np.array(flags), sets, 0.45, containment=0.7, bounds=mine)
    assert set(np.flatnonzero(got).tolist()) == set(expected)
    unbounded = verify_decisions(keys, active, np.array(flags), sets, 0.45, containment=0.7, bounds=None)
    assert set(np.flatnonzero(unbounded).tolist()) == set(reference_verify(sets, pairs, flags, 0.45, 0.7,
                                                                           bounds=UNBOUNDED))


K = CANDIDATES_PER_DOCUMENT


def hand_made_buckets():
    """(keys, sets, flags) of K + 10 documents over K + 4 bands whose expected decisions are known by hand
    (K = CANDIDATES_PER_DOCUMENT).

    Kept by the pass, 0..K, each alone in its buckets; K = ``S``. Flagged: A = K+1 and B = K+2 are ``S`` and share
    one band with each of 0..K (K+1 candidates in round 1), B a second band with K. Bounded, A's K strongest are
    0..K-1 (one band each, the earliest): K is cut and A is unflagged; B ranks K first and verifies. C = K+3..K+9
    share a bucket in band 0 and one in band 1 (also 0's key, so the pass flags them; 0 verifies none): round 2;
    the last three (X, Y, Z) are one text; Z also shares bands 2..4 with X alone. Bounded, the shared buckets offer
    their first 4 holders (K+3..K+6, two bands each): Y does not see X and stays kept; Z sees X in their own buckets
    (three bands: ranked first) and verifies."""
    b, n = K + 4, K + 10
    a, bb, x, y, z = K + 1, K + 2, K + 7, K + 8, K + 9
    keys = np.array([[10_000 + i * 100 + band for band in range(b)] for i in range(n)], dtype=np.uint64)
    for j in range(K + 1):
        keys[j, j] = keys[a, j] = keys[bb, j] = 100 + j
    keys[K, K + 1] = keys[bb, K + 1] = 99
    keys[K + 3:, 0] = 500
    keys[K + 3:, 1] = keys[0, 1]
    keys[z, 2:5] = keys[x, 2:5] = [600, 601, 602]
    sets = [frozenset(f"k{j}-{v}" for v in range(10)) for j in range(K)] + [frozenset(f"s{v}" for v in range(10))] * 3
    own = [frozenset(f"u{i}-{v}" for v in range(10)) for i in range(5)]
    sets += own + [own[4]] * 2
    assert len(sets) == n and (x, y, z) == (n - 3, n - 2, n - 1)
    return keys, sets, np.array([False] * (K + 1) + [True] * 9)


@pytest.mark.parametrize("bounded,expected", [(True, {K + 2: 1, K + 9: 2}),
                                              (False, {K + 1: 1, K + 2: 1, K + 8: 2, K + 9: 2})])
def test_the_bounds_cut_where_the_definition_says(bounded, expected):
    """The hand-made buckets' decisions and rounds, bounded and not: the reference's and the study's."""
    keys, sets, flags = hand_made_buckets()
    pairs = [{(band, int(k)) for band, k in enumerate(row)} for row in keys]
    got = reference_verify(sets, pairs, flags.tolist(), 0.9, None, bounds=ReferenceBounds() if bounded else UNBOUNDED)
    assert {i: v.round for i, v in got.items()} == expected
    mine = verify_decisions(keys, np.ones(len(flags), bool), flags, sets, 0.9, bounds=BOUNDED if bounded else None)
    assert set(np.flatnonzero(mine).tolist()) == set(expected)


def test_round_two_ranks_by_bands_then_the_smallest_bucket():
    """Round 2, hand-made: 18 shares one band each with 1..17; 1..16's buckets with it also hold 19 and 20 (size
    4), 17's holds the two alone (size 2). The pass flags 18 against 0 in band 19 and the others against 0 in band
    18 (0 verifies none of them). Bounded, 18's candidates all share one band: 17 (the smallest bucket) ranks
    first, then the earliest, so 17, its only match, is kept whatever CANDIDATES_PER_DOCUMENT (ranking by bands
    and then the earliest would cut it below 17)."""
    b, n = 20, 21
    keys = np.array([[10_000 + i * 100 + band for band in range(b)] for i in range(n)], dtype=np.uint64)
    keys[1:18, 18] = keys[19:, 18] = keys[0, 18]
    keys[18, 19] = keys[0, 19]
    for j in range(17):
        keys[1 + j, j] = keys[18, j] = 700 + j
        if j < 16:
            keys[19, j] = keys[20, j] = 700 + j
    own = [frozenset(f"v{i}-{x}" for x in range(10)) for i in range(n)]
    sets = own[:18] + [own[17]] + own[19:]
    flags = np.array([False] + [True] * 20)
    pairs = [{(band, int(k)) for band, k in enumerate(row)} for row in keys]
    for mine, ref in ((BOUNDED, ReferenceBounds()), (None, UNBOUNDED)):
        expected = reference_verify(sets, pairs, flags.tolist(), 0.9, None, bounds=ref)
        assert {i: v.round for i, v in expected.items()} == {18: 2}
        got = verify_decisions(keys, np.ones(n, bool), flags, sets, 0.9, bounds=mine)
        assert np.flatnonzero(got).tolist() == [18]


def test_where_the_bounds_do_not_bind_they_change_nothing():
    """A stream of partial copies (few documents share a bucket): bounded = unbounded = the reference."""
    texts = [t for t, _ in partial_copy_stream(60, seed=3)]
    keys, active, pairs, flags, sets = word_stream(texts)
    expected = reference_verify(sets, pairs, flags, 0.45, 0.7, bounds=UNBOUNDED)
    assert expected and set(expected) == set(reference_verify(sets, pairs, flags, 0.45, 0.7))
    for bounds in (BOUNDED, None):
        got = verify_decisions(keys, active, np.array(flags), sets, 0.45, containment=0.7, bounds=bounds)
        assert set(np.flatnonzero(got).tolist()) == set(expected)


SHIPPED_UNIT = Shingling("mixed", 11, DEHYPHEN)


@pytest.mark.parametrize("mine,ref", [*BOUND_PAIRS, (None, UNBOUNDED)], ids=["product", "tight", "unbounded"])
def test_the_multilingual_studys_rule_is_the_reference(mine, ref):
    """candidates.pass_decisions + verify (the shipped row's path: mixed 11-grams, the product's poisson
    signatures, Tj 0.4 / Tc 0.7 with J >= 0.3, the template rule at max_df 5) = reference_verify with the same
    bounds over the study's own shingle sets and band keys, on a template family."""
    texts = template_family(60, 20, seed=2)
    sh = shingle_split(texts, SHIPPED_UNIT, 256, scheme="poisson")
    keys = split_band_keys(sh, 256, 64, 4)
    idx = np.arange(len(texts))
    result = pass_decisions(idx, keys, sh.has)
    pairs = [{(band, int(k)) for band, k in enumerate(row)} if has else set() for row, has in zip(keys, sh.has)]
    flags = pass_flags(pairs, sh.has, "first")
    assert result.flags.tolist() == flags and sum(flags) > 50
    sets = [set(s.tolist()) for s in sh.sets]
    expected = reference_verify(sets, pairs, flags, 0.4, 0.7, 0.3, Template(5), bounds=ref)
    if mine is not None:
        largest, anchored = round2_binds(pairs, flags, expected, ref)
        assert largest > mine.anchors and anchored > mine.per_document
    got = verify(idx, result, sh, 0.4, 0.7, 0.3, template_max_df=5, bounds=mine)
    assert expected and set(np.flatnonzero(got).tolist()) == set(expected)
