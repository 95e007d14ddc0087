"""Where a run writes its staged filters: in memory while they fit there, else in its staging copy."""

from __future__ import annotations

import os

# While a run writes its staged filters they live in memory (/dev/shm) if they fit in this share of what the process
# may still take: random writes into memory-mapped files on a disk are throttled by the kernel's writeback (the
# driver pass of 10^7 documents into a kept index on ext4: 5x slower, docs/benchmarks.md), and the commit copies
# them onto the index's file system in one sequential write.
WORK_MEMORY_SHARE = 0.5
# The working copy grows by the generations a run adds (each ~2x the newest): the room it is given, in its sizes.
WORK_GROWTH_ROOM = 3


def working_place(staging: str, need: int) -> str:
    """Where the staged index of ``need`` bytes is written: a new directory in /dev/shm when it fits there and in
    memory (:data:`WORK_MEMORY_SHARE`, :data:`WORK_GROWTH_ROOM`), else ``staging`` itself (already in memory, or
    on a disk)."""
    from lshbloom_udf.litter import fast_temp_base, make_temp_dir
    from lshbloom_udf.memory import machine_available

    if os.path.realpath(staging).startswith("/dev/shm/"):
        return staging
    room = WORK_GROWTH_ROOM * need
    available = machine_available()
    if available is None or room > WORK_MEMORY_SHARE * available or fast_temp_base(room) != "/dev/shm":
        return staging
    return make_temp_dir("index", dir="/dev/shm")
