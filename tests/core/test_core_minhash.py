"""Signatures and band keys are bit-identical to datasketch's."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
import shingle_reference
from datasketch import MinHash
from datasketch.lsh_bloom import BloomTable

from lshbloom_udf import _native, band_keys, signatures, text_band_keys, arrow_band_keys
from lshbloom_udf.minhash import normalization_mask, permutations

# Every character Python's str.split() splits on, plus look-alikes it does not.
PY_WHITESPACE = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())
NOT_WHITESPACE = "\u200b\u180e\ufeff\u2060"  # zero-width space, Mongolian vowel separator, BOM, word joiner


def reference_shingles(text, ngram, normalize=0):
    """The shingling contract in plain Python (docs/algorithm.md §1): the tests' one reference, words unit."""
    return shingle_reference.shingles(text, ngram, normalize, "words")


def datasketch_signature(text, num_perm, ngram, seed=1, scheme="affine32", normalize=0):
    m = MinHash(num_perm=num_perm, seed=seed, scheme=scheme)
    m.update_batch(sorted(reference_shingles(text, ngram, normalize)))
    return m.hashvalues


def random_text(rng: random.Random) -> str:
    pieces = []
    alphabet = [
        "lorem", "ipsum", "dolor", "sit", "amet", "Ünïcödé", "日本語", "テキスト", "😀", "🇫🇷", "a", "the",
        "naïve", "ﬁle", "Ⅻ", "ǅ", "İstanbul", "ΣΊΣΥΦΟΣ", "straße", "x" * 300, "中文字", "\u0301e",
    ]
    for _ in range(rng.randint(0, 60)):
        pieces.append(rng.choice(alphabet) + rng.choice(["", ",", ".", "!", "—", "'s", "(", ")"]))
        pieces.append(rng.choice([" ", " ", "  ", "\n", "\t", "\u00a0", "\u2028", "\x1c", "\x85", "\u3000", NOT_WHITESPACE[rng.randrange(4)]]))
    return "".join(pieces)


ADVERSARIAL = [
    "",
    None,
    " ",
    PY_WHITESPACE,
    PY_WHITESPACE.join(["a", "b", "c", "d", "e", "f"]),
    "a" + NOT_WHITESPACE + "b",
    "word",
    "two words",
    "emoji 😀 🇫🇷 👩‍👩‍👧 flags",
    "日本語のテキスト 中文 한국어",
    "tab\tnew\nline\rcr\x0bvt\x0cff\x1cfs\x1dgs\x1ers\x1fus\x85nel\xa0nbsp\u2028ls\u2029ps",
    "repeat repeat repeat repeat repeat",
    "ﬁ ﬂ Ⅻ ① ｆｕｌｌ ＷＩＤＴＨ",
    "Mixed CASE, punctuation!!! (brackets) «quotes» — dashes… end.",
]


@pytest.mark.parametrize("ngram", [1, 3, 5])
@pytest.mark.parametrize("normalize", [0, 1, 2, 4, 7])
def test_native_shingles_match_reference(ngram, normalize):
    rng = random.Random(ngram * 10 + normalize)
    texts = ADVERSARIAL + [random_text(rng) for _ in range(150)]
    for text in texts:
        assert set(_native.shingles(text, ngram, normalize)) == reference_shingles(text, ngram, normalize), repr(text)


def test_split_on_every_python_whitespace_char_only():
    for ch in PY_WHITESPACE:
        assert _native.shingles(f"a{ch}b", 1, 0) == [b"a", b"b"], hex(ord(ch))
    for ch in NOT_WHITESPACE:
        assert _native.shingles(f"a{ch}b", 1, 0) == [f"a{ch}b".encode()], hex(ord(ch))


@pytest.mark.parametrize("scheme", ["affine32", "legacy"])
@pytest.mark.parametrize("ngram", [1, 3, 5])
def test_signatures_equal_datasketch(scheme, ngram):
    rng = random.Random(hash((scheme, ngram)) & 0xFFFF)
    texts = ADVERSARIAL + [random_text(rng) for _ in range(60)]
    sig = signatures(texts, num_perm=128, ngram=ngram, seed=1, scheme=scheme)
    assert sig.dtype == np.uint32 and sig.shape == (len(texts), 128)
    for row, text in zip(sig, texts):
        np.testing.assert_array_equal(row, datasketch_signature(text, 128, ngram, 1, scheme), err_msg=repr(text))


@pytest.mark.parametrize("num_perm,seed", [(2, 1), (16, 0), (64, 42), (256, 1), (300, 7)])
@pytest.mark.parametrize("scheme", ["affine32", "legacy"])
def test_signatures_for_several_num_perm_and_seeds(num_perm, seed, scheme):
    rng = random.Random(num_perm)
    texts = [random_text(rng) for _ in range(25)] + ["", None]
    sig = signatures(texts, num_perm=num_perm, seed=seed, scheme=scheme)
    for row, text in zip(sig, texts):
        np.testing.assert_array_equal(row, datasketch_signature(text, num_perm, 1, seed, scheme))


def test_normalized_signatures_equal_datasketch_on_normalized_shingles():
    texts = ADVERSARIAL + ["The QUICK brown fox, jumps!", "the quick brown fox jumps"]
    sig = signatures(texts, num_perm=64, normalize=True)
    for row, text in zip(sig, texts):
        np.testing.assert_array_equal(row, datasketch_signature(text, 64, 1, normalize=7))
    # Normalization makes these two the same document.
    np.testing.assert_array_equal(sig[-1], sig[-2])


def test_permutations_are_datasketchs():
    for scheme in ("affine32", "legacy"):
        a, b = permutations(64, 3, scheme)
        ref = MinHash(num_perm=64, seed=3, scheme=scheme).permutations
        np.testing.assert_array_equal(a, ref[0])
        np.testing.assert_array_equal(b, ref[1])


@pytest.mark.parametrize("b,r", [(42, 6), (9, 28), (17, 15), (2, 1), (256, 1), (1, 256)])
def test_band_keys_equal_datasketch_band_hash(b, r):
    rng = random.Random(b)
    texts = [random_text(rng) for _ in range(30)] + ["", None]
    sig = signatures(texts, num_perm=256)
    keys = band_keys(sig, b, r)
    assert keys.dtype == np.uint64 and keys.shape == (len(texts), b)
    table = BloomTable.__new__(BloomTable)  # only _band_hash is used: no filter needed
    for row_sig, row_keys in zip(sig, keys):
        expected = [table._band_hash(row_sig[i * r : (i + 1) * r]) for i in range(b)]
        assert [int(k) for k in row_keys] == expected


def test_band_keys_of_all_max_signature_is_exact():
    sig = np.full((1, 256), 0xFFFFFFFF, dtype=np.uint32)
    keys = band_keys(sig, 1, 256)
    assert int(keys[0, 0]) == (256 * 0xFFFFFFFF) % ((1 << 61) - 1)


def test_fused_band_keys_equal_two_step_and_flag_empty_documents():
    rng = random.Random(5)
    texts = [random_text(rng) for _ in range(40)] + ["", None, "   \u2028 "]
    keys, has = text_band_keys(texts, 42, 6, ngram=3)
    np.testing.assert_array_equal(keys[has], band_keys(signatures(texts, ngram=3), 42, 6)[has])
    assert list(has) == [bool(reference_shingles(t, 3)) for t in texts]


@pytest.mark.parametrize("large", [False, True])
def test_arrow_band_keys_equal_python_path_with_nulls_and_slices(large):
    rng = random.Random(11)
    texts = [random_text(rng) for _ in range(50)] + [None, "", "x y z"]
    arr = pa.array(texts, type=pa.large_string() if large else pa.string())
    keys, has = arrow_band_keys(arr, 42, 6)
    ref_keys, ref_has = text_band_keys(texts, 42, 6)
    np.testing.assert_array_equal(has, ref_has)
    np.testing.assert_array_equal(keys[has], ref_keys[ref_has])
    # A slice has a non-zero offset into the parent's buffers.
    sliced_keys, sliced_has = arrow_band_keys(arr.slice(7, 20), 42, 6)
    np.testing.assert_array_equal(sliced_has, ref_has[7:27])
    np.testing.assert_array_equal(sliced_keys[sliced_has], ref_keys[7:27][ref_has[7:27]])
    chunked_keys, _ = arrow_band_keys(pa.chunked_array([arr.slice(0, 10), arr.slice(10)]), 42, 6)
    np.testing.assert_array_equal(chunked_keys[has], ref_keys[ref_has])


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="num_perm"):
        signatures(["a"], num_perm=1)
    with pytest.raises(ValueError, match="scheme"):
        signatures(["a"], scheme="affine64")
    with pytest.raises(ValueError, match="ngram"):
        signatures(["a"], ngram=0)
    with pytest.raises(TypeError, match=r"texts\[1\] is int"):
        signatures(["a", 3])
    with pytest.raises(TypeError, match="single string"):
        signatures("a text")
    with pytest.raises(ValueError, match="exceeds num_perm"):
        band_keys(np.zeros((2, 256), dtype=np.uint32), 42, 7)
    with pytest.raises(ValueError, match="2-D"):
        band_keys(np.zeros(256, dtype=np.uint32), 42, 6)
    with pytest.raises(ValueError, match="normalization step"):
        normalization_mask("nfkc,upper")
    with pytest.raises(TypeError, match="string column"):
        arrow_band_keys(pa.array([1, 2]), 42, 6)


@pytest.mark.parametrize("shingle", ["chars", "mixed"])
def test_a_periodic_text_is_sketched_as_its_few_distinct_shingles(shingle):
    """A megabyte of one repeated character (or of a period-2 pattern) has one (two) distinct 11-gram(s): its
    poisson signature is the short text's with the same shingles, computed in linear time (the sketch falls back
    to the distinct hashes; before, this was quadratic in the repeats and took hours)."""
    long_texts = ["x" * (1 << 20), "ab" * (1 << 19)]
    short_texts = ["x" * 11, "ab" * 6]  # "ab" * 6 holds both 11-grams, "ababababab" + "a" and "b" + "ababababab"
    got = signatures(long_texts, num_perm=256, ngram=11, scheme="poisson", shingle=shingle)
    want = signatures(short_texts, num_perm=256, ngram=11, scheme="poisson", shingle=shingle)
    assert (got == want).all()
