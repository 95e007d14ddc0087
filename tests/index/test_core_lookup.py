"""The records' lookup by band key (lshbloom_udf.index.lookup) against a brute-force reference: every record that
shares a band with a flag, with the number of bands it shares, the earliest ENTRIES_PER_KEY of a shared key."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from lshbloom_udf import _native
from lshbloom_udf.index import lookup
from lshbloom_udf.index.binary import fixed_binary


def _write(directory, sketches, chunk=777):
    writer = lookup.LookupWriter(str(directory), sketches.shape[1])
    for start in range(0, len(sketches), chunk):
        part = sketches[start:start + chunk]
        rows = np.arange(start, start + len(part))
        writer.add(pa.table({"row": pa.array(rows), "id": pa.array([f"d{i}" for i in rows]),
                             "sketch": fixed_binary(part), "size": pa.array(rows.astype(np.float32)),
                             "text_hash": fixed_binary(np.zeros((len(part), 16), np.uint8))}))
    return writer.close(B, R)


B, R = 8, 4


def _reference(sketches, flags) -> set:
    """(flag, position, shared bands) of every record sharing a band (its 8-bit values), a key's first
    ENTRIES_PER_KEY records only. (The lookup keeps 4 bits of each value: another record of a matching record's
    group with the same 4-bit band values would be found too; in these sketches there is none.)"""
    keys = _native.sketch_band_keys(sketches, B, R) if len(sketches) else np.zeros((0, B), np.uint64)
    fkeys = _native.sketch_band_keys(flags, B, R)
    shared: Counter = Counter()
    for f in range(len(flags)):
        for band in range(B):
            for p in np.flatnonzero(keys[:, band] == fkeys[f, band])[:lookup.ENTRIES_PER_KEY]:
                shared[(f, int(p))] += 1
    return {(f, p, s) for (f, p), s in shared.items()}


@pytest.mark.parametrize("n", [0, 1, 5, 1000, 140_000])
def test_lookup_finds_what_a_scan_finds(tmp_path, n):
    rng = np.random.default_rng(n)
    k = B * R
    sketches = rng.integers(0, 256, (n, k), dtype=np.uint8)
    if n > 200:
        sketches[:150, :R] = 7  # a key 150 records share (a template's band): the earliest 64 are followed
        sketches[n - 40:, R:2 * R] = sketches[n // 2, R:2 * R]  # shared by records in other groups
    assert _write(tmp_path, sketches) == n
    picks = rng.integers(0, max(n, 1), 60)
    flags = sketches[picks].copy() if n else rng.integers(0, 256, (4, k), dtype=np.uint8)
    if n:
        flags[:, 2 * R:] = rng.integers(0, 256, (60, k - 2 * R))  # each shares bands 0 and 1 with its pick
        flags[:5, R:] = sketches[:5, R:]  # shares more bands with another record
    opened = lookup.RunLookup(str(tmp_path), n, k, B, R)
    found = opened.matches(flags)
    assert set(zip(found.owner.tolist(), found.position.tolist(), found.shared.tolist())) == _reference(sketches, flags)
    if n:
        assert lookup.group_rows(n) == (3 if n == 140_000 else 1)
        got = opened.records(np.array([0, n - 1]))
        assert got.column("row").to_pylist() == [0, n - 1] and got.column("id").to_pylist() == ["d0", f"d{n - 1}"]
        assert got.column("sketch").to_pylist() == [(sketches[i] & 0x0F).tobytes() for i in (0, n - 1)]
    table = lookup.read_records(str(tmp_path))
    assert table.column("row").to_pylist() == list(range(n))
    assert lookup.documents_in(str(tmp_path)) == n


def test_the_sketches_are_kept_at_four_bits(tmp_path):
    rng = np.random.default_rng(4)
    for k in (7, 8):
        sketches = rng.integers(0, 256, (300, k), dtype=np.uint8)
        assert np.array_equal(lookup.unpack(lookup.pack(sketches), k), sketches & 0x0F)
    directory = tmp_path / "k7"
    writer = lookup.LookupWriter(str(directory), 7)
    rows = np.arange(300)
    writer.add(pa.table({"row": pa.array(rows), "id": pa.nulls(300, pa.string()),
                         "sketch": fixed_binary(sketches[:, :7]),
                         "size": pa.array(np.ones(300, np.float32)),
                         "text_hash": fixed_binary(np.zeros((300, 16), np.uint8))}))
    writer.close(1, 7)
    assert sorted(p.name for p in directory.iterdir()) == sorted(lookup.FILES)  # the 8-bit copy is gone
    assert (directory / lookup.SKETCH_FILE).stat().st_size == 300 * 4
    kept = [list(v) for v in lookup.read_records(str(directory)).column("sketch").to_pylist()]
    assert kept == (sketches[:, :7] & 0x0F).tolist()


def test_a_build_in_several_passes_writes_the_same_files(tmp_path):
    """The build takes as many bands per pass as its memory budget holds: one band at a time gives the same bytes."""
    rng = np.random.default_rng(3)
    sketches = rng.integers(0, 256, (5000, B * R), dtype=np.uint8)
    for name in ("one", "many"):
        _write(tmp_path / name, sketches)
    lookup.build(str(tmp_path / "one"), sketches, B, R, budget=1)
    for name in (lookup.FENCE_FILE, lookup.FRAGMENT_FILE, lookup.GROUP_FILE):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "many" / name).read_bytes()


def test_candidates_of_many_runs_in_chunks_of_flags_are_the_best_of_all(tmp_path, monkeypatch):
    """Verification's candidates from the lookup: per flag the 4 records sharing the most bands across all runs
    (ties to the earliest run and row), the same whether the flags are looked up at once or a few at a time."""
    from types import SimpleNamespace

    from lshbloom_udf.spark.verify import crossrun

    rng = np.random.default_rng(9)
    k = B * R
    runs, all_sketches = [], []
    for t in range(3):
        sketches = rng.integers(0, 256, (400, k), dtype=np.uint8)
        directory = tmp_path / f"run{t}"
        _write(directory, sketches)
        runs.append((f"00000{t}", str(directory), 400))
        all_sketches.append(sketches)
    flags = np.concatenate([s[:30] for s in all_sketches]).copy()
    flags[:, 3 * R:] = rng.integers(0, 256, (len(flags), k - 3 * R))  # 3 bands shared with a record of each run
    flags[::7, :R] = all_sketches[2][0, :R]  # and a band shared with a later run's record
    spec = SimpleNamespace(num_perm=k, b=B, r=R)
    whole = crossrun.looked_up(runs, flags, spec)
    monkeypatch.setattr(crossrun, "FLAGS_PER_LOOKUP", 7)
    chunked = crossrun.looked_up(runs, flags, spec)
    assert whole.to_pylist() == chunked.to_pylist()
    record_keys = [_native.sketch_band_keys(s, B, R) for s in all_sketches]
    flag_keys = _native.sketch_band_keys(flags, B, R)
    expected = []
    for f in range(len(flags)):
        shared = [(-int((keys[i] == flag_keys[f]).sum()), t, i) for t, keys in enumerate(record_keys)
                  for i in range(len(keys))]
        best = sorted(x for x in shared if x[0] < 0)[:4]  # most bands, then the earliest run and row
        expected += [(f, runs[t][0], i) for _, t, i in sorted(best, key=lambda x: (x[1], x[2]))]
    got = list(zip(whole.column("owner").to_pylist(), whole.column("run").to_pylist(), whole.column("row").to_pylist()))
    assert got == expected
