"""The blocked Bloom backend (``--bloom blocked``): one 512-bit block per key per band.

Same decisions rule as :class:`~lshbloom_udf.index.LSHBloomIndex` ("keep
first": a document is a duplicate iff one of its ``b`` band keys is in that
band's filter; only non-duplicates are inserted, in order), but each band's
filter touches one cache line per key instead of ``k`` scattered ones. The
price is space: the filters are sized with the exact false-positive rate of
a blocked filter (``_native.blocked_num_blocks``: a Poisson mixture over block
loads), which at the low per-band rates LSHBloom uses is larger than the
textbook split-block estimate and than a classic Bloom filter at the same rate.

The files are *not* pybloomfiltermmap3 files: datasketch cannot read this
index. A directory holds ``band-{i}.bbf`` and ``manifest.json`` with its own
format name and version (``lshbloom-blocked-index``, 1), so neither kind of
index can be opened as the other. The default backend stays the compatible one.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, fields
from typing import Any, Mapping, Optional

import numpy as np

from lshbloom_udf import _native
from lshbloom_udf.index import (
    IndexMismatchError,
    IndexParams,
    _acquire_lock,
    _release_lock,
    _write_json_atomically,
)

MANIFEST_NAME = "manifest.json"
FORMAT_NAME = "lshbloom-blocked-index"
FORMAT_VERSION = 1
BLOOM_FORMAT = f"lshbloom-blocked-512x16-v{_native.BLOCKED_FORMAT_VERSION}"
BACKENDS = ("pybloomfiltermmap3", "blocked")
_SEED_DOMAIN = 0x424C4B44  # "BLKD"


def band_file_name(i: int) -> str:
    return f"band-{i}.bbf"


def band_seed(band: int) -> int:
    """The deterministic 64-bit hash seed of band ``band``."""
    return int(np.random.SeedSequence([_SEED_DOMAIN, band]).generate_state(1, dtype=np.uint64)[0])


def blocked_index_bytes(capacity: int, p_band: float, b: int) -> int:
    """Bytes on disk of a blocked index (``b`` band files; manifest excluded)."""
    return b * (64 + 64 * _native.blocked_num_blocks(capacity, p_band))


class BlockedLSHBloomIndex:
    """A directory of per-band blocked Bloom filters plus a manifest.

    The API mirrors :class:`~lshbloom_udf.index.LSHBloomIndex`: :meth:`create`,
    :meth:`open`, :meth:`open_or_create`, :meth:`query`, :meth:`insert`,
    :meth:`query_insert`, :meth:`stats`, :meth:`sync`, :meth:`close`; it is a
    context manager.
    """

    def __init__(self, path: str, manifest: dict, read_only: bool, lock_fd: Optional[int]):
        self.path = path
        self._manifest = manifest
        names = {f.name for f in fields(IndexParams)}
        self.params = IndexParams(**{k: manifest["params"][k] for k in names if k in manifest["params"]})
        self.read_only = read_only
        self._lock_fd = lock_fd
        try:
            missing = [p for p in self.band_paths() if not os.path.isfile(p)]
            if missing:
                raise FileNotFoundError(f"{path}: band files missing: {', '.join(os.path.basename(p) for p in missing)}")
            self._filters = _native.BlockedBands(self.band_paths(), not read_only)
        except BaseException:
            _release_lock(lock_fd)
            raise
        self._closed = False

    @staticmethod
    def exists(path: str) -> bool:
        try:
            with open(os.path.join(path, MANIFEST_NAME), encoding="utf-8") as f:
                return json.load(f).get("format") == FORMAT_NAME
        except (OSError, ValueError):
            return False

    @classmethod
    def create(cls, path: str, params: IndexParams) -> "BlockedLSHBloomIndex":
        os.makedirs(path, exist_ok=True)
        lock_fd = _acquire_lock(path, read_only=False)
        try:
            if os.path.exists(os.path.join(path, MANIFEST_NAME)):
                raise FileExistsError(f"{path}: already holds an index; open it instead")
            p_band = params.p_band
            paths = [os.path.join(path, band_file_name(i)) for i in range(params.b)]
            try:
                for i, band_path in enumerate(paths):
                    _native.BlockedFile.create(band_path, params.capacity, p_band, band_seed(i)).close()
            except BaseException:
                for band_path in paths:
                    if os.path.exists(band_path):
                        os.remove(band_path)
                raise
            manifest = {
                "format": FORMAT_NAME,
                "format_version": FORMAT_VERSION,
                "bloom_format": BLOOM_FORMAT,
                "params": asdict(params),
                "p_band": p_band,
                "num_blocks": _native.blocked_num_blocks(params.capacity, p_band),
                "inserted": 0,
            }
            _write_json_atomically(os.path.join(path, MANIFEST_NAME), manifest)
        except BaseException:
            _release_lock(lock_fd)
            raise
        return cls(path, manifest, read_only=False, lock_fd=lock_fd)

    @classmethod
    def open(cls, path: str, expected: Optional[Mapping[str, Any]] = None, read_only: bool = False) -> "BlockedLSHBloomIndex":
        manifest_path = os.path.join(path, MANIFEST_NAME)
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
        if manifest.get("format") != FORMAT_NAME:
            raise IndexMismatchError(
                f"{path}: not a blocked index (format {manifest.get('format')!r}); open it with the backend it was made with"
            )
        if manifest.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{manifest_path}: format version {manifest.get('format_version')!r}, this version reads {FORMAT_VERSION}")
        if expected is not None:
            exp = asdict(expected) if isinstance(expected, IndexParams) else dict(expected)
            diffs = [
                f"{k}: index has {manifest['params'].get(k)!r}, asked for {v!r}"
                for k, v in exp.items()
                if v is not None and k in manifest["params"] and manifest["params"][k] != v
            ]
            if diffs:
                raise IndexMismatchError(f"{path}: " + "; ".join(diffs))
        lock_fd = _acquire_lock(path, read_only=read_only)
        return cls(path, manifest, read_only=read_only, lock_fd=lock_fd)

    @classmethod
    def open_or_create(cls, path: str, params: IndexParams, sizing_given: bool = True) -> "BlockedLSHBloomIndex":
        if os.path.exists(os.path.join(path, MANIFEST_NAME)):
            expected = asdict(params)
            if not sizing_given:
                expected.pop("capacity")
                expected.pop("p_effective")
            return cls.open(path, expected=expected)
        return cls.create(path, params)

    # -- decisions ---------------------------------------------------------

    def _keys(self, keys: np.ndarray) -> np.ndarray:
        if self._closed:
            raise ValueError("index is closed")
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        if keys.ndim != 2 or keys.shape[1] != self.params.b:
            raise ValueError(f"keys must have shape (N, {self.params.b}), got {keys.shape}")
        return keys

    def query(self, keys: np.ndarray) -> np.ndarray:
        return self._filters.query(self._keys(keys))

    def insert(self, keys: np.ndarray) -> None:
        keys = self._keys(keys)
        self._filters.insert(keys)
        self._manifest["inserted"] += len(keys)

    def query_insert(self, keys: np.ndarray, active: Optional[np.ndarray] = None) -> np.ndarray:
        """Keep-first decisions (True = duplicate); rows with ``active`` False are skipped and come out False."""
        keys = self._keys(keys)
        if active is not None:
            active = np.asarray(active, dtype=bool)
            if active.shape != (len(keys),):
                raise ValueError(f"active must have shape ({len(keys)},), got {active.shape}")
            out = np.zeros(len(keys), dtype=bool)
            out[active] = self.query_insert(keys[active])
            return out
        dup = self._filters.query_insert(keys)
        self._manifest["inserted"] += int(len(keys) - np.count_nonzero(dup))
        return dup

    # -- state -------------------------------------------------------------

    @property
    def inserted(self) -> int:
        return self._manifest["inserted"]

    @property
    def manifest(self) -> dict:
        return dict(self._manifest)

    def band_paths(self) -> list[str]:
        return [os.path.join(self.path, band_file_name(i)) for i in range(self.params.b)]

    def stats(self) -> dict:
        size = sum(os.path.getsize(p) for p in self.band_paths())
        band_fp = _native.blocked_fp_rate(float(self.inserted), int(self._manifest["num_blocks"]))
        return {
            "path": self.path,
            "backend": "blocked",
            "bytes_on_disk": size,
            "inserted": self.inserted,
            "capacity": self.params.capacity,
            "b": self.params.b,
            "r": self.params.r,
            "p_band": self._manifest["p_band"],
            "expected_false_positive": -math.expm1(self.params.b * math.log1p(-band_fp)) if band_fp < 1 else 1.0,
        }

    def sync(self) -> None:
        if self._closed or self.read_only:
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
            self._lock_fd = None

    def __enter__(self) -> "BlockedLSHBloomIndex":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<BlockedLSHBloomIndex {self.path!r} b={self.params.b} inserted={self.inserted}>"
