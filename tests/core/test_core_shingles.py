"""Shingle units (words, chars, mixed) and the dehyphen step: native shingles equal a plain-Python
reference of each rule, signatures equal datasketch's over the same shingles, and the unit is an
index parameter (recorded, checked on reopen)."""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pyarrow as pa
import pytest
from datasketch import MinHash

import shingle_reference as ref
from lshbloom_udf import IndexMismatchError, IndexParams, LSHBloomIndex, _native, arrow_band_keys, signatures
from lshbloom_udf import text_band_keys
from lshbloom_udf.config import DedupConfig
from lshbloom_udf.errors import ConfigError
from lshbloom_udf.minhash import normalization_mask, normalization_name

UNITS = ("words", "chars", "mixed")
PY_WHITESPACE = [chr(c) for c in range(0x110000) if chr(c).isspace()]
# Letters of several scripts (no combining marks: Rust's Alphabetic includes some that str.isalpha() does not).
LETTERS = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    "ÀÉÎÕÜßàçéñöøÿªº" "АБВГДЕЖабвгдежзийклмнопрстуфхцчшщъыьэюяЁё"
    "日本語中文字漢〇々" "ひらがなカタカナーｱｶﾞ" "한국어가나다" "ⅫǅﬁＡＢ１"
    "\U00020000\U0002a6d6😀"  # 4-byte code points: shingles longer than 16 bytes take the long-shingle path
)
PUNCT = ".,;:!?'\"()[]{}—–…「」。、！？·"
HYPHENS = ["-", "\u00ad", "\u2010", "\u2011", "-\n", "-\r\n", "- \n\t", "\u00ad\n ", "\u2010\r", "-\n\n"]


def random_text(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 40)):
        kind = rng.random()
        if kind < 0.55:
            parts.append("".join(rng.choice(LETTERS) for _ in range(rng.randint(1, 6))))
        elif kind < 0.75:
            parts.append(rng.choice(PY_WHITESPACE))
        elif kind < 0.87:
            parts.append(rng.choice(HYPHENS))
        else:
            parts.append(rng.choice(PUNCT))
    return "".join(parts)


@pytest.fixture(scope="module")
def texts():
    rng = random.Random(2026)
    return [random_text(rng) for _ in range(3000)]


@pytest.mark.parametrize("unit", UNITS)
def test_native_shingles_equal_the_reference_on_random_texts(texts, unit):
    rng = random.Random(unit)
    for text in texts:
        ngram = rng.choice([1, 2, 3, 4, 5, 7])
        flags = rng.choice([0, 8, 7, 15, 3, 9])
        got = _native.shingles(text, ngram, flags, unit)
        assert set(got) == ref.shingles(text, ngram, flags, unit), (text, ngram, flags)
        assert got == sorted(set(got))  # distinct, sorted bytewise


def test_words_is_the_default_and_unchanged(texts):
    for text in texts[:500]:
        assert _native.shingles(text, 2, 7) == _native.shingles(text, 2, 7, "words") == sorted(ref.shingles(text, 2, 7))


def test_every_python_whitespace_is_deleted_by_the_character_units():
    for ws in PY_WHITESPACE:  # includes U+001C-U+001F, U+0085, U+2028, U+3000
        text = f"{ws}ab{ws}{ws}c{ws}"
        assert _native.shingles(text, 2, 0, "chars") == [b"ab", b"bc"], hex(ord(ws))
        assert _native.shingles(text, 2, 0, "mixed") == [b"ab", b"bc"], hex(ord(ws))
    # Not whitespace to Python: kept.
    assert _native.shingles("a\u200bb", 2, 0, "chars") == sorted(["a\u200b".encode(), "\u200bb".encode()])


def test_short_and_empty_texts():
    for unit in ("chars", "mixed"):
        assert _native.shingles(None, 3, 0, unit) == []
        assert _native.shingles("", 3, 0, unit) == []
        assert _native.shingles(" \n\u3000", 3, 0, unit) == []
        assert _native.shingles("a b", 5, 0, unit) == [b"ab"]
    assert _native.shingles("漢字", 7, 0, "mixed") == ["漢字".encode()]  # weight 6 < 7: one shingle of all
    assert _native.shingles("漢字", 6, 0, "mixed") == ["漢字".encode()]  # weight 6: one full run


def test_mixed_weighs_dense_scripts_three_at_the_range_edges():
    for lo, hi in ref.DENSE:
        for cp in (lo - 1, lo, hi, hi + 1):
            c = chr(cp)
            dense = any(a <= cp <= b for a, b in ref.DENSE)
            # ngram 3: a dense character is a whole shingle (and "xy" alone is too light to start one);
            # any other character needs "xy" after it.
            want = [c.encode()] if dense else [(c + "xy").encode()]
            assert _native.shingles(c + "xy", 3, 0, "mixed") == want, hex(cp)


def test_dehyphen_step():
    assert normalization_mask("dehyphen") == _native.NORM_DEHYPHEN == 8
    assert _native.shingles("docu-\n  ment", 1, 8) == [b"document"]
    assert _native.shingles("Docu-\r\nment", 1, normalization_mask("dehyphen,all")) == [b"document"]
    assert _native.shingles("Docu-\r\nment", 1, normalization_mask("all")) == [b"docu", b"ment"]
    for text in ("well-known", "9-\n1", "a -\nb", "a-\n\nb", "a\u2011\nb"):
        assert ref.dehyphen(text) == text.replace("-\n\n", "\n")
        assert _native.shingles(text, 1, 8) == sorted(ref.shingles(text, 1, 8)), text


def test_normalization_names_keep_their_canonical_forms():
    assert normalization_name("all") == normalization_name(True) == "nfkc,lower,punct"
    assert normalization_name("none") == "none"
    assert normalization_name("punct,dehyphen") == "dehyphen,punct"
    assert normalization_name("all,dehyphen") == normalization_name(["dehyphen", "all"]) == "dehyphen,nfkc,lower,punct"
    assert normalization_mask("dehyphen,nfkc,lower,punct") == 15


@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("scheme", ["affine32", "legacy"])
def test_signatures_equal_datasketch_over_the_reference_shingles(texts, unit, scheme):
    sample = texts[:300] + [None, "", "漢字かな交じり文", "a"]
    spec = "dehyphen,all" if scheme == "affine32" else "none"
    flags = normalization_mask(spec)
    sigs = signatures(sample, num_perm=64, ngram=4, seed=7, scheme=scheme, normalize=spec, shingle=unit)
    for text, row in zip(sample, sigs):
        m = MinHash(num_perm=64, seed=7, scheme=scheme)
        m.update_batch(sorted(ref.shingles(text, 4, flags, unit)))
        np.testing.assert_array_equal(row, m.hashvalues.astype(np.uint32), err_msg=repr(text))


@pytest.mark.parametrize("unit", ["chars", "mixed"])
def test_band_keys_of_a_unit_agree_on_every_path(texts, unit):
    sample = texts[:200] + [None]
    kw = dict(num_perm=128, ngram=5, shingle=unit, band_key="mix")
    keys, has = text_band_keys(sample, 16, 8, **kw)
    arrow_keys, arrow_has = arrow_band_keys(pa.array(sample, pa.large_string()), 16, 8, threads=2, **kw)
    np.testing.assert_array_equal(has, arrow_has)
    np.testing.assert_array_equal(keys[has], arrow_keys[has])
    words_keys, _ = text_band_keys(sample, 16, 8, num_perm=128, ngram=5, band_key="mix")
    assert (words_keys[has] != keys[has]).any()  # the unit reaches the hashing


def test_bad_units_are_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"unit must be one of \[\"words\", \"chars\", \"mixed\"\], got \"word\""):
        _native.shingles("a", 1, 0, "word")
    a = np.arange(1, 17, 2, dtype=np.uint64)
    with pytest.raises(ValueError, match="unit must be one of"):
        _native.SignatureSettings(a, a, "affine32", 1, 0, 1, "bytes")
    with pytest.raises(ValueError, match="shingle must be one of"):
        signatures(["a"], shingle="char")
    with pytest.raises(ConfigError, match="shingle must be one of"):
        DedupConfig().replace(shingle="letters")
    s = _native.SignatureSettings(a, a, "affine32", 3, 8, 1, "mixed")
    assert (s.unit, s.ngram, s.normalize) == ("mixed", 3, 8)
    assert repr(s).endswith("threads=1, unit='mixed')")
    assert _native.SignatureSettings(a, a, "affine32", 3, 0).unit == "words"
    assert list(_native.SHINGLE_UNITS) == list(UNITS)


# -- the unit is an index parameter ---------------------------------------------


def make_params(shingle="words", **kw):
    return IndexParams.for_threshold(200, 0.5, 64, shingle=shingle, **kw)


def test_manifest_records_the_unit_and_reopening_with_another_is_refused(tmp_path):
    path = str(tmp_path / "index")
    LSHBloomIndex.create(path, make_params("chars")).close()
    with open(os.path.join(path, "manifest.json"), encoding="utf-8") as f:
        assert json.load(f)["params"]["shingle"] == "chars"
    with LSHBloomIndex.open_or_create(path, make_params("chars")) as index:
        assert index.params.shingle == "chars"
        assert index.params.signature_kwargs()["shingle"] == "chars"
    with pytest.raises(IndexMismatchError, match="shingle: index has 'chars', asked for 'words'"):
        LSHBloomIndex.open_or_create(path, make_params("words"))


def test_config_threads_the_unit_to_the_index_parameters():
    assert DedupConfig().shingle == "mixed"  # the default since the multilingual study
    assert DedupConfig.from_preset("paper").shingle == "words"
    assert DedupConfig().index_params(100).shingle == "mixed"
    assert DedupConfig().replace(shingle="chars").index_params(100).shingle == "chars"
