"""The multilingual study's shingle units, noise model and insert rule."""

import random
import unicodedata

import numpy as np
import pytest

from evaluation import baselines as B
from evaluation.generator.crawl import CRAWL_KINDS, CrawlNoise, crawl_variant, is_dense_text, kinds_for
from evaluation.shingling import (
    Shingling,
    char_shingles,
    dehyphenate,
    mixed_shingles,
    mixed_shingles_fast,
    shingles,
    word_shingles,
)
from evaluation.study.candidates import pass_decisions, shingle_split, split_band_keys, verify
from evaluation.study.multilingual import CrawlVariantCache, build_split
from evaluation.study.verified import verify_decisions
from evaluation.synthetic import synthetic_sources
from lshbloom_udf.index import IndexParams
from lshbloom_udf.minhash import band_keys

ZH = "这是一个测试文档，用于检查噪声模型。内核文档的翻译由社区维护，欢迎提交补丁。"
JA = "これはテスト文書です。カーネルの文書は翻訳されています。"


def test_dehyphen_joins_only_a_letter_hyphen_and_one_line_break():
    assert dehyphenate("docu-\nment") == "document"
    assert dehyphenate("docu- \t\r\n  ment") == "document"
    assert dehyphenate("docu\u00ad\rment docu\u2010\nment") == "document document"
    assert dehyphenate("3-\nx") == "3-\nx"  # after a digit
    assert dehyphenate("re-\n\nx") == "re\nx"  # only the hyphen and the first line break go
    assert dehyphenate("well-known") == "well-known"  # no line break
    assert dehyphenate("a - \nb") == "a - \nb"  # after a space


@pytest.mark.parametrize("text", [
    "docu-\nment", "\u2160-\nx", "\u216b-\nx", "3-\nx", "_-\nx", "a-\n-\nb", "-\nx", "a-\n\nb", "\u6f22-\n\u5b57",
    "\u041a\u043e\u043d-\n\u0435\u0446", "x\u00b2-\ny", "\u00aa-\ny", "end-\n", "a-\u2028b"])
def test_dehyphen_is_the_native_rule_at_its_edges(text):
    """The study's dehyphen tests the native core's letter (char::is_alphabetic): letter numbers (Roman numerals)
    join, digits, superscripts and "_" do not; the one reference the evaluation uses (baselines.reference_shingles
    goes through it) gives the native core's shingles."""
    from lshbloom_udf import _native

    want = _native.shingles(text, 1, 8, "chars")  # dehyphen only, every code point a shingle
    assert set(char_shingles(dehyphenate(text), 1)) == {s.decode() for s in want}
    assert B.reference_shingles(text, 2, "dehyphen,nfkc,lower,punct") == set(_native.shingles(text, 2, 15))


def test_word_units_are_todays_shingles():
    assert word_shingles("a b c d", 2) == {"a b", "b c", "c d"}
    assert word_shingles("a b", 3) == {"a b"}
    assert word_shingles(" \n", 3) == set()
    text = "The quick, brown fox — jumps over the lazy dog's back. " * 3
    assert {s.encode() for s in shingles(text, Shingling("words", 4))} == B.reference_shingles(text, 4, "nfkc,lower,punct")


def test_char_units_delete_whitespace_and_slide():
    assert char_shingles("ab c\td", 3) == {"abc", "bcd"}
    assert char_shingles("a b", 5) == {"ab"}
    assert char_shingles(" \u3000\n", 5) == set()
    assert shingles("Ａ.B", Shingling("chars", 2)) == {"ab"}  # NFKC, lower, punctuation to a space, then deleted


def test_mixed_units_weigh_dense_scripts_three():
    # a=1 b=1 中=3 文=3 c=1 d=1; n=4: the shortest run of weight >= 4 from each start
    assert mixed_shingles("ab中 文cd", 4) == {"ab中", "b中", "中文", "文c"}
    assert mixed_shingles("中", 4) == {"中"}  # total weight < n: one shingle of all
    assert mixed_shingles("中文", 4) == {"中文"}  # 中 alone weighs 3; the run from 文 passes the end
    assert mixed_shingles("abcdef", 4) == char_shingles("abcdef", 4)  # no dense characters: chars
    assert mixed_shingles("한국어", 3) == {"한", "국", "어"}  # Hangul syllables are dense
    assert mixed_shingles("𠀀x", 3) == {"𠀀"}  # a supplementary-plane ideograph


@pytest.mark.parametrize("n", [1, 3, 7, 9, 13])
def test_the_studys_fast_mixed_shingler_is_the_reference(n):
    rng = random.Random(n)
    alphabet = "ab c中文カナ한 \n𠀀ｱ,"
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30)))
        assert mixed_shingles_fast(text, n) == mixed_shingles(text, n)
    assert mixed_shingles_fast(ZH + JA, n) == mixed_shingles(ZH + JA, n)


def test_every_kind_of_copy_is_recorded_and_deterministic():
    text = ZH * 4 + "\n\n" + JA * 4
    assert is_dense_text(text) and "cjk_space" in kinds_for(text)
    assert "cjk_space" not in kinds_for("plain English words only " * 20)
    for kind in CRAWL_KINDS:
        a = crawl_variant(text, kind, random.Random(7))
        assert a == crawl_variant(text, kind, random.Random(7))
        assert a[1] == kind or (kind == "composed" and a[1].startswith("composed:"))
        assert a[0] != text or kind in ("html", "drop")
    with pytest.raises(ValueError, match="unknown kind"):
        crawl_variant(text, "nope", random.Random(0))


def test_the_noise_does_what_it_says():
    rng = random.Random(3)
    english = " ".join(f"documentation{i} paragraph" for i in range(200))
    hyph = crawl_variant(english, "hyphen", rng)[0]
    assert "-\n" in hyph and dehyphenate(hyph).split() == english.split()
    spaced = crawl_variant(ZH * 3, "cjk_space", rng)[0]
    assert spaced.replace(" ", "") == (ZH * 3).replace(" ", "") and spaced.count(" ") > 10
    noise = CrawlNoise(ocr_rate=(0.04, 0.04))
    ocr = crawl_variant(english, "ocr_chars", rng, noise)[0]
    assert ocr != english and abs(len(ocr) - len(english)) < 0.05 * len(english)
    cut = crawl_variant(english, "truncate", rng)[0]
    assert english.startswith(cut) and 0.4 * len(english) <= len(cut) <= 0.95 * len(english) + 1


def test_streams_cover_the_kinds_and_label_first_occurrences():
    pool = synthetic_sources(60, seed=2)
    split = build_split("t", pool, 60, seed=0)
    kinds = {d.kind.split(":")[0] for st in split.streams for d in st.docs}
    assert {"original", "truncate", "ocr_chars", "boilerplate", "composed"} <= kinds
    for st in split.streams:
        seen = set()
        for d in st.docs:
            assert d.is_duplicate == (d.source in seen)
            seen.add(d.source)
    assert CrawlVariantCache(pool, 0, CrawlNoise()).get(pool[0].id, 3) == CrawlVariantCache(
        pool, 0, CrawlNoise()).get(pool[0].id, 3)


@pytest.mark.parametrize("tj,tc,floor", [(0.5, None, None), (0.45, 0.8, None), (0.6, 0.7, None), (0.6, 0.5, 0.3)])
def test_the_fast_rule_is_the_products_rule(tj, tc, floor):
    """candidates.pass_decisions/verify decide as the product's index (keep-first) + verify_decisions."""
    pool = synthetic_sources(80, seed=4)
    split = build_split("t", pool, 80, seed=1)
    sh = Shingling("words", 3)
    shingled = shingle_split(split.texts, sh, 128)
    b, r = 16, 8
    bucket_keys = split_band_keys(shingled, 128, b, r)
    keys = band_keys(shingled.sigs[:, :128], b, r, "mix")
    sets = [frozenset(shingles(t, sh)) for t in split.texts]
    for idx in split.index:
        params = IndexParams(b=b, r=r, capacity=4 * len(idx), num_perm=128, threshold=0.3, ngram=3,
                             normalize="nfkc,lower,punct", p_effective=1e-9, band_key="mix")
        expected = B.lshbloom_decisions(keys[idx], shingled.has[idx], params).duplicate
        got = pass_decisions(idx, bucket_keys, shingled.has)
        assert expected.any() and np.array_equal(got.flags, expected)
        want = verify_decisions(keys[idx], shingled.has[idx], expected, [sets[j] for j in idx], tj,
                                containment=tc, floor=floor)
        assert np.array_equal(verify(idx, got, shingled, tj, tc, floor), want)


def test_containment_verifies_a_truncation_jaccard_misses():
    long = " ".join(f"w{i}" for i in range(100))
    short = " ".join(f"w{i}" for i in range(40))
    sets = [frozenset(shingles(t, Shingling("words", 1))) for t in (long, short)]
    keys = np.array([[1], [1]], dtype=np.uint64)
    has = np.array([True, True])
    flags = np.array([False, True])
    assert not verify_decisions(keys, has, flags, sets, 0.5)[1]
    assert verify_decisions(keys, has, flags, sets, 0.5, containment=0.9)[1]
    # J = 40/100: a floor above it refuses the containment, one at it accepts
    assert not verify_decisions(keys, has, flags, sets, 0.5, containment=0.9, floor=0.41)[1]
    assert verify_decisions(keys, has, flags, sets, 0.5, containment=0.9, floor=0.4)[1]
    assert unicodedata.normalize("NFKC", "ｱ") == "ア"  # the dense range FF66-FF9D is NFKC's half-width kana


def test_templated_pairs_count_a_pair_verified_in_either_order():
    from evaluation.study.templated_pairs import accepted, verifies

    # a small page (40 shingles, 30 of them in a sibling of 100): C 0.75 later, 0.30 earlier; J 30/110
    pair = {"common": 30, "small": 40, "large": 100}
    assert verifies(30, 40, 100, 0.4, 0.7, None) and not verifies(30, 100, 40, 0.4, 0.7, None)
    assert accepted([pair], (0.4, 0.7, None)) == [pair]  # the smaller page later is the worst case
    assert accepted([pair], (0.4, 0.7, 0.3)) == []  # J = 0.27 < 0.3: the floor refuses it
    assert accepted([dict(pair, common=33, large=103)], (0.4, 0.7, 0.3))  # J = 33/110 = 0.3: at the floor
