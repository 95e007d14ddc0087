"""The index package's pieces on their own: the lock, the backends, "parameters minus sizing", errors, commits."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from lshbloom_udf import errors, hooks
from lshbloom_udf.index import (
    BLOOMS,
    SIZING_FIELDS,
    IndexLock,
    IndexParams,
    IndexTransaction,
    LSHBloomIndex,
    RunRecord,
    backend,
    commit_rename,
    expected_params,
    run_params,
    without_sizing,
)
from lshbloom_udf.index.backends import backend_for_format


def params(capacity=100, **kw):
    return IndexParams.for_threshold(capacity=capacity, threshold=0.5, num_perm=256, **kw)


# -- lock ---------------------------------------------------------------------


def test_lock_is_released_when_its_block_fails_and_kept_when_handed_over(tmp_path):
    path = str(tmp_path)
    with pytest.raises(RuntimeError, match="boom"):
        with IndexLock(path) as lock:
            assert lock.held
            raise RuntimeError("boom")
    assert not lock.held
    with IndexLock(path) as lock:
        kept = lock.keep()
    assert kept.held  # the block ended, the new holder has it
    with pytest.raises(errors.IndexLockedError, match=f"pid {os.getpid()}"):
        IndexLock(path)
    kept.release()
    kept.release()  # idempotent
    IndexLock(path).release()


def test_lock_readers_share_and_a_disabled_lock_holds_nothing(tmp_path):
    path = str(tmp_path)
    r1, r2 = IndexLock(path, read_only=True), IndexLock(path, read_only=True)
    with pytest.raises(errors.IndexLockedError):
        IndexLock(path)
    r1.release()
    r2.release()
    with IndexLock(path, enabled=False) as none:
        assert not none.held
        IndexLock(path).release()


def test_a_failing_open_releases_the_lock(tmp_path):
    path = tmp_path / "index"
    LSHBloomIndex.create(str(path), params()).close()
    os.remove(path / "band-3.bf")
    for _ in range(2):  # the first failure left no lock behind
        with pytest.raises(errors.IndexFilesMissingError, match="band-3.bf"):
            LSHBloomIndex.open(str(path))


# -- backends -----------------------------------------------------------------


def test_backends_are_looked_up_by_name_and_by_manifest_format():
    assert BLOOMS == ("pybloomfiltermmap3", "blocked", "cuckoo")
    classic, blocked, cuckoo = backend("pybloomfiltermmap3"), backend("blocked"), backend("cuckoo")
    assert (classic.file_name(3), blocked.file_name(3), cuckoo.file_name(3)) == ("band-3.bf", "band-3.bbf", "band-3.cbf")
    assert backend_for_format("lshbloom-index") is classic and backend_for_format("lshbloom-blocked-index") is blocked
    assert backend_for_format("lshbloom-cuckoo-index") is cuckoo and not cuckoo.datasketch_compatible
    assert backend_for_format("other") is None and backend_for_format(None) is None
    assert classic.datasketch_compatible and not blocked.datasketch_compatible
    with pytest.raises(errors.UsageError, match="bloom must be one of"):
        backend("quotient")
    with pytest.raises(ValueError, match="bloom must be one of"):
        backend(None)


@pytest.mark.parametrize("bloom", BLOOMS)
def test_backend_bytes_and_manifest_describe_the_index_it_creates(tmp_path, bloom):
    p = params(5000, p_effective=1e-4)
    kind = backend(bloom)
    with LSHBloomIndex.create(str(tmp_path / "ix"), p, bloom=bloom) as index:
        assert index.backend is kind
        assert index.stats()["bytes_on_disk"] == kind.index_bytes(p.capacity, p.p_band, p.b)
        assert all(os.path.getsize(f) == kind.file_bytes(p.capacity, p.p_band) for f in index.band_paths())
        manifest = index.manifest.to_json()
    assert manifest["format"] == kind.manifest_format and manifest["bloom_format"] == kind.bloom_format
    assert {k: manifest[k] for k in kind.manifest_fields(p.capacity, p.p_band)} == kind.manifest_fields(p.capacity, p.p_band)


# -- parameters minus sizing --------------------------------------------------


def test_one_helper_drops_the_sizing_fields_for_reopen_checks_and_run_records():
    p = params(1234, p_effective=1e-6, ngram=3)
    full = without_sizing(p, keep=SIZING_FIELDS)
    assert full["capacity"] == 1234 and full["p_effective"] == 1e-6 and full["growth"] == "fixed"
    bare = without_sizing(p)
    assert not set(SIZING_FIELDS) & set(bare) and bare["ngram"] == 3
    assert expected_params(p, True) == full
    assert expected_params(p, False) == bare
    assert expected_params(p, {"p_effective"}) == {**bare, "p_effective": 1e-6}
    assert run_params(p) == json.loads(json.dumps(bare))
    with pytest.raises(ValueError, match="not sizing parameters: ngram"):
        expected_params(p, {"ngram"})


def test_sizing_given_by_name_checks_only_those(tmp_path):
    path = str(tmp_path / "index")
    LSHBloomIndex.create(path, params(100, p_effective=1e-4)).close()
    other_capacity = params(999, p_effective=1e-4)
    with LSHBloomIndex.open_or_create(path, other_capacity, sizing_given={"p_effective"}) as index:
        assert index.params.capacity == 100
    with pytest.raises(errors.IndexMismatchError, match="p_effective"):
        LSHBloomIndex.open_or_create(path, params(100, p_effective=1e-5), sizing_given={"p_effective"})


# -- errors -------------------------------------------------------------------


def test_damaged_index_files_raise_the_error_family_and_their_builtin(tmp_path):
    path = tmp_path / "index"
    LSHBloomIndex.create(str(path), params()).close()
    (path / "band-2.bf").write_bytes(b"garbage")
    with pytest.raises(errors.IndexCorruptError, match="band-2.bf") as bad:
        LSHBloomIndex.open(str(path))
    assert isinstance(bad.value, ValueError) and isinstance(bad.value, errors.LSHBloomError)
    assert errors.exit_code(bad.value) == 2
    (path / "manifest.json").write_text("{")
    with pytest.raises(errors.IndexCorruptError, match="corrupt manifest"):
        LSHBloomIndex.open(str(path))
    os.remove(path / "manifest.json")
    with pytest.raises(errors.IndexFilesMissingError, match="no LSHBloom index manifest") as missing:
        LSHBloomIndex.open(str(path))
    assert isinstance(missing.value, FileNotFoundError)


# -- transactions and commits -------------------------------------------------


def test_check_compatible_refuses_before_any_staging_and_abort_discards(tmp_path):
    path = str(tmp_path / "index")
    with IndexTransaction(path) as txn:
        assert txn.check_compatible(params(100)) is None  # no index yet
        index = txn.stage(params(100))
        index.insert(np.random.default_rng(1).integers(0, 1 << 60, (5, index.params.b), dtype=np.uint64))
        txn.commit()
    with IndexTransaction(path) as txn:
        assert txn.check_compatible(params(100)).capacity == 100
        assert txn.check_compatible(params(5), sizing_given=False).capacity == 100
        with pytest.raises(errors.IndexMismatchError, match="ngram"):
            txn.check_compatible(params(100, ngram=2))
        with pytest.raises(errors.IndexMismatchError, match="blocked"):
            txn.check_compatible(params(100), bloom="blocked")
        assert txn.staging is None
        index = txn.stage(params(100))
        index.insert(np.random.default_rng(2).integers(0, 1 << 60, (7, index.params.b), dtype=np.uint64))
        txn.abort()
        assert txn.index is None and txn.staging is None
        with pytest.raises(ValueError, match="closed"):
            index.query(np.zeros((1, index.params.b), dtype=np.uint64))
    with LSHBloomIndex.open(path, read_only=True) as live:
        assert live.inserted == 5


def test_commit_rename_replaces_a_directory_and_fires_the_mid_commit_point(tmp_path):
    tmp, final = tmp_path / "out.tmp", tmp_path / "out"
    tmp.mkdir()
    (tmp / "part-0").write_text("new")
    final.mkdir()
    (final / "part-0").write_text("old")
    fired = []
    hooks.install("mid-commit", lambda **_: fired.append(True))
    try:
        commit_rename(str(tmp), str(final))
    finally:
        hooks.uninstall("mid-commit")
    assert fired == [True]
    assert (final / "part-0").read_text() == "new" and not tmp.exists()
    assert not os.path.exists(str(final) + ".lshbloom-old")


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
def test_a_staged_index_on_a_disk_is_written_in_memory_and_committed_the_same(tmp_path, monkeypatch):
    path = tmp_path / "index"
    rows = np.random.default_rng(3).integers(0, 2**62, (300, params().b), dtype=np.uint64)
    with IndexTransaction(str(path)) as txn:
        index = txn.stage(params(1000))
        assert txn.work.startswith("/dev/shm/lshbloom-index-") and os.path.dirname(index.band_paths()[0]) == txn.work
        first = index.query_insert(rows[:200])
        txn.commit(RunRecord(documents=200, duplicates=0, inserted=200, params={}))
        assert txn.work is None  # the working copy is gone with the commit
    # Too little memory for the copy: the run writes its staging copy on the index's file system, as before.
    monkeypatch.setattr("lshbloom_udf.memory.machine_available", lambda: 1 << 20)
    with IndexTransaction(str(path)) as txn:
        index = txn.stage(params(1000))
        assert txn.work == txn.staging
        second = index.query_insert(rows)
        txn.commit(RunRecord(documents=300, duplicates=0, inserted=300, params={}))
    with LSHBloomIndex.open(str(path), read_only=True) as live:  # checksums verified on open
        assert live.inserted == int((~first).sum() + (~second).sum())
        assert live.query(rows).all()
    assert second[:200].all() and not first.any()
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"lshbloom-index-{os.getpid()}@")]
