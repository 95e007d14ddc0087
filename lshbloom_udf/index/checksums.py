"""Checksums of the band files: xxh3-64 of each whole file, recorded in the manifest, verified when it opens.

The manifest's ``checksums`` entry (``{"algorithm": "xxh3-64", "files":
{"band-0.bf": "<16 hex digits>", ...}}``) is written with the manifest
whenever a writer syncs the index (so at every commit); the band files
themselves stay exactly the pybloomfiltermmap3 (or blocked) format, so
datasketch reads them as before. Opening an index checks every band file
against it in native code (one pass over each mapped file): a mismatch is
:class:`IndexCorruptError` naming the band file — except a pybloomfiltermmap3
file modified after the manifest was written, which datasketch wrote
(it continues these indexes): a warning, and its next commit records it.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Mapping, Sequence

from lshbloom_udf import _native
from lshbloom_udf.errors import IndexCorruptError

CHECKSUMS = "checksums"
ALGORITHM = "xxh3-64"

log = logging.getLogger(__name__)


def file_checksum(path: str) -> str:
    return f"{_native.file_checksum(path):016x}"


def file_checksums(paths: Sequence[str]) -> list:
    """:func:`file_checksum` of each of ``paths``, on every core (the native pass runs without the GIL): a commit
    reads the whole index while nothing else runs."""
    if len(paths) < 2:
        return [file_checksum(p) for p in paths]
    with ThreadPoolExecutor(min(len(paths), os.cpu_count() or 1), thread_name_prefix="lshbloom-checksum") as pool:
        return list(pool.map(file_checksum, paths))


def of_files(paths: Sequence[str]) -> dict[str, str]:
    """The checksums of the band files ``paths``, by file name (what the manifest records)."""
    return {os.path.basename(p): c for p, c in zip(paths, file_checksums(paths))}


def verify(recorded: Mapping[str, str], paths: Sequence[str], label: str) -> int:  # label: the index directory
    """Check every band file of ``paths`` against the checksums the manifest ``recorded``; how many were checked.

    Raises :class:`IndexCorruptError` naming the first band file whose bytes
    differ, or that has no checksum.
    """
    for path in paths:
        if os.path.basename(path) not in recorded:
            raise IndexCorruptError(f"{path}: the manifest records no checksum for this band file")
    for path, got in zip(paths, file_checksums(paths)):
        want = recorded[os.path.basename(path)]
        if got != want and _written_by_datasketch(path, label):
            log.warning("%s: written since the index's last commit (datasketch continuing it?): not verified; the "
                        "next commit records its checksum", path)
        elif got != want:
            raise IndexCorruptError(
                f"{path}: corrupt band file (its {ALGORITHM} checksum is {got}, the manifest recorded {want} when it "
                "was committed): the file changed outside lshbloom (disk, copy). Restore the index from a backup, or "
                "rebuild it from its runs' inputs into a new --index-dir (docs/reliability.md)"
            )
    return len(paths)


def _written_by_datasketch(path: str, index_dir: str) -> bool:
    """A pybloomfiltermmap3 band file modified after the manifest was written (a commit writes the manifest after
    the band files): datasketch, which reads and continues these files, wrote it; damage to the disk does not
    touch the time. Blocked files have no other writer."""
    try:
        manifest_time = os.stat(os.path.join(index_dir, "manifest.json")).st_mtime_ns
    except OSError:
        return False
    return path.endswith(".bf") and os.stat(path).st_mtime_ns > manifest_time
