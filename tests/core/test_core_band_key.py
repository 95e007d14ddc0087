"""The band key option: "sum" (datasketch's, the default) and "mix" (a 64-bit hash of the band).

datasketch keys a band by the sum of its r MinHash values. The values are
minima, so the sums of distinct documents crowd into a small range and collide
(docs/algorithm.md §7); "mix" keys do not. These tests show the collisions on
real signatures, that "mix" keys are the same through every entry point, and
that an index remembers its band key.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pyarrow as pa
import pytest

from lshbloom_udf import IndexMismatchError, IndexParams, LSHBloomIndex, arrow_band_keys, band_keys, signatures, text_band_keys

MERSENNE61 = (1 << 61) - 1


def distinct_documents(n: int, words: int = 800, seed: int = 3) -> list:
    """Random documents over a 200k-word vocabulary: pairwise Jaccard ~0, so any shared band key is spurious."""
    rng = random.Random(seed)
    return [" ".join(f"w{rng.randrange(200_000)}" for _ in range(words)) for _ in range(n)]


def repeated_keys(keys: np.ndarray) -> int:
    """Documents whose key in some band equals an earlier document's key in that band."""
    return sum(len(col) - len(np.unique(col)) for col in keys.T)


def test_sum_keys_of_distinct_documents_collide_and_mix_keys_do_not():
    docs = distinct_documents(6000)
    sigs = signatures(docs, num_perm=256)
    sums, mixes = band_keys(sigs, 51, 5), band_keys(sigs, 51, 5, band_key="mix")
    # Sums of 5 minima of ~800 shingles stay below ~2^32 * 5 * 8/800, about 2^28.
    assert sums.max() < 1 << 29
    assert repeated_keys(sums) > 0
    assert repeated_keys(mixes) == 0
    # Mix keys use the whole key range.
    assert mixes.max() > 1 << 60 and mixes.max() < MERSENNE61


def test_mix_keys_are_the_same_through_every_entry_point():
    docs = distinct_documents(40, words=50) + [None, "", "a b", docs_text := "the same text twice"] + [docs_text]
    kw = dict(b=20, r=3, num_perm=64, ngram=2, normalize="all")
    two_step = band_keys(signatures(docs, num_perm=64, ngram=2, normalize="all"), 20, 3, band_key="mix")
    fused, has = text_band_keys(docs, band_key="mix", **kw)
    arrow, arrow_has = arrow_band_keys(pa.array(docs, pa.large_string()), band_key="mix", threads=2, **kw)
    np.testing.assert_array_equal(fused[has], two_step[has])
    np.testing.assert_array_equal(arrow, fused)
    np.testing.assert_array_equal(arrow_has, has)
    np.testing.assert_array_equal(fused[-1], fused[-2])  # equal texts, equal keys
    sums, _ = text_band_keys(docs, **kw)
    assert not np.any(sums[has] == fused[has])


def test_a_bad_band_key_is_named():
    with pytest.raises(ValueError, match="band_key must be one of"):
        band_keys(np.zeros((1, 8), np.uint32), 2, 4, band_key="xor")
    with pytest.raises(ValueError, match="band_key must be one of"):
        text_band_keys(["a"], 2, 4, num_perm=8, band_key="SUM")
    with pytest.raises(ValueError, match="band_key must be one of"):
        IndexParams.for_threshold(capacity=10, threshold=0.5, band_key="hash")


def test_an_index_remembers_its_band_key(tmp_path):
    path = str(tmp_path / "ix")
    mix = IndexParams.for_threshold(capacity=100, threshold=0.5, num_perm=64, band_key="mix")
    LSHBloomIndex.create(path, mix).close()
    with open(tmp_path / "ix" / "manifest.json") as f:
        assert json.load(f)["params"]["band_key"] == "mix"
    with pytest.raises(IndexMismatchError, match="band_key: index has 'mix', asked for 'sum'"):
        LSHBloomIndex.open_or_create(path, IndexParams.for_threshold(capacity=100, threshold=0.5, num_perm=64))
    with LSHBloomIndex.open(path, expected=mix) as index:
        assert index.params.band_key == "mix"
