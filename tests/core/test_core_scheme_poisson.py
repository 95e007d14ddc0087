"""Scheme ``poisson`` through every native entry point: a MinHash row is the minimum over the shingles."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lshbloom_udf import arrow_band_keys, band_keys, signatures, text_band_keys
from lshbloom_udf.index import IndexParams

WORDS = [f"tok{i}" for i in range(400)]


def _texts(rng: np.random.Generator, n: int) -> list:
    return [" ".join(rng.choice(WORDS, rng.integers(1, 60))) for _ in range(n)]


def test_row_of_a_union_is_the_rowwise_minimum():
    """With unigram shingles, the shingle set of ``a + " " + b`` is the union of theirs, so its signature is
    the element-wise minimum of theirs whatever the sizes (1 to 300 shingles, k = 512)."""
    rng = np.random.default_rng(3)
    a, b = _texts(rng, 200), _texts(rng, 200)
    b[:20] = [" ".join(rng.choice(WORDS, 300)) for _ in range(20)]
    sa, sb, su = (signatures(t, 512, 1, 1, "poisson") for t in (a, b, [x + " " + y for x, y in zip(a, b)]))
    assert np.array_equal(su, np.minimum(sa, sb))
    assert (sa != np.iinfo(np.uint32).max).all()


def test_every_entry_point_gives_the_same_rows_and_keys():
    rng = np.random.default_rng(5)
    texts = _texts(rng, 300) + [None, "", "  \n"]
    sig = signatures(texts, 256, 2, 7, "poisson", "all")
    assert np.array_equal(sig, signatures(texts, 256, 2, 7, "poisson", "all", threads=3))
    assert (sig[-3:] == np.iinfo(np.uint32).max).all()
    expected = band_keys(sig, 42, 6, "mix")
    kwargs = dict(num_perm=256, ngram=2, seed=7, scheme="poisson", normalize="all", band_key="mix")
    keys, has = text_band_keys(texts, 42, 6, threads=2, **kwargs)
    assert np.array_equal(keys[:-3], expected[:-3]) and has.tolist() == [True] * 300 + [False] * 3
    arrow_keys, arrow_has = arrow_band_keys(pa.array(texts, pa.large_string()), 42, 6, **kwargs)
    assert np.array_equal(arrow_keys[has], keys[has]) and np.array_equal(arrow_has, has)


def test_seed_and_scheme_change_the_rows():
    texts = ["the quick brown fox jumps over the lazy dog"] * 2
    s1, s2 = signatures(texts, 128, 1, 1, "poisson"), signatures(texts, 128, 1, 2, "poisson")
    assert np.array_equal(s1[0], s1[1]) and (s1[0] != s2[0]).mean() > 0.9
    assert (s1[0] != signatures(texts, 128, 1, 1, "affine32")[0]).mean() > 0.9


def test_index_params_and_bad_scheme():
    params = IndexParams.for_threshold(1000, 0.45, 512, scheme="poisson", ngram=4, band_key="mix")
    assert params.signature_kwargs()["scheme"] == "poisson"
    with pytest.raises(ValueError, match="poisson"):
        IndexParams.for_threshold(1000, 0.45, 512, scheme="oph")
