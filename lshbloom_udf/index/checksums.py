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


def record(manifest: dict, paths: Sequence[str]) -> None:
    """Write the checksums of the band files ``paths`` into ``manifest``."""
    sums = file_checksums(paths)
    manifest[CHECKSUMS] = {"algorithm": ALGORITHM, "files": {os.path.basename(p): c for p, c in zip(paths, sums)}}


def verify(manifest: Mapping, paths: Sequence[str], label: str) -> int:  # label: the index directory
    """Check every band file of ``paths`` against the checksums ``manifest`` records; how many were checked.

    Raises :class:`IndexCorruptError` naming the first band file whose bytes
    differ, or for a manifest without checksums.
    """
    recorded = manifest[CHECKSUMS] if CHECKSUMS in manifest else {}
    files = recorded.get("files") if isinstance(recorded, dict) else None
    if not isinstance(files, dict) or recorded.get("algorithm") != ALGORITHM:
        raise IndexCorruptError(
            f"{label}: corrupt manifest (its {CHECKSUMS} entry is not {ALGORITHM} of each band file)")
    for path in paths:
        if files.get(os.path.basename(path)) is None:
            raise IndexCorruptError(f"{path}: the manifest records no checksum for this band file")
    for path, got in zip(paths, file_checksums(paths)):
        want = files[os.path.basename(path)]
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
