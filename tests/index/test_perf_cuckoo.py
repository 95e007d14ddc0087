"""The cuckoo backend (``--bloom cuckoo``): measured false-positive rate, exact sizing, files, decisions, Spark."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
from pyspark.sql import types as T
from scipy.stats import binom

from lshbloom_udf import IndexParams, LSHBloomIndex, _native, band_keys, deduplicate, signatures, text_band_keys
from lshbloom_udf.errors import IndexMismatchError
from lshbloom_udf.index import backend
from lshbloom_udf.sample import build_sample
from spark_support import REFERENCE, sample_docs
from test_core_insert_rule import any_earlier_reference

QUERIES = 10**7
# One false verdict in 10^6 runs of a correct filter.
ALPHA = 1e-6
LOAD = 18 / 20
# Fingerprints that fill SIMD lanes win within this factor of the least buckets (native/src/filters/cuckoo/sizing.rs).
LANE_WIDTHS, LANE_SLACK = (8, 16, 32, 64), 1.15


@pytest.mark.parametrize("error_rate", [1e-3, 1e-5, 1e-7])
def test_measured_false_positive_rate_within_target(error_rate):
    # A filter sized for 200,000 keys holds 200,000 random keys; 10^7 other random keys are queried (native loop).
    capacity = 200_000
    fp, num_buckets, fp_bits, stored = _native.cuckoo_measure_fp(capacity, error_rate, QUERIES, 5)
    assert stored <= capacity and stored >= capacity - 3 * error_rate * capacity - 3
    # Within the target: below the 1 - ALPHA quantile of Binomial(QUERIES, p).
    assert fp <= binom.ppf(1 - ALPHA, QUERIES, error_rate), (fp, error_rate)
    # The model brackets the rate: a query reads bucket 1 always (the rate of n/2 keys over both buckets) and
    # bucket 2 at most (the closed form, an upper bound: the sizing's). The measurement lies inside, up to noise.
    upper = _native.cuckoo_fp_rate(stored, num_buckets, fp_bits)
    lower = _native.cuckoo_fp_rate(stored / 2, num_buckets, fp_bits)
    assert upper <= error_rate
    assert binom.ppf(ALPHA, QUERIES, lower) <= fp <= binom.ppf(1 - ALPHA, QUERIES, upper), (fp, lower, upper)


@pytest.mark.parametrize("capacity,error_rate", [(1000, 1e-2), (200_000, 1e-3), (10**6, 1.2e-7), (10**9, 1.2e-12)])
def test_sizing_is_the_least_that_meets_rate_and_load(capacity, error_rate):
    fp_bits, slots, num_buckets = _native.cuckoo_geometry(capacity, error_rate)
    assert slots == 512 // fp_bits
    assert _native.cuckoo_fp_rate(capacity, num_buckets, fp_bits) <= error_rate
    assert capacity <= LOAD * slots * num_buckets
    # One bucket fewer (fewer than the slack allows, for a lane width), at any fingerprint width, misses the rate
    # or the load.
    slack = LANE_SLACK if fp_bits in LANE_WIDTHS else 1.0
    for f in range(2, 65):
        fewer = min(math.ceil(num_buckets / slack), num_buckets) - 1
        assert _native.cuckoo_fp_rate(capacity, fewer, f) > error_rate or capacity > LOAD * (512 // f) * fewer


def test_about_classic_bloom_at_lshbloom_rates():
    n = 10**7
    for p, most in [(1.2e-7, 1.10), (1.2e-12, 0.92)]:
        _, _, num_buckets = _native.cuckoo_geometry(n, p)
        classic = -n * math.log(p) / math.log(2) ** 2
        assert num_buckets * 512 <= most * classic, (p, num_buckets * 512 / classic)


def test_file_roundtrip_readonly_and_overfill(tmp_path):
    path = str(tmp_path / "c.cbf")
    keys = np.random.default_rng(1).integers(0, (1 << 61) - 1, 50_000, dtype=np.uint64)
    with _native.CuckooFile.create(path, 50_000, 1e-4, 12345) as f:
        was_present = f.add(keys)
        assert f.contains(keys).all()
        assert f.elem_count == int(np.count_nonzero(~was_present))
        count = f.elem_count
    g = _native.CuckooFile.open(path)
    assert (g.capacity, g.seed, g.elem_count) == (50_000, 12345, count)
    assert g.file_size == 64 + 64 * g.num_buckets == os.path.getsize(path)
    assert (g.fp_bits, g.slots, g.num_buckets) == _native.cuckoo_geometry(50_000, 1e-4)
    assert g.contains(keys).all()
    with pytest.raises(PermissionError):
        g.add(keys[:1])
    g.close()
    (tmp_path / "x.cbf").write_bytes(b"\0" * 128)
    with pytest.raises(ValueError, match="bad magic"):
        _native.CuckooFile.open(str(tmp_path / "x.cbf"), False)
    # Far past its capacity a cuckoo filter refuses, naming the filter; what it holds is still found.
    with _native.CuckooFile.create(str(tmp_path / "small.cbf"), 100, 1e-3, 1) as f:
        many = np.arange(10_000, dtype=np.uint64)
        with pytest.raises(ValueError, match="small.cbf: cuckoo filter full"):
            f.add(many)
        held = f.elem_count
        assert 100 < held < 10_000 and f.contains(many[:held]).all()


def test_cuckoo_index_decisions_equal_compatible_index(tmp_path):
    docs = [d["text"] for d in build_sample(num_docs=800, duplicate_fraction=0.3, seed=5)]
    params = IndexParams.for_threshold(capacity=len(docs), threshold=0.5, num_perm=256)
    keys, has = text_band_keys(docs, **params.signature_kwargs())
    with LSHBloomIndex.create(str(tmp_path / "compat"), params) as ref:
        expected = ref.query_insert(keys, active=has)
    path = str(tmp_path / "cuckoo")
    with LSHBloomIndex.create(path, params, bloom="cuckoo") as idx:
        got = idx.query_insert(keys[:400], active=has[:400])
        stats = idx.stats()
    # At p_effective = 1e-5 a false positive in 800 documents is very unlikely: decisions equal.
    with LSHBloomIndex.open(path, expected=params, bloom="cuckoo") as idx:
        assert idx.bloom == "cuckoo" and os.path.basename(idx.band_paths()[0]) == "band-0.cbf"
        got = np.concatenate([got, idx.query_insert(keys[400:], active=has[400:])])
        assert idx.inserted == int(np.count_nonzero(has & ~got))
    np.testing.assert_array_equal(got, expected)
    assert expected.sum() > 100
    assert stats["backend"] == "cuckoo" and stats["bytes_on_disk"] == backend("cuckoo").index_bytes(
        params.capacity, params.p_band, params.b)
    manifest = json.loads((tmp_path / "cuckoo" / "manifest.json").read_text())
    fp_bits, slots, num_buckets = _native.cuckoo_geometry(params.capacity, params.p_band)
    assert manifest["format"] == "lshbloom-cuckoo-index" and manifest["bloom_format"] == "lshbloom-cuckoo-512-v1"
    assert (manifest["fp_bits"], manifest["bucket_slots"], manifest["num_buckets"]) == (fp_bits, slots, num_buckets)
    # Neither kind opens as another.
    with pytest.raises(IndexMismatchError, match="cuckoo Bloom filters, asked for blocked"):
        LSHBloomIndex.open(path, bloom="blocked")
    with pytest.raises(IndexMismatchError, match="pybloomfiltermmap3 Bloom filters, asked for cuckoo"):
        LSHBloomIndex.open(str(tmp_path / "compat"), bloom="cuckoo")


# -- Spark ----------------------------------------------------------------------

SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("text", T.StringType()),
                       T.StructField("source", T.LongType())])
MIX = {**REFERENCE, "band_key": "mix", "order_by": "id", "id_column": "id", "progress": False}


def ordered_keys(texts):
    """The mix band keys of ``texts`` (REFERENCE: 42 bands x 6 rows) and which texts are active."""
    keys = band_keys(signatures([t or "" for t in texts], num_perm=256), 42, 6, band_key="mix")
    return keys, np.array([bool(t and t.split()) for t in texts])


def keep_first_reference(keys: np.ndarray, active: np.ndarray) -> list:
    """Keep first, exactly: a row is flagged when a band key equals one of an earlier kept (inserted) row."""
    seen = [set() for _ in range(keys.shape[1])]
    flags = []
    for row, act in zip(keys.tolist(), active.tolist()):
        dup = act and any(k in s for k, s in zip(row, seen))
        if act and not dup:
            for k, s in zip(row, seen):
                s.add(k)
        flags.append(bool(dup))
    return flags


@pytest.fixture(scope="module")
def docs():
    return sorted(sample_docs(), key=lambda d: d["id"])


def frame(spark, part):
    return spark.createDataFrame([(d["id"], d["text"], d["source"]) for d in part], SCHEMA).repartition(3)


def flags_by_id(df) -> dict:
    return {r["id"]: r["is_duplicate"] for r in df.collect()}


def test_driver_pass_equals_exact_keep_first_and_a_kept_index_grows(spark, docs, tmp_path):
    """Two runs into one growing cuckoo index sized for 60 documents: keep-first over both runs, exactly."""
    index_dir = str(tmp_path / "ix")
    got = {}
    for part in (docs[:250], docs[250:]):
        got.update(flags_by_id(deduplicate(frame(spark, part), **MIX, bloom="cuckoo", index_dir=index_dir,
                                           expected_docs=60, growth="grow", p_effective=1e-7)))
    keys, active = ordered_keys([d["text"] for d in docs])
    expected = keep_first_reference(keys, active)
    assert [got[d["id"]] for d in docs] == expected and sum(expected) > 50
    with LSHBloomIndex.open(index_dir, read_only=True) as index:
        assert index.bloom == "cuckoo" and len(index.generations) >= 3
        assert index.inserted == int(active.sum()) - sum(expected)
    assert os.path.isfile(os.path.join(index_dir, backend("cuckoo").file_name(0, 2)))
    # Reopened, the kept index holds the documents it kept: all of them come back duplicates.
    out = flags_by_id(deduplicate(frame(spark, docs[:100]), **MIX, index_dir=index_dir))
    assert all(out[d["id"]] for d in docs[:100] if d["text"] and d["text"].split())


@pytest.mark.slow
def test_sharded_pass_with_cuckoo_shards_equals_exact_any_earlier(spark, docs, tmp_path):
    index_dir = str(tmp_path / "sharded")
    got = {}
    for part in (docs[:250], docs[250:]):
        got.update(flags_by_id(deduplicate(frame(spark, part), **MIX, pass_mode="sharded", bloom="cuckoo",
                                           index_dir=index_dir, expected_docs=60, growth="grow",
                                           shard_memory=1 << 12, p_effective=1e-7)))
    keys, active = ordered_keys([d["text"] for d in docs])
    assert [got[d["id"]] for d in docs] == any_earlier_reference(keys, active).tolist()
    with open(os.path.join(index_dir, "manifest-00000002.json")) as f:
        manifest = json.load(f)
    assert manifest["bloom"] == "cuckoo" and manifest["shard_plan"]["bloom"] == "cuckoo"
    assert manifest["fill"]["generations"] >= 2
    with pytest.raises(IndexMismatchError, match="keeps cuckoo filters"):
        deduplicate(frame(spark, docs[:10]), **MIX, pass_mode="sharded", bloom="blocked", index_dir=index_dir)
