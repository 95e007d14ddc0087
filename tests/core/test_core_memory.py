"""lshbloom_udf.memory: the driver's memory read from real files (cgroup v2, v1, /proc/meminfo) and the budgets."""

from __future__ import annotations

import sys

import pytest

from lshbloom_udf import memory as M
from lshbloom_udf.errors import DriverMemoryError, UsageError, exit_code

GIB, MIB = 1 << 30, 1 << 20


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_meminfo_available_reads_the_line(tmp_path):
    info = tmp_path / "meminfo"
    _write(info, "MemTotal:       24000000 kB\nMemFree:         1000 kB\nMemAvailable:   12345678 kB\n")
    assert M.meminfo_available(str(info)) == 12345678 * 1024
    _write(info, "MemTotal:       24000000 kB\n")
    assert M.meminfo_available(str(info)) is None
    assert M.meminfo_available(str(tmp_path / "missing")) is None


def test_cgroup_v2_takes_the_tightest_limit_up_the_hierarchy(tmp_path):
    proc = tmp_path / "cgroup"
    _write(proc, "0::/job/driver\n")
    root = tmp_path / "fs"
    _write(root / "job" / "driver" / "memory.max", "max\n")  # no limit of its own
    _write(root / "job" / "driver" / "memory.current", str(1 * GIB))
    _write(root / "job" / "memory.max", str(4 * GIB))
    _write(root / "job" / "memory.current", str(3 * GIB))
    # page cache the kernel reclaims first is not counted as used
    _write(root / "job" / "memory.stat", f"anon 100\ninactive_file {GIB // 2}\nactive_file 7\n")
    assert M.cgroup_available(str(proc), str(root)) == 4 * GIB - (3 * GIB - GIB // 2)
    _write(root / "job" / "driver" / "memory.max", str(2 * GIB))  # tighter below
    assert M.cgroup_available(str(proc), str(root)) == 1 * GIB


def test_cgroup_v1_and_its_no_limit(tmp_path):
    proc = tmp_path / "cgroup"
    _write(proc, "5:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n")
    root = tmp_path / "fs"
    here = root / "memory" / "docker" / "abc"
    _write(here / "memory.limit_in_bytes", str(8 * GIB))
    _write(here / "memory.usage_in_bytes", str(5 * GIB))
    _write(here / "memory.stat", f"cache 5\ntotal_inactive_file {GIB}\n")
    assert M.cgroup_available(str(proc), str(root)) == 8 * GIB - 4 * GIB
    _write(here / "memory.limit_in_bytes", "9223372036854771712")  # v1's "no limit"
    assert M.cgroup_available(str(proc), str(root)) is None


def test_cgroup_namespace_root_when_the_named_path_is_not_mounted(tmp_path):
    # Inside a container /proc/self/cgroup names the host's path; the mount's root is the container's cgroup.
    proc = tmp_path / "cgroup"
    _write(proc, "4:memory:/process_api/c468\n")
    root = tmp_path / "fs"
    _write(root / "memory" / "memory.limit_in_bytes", str(2 * GIB))
    _write(root / "memory" / "memory.usage_in_bytes", str(GIB + 10))
    assert M.cgroup_available(str(proc), str(root)) == GIB - 10
    assert M.cgroup_available(str(tmp_path / "none"), str(root)) is None


def test_str_cost_counts_the_python_string_not_its_utf8():
    ascii_text, wide = "a" * 1000, "a" * 999 + "\U0001F600"  # one emoji makes every character 4 bytes
    assert M.str_cost(ascii_text) == M.HELD_ENTRY_BYTES + sys.getsizeof(ascii_text)
    assert len(wide.encode()) == 1003 and M.str_cost(wide) - M.HELD_ENTRY_BYTES >= 4000
    assert M.str_cost(None) == M.HELD_ENTRY_BYTES


def test_budgets_of_a_default_1g_driver():
    d = M.DriverMemory(heap=GIB, max_result=GIB, python=8 * GIB)
    user = int((GIB - M.RESERVED_HEAP) * (1 - M.MEMORY_FRACTION))
    assert d.user_heap == user
    assert d.collect == int(user * M.COLLECT_SHARE_OF_USER_HEAP) < 100 * MIB  # the 194 MB collect that died: refused
    assert d.partition == d.collect // M.PARTITIONS_IN_FLIGHT
    assert d.broadcast_rows == d.collect // M.BROADCAST_ROW_BYTES < 2_000_000  # the default broadcast_limit governs
    assert d.texts == int(8 * GIB * M.TEXTS_SHARE) and d.arrays == int(8 * GIB * M.ARRAYS_SHARE)


def test_budgets_follow_max_result_size_and_its_off_value():
    big = M.DriverMemory(heap=64 * GIB, max_result=GIB, python=8 * GIB)
    assert big.collect == int(GIB * M.COLLECT_SHARE_OF_MAX_RESULT)
    unlimited = M.DriverMemory(heap=64 * GIB, max_result=0, python=8 * GIB)
    assert unlimited.collect == int(unlimited.user_heap * M.COLLECT_SHARE_OF_USER_HEAP) > GIB


def test_an_explicit_texts_budget_wins_up_to_its_cap(caplog):
    d = M.DriverMemory(heap=GIB, max_result=GIB, python=4 * GIB)
    assert d.texts_budget(None) == d.texts
    assert d.texts_budget(3 * GIB // 2) == 3 * GIB // 2
    with caplog.at_level("WARNING", logger="lshbloom_udf.memory"):
        assert d.texts_budget(16 * GIB) == int(4 * GIB * M.EXPLICIT_TEXTS_SHARE)
    assert "verify_driver_bytes" in caplog.text and "capped" in caplog.text


def test_require_names_the_setting_to_change():
    M.DriverMemory(heap=GIB, max_result=GIB, python=4 * GIB).require(10**7)
    with pytest.raises(DriverMemoryError, match="spark.driver.maxResultSize") as e:
        M.DriverMemory(heap=GIB, max_result=4 * MIB, python=4 * GIB).require(10)
    assert isinstance(e.value, UsageError) and exit_code(e.value) == 2
    with pytest.raises(DriverMemoryError, match="--driver-memory"):
        M.DriverMemory(heap=350 * MIB, max_result=GIB, python=4 * GIB).require(10)
    with pytest.raises(DriverMemoryError, match="100 MB of memory available.*10,000 documents.*--driver-memory"):
        M.DriverMemory(heap=GIB, max_result=GIB, python=100 * 10**6).require(10**4)
    # refused on what is free now: the JVM's possible growth narrows the budgets, not the refusal
    M.DriverMemory(heap=8 * GIB, max_result=GIB, python=0, available=2 * GIB).require(10**9)


def test_plan_needs_grow_with_the_flagged_documents():
    few, many = M.run_needs(10**6, 0.01, 2400), M.run_needs(10**6, 0.10, 2400)
    assert few["heap"] == many["heap"] == M.min_heap() <= 1 << 30  # Spark's default driver is enough
    assert many["python"] - M.PYTHON_FLOOR == 10 * (few["python"] - M.PYTHON_FLOOR) == 10**5 * (8 * 64 + 32)
    assert many["python_for_driver_similarities"] == 2 * 10**5 * (2400 + 49 + 72) / M.TEXTS_SHARE
    d = M.DriverMemory(heap=M.min_heap(), max_result=1 << 30, python=8 * GIB)
    assert d.collect >= M.MIN_COLLECT



def test_the_ids_hashes_are_sorted_on_the_driver_only_within_its_arrays_budget():
    from lshbloom_udf.spark.ids import DRIVER_BYTES_PER_ID, hashes_fit

    d = M.DriverMemory(heap=GIB, max_result=GIB, python=4 * GIB)
    fit = d.arrays // DRIVER_BYTES_PER_ID
    assert hashes_fit(fit, d) and not hashes_fit(fit + 1, d)
    assert hashes_fit(10**7, d)  # 160 MB of a 1 GB budget
