"""The paper's baselines at document level: each one's documented behaviour on small constructed streams."""

import os
import random

import numpy as np
import pytest

from lshbloom_udf import signatures
from evaluation import baselines as B
from evaluation import generator as G
from evaluation.scoring import agreement, score
from evaluation.synthetic import synthetic_sources
from lshbloom_udf.index import IndexParams
from lshbloom_udf.minhash import band_keys


@pytest.fixture(scope="module")
def sources():
    kept, _ = G.prepare_sources(synthetic_sources(60, seed=5), min_words=50)
    return kept


def _fractions(method, texts):
    return method.fractions(texts).extra["fractions"]


def _pdf(text, seed=0):
    return G.render_pdf(text, random.Random(seed), G.NoiseConfig())


def _ocr(text, seed=0):
    return G.render_ocr(text, random.Random(seed), G.NoiseConfig(ocr_confusion=0.05))


def test_ccnet_catches_exact_line_copies_and_misses_reflowed_or_ocr_text(sources):
    src = sources[0].text
    lines = src.split("\n")
    # lines reordered, upper-cased and renumbered: CCNet's normalization still matches each line
    copy = "\n".join(line.upper().replace("1", "7") for line in reversed(lines))
    dropped = G.drop_sections(src, random.Random(1), G.NoiseConfig())
    texts = [src, sources[1].text, copy, dropped, _ocr(src), _pdf(src)]
    frac = _fractions(B.CCNet(), texts)
    assert frac[0] == 0 and frac[1] < 0.2  # another document shares at most a boilerplate line (``::``)
    assert frac[2] == 1.0 and frac[3] == 1.0
    assert frac[4] < 0.5 and frac[5] < 0.5  # re-set lines share only short lines (title, last lines) with the source
    dup = B.CCNet.decide(frac, 0.5)
    assert dup.tolist() == [False, False, True, True, False, False]


def test_ccnet_normalization():
    assert B.ccnet_normalize("  Hello, WORLD 2024！ ") == "hello, world 0000"
    assert B.ccnet_normalize("a\u2014b\x07c") == "abc"
    assert B.ccnet_normalize("   ") == ""


def test_ccnet_uses_an_exact_hash_set(sources):
    res = B.CCNet().fractions([s.text for s in sources[:5]])
    lines = sum(1 for s in sources[:5] for line in s.text.split("\n") if B.ccnet_normalize(line))
    assert 0 < res.index_bytes <= 8 * lines  # 8 bytes per distinct SHA-1 prefix


def test_dolma_weights_duplicated_paragraphs_by_characters_in_a_bloom_filter(sources):
    a = "first paragraph, short\nsecond paragraph, which is a good deal longer than the first one"
    b = "second paragraph, which is a good deal longer than the first one\nsomething new"
    frac = _fractions(B.Dolma(), [a, b])
    long_len, new_len = len(b.split("\n")[0]), len("something new")
    assert frac[1] == pytest.approx(long_len / (long_len + new_len))
    # exact text only: a paragraph with one changed character is not a duplicate
    frac2 = _fractions(B.Dolma(), [a, a.replace("first one", "first 0ne")])
    assert frac2[1] == pytest.approx(len("first paragraph, short") / len(a.replace("\n", "")))
    res = B.Dolma().fractions([s.text for s in sources[:3]])
    assert res.index_bytes > 0 and res.extra["capacity"] >= 1  # a pybloomfiltermmap3 file


def test_ngram_methods_catch_truncations_completely(sources):
    src = sources[2].text
    cut = src[: src.rfind(" ", 0, int(len(src) * 0.7))]  # a truncation at a word boundary
    for method in (B.DolmaNgram(5), B.DCLM(5)):
        frac = _fractions(method, [src, cut, sources[3].text])
        assert frac[1] == pytest.approx(1.0, abs=0.02), method.name  # the last n-gram may be cut mid-word
        assert frac[2] < 0.1


def test_dclm_segments_unicode_words_where_dolma_splits_on_whitespace():
    assert B.dclm_tokens("Hello, world. It's 3.5 o'clock!") == ["Hello", ",", "world", ".", "It's", "3.5", "o'clock", "!"]
    text = "the quick brown fox, jumps over the lazy dog. " * 3 + "and runs away, far away from here."
    spaced = text.replace(",", " ,").replace(".", " .")  # the same words, punctuation detached
    dclm = _fractions(B.DCLM(3), [text, spaced])
    dolma = _fractions(B.DolmaNgram(3), [text, spaced])
    assert dclm[1] == pytest.approx(1.0)
    assert dolma[1] < 0.6


def test_overlap_decisions_and_thresholds():
    frac = np.array([0.0, 0.2, 0.5, 1.0])
    assert B.OverlapMethod.decide(frac, 0.5).tolist() == [False, False, True, True]
    assert B.OverlapMethod.decide(frac, 0.0).tolist() == [False, True, True, True]  # nothing seen, never a duplicate
    with pytest.raises(ValueError, match="unknown method"):
        B.overlap_method("simhash")
    assert B.overlap_method("dclm", 7).n == 7
    with pytest.raises(ValueError):
        B.DolmaNgram(0)


def test_capacity_is_mean_units_of_a_sample_times_documents():
    texts = ["a b c d e f", "a b c", None, ""] * 5
    m = B.DolmaNgram(2)
    expected = round(np.mean([5, 2, 0, 0]) * 20)
    assert m.estimate_capacity(texts) == expected


def test_reference_shingles_give_the_products_signatures(sources):
    from datasketch import MinHash

    texts = [s.text for s in sources[:5]] + [_ocr(sources[0].text)]
    for ngram, norm in ((1, "none"), (3, "all")):
        ours = signatures(texts, num_perm=64, ngram=ngram, normalize=norm)
        for text, sig in zip(texts, ours):
            m = MinHash(num_perm=64)
            m.update_batch(sorted(B.reference_shingles(text, ngram, norm)))
            assert np.array_equal(m.hashvalues.astype(np.uint32), sig)
    # and datasketch_minhashes does exactly that
    ds = B.datasketch_minhashes(texts, 64, 3, "all")
    assert all(np.array_equal(m.hashvalues.astype(np.uint32), s) for m, s in zip(ds, signatures(texts, 64, 3, normalize="all")))


@pytest.mark.parametrize("scheme", ["affine32", "legacy"])
def test_lshbloom_matches_datasketch_lshbloom_on_a_stream(sources, scheme):
    st = G.make_stream(sources, 50, 0.5, seed=2)
    threshold, k = 0.5, 128
    sigs = signatures(st.texts, num_perm=k, ngram=1, scheme=scheme)
    has = np.ones(len(sigs), bool)
    params = IndexParams.for_threshold(len(sigs), threshold, k, scheme=scheme)
    ours = B.lshbloom_decisions(band_keys(sigs, params.b, params.r), has, params)
    mh = B.minhashes_from_signatures(sigs, has, scheme=scheme)
    bloom = B.datasketch_lshbloom_decisions(mh, threshold, k, len(sigs), params.p_band)
    exact = B.datasketch_lsh_decisions(mh, threshold, k)
    assert agreement(ours.duplicate, bloom.duplicate).identical
    assert agreement(ours.duplicate, exact.duplicate).rate >= 0.95
    assert (bloom.extra["b"], bloom.extra["r"]) == (params.b, params.r) == (exact.extra["b"], exact.extra["r"])
    assert score(st.labels, ours.duplicate).recall > 0.5
    # keep-first: every flagged document has an earlier unflagged one it could collide with
    assert not ours.duplicate[0]
    assert ours.index_bytes > 0 and exact.index_bytes > 0


def test_run_lshbloom_end_to_end_and_documents_without_shingles(sources):
    texts = [sources[0].text, "", None, sources[0].text, sources[1].text]
    res = B.run_lshbloom(texts, threshold=0.5, num_perm=64)
    assert res.duplicate.tolist() == [False, False, False, True, False]
    assert res.seconds > 0 and res.extra["b"] * res.extra["r"] <= 64


@pytest.mark.filterwarnings("ignore::lshbloom_udf.index.CapacityWarning")
def test_bloom_files_live_in_scratch_and_are_removed(sources):
    before = set(os.listdir(B.scratch_dir()))
    B.DCLM(5).fractions([s.text for s in sources[:4]])
    B.run_lshbloom([s.text for s in sources[:4]], num_perm=32)
    assert set(os.listdir(B.scratch_dir())) - before == set()


def _exact_fractions(method, texts):
    """The overlap fraction by its definition, with a Python set of unit strings (no Bloom filter)."""
    seen, out = set(), []
    for text in texts:
        keys, weights = method.units(text) if text else ([], None)
        if not keys:
            out.append(0.0)
            continue
        weights = weights or [1.0] * len(keys)
        out.append(sum(w for k, w in zip(keys, weights) if k in seen) / sum(weights))
        seen.update(keys)
    return np.array(out)


@pytest.mark.parametrize("name,n", [("ccnet", None), ("dolma", None), ("dolma-ngram", 1), ("dolma-ngram", 2),
                                    ("dolma-ngram", 5), ("dclm", 3), ("dclm", 7), ("dclm", 13)])
def test_bulk_unit_table_gives_each_methods_fractions(sources, name, n):
    # a small pool of distinct texts (copies, truncations, short and empty documents), several streams over it
    texts = [s.text for s in sources[:12]]
    texts += [texts[0], texts[1][: len(texts[1]) // 2], _ocr(texts[2]), "one two three", "one two three", "", None,
              "\n".join(texts[3].split("\n")[::-1]), "a b", "b a"]
    method = B.overlap_method(name, n)
    table = B.UnitTable(method, texts)
    rng = np.random.default_rng(0)
    for _ in range(4):
        rows = rng.permutation(len(texts))[: len(texts) - 3]
        stream = [texts[i] for i in rows]
        bulk = table.fractions(rows)
        np.testing.assert_allclose(bulk, _exact_fractions(method, stream), rtol=0, atol=1e-12)
        # the Bloom-filter run agrees (at p = 1e-5 a false "seen" is not expected on a few thousand units)
        np.testing.assert_allclose(bulk, _fractions(method, stream), rtol=0, atol=1e-12)
        assert table.distinct_units(rows) == len({k for t in stream if t for k in method.units(t)[0]})


def test_token_table_ngram_ids_are_equal_exactly_when_the_ngrams_are():
    texts = ["a b c a b c a b d", "c a b c a", "x y", "", "b c a b c a b"]
    table = B.TokenTable(str.split, texts)
    tokens = " ".join(t for t in texts if t).split()  # the table's token stream, texts end to end
    for n in range(1, 9):
        ids = table.grams(n)
        grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
        assert len(ids) == len(grams)
        for i in range(len(grams)):
            for j in range(len(grams)):
                assert (ids[i] == ids[j]) == (grams[i] == grams[j])
