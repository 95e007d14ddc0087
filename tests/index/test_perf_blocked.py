"""The blocked Bloom backend (``--bloom blocked``): measured false-positive rate, sizing, decisions."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from lshbloom_udf import IndexParams, LSHBloomIndex, _native, text_band_keys
from lshbloom_udf.index import IndexMismatchError, backend
from lshbloom_udf.sample import build_sample

QUERIES = 10**7
FORMAT_NAME = backend("blocked").manifest_format


def four_sigma(p, q):
    return 4.0 * math.sqrt(p * q) / q


@pytest.mark.parametrize(
    "capacity,error_rate",
    [
        (100_000, 1e-3),
        (1_000_000, 1e-4),
        # the per-band rate of p_effective = 1e-3 over b = 42 bands
        (1_000_000, -math.expm1(math.log1p(-1e-3) / 42)),
    ],
)
def test_measured_false_positive_rate_within_target(capacity, error_rate):
    # 10^7 random queries (vectorized in native code) against a filter holding
    # `capacity` random keys, sized for `error_rate`.
    fp, num_blocks = _native.blocked_measure_fp(capacity, error_rate, QUERIES, 7)
    rate = fp / QUERIES
    assert rate <= error_rate + four_sigma(error_rate, QUERIES), (rate, error_rate)
    # The sizing is tight, not wasteful: the filter one block smaller would miss the target.
    assert _native.blocked_fp_rate(capacity, num_blocks - 1) > error_rate
    assert rate >= 0.5 * error_rate


def test_textbook_formula_underestimates_at_low_rates():
    n, p = 1_000_000, 2.4e-7
    ours = _native.blocked_num_blocks(n, p)
    # The textbook estimate at our size promises far better than p: it would size smaller.
    assert _native.blocked_fp_rate_textbook(n, ours) < p / 10
    assert _native.blocked_fp_rate(n, ours) <= p
    # And is more costly than a classic Bloom filter at the same rate.
    _, classic_bits = _native.bloom_geometry(n, p)
    assert ours * 512 > classic_bits


def test_file_roundtrip_and_contains(tmp_path):
    path = str(tmp_path / "b.bbf")
    keys = np.random.default_rng(1).integers(0, (1 << 61) - 1, 50_000, dtype=np.uint64)
    with _native.BlockedFile.create(path, 50_000, 1e-4, 12345) as f:
        was_present = f.add(keys)
        assert f.contains(keys).all()
        assert f.elem_count == int(np.count_nonzero(~was_present))
        count = f.elem_count
    g = _native.BlockedFile.open(path)
    assert (g.capacity, g.seed, g.elem_count) == (50_000, 12345, count)
    assert g.file_size == 64 + 64 * g.num_blocks
    assert g.contains(keys).all()
    with pytest.raises(PermissionError):
        g.add(keys[:1])
    g.close()
    (tmp_path / "x.bbf").write_bytes(b"\0" * 128)
    with pytest.raises(ValueError, match="bad magic"):
        _native.BlockedFile.open(str(tmp_path / "x.bbf"), False)


def test_blocked_index_decisions_equal_compatible_index(tmp_path):
    docs = [d["text"] for d in build_sample(num_docs=800, duplicate_fraction=0.3, seed=5)]
    params = IndexParams.for_threshold(capacity=len(docs), threshold=0.5, num_perm=256)
    keys, has = text_band_keys(docs, **params.signature_kwargs())
    with LSHBloomIndex.create(str(tmp_path / "compat"), params) as ref:
        expected = ref.query_insert(keys, active=has)
    path = str(tmp_path / "blocked")
    with LSHBloomIndex.create(path, params, bloom="blocked") as idx:
        got = idx.query_insert(keys[:400], active=has[:400])
        stats = idx.stats()
    # At p_effective = 1e-5 a false positive in 800 documents is very unlikely: decisions equal.
    with LSHBloomIndex.open(path, expected=params, bloom="blocked") as idx:
        assert idx.bloom == "blocked" and os.path.basename(idx.band_paths()[0]) == "band-0.bbf"
        got = np.concatenate([got, idx.query_insert(keys[400:], active=has[400:])])
        assert idx.inserted == int(np.count_nonzero(has & ~got))
    np.testing.assert_array_equal(got, expected)
    assert expected.sum() > 100
    assert stats["backend"] == "blocked" and stats["bytes_on_disk"] > 0
    manifest = json.loads((tmp_path / "blocked" / "manifest.json").read_text())
    assert manifest["format"] == FORMAT_NAME and manifest["format_version"] == 1
    # Neither kind opens as the other.
    with pytest.raises(IndexMismatchError, match="pybloomfiltermmap3 Bloom filters, asked for blocked"):
        LSHBloomIndex.open(str(tmp_path / "compat"), bloom="blocked")
    with pytest.raises(IndexMismatchError, match="blocked Bloom filters, asked for pybloomfiltermmap3"):
        LSHBloomIndex.open_or_create(path, params)
    with pytest.raises(IndexMismatchError):
        LSHBloomIndex.open(path, expected={"num_perm": 128})
    with pytest.raises(ValueError, match="bloom must be one of"):
        LSHBloomIndex.create(str(tmp_path / "other"), params, bloom="quotient")


@pytest.mark.parametrize("ext, file_class, bands_class", [
    ("bbf", _native.BlockedFile, _native.BlockedBands),
    ("cbf", _native.CuckooFile, _native.CuckooBands),
])
def test_line_bands_query_insert_equals_row_by_row(tmp_path, ext, file_class, bands_class):
    rng = np.random.default_rng(3)
    b = 7
    keys = rng.integers(0, 3000, (5000, b), dtype=np.uint64)  # many collisions
    paths = []
    for i in range(b):
        p = str(tmp_path / f"band-{i}.{ext}")
        file_class.create(p, 5000, 1e-3, 100 + i).close()
        paths.append(p)
    with bands_class(paths, True) as bands:
        fast = bands.query_insert(keys)
    files = [file_class.create(str(tmp_path / f"n-{i}.{ext}"), 5000, 1e-3, 100 + i) for i in range(b)]
    slow = []
    for row in keys:
        dup = any(f.contains(np.array([k], dtype=np.uint64))[0] for f, k in zip(files, row))
        if not dup:
            for f, k in zip(files, row):
                f.add(np.array([k], dtype=np.uint64))
        slow.append(dup)
    np.testing.assert_array_equal(fast, np.array(slow))
    assert fast.any() and not fast.all()
