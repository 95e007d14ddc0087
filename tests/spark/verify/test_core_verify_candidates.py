"""Verification's candidate matching and its native parts, without Spark (the sources' end-to-end runs are
tests/spark/verify/test_spark_verify_sources.py).

- The in-memory self-join (round 2), the native (band, key) matching and the driver's match of round 1's kept
  pairs equal quadratic references; round 2's pairs grow linearly on one bucket; candidates are counted once per
  pair with their bands and ranked strongest first.
- The native overlaps equal :func:`shingle_set`'s sets; the driver's similarities count recurring and distinct
  candidates exactly; Arrow blobs split batches by bytes and keep every row.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from lshbloom_udf import _native
from lshbloom_udf.spark.verify.rule import Shingling, shingle_set
from lshbloom_udf.spark.verify.similarity import overlaps
from lshbloom_udf.spark.verify.sources import (ANCHORS_PER_BUCKET, CANDIDATES_PER_DOCUMENT, count_pairs,
                                               shared_key_pairs, strongest)
from spark_support import sample_docs


@pytest.fixture(scope="module")
def docs():
    return list(sample_docs(300, seed=23))


def _reference_pairs(rows, keys, anchors=ANCHORS_PER_BUCKET, per_document=CANDIDATES_PER_DOCUMENT):
    """Quadratic: (later, earlier) with the earlier among the first ``anchors`` holders of a (band, key) the later
    holds; each later row's ``per_document`` with the most such bands, then the smallest such bucket, then the
    earliest."""
    n, b = keys.shape
    evidence: dict = {}
    for band in range(b):
        holders: dict = {}
        for j in range(n):
            holders.setdefault(int(keys[j, band]), []).append(j)
        for members in holders.values():
            for pos, j in enumerate(members):
                for i in members[:min(pos, anchors)]:
                    count, smallest = evidence.get((j, i), (0, n + 1))
                    evidence[(j, i)] = (count + 1, min(smallest, len(members)))
    chosen = []
    for j in range(n):
        mine = sorted((-c, size, i) for (jj, i), (c, size) in evidence.items() if jj == j)
        chosen += [(int(rows[j]), int(rows[i])) for _, _, i in mine[:per_document]]
    return sorted(chosen)


def test_the_in_memory_self_join_equals_the_quadratic_reference():
    rng = np.random.default_rng(3)
    for n, b, values in ((0, 4, 5), (1, 4, 5), (60, 4, 6), (200, 8, 40), (50, 1, 3), (300, 64, 3)):
        rows = np.sort(rng.choice(10**6, n, replace=False)).astype(np.int64)
        keys = rng.integers(0, values, (n, b), dtype=np.uint64)
        f, k, beyond = shared_key_pairs(rows, keys)
        assert list(zip(f.tolist(), k.tolist())) == _reference_pairs(rows, keys)
        assert beyond == len(_reference_pairs(rows, keys, per_document=n + 1)) - len(f)


def test_round_two_pairs_grow_linearly_on_one_bucket():
    """A template family: every document in one bucket of every band. Without anchors 20,000 documents give
    2·10^8 pairs; with them each document gets at most CANDIDATES_PER_DOCUMENT, the earliest."""
    n = 20_000
    keys = np.tile(np.arange(8, dtype=np.uint64), (n, 1))
    f, k, _ = shared_key_pairs(np.arange(n, dtype=np.int64), keys)
    per = np.bincount(f, minlength=n)
    assert per.max() == min(ANCHORS_PER_BUCKET, CANDIDATES_PER_DOCUMENT) and len(f) < ANCHORS_PER_BUCKET * n
    assert set(k.tolist()) == set(range(min(ANCHORS_PER_BUCKET, CANDIDATES_PER_DOCUMENT)))  # the earliest


def test_the_native_self_join_names_bad_keys_and_does_not_depend_on_threads():
    rng = np.random.default_rng(4)
    keys = rng.integers(0, 2000, (3000, 64), dtype=np.uint64)  # 192k keys: past the one-thread size
    one = _native.shared_band_pairs(keys, 4, 1)
    assert len(one[0]) > 1000
    for threads in (2, 7):
        many = _native.shared_band_pairs(keys, 4, threads)
        assert all(np.array_equal(a, b) for a, b in zip(one, many))
    for bad in (np.zeros(3, np.uint64), np.zeros((3, 0), np.uint64)):
        with pytest.raises(ValueError, match=r"\(n, b\) matrix with b >= 1"):
            _native.shared_band_pairs(bad, 4)
    with pytest.raises(ValueError, match="threads must be >= 1"):
        _native.shared_band_pairs(keys, 4, 0)
    with pytest.raises(ValueError, match="anchors must be >= 1"):
        _native.shared_band_pairs(keys, 0)
    with pytest.raises(TypeError, match="uint64"):
        _native.shared_band_pairs(keys.astype(np.float64), 4)


def test_count_pairs_keeps_each_later_earlier_pair_once_with_its_bands():
    f, k, bands = count_pairs(np.array([5, 5, 3, 2, 5]), np.array([1, 1, 4, 2, 0]))
    assert list(zip(f.tolist(), k.tolist(), bands.tolist())) == [(5, 0, 1), (5, 1, 2)]


def test_strongest_ranks_by_bands_then_bucket_then_earliest():
    f = np.array([9, 9, 9, 9, 7, 7])
    k = np.array([1, 2, 3, 4, 1, 2])
    bands = np.array([1, 1, 5, 1, 2, 2])
    bucket = np.array([50, 2, 2, 2, 3, 3])
    got_f, got_k, beyond = strongest(f, k, bands, bucket, per_document=2)
    assert list(zip(got_f.tolist(), got_k.tolist())) == [(7, 1), (7, 2), (9, 2), (9, 3)] and beyond == 2


def test_the_native_pair_index_finds_every_shared_band_key():
    rng = np.random.default_rng(5)
    few = rng.integers(0, 30, (40, 6), dtype=np.uint64)
    many = rng.integers(0, 30, (300, 6), dtype=np.uint64)
    only = rng.random(300) < 0.7
    js, fs = _native.PairIndex(few).matches(many, only)
    got = sorted(zip(js.tolist(), fs.tolist()))
    want = sorted((j, f) for j in range(300) if only[j] for f in range(40) for i in range(6) if many[j, i] == few[f, i])
    assert got == want and len(want) > 100
    with pytest.raises(ValueError, match="shape"):
        _native.PairIndex(few).matches(many[:, :5])
    with pytest.raises(ValueError, match="only"):
        _native.PairIndex(few).matches(many, only[:10])


@pytest.mark.parametrize("unit,ngram", [("words", 4), ("chars", 5), ("mixed", 11)])
def test_native_overlaps_equal_the_shingle_sets(docs, unit, ngram):
    shingling = Shingling(ngram, 2 | 4, unit)
    texts = [d["text"] for d in docs[:40]] + [None, "", "敏捷的棕色狐狸跳过了懒狗 the fox", "短い"]
    rng = random.Random(1)
    lefts = [rng.choice(texts) for _ in range(300)]
    rights = sorted((rng.choice(texts) for _ in range(300)), key=lambda t: t or "")  # runs of one right text
    got = overlaps(lefts, rights, shingling, threads=3)
    for (common, size_l, size_r), l, r in zip(got.tolist(), lefts, rights):
        a, b = shingle_set(l, shingling), shingle_set(r, shingling)
        assert (common, size_l, size_r) == (len(a & b), len(a), len(b))
    # The same pairs by index into one table of texts (verification's driver path): the same counts.
    index = {t: i for i, t in enumerate(texts)}
    at = [np.array([index[t] for t in side], np.uint32) for side in (lefts, rights)]
    for cache_bytes in (0, 1 << 30):  # every earlier text shingled for its pair, or the recurring ones cached
        indexed = _native.indexed_overlaps(texts, *at, ngram, shingling.normalize_mask, unit, 2, cache_bytes)
        assert np.array_equal(indexed, got)
    with pytest.raises(ValueError, match="past the"):
        _native.indexed_overlaps(texts[:3], *at, ngram, shingling.normalize_mask, unit, 1)


@pytest.mark.parametrize("anchors,python", [(3, 1 << 30), (3, 0), (None, 1 << 30)])
def test_the_driver_counts_recurring_and_distinct_candidates_exactly(docs, anchors, python):
    """The driver's similarities (verify.similarity._on_driver) equal the shingle sets' whether the earlier texts
    recur (a few anchors: their lists cached within the driver's budget, or shingled for each pair without one) or
    are mostly distinct."""
    from lshbloom_udf.memory import DriverMemory
    from lshbloom_udf.spark.verify import similarity as verify_similarity
    from lshbloom_udf.spark.verify.rule import VerifyRule

    shingling, rule = Shingling(4, 2 | 4, "words"), VerifyRule(0.6, 0.8, 0.2)
    texts = {row: d["text"] or "" for row, d in enumerate(docs[:100])}
    rng = random.Random(5)
    sources = {f: f % anchors if anchors else f - 100 for f in range(100, 200)}
    for f, source in sources.items():  # 4 % of its source's words replaced, or its first half (contained)
        words = texts[source].split()
        edited = [w if rng.random() > 0.04 else "edited" for w in words]
        texts[f] = " ".join(edited if f % 2 else words[:len(words) // 2])
    pairs = {(f, rng.randrange(anchors or f)) for f in range(100, 200) for _ in range(3)} | set(sources.items())
    f_rows, k_rows = (np.array(side, np.int64) for side in zip(*sorted(pairs, reverse=True)))
    memory = DriverMemory(1 << 30, 1 << 30, python)
    assert (memory.shingle_cache > 0) == bool(python)
    got = verify_similarity._on_driver(f_rows, k_rows, texts, shingling, rule, memory)
    expected = {}
    for f, k in pairs:
        a, b = shingle_set(texts[f], shingling), shingle_set(texts[k], shingling)
        passes, sim, _ = rule.judge(*(np.array([x]) for x in (len(a & b), len(a), len(b))))
        if passes[0]:
            expected[f, k] = sim[0]
    assert dict(zip(zip(got.f_rows.tolist(), got.k_rows.tolist()), got.similarity.tolist())) == pytest.approx(expected)
    measures = dict(zip(zip(got.f_rows.tolist(), got.k_rows.tolist()), got.measure.tolist()))
    assert {measures[f, k] for f, k in sources.items() if (f, k) in expected} == {0, 1}  # by J and by C


def test_arrow_blobs_split_batches_by_bytes_and_keep_every_row(monkeypatch):
    """The driver's text transfer (common.iter_arrow) cuts each batch into blobs of about ARROW_BLOB_BYTES,
    in order, nulls and long rows included."""
    import pyarrow as pa

    from lshbloom_udf import common

    texts = [None if i % 7 == 0 else "é" * (i % 50) for i in range(3000)] + ["x" * 5000]
    batch = pa.RecordBatch.from_pydict({"r": pa.array(range(len(texts)), pa.int64()), "t": pa.array(texts)})
    monkeypatch.setattr(common, "ARROW_BLOB_BYTES", 2000)
    blobs = [pa.ipc.open_stream(b.column(0)[0].as_py()).read_all() for b in common._arrow_blobs([batch])]
    assert len(blobs) > 10
    assert pa.concat_tables(blobs).to_pydict() == batch.to_pydict()
    for table in blobs[:-1]:  # about the budget: one row more at most (the long last row travels alone)
        sizes = [16 + (0 if t is None else len(t.encode())) for t in table.column("t").to_pylist()]
        assert sum(sizes) - max(sizes) < 2000


def test_round_one_on_the_driver_equals_the_quadratic_reference():
    """match_kept: every (flagged, earlier kept) pair sharing a (band, key), with the bands they share, in
    batches, exact despite pair-hash collisions being checked (keys drawn from a few values share often)."""
    import pyarrow as pa

    from lshbloom_udf.spark.verify.spark_source import PairBloom, match_kept, pair_hashes

    rng = np.random.default_rng(5)
    b = 6
    flagged = np.sort(rng.choice(400, 60, replace=False)).astype(np.int64)
    kept = np.setdiff1d(np.arange(400), flagged).astype(np.int64)
    f_keys = rng.integers(0, 5, (len(flagged), b), dtype=np.uint64)
    k_keys = rng.integers(0, 5, (len(kept), b), dtype=np.uint64)
    batches = []
    for lo in range(0, len(kept), 97):
        rows, keys = kept[lo:lo + 97], k_keys[lo:lo + 97]
        batches.append(pa.RecordBatch.from_pydict({
            "band": pa.array(np.tile(np.arange(b, dtype=np.int32), len(rows))),
            "key": pa.array(keys.ravel().view(np.int64)), "row": pa.array(np.repeat(rows, b))}))
    f, k, bands = match_kept(flagged, f_keys, iter(batches))
    expected = sorted((int(fr), int(kr), int(np.sum(f_keys[i] == k_keys[j])))
                      for i, fr in enumerate(flagged) for j, kr in enumerate(kept)
                      if fr > kr and np.any(f_keys[i] == k_keys[j]))
    assert list(zip(f.tolist(), k.tolist(), bands.tolist())) == expected and len(expected) > 1000
    bloom = PairBloom(len(flagged) * b)
    bloom.add(pair_hashes(f_keys))
    assert bloom.contains(pair_hashes(f_keys)).all()  # no false negative
