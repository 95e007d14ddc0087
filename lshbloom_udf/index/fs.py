"""File-system helpers of the index: atomic JSON, fsync, removal, space, and the commit of a local output.

Everything here is about making a write durable or failing before it starts;
nothing here knows what an index is.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from typing import Mapping

from lshbloom_udf import hooks


def human_bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{int(n)} B"


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path: str) -> None:
    """fsync every file and directory under ``path`` (a written output), then ``path`` itself."""
    if os.path.isdir(path):
        for root, _dirs, files in os.walk(path):
            for name in files:
                fsync_path(os.path.join(root, name))
            fsync_path(root)
    elif os.path.exists(path):
        fsync_path(path)


def write_json_atomically(path: str, data: Mapping) -> None:
    """Write ``data`` as JSON to ``path``: a temporary file, fsynced, renamed over ``path``, directory fsynced."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_path(os.path.dirname(os.path.abspath(path)))


def rmtree(path: str) -> None:
    """Remove a directory tree or a file; nothing if it is gone."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def check_free_space(path: str, needed: int, what: str, why: str) -> None:
    """Raise ``OSError(ENOSPC)`` naming ``what`` when the file system of ``path`` has less than ``needed`` bytes
    free."""
    free = shutil.disk_usage(path).free
    if needed > free:
        raise OSError(
            errno.ENOSPC,
            f"not enough space for {what}: it needs {human_bytes(needed)} and {human_bytes(free)} is free ({why})",
            path,
        )


def reserve_space(paths: list[str]) -> None:
    """Allocate the files' blocks now, so that a full disk is an error here and not a SIGBUS later."""
    for path in paths:
        fd = os.open(path, os.O_RDWR)
        try:
            os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
        finally:
            os.close(fd)


def apply_renames(base: str, ops: list, on_missing) -> None:
    """Do the renames ``ops`` (``[src, dst]``, relative to ``base``); each at most once, so this can be repeated.

    An op whose ``src`` is gone was done already (sources are unique to one
    run); if its ``dst`` is gone too, ``on_missing(src, dst)`` is raised. A
    directory at ``dst`` (an output replaced with ``--overwrite``) is first
    moved aside to ``dst.lshbloom-old`` and removed after the rename. The
    ``mid-commit`` hook point fires once the first op is done.
    """
    for i, (src, dst) in enumerate(ops):
        src, dst = os.path.join(base, src), os.path.join(base, dst)
        old = dst + ".lshbloom-old"
        if os.path.lexists(src):
            if os.path.isdir(dst) and not os.path.islink(dst):
                if os.path.lexists(old):
                    rmtree(old)
                os.rename(dst, old)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.replace(src, dst)
            fsync_path(os.path.dirname(dst))
        elif not os.path.lexists(dst):
            raise on_missing(src, dst)
        if os.path.lexists(old):
            rmtree(old)
        if i == 0:
            hooks.fire("mid-commit")


def commit_rename(tmp: str, final: str) -> None:
    """Make a written local output live: fsync it, then rename ``tmp`` to ``final`` (replacing a directory there).

    For a job without an index (with one, the output's rename is an op of the
    index's commit journal, see :meth:`IndexTransaction.commit`).
    """
    tmp, final = os.path.abspath(tmp), os.path.abspath(final)
    fsync_tree(tmp)
    apply_renames("/", [[tmp, final]],
                  lambda src, dst: FileNotFoundError(f"cannot rename {src} to {dst}: both are gone"))


def read_checked(path: str, sha256: object, unit: int, missing: str, owner: str) -> bytes:
    """The bytes of the committed file ``path``: a whole number of ``unit``-byte items with the SHA-256 ``sha256``
    its ``owner`` (e.g. "run 000002") recorded; :class:`IndexCorruptError` saying ``missing`` when it is absent."""
    import hashlib

    from lshbloom_udf.errors import IndexCorruptError

    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise IndexCorruptError(f"{path}: {missing}") from None
    if len(data) % unit or hashlib.sha256(data).hexdigest() != sha256:
        raise IndexCorruptError(f"{path}: corrupt (size or SHA-256 differs from the manifest's {owner})")
    return data
