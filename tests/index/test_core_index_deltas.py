"""The write buffer (lshbloom_udf.index.deltas): small runs decide against the live base read-only and commit a delta;
merges and folds keep them few; the decisions are those of the copy-on-write path."""

from __future__ import annotations

import os

import numpy as np
import pytest

from lshbloom_udf import errors
from lshbloom_udf.index import IndexParams, IndexTransaction, LSHBloomIndex, RunRecord, deltas
from lshbloom_udf.index import manifest as mf

BASE, RUN = 4000, 100


def params(capacity=20_000, growth="fixed"):
    return IndexParams.for_threshold(capacity=capacity, threshold=0.5, num_perm=256, growth=growth)


def run_into(path, keys, documents, bloom="cuckoo", rule="first", p=None):
    """One committed run deciding ``keys``; its decisions and the delta it wrote (None: the copy path)."""
    with IndexTransaction(path) as txn:
        index = txn.stage(p or params(), bloom=bloom, documents=documents)
        delta = txn.delta
        decided = index.decide(keys, None, rule)
        txn.commit(RunRecord(documents=len(keys), duplicates=int(decided.sum()),
                             inserted=int((~decided).sum()), params={}))
    return decided, delta


def batches(seed, b):
    """A base batch, then runs of RUN rows: half new keys, a quarter copies of base rows, a quarter of earlier runs'."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 1 << 62, (BASE, b), dtype=np.uint64)
    runs, earlier = [], [base]
    for _ in range(30):
        new = rng.integers(0, 1 << 62, (RUN // 2, b), dtype=np.uint64)
        pool = np.concatenate(earlier)
        copies = pool[rng.integers(0, len(pool), RUN // 2)].copy()
        copies[:, : b - 2] = rng.integers(0, 1 << 62, (len(copies), b - 2), dtype=np.uint64)  # shares 2 bands
        run = np.concatenate([new, copies])[rng.permutation(RUN)]
        runs.append(run)
        earlier.append(run)
    return base, runs


@pytest.mark.parametrize("bloom,rule", [("cuckoo", "first"), ("blocked", "all")])
def test_small_runs_write_deltas_that_merge_and_fold_deciding_as_the_copy_path(tmp_path, bloom, rule):
    b = params().b
    base, runs = batches(1, b)
    with_deltas, copying = str(tmp_path / "deltas"), str(tmp_path / "copies")
    for path in (with_deltas, copying):
        run_into(path, base, len(base), bloom, rule)
    written, most = [], 0
    for run in runs:
        got, delta = run_into(with_deltas, run, len(run), bloom, rule)
        want, none = run_into(copying, run, None, bloom, rule)  # no count: the copy path, as before deltas
        assert none is None
        # Every copy of an earlier document is found through the base or a delta; a new key at most by a false
        # positive, which the two paths may make on different rows.
        assert (got == want).mean() > 0.97 and got[want].all() or (got != want).sum() <= 3
        written.append(delta)
        manifest = mf.read_manifest(with_deltas)
        most = max(most, len(manifest.deltas))
        assert len(manifest.deltas) <= deltas.MAX_DELTAS
        on_disk = sorted(n for n in os.listdir(with_deltas) if deltas.is_delta_file(n))
        assert on_disk == sorted(manifest.delta_files())  # merged and folded deltas leave no file behind
    assert written[0] is not None and None in written  # deltas were written, and some run folded them
    assert most >= 2  # some deltas were pending together
    for path in (with_deltas, copying):
        with LSHBloomIndex.open(path, read_only=True) as live:  # every checksum verified
            assert live.query(np.concatenate([base, *runs])).all()
            assert live.inserted == mf.read_manifest(path).inserted


def test_a_delta_run_leaves_the_live_base_files_untouched_and_is_refused_when_its_log_is_damaged(tmp_path):
    path, b = str(tmp_path / "index"), params().b
    base, runs = batches(2, b)
    run_into(path, base, len(base))
    before = {n: os.stat(os.path.join(path, n)).st_mtime_ns for n in os.listdir(path) if n.startswith("band-")}
    decided, delta = run_into(path, runs[0], len(runs[0]))
    assert delta == "delta000002"
    assert {n: os.stat(os.path.join(path, n)).st_mtime_ns for n in before} == before
    log = os.path.join(path, deltas.keys_file_name(delta))
    assert os.path.getsize(log) == 8 * b * int((~decided).sum()) > 0  # keep-first: the kept documents' keys
    with open(log, "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 1]))
    with IndexTransaction(path) as txn:
        with pytest.raises(errors.IndexCorruptError, match="delta000002"):
            txn.verify()


def test_a_crash_before_the_sweep_leaves_merged_deltas_that_the_next_writer_removes(tmp_path):
    path, b = str(tmp_path / "index"), params().b
    base, runs = batches(3, b)
    run_into(path, base, len(base))
    run_into(path, runs[0], len(runs[0]))
    stray = os.path.join(path, "delta000099-band-0.cbf")
    with open(stray, "wb") as f:
        f.write(b"left by a crash")
    with IndexTransaction(path) as txn:
        assert txn.recovered["deltas_removed"] == ["delta000099-band-0.cbf"]
    assert not os.path.exists(stray)
    assert len(mf.read_manifest(path).deltas) == 1


def test_a_fixed_index_folds_before_its_deltas_outgrow_the_base_room(tmp_path):
    b = params().b
    p = params(capacity=BASE + 150)
    path = str(tmp_path / "index")
    fresh = np.random.default_rng(4).integers(0, 1 << 62, (BASE + 400, b), dtype=np.uint64)
    run_into(path, fresh[:BASE], BASE, p=p)
    room = p.capacity - mf.read_manifest(path).inserted
    _, delta = run_into(path, fresh[BASE : BASE + 60], 60, p=p)
    pending = mf.read_manifest(path).deltas[0].inserted
    assert delta is not None and pending > 50
    n = room - pending + 1  # the delta's documents and this run's do not fit the base's room: the copy path
    with pytest.raises(errors.IndexFullError):  # folds, then finds no room, as without deltas
        run_into(path, fresh[BASE + 60 : BASE + 60 + n], n, p=p)
    assert [d.name for d in mf.read_manifest(path).deltas] == [delta]  # nothing committed
    _, second = run_into(path, fresh[BASE + 60 : BASE + 59 + n], n - 1, p=p)  # fits exactly: a delta
    assert second is not None
    with pytest.raises(errors.IndexFullError):
        run_into(path, fresh[-1:], 1, p=p)


def test_a_writer_opening_the_index_directly_inserts_into_the_base_and_a_growing_base_keeps_its_names(tmp_path):
    p = params(capacity=BASE, growth="grow")
    path, b = str(tmp_path / "index"), p.b
    keys = np.random.default_rng(5).integers(0, 1 << 62, (BASE + 700, b), dtype=np.uint64)
    run_into(path, keys[:BASE], BASE, p=p)
    _, delta = run_into(path, keys[BASE : BASE + 100], 100, p=p)
    assert delta is not None
    with LSHBloomIndex.open(path) as index:  # not a run: the base's newest generation takes the inserts
        index.insert(keys[BASE + 100 : BASE + 600])
    manifest = mf.read_manifest(path)
    assert [d.name for d in manifest.deltas] == [delta] and len(manifest.generations) == 2
    assert os.path.exists(os.path.join(path, "gen1-band-0.cbf"))
    deltas.read_keys(path, manifest.deltas[0], b)  # the delta's log still matches it
    with LSHBloomIndex.open(path, read_only=True) as live:
        assert live.query(keys[: BASE + 600]).all() and live.inserted == manifest.inserted
    run_into(path, keys[BASE + 600 :], None, p=p)  # the copy path folds the delta into the grown base
    assert not mf.read_manifest(path).deltas
    with LSHBloomIndex.open(path, read_only=True) as live:
        assert live.query(keys).all()
