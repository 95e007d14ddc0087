"""The native Bloom filter reads and writes pybloomfiltermmap3 files exactly as pybloomfilter does."""

from __future__ import annotations

import os

import numpy as np
import pybloomfilter
import pytest

from lshbloom_udf import _native

KEY_RANGE = (1 << 61) - 1
PREAMBLE = 1280


def random_keys(n, seed):
    return np.random.default_rng(seed).integers(0, KEY_RANGE, n, dtype=np.uint64)


@pytest.mark.parametrize("capacity,error_rate", [(1, 0.5), (1000, 0.01), (50_000, 1e-5), (123_457, 2.3e-7)])
def test_geometry_equals_pybloomfilter(tmp_path, capacity, error_rate):
    bf = pybloomfilter.BloomFilter(capacity, error_rate, str(tmp_path / "ref.bf"))
    assert _native.bloom_geometry(capacity, error_rate) == (bf.num_hashes, bf.num_bits)


def test_native_file_is_byte_identical_to_pybloomfilters(tmp_path):
    seeds = [11, 22, 33, 44, 55, 66, 77]
    keys = random_keys(20_000, 1)
    ref = pybloomfilter.BloomFilter(30_000, 0.01, str(tmp_path / "ref.bf"), hash_seeds=seeds)
    for k in keys:
        ref.add(int(k))
    ref.sync()
    native = _native.BloomFile.create(str(tmp_path / "native.bf"), 30_000, 0.01, seeds)
    native.add(keys)
    native.sync()
    ref_bytes = (tmp_path / "ref.bf").read_bytes()
    native_bytes = (tmp_path / "native.bf").read_bytes()
    assert len(ref_bytes) == len(native_bytes) == native.file_size
    assert native_bytes[PREAMBLE:] == ref_bytes[PREAMBLE:], "bit data differs"
    # Headers agree but for the struct's pointer field and the element count
    # (pybloomfilter never writes its count back to the file).
    assert native_bytes[:21 + 1048] == ref_bytes[:21 + 1048]
    ref.close()
    native.close()


def test_pybloomfilter_reads_native_inserts(tmp_path):
    path = str(tmp_path / "band.bf")
    native = _native.BloomFile.create(path, 100_000, 1e-4, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13])
    inserted = random_keys(100_000, 2)
    was_present = native.add(inserted)
    assert native.elem_count == int(np.count_nonzero(~was_present))
    native.sync()
    probes = np.concatenate([inserted, random_keys(100_000, 3)])
    ours = native.contains(probes)
    native.close()
    ref = pybloomfilter.BloomFilter.open(path)
    theirs = np.array([int(k) in ref for k in probes])
    np.testing.assert_array_equal(ours, theirs)
    assert ours[:100_000].all()
    assert len(ref) == int(np.count_nonzero(~was_present))


def test_native_reads_pybloomfilter_inserts(tmp_path):
    path = str(tmp_path / "band.bf")
    ref = pybloomfilter.BloomFilter(50_000, 1e-3, path)  # random seeds, as datasketch creates them
    inserted = random_keys(50_000, 4)
    for k in inserted:
        ref.add(int(k))
    ref.sync()
    probes = np.concatenate([inserted, random_keys(100_000, 5)])
    theirs = np.array([int(k) in ref for k in probes])
    native = _native.BloomFile.open(path, False)
    assert native.seeds == list(ref.hash_seeds)
    assert (native.num_bits, native.num_hashes, native.capacity) == (ref.num_bits, ref.num_hashes, ref.capacity)
    np.testing.assert_array_equal(native.contains(probes), theirs)


def test_read_only_and_closed_filters_refuse_writes(tmp_path):
    path = str(tmp_path / "band.bf")
    _native.BloomFile.create(path, 100, 0.01, [1, 2]).close()
    ro = _native.BloomFile.open(path, False)
    with pytest.raises(PermissionError, match="read-only"):
        ro.add(np.array([1], dtype=np.uint64))
    ro.close()
    ro.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        ro.contains(np.array([1], dtype=np.uint64))
    with pytest.raises(FileExistsError):
        _native.BloomFile.create(path, 100, 0.01, [1, 2])


def test_bad_files_are_named_and_explained(tmp_path):
    good = tmp_path / "good.bf"
    _native.BloomFile.create(str(good), 1000, 0.01, [1, 2, 3]).close()
    data = good.read_bytes()

    truncated = tmp_path / "truncated.bf"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"truncated\.bf.*truncated"):
        _native.BloomFile.open(str(truncated), False)

    bad_magic = tmp_path / "magic.bf"
    bad_magic.write_bytes(b"NOTBITARR" + data[9:])
    with pytest.raises(ValueError, match=r"magic\.bf"):
        _native.BloomFile.open(str(bad_magic), False)

    tiny = tmp_path / "tiny.bf"
    tiny.write_bytes(b"MBIT")
    with pytest.raises(ValueError, match=r"tiny\.bf"):
        _native.BloomFile.open(str(tiny), False)

    with pytest.raises(FileNotFoundError):
        _native.BloomFile.open(str(tmp_path / "missing.bf"), False)


def test_band_filters_keep_first_semantics(tmp_path):
    paths = []
    for i in range(3):
        p = str(tmp_path / f"band-{i}.bf")
        _native.BloomFile.create(p, 1000, 1e-6, [i + 1, i + 100, i + 200]).close()
        paths.append(p)
    filters = _native.BandFilters(paths, True)
    keys = np.array(
        [
            [1, 2, 3],
            [4, 5, 6],
            [7, 2, 9],  # shares band 1 with row 0
            [10, 11, 12],
            [10, 13, 14],  # shares band 0 with row 3
            [7, 15, 16],  # would share with row 2, but row 2 was a duplicate and never inserted
        ],
        dtype=np.uint64,
    )
    assert filters.query_insert(keys).tolist() == [False, False, True, False, True, False]
    assert filters.query(np.array([[7, 0, 0], [0, 0, 9], [0, 5, 0]], dtype=np.uint64)).tolist() == [True, False, True]
    with pytest.raises(ValueError, match="3"):
        filters.query(np.zeros((2, 4), dtype=np.uint64))
    filters.close()


def test_file_sizes_match_design_formula(tmp_path):
    path = str(tmp_path / "band.bf")
    f = _native.BloomFile.create(path, 1_000_000, 1e-5 / 42, list(range(1, 22)))
    assert os.path.getsize(path) == f.file_size == PREAMBLE + (f.num_bits + 7) // 8
    f.close()
