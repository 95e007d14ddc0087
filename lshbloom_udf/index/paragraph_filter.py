"""The paragraph filter a kept index holds (``<index>/paragraphs/``), staged and committed with a run.

The filter is a one-band :class:`~lshbloom_udf.index.LSHBloomIndex` of
paragraph keys (:mod:`lshbloom_udf.paragraphs`): its own manifest, its
checksummed band files, grown by generations; its ``unit`` names how its
keys were made, so runs that cut or key paragraphs otherwise cannot share it.

A run that decides paragraphs into a kept index works on a copy of it
(:class:`StagedParagraphs`: in memory while it fits there, as the bands'
copy), and records the paragraphs it removed, ``(row, paragraph index)``
pairs (``(row, -1)`` for a document it emptied), in
``runs/<run id>.paragraphs.i64`` with their SHA-256 in the run record. The
commit renames the staged filter onto ``paragraphs/`` and the pairs into
``runs/`` in the same journal as the band files and before the manifest: a
crash leaves the filter of the last committed run, as it leaves its bands, and
a rerun of a committed input reproduces its paragraphs from the pairs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from typing import Mapping, Optional

import numpy as np

from lshbloom_udf.errors import IndexMismatchError, IndexStorageError
from lshbloom_udf.index import manifest as mf
from lshbloom_udf.index.fs import check_free_space, fsync_path, read_checked, rmtree
from lshbloom_udf.index.journal import RUNS_DIR
from lshbloom_udf.index.params import IndexParams, expected_params
from lshbloom_udf.index.paths import inside
from lshbloom_udf.index.store import LSHBloomIndex
from lshbloom_udf.index.workspace import working_place

PARAGRAPHS_DIR = "paragraphs"
PAIRS_SUFFIX = ".paragraphs.i64"
# The paragraph filter's backend: one band, so the blocked filter's one cache line per key is all it reads.
PARAGRAPH_BLOOM = "blocked"


def live_path(index_dir: str) -> str:
    return os.path.join(index_dir, PARAGRAPHS_DIR)


class StagedParagraphs:
    """A run's writable copy of its kept index's paragraph filter (a new one if the index holds none)."""

    def __init__(self, index_dir: str, staging: str, params: IndexParams):
        self.staging = staging
        live = live_path(index_dir)
        if not LSHBloomIndex.exists(live):
            self.root = working_place(staging, _index_bytes(params))
            self.work = os.path.join(self.root, PARAGRAPHS_DIR)
            self.index = LSHBloomIndex.create(self.work, params, bloom=PARAGRAPH_BLOOM, lock=False)
        else:
            names = _checked_files(live, params)
            need = sum(os.path.getsize(os.path.join(live, n)) for n in names)
            check_free_space(staging, need, "the staging copy of the paragraph filter",
                             "a run works on a copy, so the index's file system needs room for two")
            self.root = working_place(staging, need)
            self.work = os.path.join(self.root, PARAGRAPHS_DIR)
            _copy(live, self.work, names)
            # The live files were verified (checksums) before they were copied.
            self.index = LSHBloomIndex.open(self.work, expected=expected_params(params, False), lock=False,
                                            verify=False)
        self.index.label = live

    def seal(self) -> list[list[str]]:
        """Close the staged filter, onto the index's file system; the commit's rename that makes it live."""
        index = self.index
        index.sync()
        names = [os.path.basename(p) for p in index.band_paths()] + [mf.MANIFEST_NAME]
        index.close()
        target = os.path.join(self.staging, PARAGRAPHS_DIR)
        if self.work != target:
            _copy(self.work, target, names)
            rmtree(self.root)
        for name in names:
            fsync_path(os.path.join(target, name))
        fsync_path(target)
        return [[f"{os.path.basename(self.staging)}/{PARAGRAPHS_DIR}", PARAGRAPHS_DIR]]

    def discard(self) -> None:
        """Drop the staged filter (the live one is untouched)."""
        self.index.discard()
        if self.root != self.staging:
            rmtree(self.root)


def _index_bytes(params: IndexParams) -> int:
    from lshbloom_udf.index.backends import backend

    return backend(PARAGRAPH_BLOOM).index_bytes(params.capacity, params.p_band, params.b)


def _checked_files(live: str, params: IndexParams) -> list[str]:
    """The live filter's files, verified (checksums) and checked to key paragraphs as ``params`` does."""
    manifest = mf.read_manifest(live)
    if manifest.params.unit != params.unit:
        raise IndexMismatchError(
            f"{live}: the kept paragraph filter keys {manifest.params.unit!r}, this run {params.unit!r}; run with "
            "the paragraph settings the index was made with (paragraph_separator, paragraph_min_chars, "
            "paragraph_ngram), or give a new --index-dir")
    index = LSHBloomIndex(live, manifest, read_only=True)
    names = [os.path.basename(p) for p in index.band_paths()] + [mf.MANIFEST_NAME]
    index.close()
    return names


def _copy(src: str, dst: str, names: list[str]) -> None:
    os.makedirs(dst, exist_ok=True)
    try:
        for name in names:
            shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))
    except OSError as e:
        raise IndexStorageError(e.errno, f"cannot copy the paragraph filter to {dst}: {e.strerror}", src) from e


def write_pairs(staging: str, run_id: str, pairs: np.ndarray) -> tuple[list[str], str, str]:
    """Write a run's removed-paragraph pairs into its staging copy: the commit's rename, their live name (relative
    to the index directory) and their SHA-256."""
    data = np.ascontiguousarray(pairs, dtype="<i8").tobytes()
    name = f"{run_id}{PAIRS_SUFFIX}"
    with open(os.path.join(staging, name), "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    live = f"{RUNS_DIR}/{name}"
    return [f"{os.path.basename(staging)}/{name}", live], live, hashlib.sha256(data).hexdigest()


def load_pairs(index_dir: str, recorded: Mapping, run_id: Optional[str]) -> np.ndarray:
    """A committed run's removed-paragraph pairs (``(n, 2)`` int64), checked against the SHA-256 its record holds."""
    path = inside(index_dir, recorded.get("file"), os.path.join(index_dir, mf.MANIFEST_NAME))
    data = read_checked(path, recorded.get("sha256"), 16,
                        f"run {run_id}'s removed paragraphs are missing; restore the index from a backup",
                        f"run {run_id}")
    return np.frombuffer(data, dtype="<i8").astype(np.int64).reshape(-1, 2)


def verify(index_dir: str) -> int:
    """Check the kept paragraph filter's band files against their checksums; how many (0: the index has none)."""
    live = live_path(index_dir)
    if not LSHBloomIndex.exists(live):
        return 0
    index = LSHBloomIndex(live, mf.read_manifest(live), read_only=True)
    n = len(index.band_paths())
    index.close()
    return n
