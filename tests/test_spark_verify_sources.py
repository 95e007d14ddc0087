"""Verification's two candidate sources (lshbloom_udf/spark/verify/sources.py) and its native parts.

- The kept key spool (socket stream, candidates on the driver) and the Spark
  path (keys computed again, Spark joins) give the same candidate pairs and the
  same verified output on the same input, with and without a round 2, with no
  flag and with no document; also when the spool is too large to keep (the
  run falls back to the Spark path) and over retried keys tasks (a real
  spark-submit). Similarities computed on the executors (texts over the
  driver's budget) equal those computed on the driver.
- The spool is gone after a verified run.
- The in-memory self-join and the native (band, key) matching equal
  quadratic references; the native overlaps equal :func:`shingle_set`'s sets.
"""

from __future__ import annotations

import itertools
import os
import random
import tempfile

import numpy as np
import pytest

from lshbloom_udf import _native, deduplicate
from lshbloom_udf.spark.verify import sources as verify_sources
from lshbloom_udf.spark.verify.rule import Shingling, shingle_set
from lshbloom_udf.spark.verify.similarity import overlaps
from lshbloom_udf.spark.verify.sources import (ANCHORS_PER_BUCKET, CANDIDATES_PER_DOCUMENT, count_pairs,
                                               shared_key_pairs, strongest)
from reliability_support import load_job, run_quietly, submit, write_jsonl
from spark_support import sample_docs

SOURCE_COLS = ("is_duplicate", "duplicate_of", "similarity", "similarity_measure")


@pytest.fixture(scope="module")
def docs():
    return list(sample_docs(300, seed=23))


def _frame(spark, docs, partitions: int = 5):
    df = spark.createDataFrame([(d["id"], d["text"]) for d in docs], "id string, text string")
    return df.repartitionByRange(partitions, "id").sortWithinPartitions("id")


def _verified(spark, docs, transfer: str, **settings):
    out, summary = deduplicate(_frame(spark, docs), id_col="id", key_transfer=transfer, duplicate_of=True,
                               chunk_rows=16, progress=False, return_summary=True, **settings)
    rows = {r["id"]: tuple(r[c] for c in SOURCE_COLS) for r in out.collect()}
    return rows, summary["verify"]


# A strict verify threshold unflags most flags in round 1, so round 2 has work; the defaults' rule has little.
@pytest.mark.parametrize("settings", [{}, {"verify_threshold": 0.9, "containment_threshold": None}])
def test_the_spool_and_the_spark_path_verify_alike(spark, docs, settings):
    spool, s_spool = _verified(spark, docs, "socket", **settings)
    keyed, s_keyed = _verified(spark, docs, "spark", **settings)
    assert "bloom" not in s_spool["stages"] and "bloom" in s_keyed["stages"]  # each took its own source
    assert spool == keyed
    for key in ("pass_flagged", "kept_flagged", "candidate_pairs", "unflagged", "by_containment", "candidates_beyond_bound"):
        assert s_spool[key] == s_keyed[key], key
    assert s_spool["kept_flagged"] > 10 and s_spool["unflagged"] > 0
    if settings:
        assert "round2" in s_spool["stages"]


def test_the_spark_paths_rounds_on_the_driver_equal_its_spark_joins(spark, docs, monkeypatch):
    """The Spark path matches round 1's kept pairs and runs round 2 natively on the driver while the flagged
    documents' keys fit its arrays budget, by Spark joins past it, and without its filter or broadcast row ids past
    one collect of the driver: the same pairs, the same output."""
    from lshbloom_udf.spark.verify import spark_source

    settings = {"verify_threshold": 0.9, "containment_threshold": None}
    calls: list = []
    for name in ("match_kept", "shared_key_pairs"):
        real = getattr(spark_source, name)
        monkeypatch.setattr(spark_source, name, lambda *a, _real=real, _name=name: calls.append(_name) or _real(*a))
    on_driver, s_driver = _verified(spark, docs, "spark", **settings)
    assert calls == ["match_kept", "shared_key_pairs"]  # both rounds had documents, and ran on the driver
    # round 1's flagged documents past the budget, round 2's within it: round 2 brings its keys to the driver
    answers = iter([False, True])
    monkeypatch.setattr(spark_source.SparkCandidates, "_on_driver", lambda self, documents: next(answers))
    calls.clear()
    mixed, s_mixed = _verified(spark, docs, "spark", **settings)
    assert calls == ["shared_key_pairs"]
    monkeypatch.setattr(spark_source.SparkCandidates, "_on_driver", lambda self, documents: False)  # past any budget
    calls.clear()
    by_join, s_join = _verified(spark, docs, "spark", **settings)
    assert not calls
    # past the driver's collect budget: no Bloom filter (every kept pair joined), the row ids semi-joined as a frame
    from lshbloom_udf.memory import DriverMemory

    monkeypatch.setattr(spark_source.SparkCandidates, "_filter_fits", lambda self, documents: False)
    monkeypatch.setattr(DriverMemory, "broadcast_rows", property(lambda self: 0))
    unbounded, s_unbounded = _verified(spark, docs, "spark", **settings)
    assert "bloom" in s_unbounded["stages"] and not calls
    assert on_driver == mixed == by_join == unbounded
    for key in ("kept_flagged", "candidate_pairs", "unflagged", "candidates_beyond_bound"):
        assert s_driver[key] == s_mixed[key] == s_join[key] == s_unbounded[key], key


def test_no_flag_and_no_document(spark, docs):
    distinct = [d for d in docs if d["source"] < 0][:1] + [{"id": f"d{i}", "text": f"word{i} " * 30}
                                                          for i in range(40)]
    rows, s = _verified(spark, distinct, "socket")
    assert s["pass_flagged"] == 0 and s["candidate_pairs"] == 0 and not any(r[0] for r in rows.values())
    empty = spark.createDataFrame([], "id string, text string")
    out, summary = deduplicate(empty, id_col="id", duplicate_of=True, progress=False, return_summary=True)
    assert out.count() == 0 and summary["verify"]["pass_flagged"] == 0


def test_a_spool_too_large_for_its_disk_falls_back_to_the_spark_path(spark, docs, monkeypatch, caplog):
    want, _ = _verified(spark, docs, "spark")
    monkeypatch.setattr(verify_sources, "SPOOL_SHARE_OF_FREE", 0.0)
    with caplog.at_level("INFO", logger="lshbloom_udf"):
        got, s = _verified(spark, docs, "socket")
    assert "bloom" in s["stages"] and got == want
    assert "verification computes the band keys again" in caplog.text


def test_similarities_on_the_executors_equal_those_on_the_driver(spark, docs, caplog):
    want, s_want = _verified(spark, docs, "socket", verify_threshold=0.9, containment_threshold=0.8)
    with caplog.at_level("INFO", logger="lshbloom_udf"):  # every candidate text over the budget
        got, s_got = _verified(spark, docs, "socket", verify_threshold=0.9, containment_threshold=0.8,
                               verify_driver_bytes=0)
    assert "similarities on the executors" in caplog.text
    assert got == want and s_got["candidate_pairs"] == s_want["candidate_pairs"]


def test_the_spool_is_removed_after_a_verified_run(spark, docs, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _verified(spark, docs, "socket")
    assert [p for p in os.listdir(tmp_path) if p.startswith("lshbloom-keys-")] == []


@pytest.mark.slow
def test_retried_keys_tasks_spools_verify_as_the_spark_path(spark, docs, tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    for i, cut in enumerate(range(0, len(docs), 100)):
        write_jsonl(inp / f"part-{i}.jsonl", docs[cut: cut + 100])
    conf = tmp_path / "small-chunks.toml"
    conf.write_text("[dedup]\nchunk_rows = 16\n")
    args = ["--input", str(inp), "--id-column", "id", "--quiet", "--config", str(conf), "--duplicate-of"]
    # The reference: the same job and flags in this session's local[2] (a spark-submit of its own would only
    # add a JVM start-up).
    run_quietly(load_job(), [*args, "--output", str(tmp_path / "keyed"), "--key-transfer", "spark"])
    retried = submit([*args, "--output", str(tmp_path / "retried")], fault="fail-task-after-send",
                     master="local[2,4]")
    assert retried.returncode == 0, retried.stderr[-3000:]
    assert "fails after a chunk" in retried.stderr  # the fault really fired: some partitions have two spools

    def read(path):
        return {r["id"]: tuple(r[c] for c in SOURCE_COLS) for r in spark.read.parquet(str(path)).collect()}

    got = read(tmp_path / "retried")
    assert got == read(tmp_path / "keyed") and sum(r[0] for r in got.values()) > 10


# -- the driver's pieces, against quadratic references ------------------------------------------------


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


def test_iter_arrow_brings_every_row_of_every_partition(spark):
    from lshbloom_udf.common import iter_arrow

    df = spark.createDataFrame([(i, None if i % 5 == 0 else f"text {i}") for i in range(2000)], "r long, t string")
    rows = {}
    for batch in iter_arrow(df.repartition(3)):
        rows.update(zip(batch.column("r").to_pylist(), batch.column("t").to_pylist()))
    assert rows == {i: None if i % 5 == 0 else f"text {i}" for i in range(2000)}


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
