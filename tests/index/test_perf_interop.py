"""The native driver pass reads and writes the same pybloomfiltermmap3 files as pybloomfilter and datasketch."""

from __future__ import annotations

import numpy as np
import pybloomfilter
from datasketch import MinHash, MinHashLSHBloom

from lshbloom_udf import IndexParams, LSHBloomIndex, _native, text_band_keys
from lshbloom_udf.sample import build_sample

KEY_RANGE = (1 << 61) - 1


def test_native_answers_equal_pybloomfilter_on_a_million_keys(tmp_path):
    path = str(tmp_path / "band.bf")
    rng = np.random.default_rng(11)
    inserted = rng.integers(0, KEY_RANGE, 200_000, dtype=np.uint64)
    with _native.BloomFile.create(path, 200_000, 1e-3, [int(s) for s in rng.integers(0, 2**32, 10)]) as f:
        f.add(inserted)
    # 10^6 random keys (plus a slice of the inserted ones), both ways round.
    probes = np.concatenate([rng.integers(0, KEY_RANGE, 1_000_000, dtype=np.uint64), inserted[:50_000]])
    ref = pybloomfilter.BloomFilter.open(path)
    theirs = np.fromiter((int(k) in ref for k in probes.tolist()), dtype=bool, count=len(probes))
    native = _native.BloomFile.open(path)
    ours = native.contains(probes)
    native.close()
    np.testing.assert_array_equal(ours, theirs)
    assert ours[-50_000:].all()
    assert 0 < ours[:1_000_000].sum() < 3_000  # ~1e-3 false positives, measured identically

    # pybloomfilter writes, native reads (random seeds, as datasketch creates them).
    path2 = str(tmp_path / "ref.bf")
    ref2 = pybloomfilter.BloomFilter(200_000, 1e-3, path2)
    for k in inserted.tolist():
        ref2.add(k)
    ref2.sync()
    theirs2 = np.fromiter((int(k) in ref2 for k in probes.tolist()), dtype=bool, count=len(probes))
    with _native.BloomFile.open(path2) as n2:
        np.testing.assert_array_equal(n2.contains(probes), theirs2)


def test_prefetching_query_insert_equals_row_by_row(tmp_path):
    rng = np.random.default_rng(5)
    b = 9
    keys = rng.integers(0, 5000, (6000, b), dtype=np.uint64)
    paths = []
    for i in range(b):
        p = str(tmp_path / f"band-{i}.bf")
        _native.BloomFile.create(p, 6000, 1e-3, [i + 1, i + 100, i + 200]).close()
        paths.append(p)
    with _native.BandFilters(paths, True) as bands:
        fast = bands.query_insert(keys)
    files = [_native.BloomFile.create(str(tmp_path / f"n-{i}.bf"), 6000, 1e-3, [i + 1, i + 100, i + 200]) for i in range(b)]
    slow = []
    for row in keys:
        one = row.reshape(-1, 1)
        dup = any(f.contains(one[j])[0] for j, f in enumerate(files))
        if not dup:
            for j, f in enumerate(files):
                f.add(one[j])
        slow.append(dup)
    np.testing.assert_array_equal(fast, np.array(slow))


def test_natively_written_index_opens_in_datasketch_with_identical_answers(tmp_path):
    docs = [d["text"] for d in build_sample(num_docs=1500, duplicate_fraction=0.3, seed=8)]
    params = IndexParams.for_threshold(capacity=len(docs), threshold=0.5, num_perm=256)
    keys, has = text_band_keys(docs, **params.signature_kwargs())
    path = str(tmp_path / "index")
    half = len(docs) // 2
    with LSHBloomIndex.create(path, params) as index:
        index.query_insert(keys[:half], active=has[:half])
        ours = index.query(keys)
    lsh = MinHashLSHBloom(threshold=0.5, num_perm=256, n=len(docs), fp=params.p_band, save_dir=path, params=(params.b, params.r))
    theirs = []
    for text in docs:
        m = MinHash(num_perm=256, seed=1)
        m.update_batch([s.encode("utf-8") for s in set((text or "").split())])
        theirs.append(lsh.query(m))
    assert ours[has].tolist() == [t for t, h in zip(theirs, has) if h]
    # datasketch continues the index we wrote, and we read what it adds.
    extra = [MinHash(num_perm=256, seed=1) for _ in range(3)]
    for i, m in enumerate(extra):
        m.update_batch([f"unseen-{i}-{j}".encode() for j in range(50)])
        lsh.insert(m)
    del lsh
    with LSHBloomIndex.open(path, read_only=True) as index:
        again = index.query(keys)
    np.testing.assert_array_equal(again, ours)
