"""The index refuses what would corrupt it or silently weaken its promise."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from lshbloom_udf import IndexParams, LSHBloomIndex
from lshbloom_udf.index import CapacityWarning, IndexFullError, IndexLockedError, IndexMismatchError


def params(capacity, **kw):
    return IndexParams.for_threshold(capacity=capacity, threshold=0.5, num_perm=256, **kw)


def random_rows(n, b, seed):
    return np.random.default_rng(seed).integers(0, (1 << 61) - 1, (n, b), dtype=np.uint64)


def test_second_writer_is_refused_while_first_holds_the_index(tmp_path):
    path = str(tmp_path / "index")
    first = LSHBloomIndex.create(path, params(100))
    with pytest.raises(IndexLockedError, match=f"pid {os.getpid()}"):
        LSHBloomIndex.open(path)
    # Another process is refused too, with the same message, and changes nothing.
    child = subprocess.run(
        [sys.executable, "-c", f"from lshbloom_udf import LSHBloomIndex; LSHBloomIndex.open({path!r})"],
        capture_output=True,
        text=True,
    )
    assert child.returncode != 0 and "in use by another process" in child.stderr
    first.close()
    LSHBloomIndex.open(path).close()


def test_readers_share_but_exclude_a_writer(tmp_path):
    path = str(tmp_path / "index")
    LSHBloomIndex.create(path, params(100)).close()
    r1 = LSHBloomIndex.open(path, read_only=True)
    r2 = LSHBloomIndex.open(path, read_only=True)
    with pytest.raises(IndexLockedError):
        LSHBloomIndex.open(path)
    r1.close()
    r2.close()


def test_capacity_warns_then_refuses_and_false_positives_stay_within_promise(tmp_path):
    p_eff = 0.01
    index = LSHBloomIndex.create(str(tmp_path / "index"), params(20_000, p_effective=p_eff))
    b = index.params.b
    with pytest.warns(CapacityWarning, match="20,000 capacity"):
        flags = index.query_insert(random_rows(20_000, b, 1))
    # Random rows are all new (up to false positives of the filling index).
    assert index.inserted == 20_000 - int(flags.sum())
    # Filled to capacity, the measured rate of false hits is within p_effective.
    probes = random_rows(100_000, b, 2)
    measured = index.query(probes).mean()
    assert measured <= p_eff * 1.15, measured
    room = index.params.capacity - index.inserted
    with pytest.raises(IndexFullError, match="exceed the capacity of 20,000"):
        index.query_insert(random_rows(room + 5, b, 3))
    assert index.inserted == index.params.capacity  # filled exactly up to the limit, never past it
    # Duplicates need no room: a full index still answers them.
    assert index.query_insert(random_rows(10, b, 1)).all()
    index.close()


def test_not_enough_disk_space_is_a_clear_error(tmp_path):
    with pytest.raises(OSError, match="not enough space for the index"):
        LSHBloomIndex.create(str(tmp_path / "huge"), params(10**13))
    assert not [n for n in os.listdir(tmp_path / "huge") if n.endswith(".bf")]


def test_space_limit_hit_while_reserving_leaves_no_band_files(tmp_path):
    # RLIMIT_FSIZE stands in for a full disk: writes past it fail with EFBIG.
    script = textwrap.dedent(
        f"""
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
        from lshbloom_udf import IndexParams, LSHBloomIndex
        LSHBloomIndex.create({str(tmp_path / "index")!r}, IndexParams.for_threshold(capacity=1_000_000))
        """
    )
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert child.returncode != 0
    assert "cannot reserve" in child.stderr or "File too large" in child.stderr, child.stderr
    assert not [n for n in os.listdir(tmp_path / "index") if n.endswith(".bf")]
    assert not LSHBloomIndex.exists(str(tmp_path / "index"))


@pytest.fixture
def small_tmpfs(tmp_path):
    """A real 2 MB file system, to run out of space and to turn read-only."""
    mount_point = tmp_path / "fs"
    mount_point.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True)


def test_full_file_system_is_a_clear_error(small_tmpfs):
    with pytest.raises(OSError, match="not enough space for the index"):
        LSHBloomIndex.create(str(small_tmpfs / "index"), params(200_000))
    # One that fits works, and nothing of the failed one is left.
    with LSHBloomIndex.create(str(small_tmpfs / "small"), params(1000)) as index:
        index.insert(random_rows(10, index.params.b, 1))
    assert not [n for n in os.listdir(small_tmpfs / "index") if n.endswith(".bf")]


def test_read_only_file_system(small_tmpfs):
    path = small_tmpfs / "index"
    with LSHBloomIndex.create(str(path), params(100)) as index:
        index.insert(random_rows(5, index.params.b, 1))
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    with pytest.raises(PermissionError, match="not writable"):
        LSHBloomIndex.open(str(path))
    with LSHBloomIndex.open(str(path), read_only=True) as ro:
        assert ro.inserted == 5
        assert ro.query(random_rows(1, ro.params.b, 1)).all()
    with pytest.raises(OSError):
        LSHBloomIndex.create(str(small_tmpfs / "other"), params(100))


def test_band_file_from_another_index_is_refused(tmp_path):
    LSHBloomIndex.create(str(tmp_path / "a"), params(100)).close()
    LSHBloomIndex.create(str(tmp_path / "b"), params(5000)).close()
    os.replace(tmp_path / "b" / "band-7.bf", tmp_path / "a" / "band-7.bf")
    with pytest.raises(IndexMismatchError, match="band-7.bf.*not this index's filter"):
        LSHBloomIndex.open(str(tmp_path / "a"))


def test_corrupt_manifest_is_named(tmp_path):
    path = tmp_path / "index"
    LSHBloomIndex.create(str(path), params(100)).close()
    (path / "manifest.json").write_text('{"format": "lshbloom-index", "format_')
    with pytest.raises(ValueError, match="corrupt manifest"):
        LSHBloomIndex.open(str(path))
    (path / "manifest.json").write_text('{"format": "something-else"}')
    with pytest.raises(ValueError, match="not an LSHBloom index manifest"):
        LSHBloomIndex.open(str(path))
