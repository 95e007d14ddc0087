"""Temporary directories that name their owner, so that what a killed run left is removed by the next one.

A run's temporary index (``/dev/shm`` or the temp directory), its key spool
and the sharded pass's shard filters live in directories named
``lshbloom-<kind>-<pid>@<host>-<random>``. A SIGKILLed process cannot remove
them; the next one that creates such a directory removes, in the same place,
those whose owner is a dead process of this host (:func:`remove_dead_owners`;
``lshbloom clean`` does it on demand). Directories of other hosts (a shared
temp directory) and of live processes are never touched.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import tempfile
from typing import Iterable, Optional

KINDS = ("index", "keys", "shards", "records")
_OWNED = re.compile(r"lshbloom-(?:index|keys|shards|records)-(?P<pid>[0-9]+)@(?P<host>.+)-[a-z0-9_]{8}")

log = logging.getLogger(__name__)


def _host() -> str:
    return socket.gethostname().replace("/", "_")


def make_temp_dir(kind: str, dir: Optional[str] = None) -> str:
    """A new ``lshbloom-<kind>-<pid>@<host>-*`` directory in ``dir`` (default: the temp directory), after removing
    those of dead owners there."""
    if kind not in KINDS:
        raise ValueError(f"unknown temporary directory kind {kind!r}")
    remove_dead_owners([dir or tempfile.gettempdir()])
    return tempfile.mkdtemp(prefix=f"lshbloom-{kind}-{os.getpid()}@{_host()}-", dir=dir)


# Room left free in /dev/shm beside what a run puts there (other processes use it too).
SHM_HEADROOM = 64 << 20


def fast_temp_base(needed: int, spark_local: bool = False) -> Optional[str]:
    """Where a temporary directory of memory-mapped files goes: /dev/shm when writable with ``needed`` bytes (plus
    :data:`SHM_HEADROOM`) free, else with ``spark_local`` the executor's local directory (``SPARK_LOCAL_DIRS``),
    else None (the default temporary directory)."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        try:
            if needed + SHM_HEADROOM < shutil.disk_usage("/dev/shm").free:
                return "/dev/shm"
        except OSError:
            pass
    if spark_local:
        local = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0]
        if local and os.path.isdir(local):
            return local
    return None


def _alive(pid: int) -> bool:
    """Is ``pid`` a running process? A zombie (killed, not yet reaped: its parent died too) is not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def default_places() -> list[str]:
    """Where lshbloom puts temporary directories on this host."""
    return [p for p in dict.fromkeys(["/dev/shm", tempfile.gettempdir()]) if os.path.isdir(p)]


def remove_dead_owners(places: Optional[Iterable[str]] = None) -> list[str]:
    """Remove the lshbloom temporary directories in ``places`` whose owner is a dead process of this host."""
    host, removed = _host(), []
    for place in places if places is not None else default_places():
        try:
            names = os.listdir(place)
        except OSError:
            continue
        for name in names:
            owned = _OWNED.fullmatch(name)
            if not owned or owned["host"] != host or _alive(int(owned["pid"])):
                continue
            path = os.path.join(place, name)
            if os.path.islink(path) or not os.path.isdir(path):
                continue
            shutil.rmtree(path, ignore_errors=True)
            if not os.path.exists(path):
                removed.append(path)
    if removed:
        log.info("removed %d temporary director(ies) of dead lshbloom processes", len(removed))
    return removed
