"""LSHBloomIndex: a directory of per-band Bloom filters plus a manifest, memory-mapped and driven in batches.

The filters may come in generations (a growing index, :mod:`~.growth`); the
index keeps the manifest and the lock, :class:`~.generations.FilterStack`
the open filters and the decisions over them.
"""

from __future__ import annotations

import dataclasses
import math
import os
import warnings
from typing import Any, Callable, Mapping, Optional

import numpy as np

from lshbloom_udf.errors import CapacityWarning, IndexMismatchError, IndexRecoveryNeededError
from lshbloom_udf.index import checksums
from lshbloom_udf.index import manifest as mf
from lshbloom_udf.index.backends import BACKENDS, DEFAULT_BLOOM, backend
from lshbloom_udf.index.compat import check_compatible
from lshbloom_udf.index.generations import FilterStack, Generation, create_generation
from lshbloom_udf.index.journal import has_journal, recover
from lshbloom_udf.index.lock import IndexLock, LockHolder
from lshbloom_udf.index.params import IndexParams, SizingGiven, effective_p, expected_params

# Warn once a fixed index holds this fraction of its capacity.
CAPACITY_WARNING_FRACTION = 0.9


class LSHBloomIndex(LockHolder):
    """A directory of per-band Bloom filters plus a manifest.

    Use :meth:`create`, :meth:`open`, :meth:`open_or_create` or, for an index
    datasketch wrote (band files without a manifest), :meth:`adopt`. The index
    is a context manager; :meth:`close` syncs the filters and the manifest.
    ``bloom`` (``"pybloomfiltermmap3"`` or ``"blocked"``) is the filters' backend,
    chosen at creation and recorded in the manifest, as is ``params.growth``:
    a ``"fixed"`` index refuses documents past its capacity
    (:class:`IndexFullError`), a ``"grow"`` one adds a generation of filters
    (:mod:`lshbloom_udf.index.growth`).
    """

    def __init__(self, path: str, manifest: mf.Manifest, read_only: bool, lock: Optional[IndexLock] = None,
                 verify: bool = True, writes_delta: bool = False):
        """Use the class methods. The index holds ``lock`` (already taken) until it closes; on error the caller releases
        it.

        ``verify``: check the band files against the manifest's checksums (:mod:`~.checksums`).
        ``writes_delta``: the newest delta is the one written (a run's staged delta, :mod:`~.deltas`); otherwise a
        writer inserts into the base's newest generation and the pending deltas are only read.
        """
        self.path = path
        self._manifest = manifest
        self.params = manifest.params
        self.backend = manifest.backend
        self.bloom = self.backend.name
        self.read_only = read_only
        self._lock = lock
        self._warned_capacity = False
        self._planned_inserts: Optional[int] = None
        self._filters = FilterStack(path, self.backend, self.params, manifest.stack_generations(writes_delta),
                                    read_only, label=path)
        self.closed = False
        if verify:
            try:
                checksums.verify(manifest.checksums, self._filters.all_paths(), path)
            except BaseException:
                self._filters.close()
                raise

    @property
    def label(self) -> str:
        """The directory named in messages (an IndexTransaction's staging copy names its live index)."""
        return self._filters.label

    @label.setter
    def label(self, value: str) -> None:
        self._filters.label = value

    # -- construction -------------------------------------------------------

    @staticmethod
    def exists(path: str) -> bool:
        return mf.exists(path)

    @classmethod
    def create(cls, path: str, params: IndexParams, *, bloom: str = DEFAULT_BLOOM,
               lock: bool = True) -> "LSHBloomIndex":
        """Create an empty index at ``path`` (which must not hold one), with ``bloom`` filters.

        ``lock=False`` is for a caller that already holds the directory's lock
        (an :class:`IndexTransaction` working on its staging copy).
        """
        bloom_backend = backend(bloom)  # an unknown name fails before the directory is made
        os.makedirs(path, exist_ok=True)

        def new_files() -> mf.Manifest:
            if cls.exists(path) or any(os.path.exists(os.path.join(path, other.file_name(0)))
                                       for other in BACKENDS.values()):
                raise FileExistsError(f"{path}: already holds an index; open it instead")
            manifest = mf.new_manifest(bloom_backend, params)
            paths = create_generation(path, bloom_backend, params.b, 0, Generation(params.capacity, manifest.p_band))
            manifest = manifest.replace(checksums=checksums.of_files(paths))
            mf.write_manifest(path, manifest)
            return manifest

        return cls._open_locked(path, False, lock, new_files)

    @classmethod
    def _open_locked(cls, path: str, read_only: bool, lock: bool, manifest: Callable[[], mf.Manifest],
                     verify: bool = True, writes_delta: bool = False) -> "LSHBloomIndex":
        """Take the lock (unless ``lock`` is False), get the ``manifest()`` under it, and open the index holding it.

        A writer first finishes a commit a crashed run left half done and
        removes stale staging copies (see :func:`recover`); a reader of an
        index in that state gets :class:`IndexRecoveryNeededError`. On any
        error the lock is released.
        """
        with IndexLock(path, read_only, enabled=lock) as held:
            if lock and not read_only:
                recover(path)
            elif lock and has_journal(path):
                raise IndexRecoveryNeededError(
                    f"{path}: a run crashed while committing to this index; open it for writing once "
                    "(or rerun the job) to finish that commit before reading it"
                )
            index = cls(path, manifest(), read_only=read_only, lock=held, verify=verify, writes_delta=writes_delta)
            held.keep()
        return index

    @classmethod
    def open(
        cls,
        path: str,
        expected: Optional[Mapping[str, Any]] = None,
        read_only: bool = False,
        *,
        bloom: Optional[str] = None,
        lock: bool = True,
        verify: bool = True,
        writes_delta: bool = False,
    ) -> "LSHBloomIndex":
        """Open the index at ``path``.

        ``expected`` maps parameter names to the values the caller's band keys
        were made with (``IndexParams`` or a dict; ``None`` values are not
        checked), and ``bloom`` the backend the caller asks for (``None``:
        either). Any difference raises :class:`IndexMismatchError`.

        A writer first finishes a commit a crashed run left half done (see
        :meth:`_open_locked`). ``lock=False`` is for a caller that already
        holds the lock; ``verify=False`` skips the band files' checksums (a
        caller that verified the files it copied).
        """
        if not os.path.isdir(path):
            raise FileNotFoundError(f"{path}: no such index directory")

        def checked() -> mf.Manifest:
            # Read under the lock: a writer rewrites the manifest on sync.
            manifest = mf.read_manifest(path)
            check_compatible(path, manifest.bloom, manifest.params, expected, bloom)
            return manifest

        return cls._open_locked(path, read_only, lock, checked, verify, writes_delta)

    @classmethod
    def open_or_create(
        cls,
        path: str,
        params: IndexParams,
        sizing_given: SizingGiven = True,
        *,
        bloom: str = DEFAULT_BLOOM,
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
            raise IndexMismatchError(
                f"{path}: datasketch's band files are keyed by band_key 'sum', not {params['band_key']!r}")
        if params.get("growth", "fixed") != "fixed":
            raise IndexMismatchError(
                f"{path}: datasketch's band files are one fixed generation, not growth {params['growth']!r}")
        b = params.get("b")
        if b is None:
            raise ValueError("adopt needs at least b and r in params")
        pybloom = backend(DEFAULT_BLOOM)
        if os.path.exists(os.path.join(path, pybloom.file_name(b))):
            raise IndexMismatchError(f"{path}: holds more than b={b} band files")
        with pybloom.open_file(os.path.join(path, pybloom.file_name(0))) as first:
            capacity, p_band = first.capacity, first.error_rate
        p_effective = effective_p(p_band, b)
        for name, value in (("capacity", capacity), ("p_effective", p_effective)):
            if params.get(name) not in (None, value) and not (
                name == "p_effective" and math.isclose(params[name], value, rel_tol=1e-9)
            ):
                raise IndexMismatchError(f"{path}: band files have {name}={value}, not {params[name]}")
        params.update(capacity=capacity, p_effective=p_effective)
        manifest = mf.new_manifest(pybloom, IndexParams(**params), p_band).replace(adopted=True)
        index = cls._open_locked(path, False, True, lambda: manifest, verify=False)
        index.sync()  # the manifest, with the band files' checksums
        return index

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
        self._filters.insert(self._keys(keys))
        self._warn_near_capacity()

    def query_insert(self, keys: np.ndarray, active: Optional[np.ndarray] = None) -> np.ndarray:
        """Keep-first decisions: True for duplicates; each non-duplicate is inserted before the next row is queried.

        Rows where ``active`` is False (documents without shingles) are
        neither queried nor inserted, and come out False. A fixed index fills
        up exactly to its capacity, then raises :class:`IndexFullError` at the
        first new document; a growing one adds a generation there.
        """
        return self._decide_active(keys, active, self._filters.query_insert)

    def test_insert(self, keys: np.ndarray, active: Optional[np.ndarray] = None) -> np.ndarray:
        """Any-earlier decisions: True when some band key of the row was present before it; every row is inserted.

        For rows j < k, k is flagged when ``keys[j, i] == keys[k, i]`` for some
        band i (or a Bloom false positive says so), whether or not j was
        flagged itself. Inactive rows are neither tested nor inserted.
        """
        return self._decide_active(keys, active, self._filters.test_insert)

    def _decide_active(self, keys: np.ndarray, active: Optional[np.ndarray], decide) -> np.ndarray:
        """``decide`` (a filter stack's rule) over the rows where ``active`` holds; False elsewhere."""
        keys = self._keys(keys)
        if active is not None:
            active = np.asarray(active, dtype=bool)
            if active.shape != (len(keys),):
                raise ValueError(f"active must have shape ({len(keys)},), got {active.shape}")
            keys = keys[active]
        try:
            decided = decide(keys)
        finally:
            self._warn_near_capacity()
        if active is None:
            return decided
        duplicate = np.zeros(len(active), dtype=bool)
        duplicate[active] = decided
        return duplicate

    def decide(self, keys: np.ndarray, active: Optional[np.ndarray], insert_rule: str) -> np.ndarray:
        """:meth:`query_insert` (``insert="first"``, keep-first) or :meth:`test_insert` (``"all"``, any-earlier)."""
        if insert_rule == "first":
            return self.query_insert(keys, active)
        if insert_rule == "all":
            return self.test_insert(keys, active)
        raise ValueError(f"insert must be 'first' or 'all', got {insert_rule!r}")

    def plan_inserts(self, documents: int) -> None:
        """Say this index will receive at most ``documents`` documents in all (a temporary index sized for one
        input). The near-capacity warning is about inserts to come: within such a plan none come beyond it, so it
        warns only if the plan itself exceeds the capacity."""
        self._planned_inserts = int(documents)

    def _warn_near_capacity(self) -> None:
        if self._warned_capacity or self.params.growth != "fixed":
            return
        if self._planned_inserts is not None and self._planned_inserts <= self.params.capacity:
            return
        if self.inserted >= CAPACITY_WARNING_FRACTION * self.params.capacity:
            self._warned_capacity = True
            warnings.warn(
                f"{self.label}: index holds {self.inserted:,} of its {self.params.capacity:,} capacity",
                CapacityWarning,
                stacklevel=3,
            )

    # -- state --------------------------------------------------------------

    @property
    def inserted(self) -> int:
        return self._filters.inserted

    @property
    def generations(self) -> list[dict]:
        """Each generation's capacity, per-band rate and documents inserted (one for a fixed index)."""
        return [g.record(self.backend) for g in self._filters.generations]

    @property
    def manifest(self) -> mf.Manifest:
        """The manifest as the next sync writes it: the filters' fill now (the checksums: the last sync's)."""
        stack = [dataclasses.replace(g) for g in self._filters.generations]
        return self._manifest.replace(generations=tuple(g for g in stack if g.name is None),
                                      deltas=tuple(g for g in stack if g.name is not None))

    def log_inserts(self, key_log) -> None:
        """Append every key the newest generation (a delta) receives from now on to ``key_log``
        (:class:`~lshbloom_udf.index.deltas.KeyLog`)."""
        self._filters.key_log = key_log

    def band_paths(self) -> list[str]:
        """Every band file, generation after generation."""
        return self._filters.all_paths()

    def stats(self) -> dict:
        """Bytes on disk, documents inserted, and the false-positive rate now expected from the fill."""
        p = self.params
        return {
            "path": self.path,
            "backend": self.bloom,
            "bytes_on_disk": sum(os.path.getsize(path) for path in self.band_paths()),
            "inserted": self.inserted,
            "capacity": p.capacity,
            "b": p.b,
            "r": p.r,
            "p_band": self._manifest.p_band,
            "expected_false_positive": self._filters.expected_false_positive(),
            "growth": p.growth,
            "generations": len(self._filters.generations),
            "generation_fill": self._filters.fill(),
            "capacity_now": sum(g.capacity for g in self._filters.generations),
        }

    def sync(self) -> None:
        """Flush the filters, then the manifest."""
        self._check_open()
        if self.read_only:
            return
        self._filters.sync()
        if self._filters.key_log is not None:  # a delta's manifest entry holds its log's SHA-256
            self._filters.newest.keys_sha256 = self._filters.key_log.digest()
        # Only the generations this index wrote changed: the others keep the checksums verified when it opened.
        names = {os.path.basename(p) for p in self.band_paths()}
        recorded = {n: c for n, c in self._manifest.checksums.items() if n in names}
        written = checksums.of_files(self._filters.written_paths())
        self._manifest = self.manifest.replace(checksums={**recorded, **written})
        mf.write_manifest(self.path, self._manifest)

    def close(self) -> None:
        """Sync (a writer) and close the filters, and release the lock."""
        if self.closed:
            return
        try:
            self.sync()
            self._close_filters()
        finally:
            self._release_lock()

    def discard(self) -> None:
        """Close without writing the manifest (what was inserted since the last sync is not recorded); release the
        lock."""
        if self.closed:
            return
        try:
            self._close_filters()
        finally:
            self._release_lock()

    def _close_filters(self) -> None:
        if self._filters.key_log is not None:
            self._filters.key_log.close()
        self._filters.close()

    def __repr__(self) -> str:
        p = self.params
        return (
            f"LSHBloomIndex({self.path!r}, b={p.b}, r={p.r}, capacity={p.capacity}, inserted={self.inserted}, "
            f"bloom={self.bloom!r})"
        )
