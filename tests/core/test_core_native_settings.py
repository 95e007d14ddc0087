"""The native settings objects: validated once, with the messages the loose arguments had."""

from __future__ import annotations

import numpy as np
import pytest

from lshbloom_udf import _native, signatures, text_band_keys
from lshbloom_udf.minhash import permutations

A, B = permutations(64, 1, "affine32")


def test_signature_settings_keep_what_they_were_given():
    s = _native.SignatureSettings(A, B, "affine32", 2, _native.NORM_LOWER, 3)
    assert (s.num_perm, s.scheme, s.ngram, s.normalize, s.threads) == (64, "affine32", 2, 2, 3)
    assert repr(s) == "SignatureSettings(num_perm=64, scheme='affine32', ngram=2, normalize=2, threads=3)"
    assert _native.SignatureSettings(A, B, "affine32", 1, 0).threads == 1
    with pytest.raises(AttributeError):
        s.threads = 1


@pytest.mark.parametrize(
    "args, error, message",
    [
        ((A, B, "affine64", 1, 0), ValueError, "scheme must be 'affine32', 'legacy' or 'poisson', got \"affine64\""),
        ((A, B, "poisson", 1, 0), ValueError, "scheme poisson takes perm_a = k copies of the seed"),
        ((A, B, "affine32", 0, 0), ValueError, "ngram must be >= 1, got 0"),
        ((A, B, "affine32", 1, 16), ValueError,
         "normalize must be a bitmask of 1 (NFKC), 2 (lowercase), 4 (punctuation), 8 (dehyphen), got 16"),
        ((A, B, "affine32", 1, 0, 0), ValueError, "threads must be >= 1, got 0"),
        ((A.astype(float), B, "affine32", 1, 0), TypeError, "perm_a must be a numpy array of dtype uint64"),
        ((A.reshape(8, 8), B, "affine32", 1, 0), ValueError, "perm_a must be a 1-D array, got shape (8, 8)"),
        ((A[:3], B, "affine32", 1, 0), ValueError, "perm_a and perm_b must have the same length, got 3 and 64"),
        ((A + 1, B, "affine32", 1, 0), ValueError, "must be odd for scheme affine32"),
    ],
)
def test_signature_settings_refuse_bad_arguments(args, error, message):
    with pytest.raises(error) as info:
        _native.SignatureSettings(*args)
    assert message in str(info.value)


def test_band_settings_and_their_check_against_the_signature_length():
    bands = _native.BandSettings(8, 8)
    assert (bands.b, bands.r, bands.band_key) == (8, 8, "sum")
    assert repr(_native.BandSettings(4, 2, "mix")) == "BandSettings(b=4, r=2, band_key='mix')"
    for args, message in [((0, 8), "b must be >= 1, got 0"), ((8, -3), "r must be >= 1, got -3"),
                          ((8, 8, "xor"), "band_key must be 'sum' or 'mix', got \"xor\"")]:
        with pytest.raises(ValueError) as info:
            _native.BandSettings(*args)
        assert str(info.value) == message
    settings = _native.SignatureSettings(A, B, "affine32", 1, 0)
    with pytest.raises(ValueError, match=r"b\*r must be <= num_perm: b=9, r=8, num_perm=64"):
        _native.minhash_band_keys(["a b"], settings, _native.BandSettings(9, 8))


def test_one_settings_object_serves_every_call():
    texts = ["a b c", None, "", "a b d e"] * 50
    settings = _native.SignatureSettings(A, B, "affine32", 1, 0, 2)
    np.testing.assert_array_equal(_native.minhash(texts, settings), signatures(texts, num_perm=64))
    keys, has = _native.minhash_band_keys(texts, settings, _native.BandSettings(16, 4, "mix"))
    expected = text_band_keys(texts, 16, 4, num_perm=64, band_key="mix")
    np.testing.assert_array_equal(keys, expected[0])
    np.testing.assert_array_equal(has, expected[1])
