"""Which paths the job may delete or rename, checked before it touches them.

The files of an index directory (the commit journal, a staging copy's
``pending.json``, the manifest) are data anyone who can write the directory
could have planted. The job never deletes or renames a path just because such
a file names it: every path is one the job's own naming rules produce —

- inside the index directory: a relative path without ``..`` whose parent
  directories, symlinks resolved, lie inside the directory;
- an output's temporary: an absolute, normalized path ending in
  :data:`OUTPUT_TMP_SUFFIX`, renamed only onto the same path without it
  (or, named hidden, :data:`HIDDEN_TMP_PREFIX` + name + suffix, onto the name
  in the same directory: :func:`temporary_of`).

A record naming anything else raises :class:`IndexCorruptError` naming the
record's file, before anything is deleted or renamed.
"""

from __future__ import annotations

import os
import re
from typing import Sequence

from lshbloom_udf.errors import IndexCorruptError
from lshbloom_udf.index.backends import BACKENDS

# The files a commit moves from a staging copy (``.staging-*/<name>``) onto ``<name>`` or ``runs/<name>``: every
# backend's band files (their extensions read from the backends, so a new backend needs no change here).
_BAND_EXTENSIONS = "|".join(re.escape(b.extension) for b in BACKENDS.values())
# A run's records (lshbloom_udf.index.records) are a directory: ``.staging-*/<run id>.records`` onto
# ``runs/<run id>.records``; its removed paragraphs ``<run id>.paragraphs.i64`` go there too; the paragraph filter
# (lshbloom_udf.index.paragraph_filter) is the directory ``paragraphs``.
STAGED_FILE = re.compile(rf"(gen[0-9]+-|delta[0-9]{{6}}-)?band-[0-9]+\.(?:{_BAND_EXTENSIONS})|manifest\.json"
                         r"|delta[0-9]{6}\.keys\.u64|[0-9]{6}\.dups\.i64"
                         r"|[0-9]{6}\.records|[0-9]{6}\.paragraphs\.i64|paragraphs")
RUN_FILES = (".dups.i64", ".records", ".paragraphs.i64")  # the staged names that go into runs/
STAGING_DIR = re.compile(r"\.staging-[A-Za-z0-9_]+")
# What the job appends to an output path to write it before the commit (lshbloom_udf.spark.output.Output).
OUTPUT_TMP_SUFFIX = ".lshbloom-tmp"
# What a stream's batch output's temporary starts with: Spark's file index skips names starting with "." (not "_"
# followed by a name with "=", which it reads as a partition directory), so a reader of the stream's output
# directory never sees a batch being written (lshbloom_udf.spark.streaming).
HIDDEN_TMP_PREFIX = "."


def temporary_of(final: str, hidden: bool = False) -> str:
    """The temporary an output at ``final`` is written to: ``<final>.lshbloom-tmp``, or hidden
    ``<dir>/.<name>.lshbloom-tmp``."""
    if not hidden:
        return final + OUTPUT_TMP_SUFFIX
    head, name = os.path.split(final.rstrip("/"))
    return os.path.join(head, HIDDEN_TMP_PREFIX + name + OUTPUT_TMP_SUFFIX)


def is_temporary_of(tmp: str, final: str) -> bool:
    """Whether ``tmp`` is a name :func:`temporary_of` gives ``final`` (either form)."""
    return tmp in (temporary_of(final), temporary_of(final, hidden=True))


def _refuse(record: str, what: str) -> IndexCorruptError:
    return IndexCorruptError(
        f"{record}: names {what}, which is not a file this job writes; the index directory was changed by something "
        "other than lshbloom. Nothing was deleted or renamed: remove this file after checking the directory "
        "(docs/reliability.md, 'threat model')"
    )


def inside(base: str, rel: object, record: str) -> str:
    """``base/rel``, absolute, when ``rel`` is a relative path that stays inside the directory ``base`` (symlinks
    resolved)."""
    if not isinstance(rel, str) or not rel or os.path.isabs(rel) or "\\" in rel or "\0" in rel:
        raise _refuse(record, f"{rel!r}")
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise _refuse(record, f"{rel!r}")
    full = os.path.join(os.path.abspath(base), rel)  # absolute: callers join it onto the index directory again
    root = os.path.realpath(base)
    parent = os.path.realpath(os.path.dirname(full))
    if parent != root and not parent.startswith(root + os.sep):
        raise _refuse(record, f"{rel!r} (outside {base} once symlinks are resolved)")
    return full


def output_temporary(path: object, record: str) -> str:
    """``path`` when it is the name of an output's temporary (absolute, normalized, ending in the job's suffix)."""
    if (
        not isinstance(path, str) or "\0" in path or not os.path.isabs(path) or os.path.normpath(path) != path
        or not path.endswith(OUTPUT_TMP_SUFFIX) or os.path.basename(path) == OUTPUT_TMP_SUFFIX
    ):
        raise _refuse(record, f"{path!r}")
    return path


def checked_renames(base: str, ops: object, record: str) -> list[tuple[str, str]]:
    """The renames of a commit journal, each checked (absolute paths), or :class:`IndexCorruptError`.

    An op is either inside the index directory (a staged file onto its live
    name) or an output's temporary onto its final path (the temporary's name
    without :data:`OUTPUT_TMP_SUFFIX`).
    """
    if not isinstance(ops, list):
        raise _refuse(record, f"renames {ops!r}")
    checked = []
    for op in ops:
        if not (isinstance(op, (list, tuple)) and len(op) == 2):
            raise _refuse(record, f"the rename {op!r}")
        src, dst = op
        if isinstance(src, str) and os.path.isabs(src):
            tmp = output_temporary(src, record)
            if not (isinstance(dst, str) and os.path.isabs(dst) and is_temporary_of(tmp, dst)):
                raise _refuse(record, f"the rename of {src!r} onto {dst!r}")
            checked.append((tmp, dst))
        else:
            checked.append(_staged_rename(base, src, dst, record))
    return checked


def _staged_rename(base: str, src: object, dst: object, record: str) -> tuple[str, str]:
    """A staged file onto its live name: ``.staging-*/<name>`` onto ``<name>`` (``runs/<name>`` for a run's duplicates
    and records)."""
    src_parts = src.split("/") if isinstance(src, str) else []
    name = src_parts[-1] if len(src_parts) == 2 else ""
    live = f"runs/{name}" if name.endswith(RUN_FILES) else name
    if not (STAGING_DIR.fullmatch(src_parts[0] if src_parts else "") and STAGED_FILE.fullmatch(name) and dst == live):
        raise _refuse(record, f"the rename of {src!r} onto {dst!r}")
    return inside(base, src, record), inside(base, dst, record)


def checked_outputs(outputs: object, record: str) -> Sequence[str]:
    """The temporary outputs a staging copy's record lists, each checked."""
    if not isinstance(outputs, list):
        raise _refuse(record, f"outputs {outputs!r}")
    return [output_temporary(path, record) for path in outputs]
