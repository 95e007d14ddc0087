"""LSHBloomIndex: a directory of per-band Bloom filters plus a manifest, memory-mapped and driven in batches."""

from __future__ import annotations

import json
import math
import os
import warnings
from typing import Any, Mapping, Optional

import numpy as np

from lshbloom_udf.errors import (
    CapacityWarning,
    IndexCorruptError,
    IndexFilesMissingError,
    IndexFullError,
    IndexMismatchError,
    IndexRecoveryNeededError,
)
from lshbloom_udf.index import manifest as mf
from lshbloom_udf.index.backends import BLOOM_FORMAT, BACKENDS, backend
from lshbloom_udf.index.fs import check_free_space, human_bytes, reserve_space
from lshbloom_udf.index.journal import has_journal, recover
from lshbloom_udf.index.lock import IndexLock, LockHolder
from lshbloom_udf.index.params import IndexParams, SizingGiven, effective_p, expected_params

# Warn once the index holds this fraction of its capacity.
CAPACITY_WARNING_FRACTION = 0.9


class LSHBloomIndex(LockHolder):
    """A directory of per-band Bloom filters plus a manifest.

    Use :meth:`create`, :meth:`open`, :meth:`open_or_create` or, for an index
    datasketch wrote (band files without a manifest), :meth:`adopt`. The index
    is a context manager; :meth:`close` syncs the filters and the manifest.
    ``bloom`` (``"pybloomfiltermmap3"`` or ``"blocked"``) is the filters' backend,
    chosen at creation and recorded in the manifest.
    """

    def __init__(self, path: str, manifest: dict, read_only: bool, lock: Optional[IndexLock] = None):
        """Use the class methods. The index holds ``lock`` (already taken) until it closes; on error the caller releases it."""
        self.path = path
        # The directory named in messages (an IndexTransaction's staging copy names its live index).
        self.label = path
        self._manifest = manifest
        self.params = mf.params_from_manifest(manifest)
        self.backend = mf.manifest_backend(manifest)
        self.bloom = self.backend.name
        self.read_only = read_only
        self._lock = lock
        self._warned_capacity = False
        paths = self.band_paths()
        self._check_band_files(paths)
        self._filters = self.backend.open_bands(paths, not read_only)
        self.closed = False

    # -- construction -------------------------------------------------------

    @staticmethod
    def exists(path: str) -> bool:
        return mf.exists(path)

    @classmethod
    def create(cls, path: str, params: IndexParams, *, bloom: str = BLOOM_FORMAT, lock: bool = True) -> "LSHBloomIndex":
        """Create an empty index at ``path`` (which must not hold one), with ``bloom`` filters.

        ``lock=False`` is for a caller that already holds the directory's lock
        (an :class:`IndexTransaction` working on its staging copy).
        """
        kind = backend(bloom)
        os.makedirs(path, exist_ok=True)
        with IndexLock(path, enabled=lock) as held:
            if lock:
                recover(path)
            if cls.exists(path) or any(os.path.exists(os.path.join(path, other.file_name(0))) for other in BACKENDS.values()):
                raise FileExistsError(f"{path}: already holds an index; open it instead")
            manifest = mf.new_manifest(kind, params)
            cls._create_files(path, params, kind, manifest["p_band"])
            mf.write_manifest(path, manifest)
            index = cls(path, manifest, read_only=False, lock=held)
            held.keep()
        return index

    @staticmethod
    def _create_files(path: str, params: IndexParams, kind, p_band: float) -> None:
        needed = kind.index_bytes(params.capacity, p_band, params.b)
        check_free_space(path, needed, "the index", "see `python -m lshbloom_udf plan`")
        paths = [os.path.join(path, kind.file_name(i)) for i in range(params.b)]
        try:
            for i, band_path in enumerate(paths):
                kind.create_file(band_path, params.capacity, p_band, i)
            reserve_space(paths)
        except OSError as e:
            for band_path in paths:
                if os.path.exists(band_path):
                    os.remove(band_path)
            raise OSError(e.errno, f"cannot reserve {human_bytes(needed)} for the index: {e.strerror}", path) from e

    @classmethod
    def open(
        cls,
        path: str,
        expected: Optional[Mapping[str, Any]] = None,
        read_only: bool = False,
        *,
        bloom: Optional[str] = None,
        lock: bool = True,
    ) -> "LSHBloomIndex":
        """Open the index at ``path``.

        ``expected`` maps parameter names to the values the caller's band keys
        were made with (``IndexParams`` or a dict; ``None`` values are not
        checked), and ``bloom`` the backend the caller asks for (``None``:
        either). Any difference raises :class:`IndexMismatchError`.

        A writer first finishes a commit a crashed run left half done and
        removes stale staging copies (see :func:`recover`); a reader of an
        index in that state gets :class:`IndexRecoveryNeededError`.
        ``lock=False`` is for a caller that already holds the lock.
        """
        if not os.path.isdir(path):
            raise FileNotFoundError(f"{path}: no such index directory")
        with IndexLock(path, read_only, enabled=lock) as held:
            if lock and not read_only:
                recover(path)
            elif lock and has_journal(path):
                raise IndexRecoveryNeededError(
                    f"{path}: a run crashed while committing to this index; open it for writing once "
                    "(or rerun the job) to finish that commit before reading it"
                )
            # Read under the lock: a writer rewrites the manifest on sync.
            manifest = mf.read_manifest(path)
            mf.check_compatible(path, manifest, expected, bloom)
            index = cls(path, manifest, read_only=read_only, lock=held)
            held.keep()
        return index

    @classmethod
    def open_or_create(
        cls,
        path: str,
        params: IndexParams,
        sizing_given: SizingGiven = True,
        *,
        bloom: str = BLOOM_FORMAT,
        lock: bool = True,
    ) -> "LSHBloomIndex":
        """Open the index at ``path`` checking it matches ``params`` and ``bloom``, or create it.

        With ``sizing_given=False`` an existing index keeps its own capacity and
        p_effective (they only size new filters); a collection of names checks
        only those sizing fields.
        """
        backend(bloom)
        if cls.exists(path):
            return cls.open(path, expected=expected_params(params, sizing_given), bloom=bloom, lock=lock)
        return cls.create(path, params, bloom=bloom, lock=lock)

    @classmethod
    def adopt(cls, path: str, params: Mapping[str, Any]) -> "LSHBloomIndex":
        """Take over band files written by datasketch ``MinHashLSHBloom`` (no manifest).

        ``params`` supplies what the files cannot tell: b, r, num_perm and the
        signature settings (scheme, seed, ngram, normalize, threshold).
        Capacity and the per-band rate are read from the files.
        """
        if cls.exists(path):
            raise FileExistsError(f"{path}: already has a manifest; open it instead")
        params = dict(params)
        if params.get("band_key", "sum") != "sum":
            raise IndexMismatchError(f"{path}: datasketch's band files are keyed by band_key 'sum', not {params['band_key']!r}")
        b = params.get("b")
        if b is None:
            raise ValueError("adopt needs at least b and r in params")
        kind = backend(BLOOM_FORMAT)
        if os.path.exists(os.path.join(path, kind.file_name(b))):
            raise IndexMismatchError(f"{path}: holds more than b={b} band files")
        with kind.open_file(os.path.join(path, kind.file_name(0))) as first:
            capacity, p_band = first.capacity, first.error_rate
        p_effective = effective_p(p_band, b)
        for name, value in (("capacity", capacity), ("p_effective", p_effective)):
            if params.get(name) not in (None, value) and not (
                name == "p_effective" and math.isclose(params[name], value, rel_tol=1e-9)
            ):
                raise IndexMismatchError(f"{path}: band files have {name}={value}, not {params[name]}")
        params.update(capacity=capacity, p_effective=p_effective)
        manifest = {**mf.new_manifest(kind, IndexParams(**params)), "p_band": p_band, "adopted": True}
        with IndexLock(path) as held:
            index = cls(path, manifest, read_only=False, lock=held)
            held.keep()
        mf.write_manifest(path, manifest)
        return index

    def _check_band_files(self, paths: list[str]) -> None:
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            raise IndexFilesMissingError(f"{self.path}: band files missing: {', '.join(os.path.basename(p) for p in missing)}")
        # Each file must be one of this index's filters, not a stray from another.
        for band_path in paths:
            try:
                with self.backend.open_file(band_path) as bloom:
                    sized = (bloom.capacity, bloom.error_rate)
            except ValueError as e:  # truncated, bad magic, bad header: the native message names the file
                raise IndexCorruptError(str(e)) from None
            if sized[0] != self.params.capacity or not math.isclose(sized[1], self._manifest["p_band"], rel_tol=1e-12):
                raise IndexMismatchError(
                    f"{band_path}: sized for capacity {sized[0]} at rate {sized[1]:.6g}, but the manifest says "
                    f"capacity {self.params.capacity} at rate {self._manifest['p_band']:.6g}: not this index's filter"
                )

    # -- queries ------------------------------------------------------------

    def _keys(self, keys: np.ndarray) -> np.ndarray:
        self._check_open()
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        if keys.ndim != 2 or keys.shape[1] != self.params.b:
            raise ValueError(f"band keys must have shape (N, {self.params.b}), got {keys.shape}")
        return keys

    def query(self, keys: np.ndarray) -> np.ndarray:
        """For each row of band keys: is any band's key already in the index?"""
        return self._filters.query(self._keys(keys))

    def insert(self, keys: np.ndarray) -> None:
        """Insert every row of band keys."""
        keys = self._keys(keys)
        self._check_capacity(len(keys))
        self._filters.insert(keys)
        self._count_inserted(len(keys))

    def _check_capacity(self, incoming: int) -> None:
        if self.inserted + incoming > self.params.capacity:
            raise IndexFullError(
                f"{self.label}: inserting {incoming} more documents would exceed the capacity of "
                f"{self.params.capacity:,} the filters were sized for ({self.inserted:,} inserted); past it the "
                "false-positive rate rises above p_effective. Deduplicate into a new --index-dir sized with "
                "--expected-docs for the whole corpus."
            )

    def _count_inserted(self, count: int) -> None:
        self._manifest["inserted"] += count
        if not self._warned_capacity and self.inserted >= CAPACITY_WARNING_FRACTION * self.params.capacity:
            self._warned_capacity = True
            warnings.warn(
                f"{self.label}: index holds {self.inserted:,} of its {self.params.capacity:,} capacity",
                CapacityWarning,
                stacklevel=3,
            )

    def query_insert(self, keys: np.ndarray, active: Optional[np.ndarray] = None) -> np.ndarray:
        """Keep-first decisions: True for duplicates; each non-duplicate is inserted before the next row is queried.

        Rows where ``active`` is False (documents without shingles) are
        neither queried nor inserted, and come out False.
        """
        keys = self._keys(keys)
        if active is not None:
            active = np.asarray(active, dtype=bool)
            if active.shape != (len(keys),):
                raise ValueError(f"active must have shape ({len(keys)},), got {active.shape}")
            duplicate = np.zeros(len(keys), dtype=bool)
            duplicate[active] = self.query_insert(keys[active])
            return duplicate
        room = self.params.capacity - self.inserted
        if len(keys) <= room:
            duplicate = self._filters.query_insert(keys)
            self._count_inserted(int(len(keys) - np.count_nonzero(duplicate)))
            return duplicate
        # Near capacity: each row inserts at most once, so `room` rows at a
        # time can never overshoot; stop at the first new document that would.
        parts, start = [], 0
        while start < len(keys) and room > 0:
            part = self._filters.query_insert(keys[start : start + room])
            self._count_inserted(int(len(part) - np.count_nonzero(part)))
            parts.append(part)
            start += len(part)
            room = self.params.capacity - self.inserted
        if start < len(keys):
            rest = self._filters.query(keys[start:])
            if not rest.all():
                self._check_capacity(1)
            parts.append(rest)
        return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)

    # -- state --------------------------------------------------------------

    @property
    def inserted(self) -> int:
        return self._manifest["inserted"]

    @property
    def manifest(self) -> dict:
        return json.loads(json.dumps(self._manifest))

    def band_paths(self) -> list[str]:
        return [os.path.join(self.path, self.backend.file_name(i)) for i in range(self.params.b)]

    def stats(self) -> dict:
        """Bytes on disk, documents inserted, and the false-positive rate now expected from the fill."""
        p = self.params
        band_fp = self.backend.band_false_positive(self.inserted, p.capacity, self._manifest["p_band"])
        return {
            "path": self.path,
            "backend": self.bloom,
            "bytes_on_disk": sum(os.path.getsize(path) for path in self.band_paths()),
            "inserted": self.inserted,
            "capacity": p.capacity,
            "b": p.b,
            "r": p.r,
            "p_band": self._manifest["p_band"],
            "expected_false_positive": effective_p(band_fp, p.b),
        }

    def sync(self) -> None:
        """Flush the filters, then the manifest."""
        self._check_open()
        if self.read_only:
            return
        self._filters.sync()
        mf.write_manifest(self.path, self._manifest)

    def close(self) -> None:
        """Sync (a writer) and close the filters, and release the lock."""
        if self.closed:
            return
        try:
            self.sync()
            self._filters.close()
        finally:
            self._release_lock()

    def discard(self) -> None:
        """Close without writing the manifest (what was inserted since the last sync is not recorded); release the lock."""
        if self.closed:
            return
        try:
            self._filters.close()
        finally:
            self._release_lock()

    def __repr__(self) -> str:
        p = self.params
        return (
            f"LSHBloomIndex({self.path!r}, b={p.b}, r={p.r}, capacity={p.capacity}, inserted={self.inserted}, "
            f"bloom={self.bloom!r})"
        )
