"""The LSHBloom index: one Bloom filter per LSH band, on disk.

A directory holds ``band-{i}.bf`` for ``i < b`` — pybloomfiltermmap3 files, so
``datasketch.MinHashLSHBloom(save_dir=..., params=(b, r))`` and
``pybloomfilter.BloomFilter.open`` read them (or, with ``bloom="blocked"``,
``band-{i}.bbf`` blocked filters, see :mod:`lshbloom_udf.blocked`) — and ``manifest.json``, which
records every parameter that decides whether two runs' band keys are
comparable (scheme, seed, num_perm, b, r, ngram, normalization, threshold, band key) and
how the filters were sized (capacity, p_effective, per-band p). Reopening with
different parameters is an error, never a silent mix.

Decisions ("keep first"): a document is a duplicate iff any of its ``b`` band
keys is in that band's filter; only non-duplicates are inserted, in order. The
filters are memory-mapped and driven in batches by the native module.
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import shutil
import warnings
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from lshbloom_udf import _native, blocked, hooks
from lshbloom_udf.errors import (  # noqa: F401  (re-exported)
    AlreadyIngestedError,
    CapacityWarning,
    IndexFullError,
    IndexLockedError,
    IndexMismatchError,
    IndexRecoveryNeededError,
)
from lshbloom_udf.lsh import optimal_params, validate_bands, validate_num_perm, validate_threshold
from lshbloom_udf.minhash import normalization_name, validate_band_key, validate_ngram, validate_scheme, validate_seed
from lshbloom_udf.sizing import BLOOM_PREAMBLE_BYTES, human_bytes, per_band_p, validate_capacity, validate_p_effective

MANIFEST_NAME = "manifest.json"
FORMAT_NAME = "lshbloom-index"
FORMAT_VERSION = 1
BLOOM_FORMAT = "pybloomfiltermmap3"
# The Bloom filter backends: the default datasketch-compatible files, or blocked filters.
BLOOM_BACKENDS = (BLOOM_FORMAT, "blocked")
# manifest "format" -> (backend, format version this code reads)
_MANIFEST_FORMATS = {FORMAT_NAME: (BLOOM_FORMAT, FORMAT_VERSION), blocked.FORMAT_NAME: ("blocked", blocked.FORMAT_VERSION)}
# Bloom hash seeds are derived, not random, so that the same parameters give
# byte-identical index files on every run.
_SEED_DOMAIN = 0x4C534842  # "LSHB"







# Warn once the index holds this fraction of its capacity.
CAPACITY_WARNING_FRACTION = 0.9
LOCK_NAME = ".lock"
# Crash-consistent runs (IndexTransaction): the commit journal, the staging
# copies' prefix, and the folder of the committed runs' duplicate row ids.
JOURNAL_NAME = ".commit.json"
STAGING_PREFIX = ".staging-"
RUNS_DIR = "runs"


def _acquire_lock(path: str, read_only: bool) -> Optional[int]:
    """An OS lock on the index for as long as it is open: exclusive for writers, shared for readers.

    A reader of an index in a directory it cannot write goes without (it
    changes nothing).
    """
    lock_path = os.path.join(path, LOCK_NAME)
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        if read_only:
            return None
        raise PermissionError(e.errno, f"{path}: index directory is not writable ({e.strerror})", lock_path) from None
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if read_only else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise IndexLockedError(
            f"{path}: index is in use by another process (pid {holder}); two jobs cannot share an index "
            "directory at once — wait for the other one or use another --index-dir"
        ) from None
    if not read_only:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def _release_lock(fd: Optional[int]) -> None:
    if fd is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _reserve_space(paths: list[str]) -> None:
    """Allocate the band files' blocks now, so that a full disk is an error here and not a SIGBUS later."""
    for path in paths:
        fd = os.open(path, os.O_RDWR)
        try:
            os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
        finally:
            os.close(fd)


def band_file_name(i: int, bloom: str = BLOOM_FORMAT) -> str:
    return blocked.band_file_name(i) if bloom == "blocked" else f"band-{i}.bf"


def validate_bloom(bloom: Any) -> str:
    if bloom not in BLOOM_BACKENDS:
        raise ValueError(f"bloom must be one of {BLOOM_BACKENDS}, got {bloom!r}")
    return bloom


def manifest_bloom(manifest: Mapping) -> str:
    """The Bloom backend of a (validated) manifest."""
    return _MANIFEST_FORMATS[manifest["format"]][0]


def bloom_hash_seeds(band: int, num_hashes: int) -> list[int]:
    """The deterministic pybloomfiltermmap3 hash seeds of band ``band``."""
    return [int(s) for s in np.random.SeedSequence([_SEED_DOMAIN, band]).generate_state(num_hashes, dtype=np.uint32)]


@dataclass(frozen=True)
class IndexParams:
    """Everything that makes two runs' decisions comparable, and the index's sizing.

    Build one with :meth:`for_threshold` (``(b, r)`` from the threshold, as
    datasketch chooses them) or give ``b`` and ``r`` directly.
    """

    b: int
    r: int
    capacity: int
    num_perm: int = 256
    threshold: Optional[float] = None
    scheme: str = "affine32"
    seed: int = 1
    ngram: int = 1
    normalize: str = "none"
    p_effective: float = 1e-5
    # "sum" (datasketch's band hash) or "mix" (see minhash.band_keys)
    band_key: str = "sum"

    @classmethod
    def for_threshold(
        cls,
        capacity: int,
        threshold: float = 0.5,
        num_perm: int = 256,
        *,
        bands: Optional[tuple[int, int]] = None,
        **kwargs: Any,
    ) -> "IndexParams":
        validate_threshold(threshold)
        b, r = bands if bands is not None else optimal_params(threshold, num_perm)
        return cls(b=b, r=r, capacity=capacity, num_perm=num_perm, threshold=threshold, **kwargs)

    def __post_init__(self) -> None:
        validate_num_perm(self.num_perm)
        validate_bands(self.b, self.r, self.num_perm)
        validate_capacity(self.capacity)
        if self.threshold is not None:
            validate_threshold(self.threshold)
        validate_scheme(self.scheme)
        validate_seed(self.seed)
        validate_ngram(self.ngram)
        validate_p_effective(self.p_effective)
        validate_band_key(self.band_key)
        object.__setattr__(self, "normalize", normalization_name(self.normalize))

    @property
    def p_band(self) -> float:
        return per_band_p(self.p_effective, self.b)

    def signature_kwargs(self) -> dict:
        """The keyword arguments of :func:`~lshbloom_udf.minhash.text_band_keys` these parameters imply."""
        return dict(
            b=self.b,
            r=self.r,
            num_perm=self.num_perm,
            ngram=self.ngram,
            seed=self.seed,
            scheme=self.scheme,
            normalize=self.normalize,
            band_key=self.band_key,
        )


# Fields that only size new filters: an existing index keeps its own.
SIZING_FIELDS = ("capacity", "p_effective")


def _write_json_atomically(path: str, data: Mapping) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_manifest(path: str) -> dict:
    """The manifest of the index at ``path``, validated."""
    manifest_path = os.path.join(path, MANIFEST_NAME)
    try:
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"{manifest_path}: no LSHBloom index manifest here") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{manifest_path}: corrupt manifest ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") not in _MANIFEST_FORMATS:
        raise ValueError(f"{manifest_path}: not an LSHBloom index manifest (format {' or '.join(_MANIFEST_FORMATS)})")
    version = _MANIFEST_FORMATS[manifest["format"]][1]
    if manifest.get("format_version") != version:
        raise ValueError(
            f"{manifest_path}: {manifest['format']} format version {manifest.get('format_version')!r}, "
            f"this version reads {version}"
        )
    return manifest


# Parameters added after format version 1 was written, with the value older manifests imply.
_LATER_PARAMS = {"band_key": "sum"}


def _params_from_manifest(manifest: Mapping) -> IndexParams:
    stored = {**_LATER_PARAMS, **manifest["params"]}
    return IndexParams(**{f.name: stored[f.name] for f in fields(IndexParams)})


class LSHBloomIndex:
    """A directory of per-band Bloom filters plus a manifest.

    Use :meth:`create`, :meth:`open`, :meth:`open_or_create` or, for an index
    datasketch wrote (band files without a manifest), :meth:`adopt`. The index
    is a context manager; :meth:`close` syncs the filters and the manifest.
    ``bloom`` (``"pybloomfiltermmap3"`` or ``"blocked"``) is the filters' backend,
    chosen at creation and recorded in the manifest.
    """

    def __init__(self, path: str, manifest: dict, read_only: bool, lock_fd: Optional[int]):
        """Use the class methods; this takes over ``lock_fd``, already acquired."""
        self.path = path
        # The directory named in messages (an IndexTransaction's staging copy names its live index).
        self.label = path
        self._manifest = manifest
        self.params = _params_from_manifest(manifest)
        self.bloom = manifest_bloom(manifest)
        self.read_only = read_only
        self._lock_fd = lock_fd
        self._closed = True
        self._warned_capacity = False
        try:
            paths = self.band_paths()
            self._check_band_files(paths)
            filters = _native.BlockedBands if self.bloom == "blocked" else _native.BandFilters
            self._filters = filters(paths, not read_only)
        except BaseException:
            _release_lock(lock_fd)
            raise
        self._closed = False

    # -- construction -------------------------------------------------------

    @staticmethod
    def exists(path: str) -> bool:
        return os.path.isfile(os.path.join(path, MANIFEST_NAME))

    @classmethod
    def create(cls, path: str, params: IndexParams, *, bloom: str = BLOOM_FORMAT, lock: bool = True) -> "LSHBloomIndex":
        """Create an empty index at ``path`` (which must not hold one), with ``bloom`` filters.

        ``lock=False`` is for a caller that already holds the directory's lock
        (an :class:`IndexTransaction` working on its staging copy).
        """
        validate_bloom(bloom)
        os.makedirs(path, exist_ok=True)
        lock_fd = _acquire_lock(path, read_only=False) if lock else None
        try:
            if lock:
                recover(path)
            if cls.exists(path) or any(os.path.exists(os.path.join(path, band_file_name(0, kind))) for kind in BLOOM_BACKENDS):
                raise FileExistsError(f"{path}: already holds an index; open it instead")
            manifest = cls._create_files(path, params, bloom)
        except BaseException:
            _release_lock(lock_fd)
            raise
        return cls(path, manifest, read_only=False, lock_fd=lock_fd)

    @staticmethod
    def _create_files(path: str, params: IndexParams, bloom: str) -> dict:
        p_band = params.p_band
        if bloom == "blocked":
            num_blocks = _native.blocked_num_blocks(params.capacity, p_band)
            needed = blocked.blocked_index_bytes(params.capacity, p_band, params.b)
        else:
            num_hashes, num_bits = _native.bloom_geometry(params.capacity, p_band)
            needed = params.b * (BLOOM_PREAMBLE_BYTES + (num_bits + 7) // 8)
        free = shutil.disk_usage(path).free
        if needed > free:
            raise OSError(
                errno.ENOSPC,
                f"not enough space for the index: it needs {human_bytes(needed)} and {human_bytes(free)} is free "
                "(see `python -m lshbloom_udf plan`)",
                path,
            )
        paths = [os.path.join(path, band_file_name(i, bloom)) for i in range(params.b)]
        try:
            for i, band_path in enumerate(paths):
                if bloom == "blocked":
                    _native.BlockedFile.create(band_path, params.capacity, p_band, blocked.band_seed(i)).close()
                else:
                    _native.BloomFile.create(band_path, params.capacity, p_band, bloom_hash_seeds(i, num_hashes)).close()
            _reserve_space(paths)
        except OSError as e:
            for band_path in paths:
                if os.path.exists(band_path):
                    os.remove(band_path)
            raise OSError(e.errno, f"cannot reserve {human_bytes(needed)} for the index: {e.strerror}", path) from e
        if bloom == "blocked":
            manifest = {"format": blocked.FORMAT_NAME, "format_version": blocked.FORMAT_VERSION, "bloom_format": blocked.BLOOM_FORMAT}
        else:
            manifest = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "bloom_format": BLOOM_FORMAT}
        manifest.update(params=asdict(params), p_band=p_band, inserted=0)
        if bloom == "blocked":
            manifest["num_blocks"] = num_blocks
        _write_json_atomically(os.path.join(path, MANIFEST_NAME), manifest)
        return manifest

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
        lock_fd = _acquire_lock(path, read_only) if lock else None
        try:
            if lock and not read_only:
                recover(path)
            elif lock and os.path.exists(os.path.join(path, JOURNAL_NAME)):
                raise IndexRecoveryNeededError(
                    f"{path}: a run crashed while committing to this index; open it for writing once "
                    "(or rerun the job) to finish that commit before reading it"
                )
            # Read under the lock: a writer rewrites the manifest on sync.
            manifest = read_manifest(path)
            _check_bloom(path, manifest, bloom)
            params = _params_from_manifest(manifest)
            if expected is not None:
                _check_expected(path, params, expected)
        except BaseException:
            _release_lock(lock_fd)
            raise
        return cls(path, manifest, read_only=read_only, lock_fd=lock_fd)

    @classmethod
    def open_or_create(
        cls, path: str, params: IndexParams, sizing_given: bool = True, *, bloom: str = BLOOM_FORMAT, lock: bool = True
    ) -> "LSHBloomIndex":
        """Open the index at ``path`` checking it matches ``params`` and ``bloom``, or create it.

        With ``sizing_given=False`` an existing index keeps its own capacity and
        p_effective (they only size new filters).
        """
        validate_bloom(bloom)
        if cls.exists(path):
            return cls.open(path, expected=_expected_params(params, sizing_given), bloom=bloom, lock=lock)
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
        if os.path.exists(os.path.join(path, band_file_name(b))):
            raise IndexMismatchError(f"{path}: holds more than b={b} band files")
        first = _native.BloomFile.open(os.path.join(path, band_file_name(0)), False)
        capacity, p_band = first.capacity, first.error_rate
        first.close()
        p_effective = -math.expm1(b * math.log1p(-p_band))
        for name, value in (("capacity", capacity), ("p_effective", p_effective)):
            if params.get(name) not in (None, value) and not (
                name == "p_effective" and math.isclose(params[name], value, rel_tol=1e-9)
            ):
                raise IndexMismatchError(f"{path}: band files have {name}={value}, not {params[name]}")
        params.update(capacity=capacity, p_effective=p_effective)
        full = IndexParams(**params)
        manifest = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "bloom_format": BLOOM_FORMAT,
            "params": asdict(full),
            "p_band": p_band,
            "inserted": 0,
            "adopted": True,
        }
        index = cls(path, manifest, read_only=False, lock_fd=_acquire_lock(path, read_only=False))
        _write_json_atomically(os.path.join(path, MANIFEST_NAME), manifest)
        return index

    def _check_band_files(self, paths: list[str]) -> None:
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            raise FileNotFoundError(f"{self.path}: band files missing: {', '.join(os.path.basename(p) for p in missing)}")
        # Each file must be one of this index's filters, not a stray from another.
        file_class = _native.BlockedFile if self.bloom == "blocked" else _native.BloomFile
        for band_path in paths:
            with file_class.open(band_path, False) as bloom:
                sized = (bloom.capacity, bloom.error_rate)
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
        return [os.path.join(self.path, band_file_name(i, self.bloom)) for i in range(self.params.b)]

    def stats(self) -> dict:
        """Bytes on disk, documents inserted, and the false-positive rate now expected from the fill."""
        size = sum(os.path.getsize(p) for p in self.band_paths())
        if self.bloom == "blocked":
            band_fp = blocked.band_false_positive_rate(self.inserted, self._manifest["num_blocks"])
        else:
            with _native.BloomFile.open(self.band_paths()[0], False) as bloom:
                k, m = bloom.num_hashes, bloom.num_bits
            band_fp = (1.0 - math.exp(-k * self.inserted / m)) ** k
        return {
            "path": self.path,
            "backend": self.bloom,
            "bytes_on_disk": size,
            "inserted": self.inserted,
            "capacity": self.params.capacity,
            "b": self.params.b,
            "r": self.params.r,
            "p_band": self._manifest["p_band"],
            "expected_false_positive": -math.expm1(self.params.b * math.log1p(-band_fp)) if band_fp < 1 else 1.0,
        }

    def sync(self) -> None:
        """Flush the filters, then the manifest."""
        self._check_open()
        if self.read_only:
            return
        self._filters.sync()
        _write_json_atomically(os.path.join(self.path, MANIFEST_NAME), self._manifest)

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.sync()
            self._filters.close()
        finally:
            self._closed = True
            _release_lock(self._lock_fd)

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"{self.path}: index is closed")

    def __enter__(self) -> "LSHBloomIndex":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        p = self.params
        return (
            f"LSHBloomIndex({self.path!r}, b={p.b}, r={p.r}, capacity={p.capacity}, inserted={self.inserted}, "
            f"bloom={self.bloom!r})"
        )


def _check_bloom(path: str, manifest: Mapping, bloom: Optional[str]) -> None:
    if bloom is not None and manifest_bloom(manifest) != validate_bloom(bloom):
        raise IndexMismatchError(
            f"{path}: index has {manifest_bloom(manifest)} Bloom filters, asked for {bloom}. "
            f"Use --bloom {manifest_bloom(manifest)} (bloom={manifest_bloom(manifest)!r}) with this index, or a new --index-dir."
        )


def _expected_params(params: IndexParams, sizing_given: bool) -> dict:
    """The parameters an existing index must have: all of ``params``, or all but the sizing ones."""
    expected = asdict(params)
    if not sizing_given:
        for name in SIZING_FIELDS:
            expected.pop(name)
    return expected


def _check_expected(path: str, params: IndexParams, expected: Mapping[str, Any]) -> None:
    if isinstance(expected, IndexParams):
        expected = asdict(expected)
    expected = dict(expected)
    if "normalize" in expected and expected["normalize"] is not None:
        expected["normalize"] = normalization_name(expected["normalize"])
    have = asdict(params)
    diffs = []
    for name, want in expected.items():
        if name not in have:
            raise ValueError(f"unknown index parameter {name!r}")
        if want is None:
            continue
        got = have[name]
        same = math.isclose(got, want, rel_tol=1e-12) if isinstance(got, float) and isinstance(want, float) else got == want
        if not same:
            diffs.append(f"{name}: index has {got!r}, asked for {want!r}")
    if diffs:
        raise IndexMismatchError(
            f"{path}: index was built with other parameters ({'; '.join(diffs)}). "
            "Use the index's parameters, or a new --index-dir."
        )



# --------------------------------------------------------------------------
# crash-consistent runs: staging copy, commit journal, recovery


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(path: str) -> None:
    """fsync every file and directory under ``path`` (a written output), then ``path`` itself."""
    if os.path.isdir(path):
        for root, dirs, files in os.walk(path):
            for name in files:
                _fsync_path(os.path.join(root, name))
            _fsync_path(root)
    elif os.path.exists(path):
        _fsync_path(path)


def _rmtree(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def _roll_forward(path: str, journal: Mapping) -> None:
    """Apply a commit journal's renames; each is done at most once, so this can be repeated after a crash.

    An op ``[src, dst]`` whose ``src`` is gone was done already (sources are
    unique to one run). A directory at ``dst`` (an output replaced with
    ``--overwrite``) is first moved aside to ``dst.lshbloom-old`` and removed
    after the rename. Relative paths are inside the index directory.
    """
    for i, (src, dst) in enumerate(journal["ops"]):
        src, dst = os.path.join(path, src), os.path.join(path, dst)
        old = dst + ".lshbloom-old"
        if os.path.lexists(src):
            if os.path.isdir(dst) and not os.path.islink(dst):
                if os.path.lexists(old):
                    _rmtree(old)
                os.rename(dst, old)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.replace(src, dst)
            _fsync_path(os.path.dirname(dst))
        elif not os.path.lexists(dst):
            raise IndexRecoveryNeededError(
                f"{os.path.join(path, JOURNAL_NAME)}: cannot finish the commit of run {journal.get('run_id')}: "
                f"neither {src} nor {dst} exists (was the index or the output moved?)"
            )
        if os.path.lexists(old):
            _rmtree(old)
        if i == 0:
            hooks.fire("mid-commit")


def recover(path: str) -> dict:
    """Bring an index directory back to a committed state after a crash. The caller holds its exclusive lock.

    A commit journal (``.commit.json``) means the crashed run had decided to
    commit: its renames are finished (roll forward). Staging copies
    (``.staging-*``) of runs that never reached their journal are removed,
    with the temporary outputs they had registered. Returns what was done.
    """
    report: dict = {"rolled_forward": None, "discarded": []}
    journal_path = os.path.join(path, JOURNAL_NAME)
    if os.path.exists(journal_path):
        try:
            with open(journal_path, encoding="utf-8") as f:
                journal = json.load(f)
        except json.JSONDecodeError as e:  # written atomically: cannot happen short of disk damage
            raise IndexRecoveryNeededError(f"{journal_path}: corrupt commit journal ({e})") from None
        _roll_forward(path, journal)
        os.remove(journal_path)
        _fsync_path(path)
        report["rolled_forward"] = journal.get("run_id")
    for name in sorted(os.listdir(path)):
        if not name.startswith(STAGING_PREFIX):
            continue
        staging = os.path.join(path, name)
        pending = os.path.join(staging, "pending.json")
        try:
            with open(pending, encoding="utf-8") as f:
                outputs = json.load(f).get("outputs", [])
        except (OSError, ValueError):
            outputs = []
        for tmp in outputs:
            if os.path.lexists(tmp):
                _rmtree(tmp)
        _rmtree(staging)
        report["discarded"].append(name)
    if report["discarded"] or report["rolled_forward"]:
        _fsync_path(path)
    return report


def run_params(params: IndexParams) -> dict:
    """The parameters a committed run is matched on: all but the sizing ones."""
    d = asdict(params)
    for name in SIZING_FIELDS:
        d.pop(name)
    return json.loads(json.dumps(d))



class IndexTransaction:
    """One run's hold on an index directory, from its start to its all-or-nothing commit.

    Opening takes the directory's exclusive OS lock (``.lock``, ``flock``; a
    second run fails at once with :class:`IndexLockedError`) and keeps it
    until :meth:`close`. It first runs :func:`recover`. The run then works on
    a *staging copy* (:meth:`stage`: ``<index>/.staging-*/``, a copy of every
    band file and the manifest, on the same file system): the live index is
    never written. :meth:`commit` makes the staged index, the duplicates'
    row ids, the run record in the manifest's ``runs`` list and the run's
    outputs (temporary path → final path) live together: it writes a journal
    listing the renames, then performs them (band files, then the manifest
    last), then deletes the journal. A crash before the journal leaves the old
    index and no output; a crash after it is finished by the next writer.
    """

    def __init__(self, path: str):
        path = os.fspath(path)
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            raise type(e)(e.errno, f"{path}: cannot create the index directory ({e.strerror})") from None
        if not os.path.isdir(path):
            raise NotADirectoryError(f"{path}: index path is not a directory")
        self.path = path
        self._lock_fd = _acquire_lock(path, read_only=False)
        try:
            self.recovered = recover(path)
        except BaseException:
            _release_lock(self._lock_fd)
            raise
        self.staging: Optional[str] = None
        self.index: Optional[LSHBloomIndex] = None
        self._outputs: list[str] = []
        self.closed = False

    # -- what is committed ---------------------------------------------------

    def manifest(self) -> Optional[dict]:
        return read_manifest(self.path) if LSHBloomIndex.exists(self.path) else None

    def runs(self) -> list:
        manifest = self.manifest()
        return list(manifest.get("runs", [])) if manifest else []

    def find_run(self, content_fingerprint: str, params: IndexParams) -> Optional[dict]:
        """The latest committed run that ingested documents with this content fingerprint and these parameters."""
        want = run_params(params)
        for run in reversed(self.runs()):
            if run.get("content_fingerprint") == content_fingerprint and run.get("params") == want:
                return run
        return None

    def check_compatible(self, params: IndexParams, sizing_given: bool, expected_docs: Optional[int],
                         bloom: Optional[str]) -> None:
        """Raise IndexMismatchError unless the committed index (if any) has ``params`` and ``bloom``.

        Its sizing is checked only where it was given: capacity against
        ``expected_docs``, p_effective when ``sizing_given``.
        """
        manifest = self.manifest()
        if manifest is None:
            return
        _check_bloom(self.path, manifest, bloom)
        expected = asdict(params)
        expected["capacity"] = expected_docs
        if not sizing_given:
            expected["p_effective"] = None
        _check_expected(self.path, _params_from_manifest(manifest), expected)

    def load_duplicates(self, run: Mapping) -> np.ndarray:
        """The row ids a committed run flagged (checked against the SHA-256 its record holds)."""
        import hashlib

        path = os.path.join(self.path, run["duplicates_file"])
        with open(path, "rb") as f:
            data = f.read()
        if len(data) % 8 or hashlib.sha256(data).hexdigest() != run["duplicates_sha256"]:
            raise ValueError(f"{path}: corrupt (size or SHA-256 differs from the manifest's run {run.get('run_id')})")
        return np.frombuffer(data, dtype="<i8").astype(np.int64)

    # -- the run's work -------------------------------------------------------

    def _ensure_staging(self) -> str:
        self._check_open()
        if self.staging is None:
            import tempfile

            self.staging = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=self.path)
            self._write_pending()
        return self.staging

    def _write_pending(self) -> None:
        _write_json_atomically(os.path.join(self.staging, "pending.json"), {"pid": os.getpid(), "outputs": self._outputs})

    def add_output(self, tmp_path: str) -> None:
        """Register a temporary output, so that a crash before the commit has it removed by the next run."""
        self._ensure_staging()
        self._outputs.append(os.path.abspath(tmp_path))
        self._write_pending()

    def stage(self, params: IndexParams, sizing_given: bool = True, bloom: str = BLOOM_FORMAT) -> LSHBloomIndex:
        """The writable staging copy of the index (a new empty one with ``bloom`` filters if the directory holds none)."""
        validate_bloom(bloom)
        staging = self._ensure_staging()
        if self.index is not None:
            raise RuntimeError("the index is already staged")
        expected = _expected_params(params, sizing_given)
        if not LSHBloomIndex.exists(self.path):
            self.index = LSHBloomIndex.create(staging, params, bloom=bloom, lock=False)
            self.index.label = self.path
            return self.index
        manifest = read_manifest(self.path)
        _check_bloom(self.path, manifest, bloom)
        _check_expected(self.path, _params_from_manifest(manifest), expected)
        names = [band_file_name(i, manifest_bloom(manifest)) for i in range(manifest["params"]["b"])]
        missing = [n for n in names if not os.path.isfile(os.path.join(self.path, n))]
        if missing:
            raise FileNotFoundError(f"{self.path}: band files missing: {', '.join(missing)}")
        need = sum(os.path.getsize(os.path.join(self.path, n)) for n in names)
        free = shutil.disk_usage(staging).free
        if need > free:
            raise OSError(
                errno.ENOSPC,
                f"not enough space for the staging copy of the index: it needs {human_bytes(need)} and "
                f"{human_bytes(free)} is free (a run works on a copy, so the index's file system needs room for two)",
                self.path,
            )
        try:
            # Validate the live files first: a bad one is named, not copied.
            LSHBloomIndex(self.path, manifest, read_only=True, lock_fd=None).close()
            for name in names + [MANIFEST_NAME]:
                shutil.copyfile(os.path.join(self.path, name), os.path.join(staging, name))
        except OSError as e:
            raise OSError(e.errno, f"cannot make the staging copy of the index in {staging}: {e.strerror}", self.path) from e
        self.index = LSHBloomIndex.open(staging, expected=expected, lock=False)
        self.index.label = self.path
        return self.index

    def commit(
        self,
        run: Optional[Mapping] = None,
        duplicates: Optional[np.ndarray] = None,
        outputs: Sequence[tuple[str, str]] = (),
    ) -> Optional[dict]:
        """Make the staged index, the run record and the outputs live together (see the class docs).

        ``run``: the record appended to the manifest's ``runs`` (needs a staged
        index); it gets ``run_id``, ``duplicates_file`` and its SHA-256.
        ``outputs``: ``(temporary, final)`` local paths, renamed in the same
        commit (an existing directory at ``final`` is replaced).
        """
        import hashlib

        self._check_open()
        ops: list = []
        for tmp, final in outputs:
            tmp, final = os.path.abspath(tmp), os.path.abspath(final)
            _fsync_tree(tmp)
            ops.append([tmp, final])
        record = None
        if self.index is not None:
            staging = self.staging
            rel = os.path.basename(staging)
            self.index.sync()
            manifest = self.index.manifest
            band_names = [os.path.basename(p) for p in self.index.band_paths()]
            self.index.close()
            self.index = None
            if run is not None:
                runs = manifest.setdefault("runs", [])
                record = json.loads(json.dumps(dict(run), default=str))
                record["run_id"] = run_id = f"{len(runs) + 1:06d}"
                data = np.ascontiguousarray(duplicates if duplicates is not None else [], dtype="<i8").tobytes()
                dups_name = f"{run_id}.dups.i64"
                with open(os.path.join(staging, dups_name), "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                record["duplicates_file"] = f"{RUNS_DIR}/{dups_name}"
                record["duplicates_sha256"] = hashlib.sha256(data).hexdigest()
                record["inserted_total"] = manifest["inserted"]
                runs.append(record)
                _write_json_atomically(os.path.join(staging, MANIFEST_NAME), manifest)
                os.makedirs(os.path.join(self.path, RUNS_DIR), exist_ok=True)
                ops.append([f"{rel}/{dups_name}", record["duplicates_file"]])
            for name in band_names:
                _fsync_path(os.path.join(staging, name))
                ops.append([f"{rel}/{name}", name])
            ops.append([f"{rel}/{MANIFEST_NAME}", MANIFEST_NAME])
        elif run is not None:
            raise RuntimeError("a run record needs a staged index")
        if ops:
            hooks.fire("before-commit")
            journal = {"run_id": record["run_id"] if record else None, "ops": ops}
            journal_path = os.path.join(self.path, JOURNAL_NAME)
            _write_json_atomically(journal_path, journal)
            _roll_forward(self.path, journal)
            os.remove(journal_path)
            _fsync_path(self.path)
        self._outputs = []
        if self.staging is not None:
            _rmtree(self.staging)
            self.staging = None
        return record

    def abort(self) -> None:
        """Drop the staging copy and the registered temporary outputs; the live index is untouched."""
        if self.index is not None:
            try:
                self.index._filters.close()
            finally:
                self.index._closed = True
                self.index = None
        for tmp in self._outputs:
            if os.path.lexists(tmp):
                _rmtree(tmp)
        self._outputs = []
        if self.staging is not None:
            _rmtree(self.staging)
            self.staging = None

    def close(self) -> None:
        """Abort what was not committed and release the lock."""
        if self.closed:
            return
        try:
            self.abort()
        finally:
            self.closed = True
            _release_lock(self._lock_fd)

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"{self.path}: index transaction is closed")

    def __enter__(self) -> "IndexTransaction":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def commit_rename(tmp: str, final: str) -> None:
    """Rename a written output into place durably (fsynced first; an existing directory at ``final`` is replaced)."""
    _fsync_tree(tmp)
    _roll_forward("/", {"run_id": None, "ops": [[tmp, final]]})
