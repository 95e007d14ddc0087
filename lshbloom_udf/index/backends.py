"""The Bloom filter backends of an index, behind one interface, looked up by name.

- ``"pybloomfiltermmap3"`` (:data:`DEFAULT_BLOOM`, the low-level API's default, as
  :data:`~lshbloom_udf.compat.COMPAT_DEFAULTS`; a run's new index follows
  :attr:`DedupConfig.new_index_bloom <lshbloom_udf.config.DedupConfig.new_index_bloom>`): one
  pybloomfiltermmap3 file per band, ``band-{i}.bf``, so that
  ``datasketch.MinHashLSHBloom(save_dir=...)`` and ``pybloomfilter.BloomFilter.open``
  read the index and we read theirs. Manifest format ``lshbloom-index``.
- ``"blocked"``: one 512-bit block per key per band (16 lanes of 32 bits, one
  bit per lane), ``band-{i}.bbf``. It decides exactly as the compatible
  backend ("keep first"), with the same transactions, capacity checks and run
  records, but each band's filter touches one cache line per key instead of
  ``k`` scattered ones. The price is space: the filters are sized with the
  exact false-positive rate of a blocked filter (``_native.blocked_num_blocks``,
  a Poisson mixture over block loads), which at LSHBloom's low per-band rates
  is larger than the textbook split-block estimate and than a classic Bloom
  filter at the same rate. datasketch cannot read these files; the manifest
  has its own format name (``lshbloom-blocked-index``), so neither kind of
  index is ever opened as the other.

- ``"cuckoo"``: cuckoo filters, ``band-{i}.cbf``: a key is an f-bit
  fingerprint in one of two buckets of one 64-byte line each (at most two
  cache lines per probe). Sized by the closed form of its false-positive rate
  (``_native.cuckoo_geometry``, maths in the Rust module ``cuckoo`` and
  docs/algorithm.md), it takes fewer bits than a classic Bloom filter at the
  low per-band rates of LSHBloom (0.96x at 1.2e-7, 0.86x at 1.2e-12). Same
  decisions, transactions and run records as the others; datasketch cannot
  read it (manifest format ``lshbloom-cuckoo-index``). Unlike a Bloom filter it
  cannot be overfilled without bound: far past its capacity (~1.05x) an insert
  fails with an error naming the filter, and nothing is lost.

Each backend knows its file names, its manifest format, how to create a band
file, the native class that drives the ``b`` band files together, the bytes
an index needs and the false-positive rate expected from a fill. Callers ask
:func:`backend` (by name) or :func:`backend_for_format` (by manifest format)
and never compare names.

Bloom hash seeds are derived from the band number (and the generation of a
growing index, :mod:`~lshbloom_udf.index.growth`), not random, so that the same
parameters give byte-identical index files on every run.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Optional

import numpy as np

from lshbloom_udf import _native
from lshbloom_udf.errors import UsageError

# pybloomfiltermmap3's preamble: magic, bit count, header length and its
# 1200-byte header, padded to 256 bytes.
BLOOM_PREAMBLE_BYTES = 1280
# The blocked and cuckoo files: a 64-byte header, then lines of 64 bytes (a blocked filter's block, a cuckoo
# filter's bucket).
LINE_HEADER_BYTES = 64
BLOCK_BITS = 512
# A blocked key sets one bit in each of a block's 16 lanes of 32 bits.
KEY_BITS_PER_BLOCK = 16


class BloomBackend:
    """One kind of band filter file; subclasses fill in the class attributes and the sizing methods."""

    name: ClassVar[str]
    # manifest "format" (its versions are the manifest's business)
    manifest_format: ClassVar[str]
    # manifest "bloom_format": the band files' own format
    bloom_format: ClassVar[str]
    extension: ClassVar[str]
    seed_domain: ClassVar[int]
    file_class: ClassVar[Any]  # the native class of one band file
    band_set_class: ClassVar[Any]  # the native class driving the b band files together
    # what datasketch can read
    datasketch_compatible: ClassVar[bool] = False
    # what the first number of geometry() is, as `plan` prints it
    key_bits_label: ClassVar[str] = "hashes per band"

    def file_name(self, band: int, generation: int = 0) -> str:
        """Generation 0 is ``band-{i}.<ext>`` (what datasketch reads); generation g > 0 ``gen{g}-band-{i}.<ext>``."""
        name = f"band-{band}.{self.extension}"
        return f"gen{generation}-{name}" if generation else name

    def geometry(self, capacity: int, p_band: float) -> tuple[int, int]:
        """``(bits set per key, bits)`` of one band's filter."""
        raise NotImplementedError

    def file_bytes(self, capacity: int, p_band: float) -> int:
        """Bytes on disk of one band file."""
        raise NotImplementedError

    def index_bytes(self, capacity: int, p_band: float, b: int) -> int:
        """Bytes on disk of ``b`` band files (the manifest excluded)."""
        return b * self.file_bytes(capacity, p_band)

    def create_file(self, path: str, capacity: int, p_band: float, band: int, generation: int = 0) -> None:
        """Create the (empty) filter file of band ``band`` of generation ``generation``."""
        raise NotImplementedError

    def manifest_fields(self, capacity: int, p_band: float) -> dict:
        """What the manifest records about this backend's filters besides the common fields."""
        return {}

    def band_false_positive(self, inserted: int, capacity: int, p_band: float,
                            recorded: Optional[dict] = None) -> float:
        """The false-positive rate of one band's filter (sized for ``capacity`` at ``p_band``) holding ``inserted``
        keys;
        ``recorded``: the geometry a manifest recorded for its files (:meth:`manifest_fields`), which wins over
        today's sizing of ``capacity`` at ``p_band`` (a sizing rule may change after the files were made)."""
        raise NotImplementedError

    def open_bands(self, paths: list[str], writable: bool):
        return self.band_set_class(paths, writable)

    def open_file(self, path: str):
        """One band file, read-only (a context manager with ``capacity`` and ``error_rate``)."""
        return self.file_class.open(path, False)

    def _seed_state(self, band: int, generation: int, count: int, dtype) -> np.ndarray:
        # Generation 0 keeps the seeds of the indexes written before generations existed.
        entropy = [self.seed_domain, band] + ([generation] if generation else [])
        return np.random.SeedSequence(entropy).generate_state(count, dtype=dtype)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class PybloomBackend(BloomBackend):
    """pybloomfiltermmap3 files (``band-{i}.bf``), datasketch's format."""

    name = "pybloomfiltermmap3"
    manifest_format = "lshbloom-index"
    bloom_format = "pybloomfiltermmap3"
    extension = "bf"
    seed_domain = 0x4C534842  # "LSHB"
    file_class = _native.BloomFile
    band_set_class = _native.BandFilters
    datasketch_compatible = True

    def geometry(self, capacity: int, p_band: float) -> tuple[int, int]:
        return _native.bloom_geometry(capacity, p_band)

    def file_bytes(self, capacity: int, p_band: float) -> int:
        _, num_bits = self.geometry(capacity, p_band)
        return BLOOM_PREAMBLE_BYTES + (num_bits + 7) // 8

    def hash_seeds(self, band: int, num_hashes: int, generation: int = 0) -> list[int]:
        """The deterministic pybloomfiltermmap3 hash seeds of band ``band`` of generation ``generation``."""
        return [int(s) for s in self._seed_state(band, generation, num_hashes, np.uint32)]

    def create_file(self, path: str, capacity: int, p_band: float, band: int, generation: int = 0) -> None:
        num_hashes, _ = self.geometry(capacity, p_band)
        self.file_class.create(path, capacity, p_band, self.hash_seeds(band, num_hashes, generation)).close()

    def band_false_positive(self, inserted: int, capacity: int, p_band: float,
                            recorded: Optional[dict] = None) -> float:
        k, m = self.geometry(capacity, p_band)  # pybloom's files follow from (capacity, p_band) alone
        return (1.0 - math.exp(-k * inserted / m)) ** k


class LineBackend(BloomBackend):
    """A layout of 64-byte lines (the native ``lines`` files: blocked, cuckoo): a header, then :meth:`num_lines`
    lines; one 64-bit hash seed per band file.

    A subclass declares its ``name``, ``extension`` and ``seed_domain`` and, as a class keyword, the
    ``layout`` of its lines; the rest follows from the name, as the native module spells it: the manifest
    format ``lshbloom-{name}-index``, the band files' format ``lshbloom-{name}-{layout}-v{version}``
    (``_native.{NAME}_FORMAT_VERSION``) and the native classes ``_native.{Name}File`` (one band file) and
    ``_native.{Name}Bands`` (the ``b`` band files together).
    """

    def __init_subclass__(cls, layout: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        native_name, version = cls.name.capitalize(), getattr(_native, f"{cls.name.upper()}_FORMAT_VERSION")
        cls.manifest_format = f"lshbloom-{cls.name}-index"
        cls.bloom_format = f"lshbloom-{cls.name}-{layout}-v{version}"
        cls.file_class = getattr(_native, f"{native_name}File")
        cls.band_set_class = getattr(_native, f"{native_name}Bands")

    def num_lines(self, capacity: int, p_band: float) -> int:
        raise NotImplementedError

    def file_bytes(self, capacity: int, p_band: float) -> int:
        return LINE_HEADER_BYTES + BLOCK_BITS // 8 * self.num_lines(capacity, p_band)

    def band_seed(self, band: int, generation: int = 0) -> int:
        """The deterministic 64-bit hash seed of band ``band`` of generation ``generation``."""
        return int(self._seed_state(band, generation, 1, np.uint64)[0])

    def create_file(self, path: str, capacity: int, p_band: float, band: int, generation: int = 0) -> None:
        self.file_class.create(path, capacity, p_band, self.band_seed(band, generation)).close()


class BlockedBackend(LineBackend, layout="512x16"):
    """Blocked Bloom filters (``band-{i}.bbf``): one cache line per key per band; not readable by datasketch."""

    name = "blocked"
    extension = "bbf"
    seed_domain = 0x424C4B44  # "BLKD"

    def num_lines(self, capacity: int, p_band: float) -> int:
        return _native.blocked_num_blocks(capacity, p_band)

    def geometry(self, capacity: int, p_band: float) -> tuple[int, int]:
        return KEY_BITS_PER_BLOCK, self.num_lines(capacity, p_band) * BLOCK_BITS

    def manifest_fields(self, capacity: int, p_band: float) -> dict:
        return {"num_blocks": self.num_lines(capacity, p_band)}

    def band_false_positive(self, inserted: int, capacity: int, p_band: float,
                            recorded: Optional[dict] = None) -> float:
        fields = recorded or self.manifest_fields(capacity, p_band)
        return _native.blocked_fp_rate(float(inserted), int(fields["num_blocks"]))


class CuckooBackend(LineBackend, layout="512"):
    """Cuckoo filters (``band-{i}.cbf``): two cache lines per key per band, fewer bits than classic Bloom."""

    name = "cuckoo"
    extension = "cbf"
    seed_domain = 0x434B4F4F  # "CKOO"
    key_bits_label = "fingerprint bits"

    def shape(self, capacity: int, p_band: float) -> tuple[int, int, int]:
        """``(fp_bits, slots per bucket, num_buckets)``."""
        return _native.cuckoo_geometry(capacity, p_band)

    def num_lines(self, capacity: int, p_band: float) -> int:
        return self.shape(capacity, p_band)[2]

    def geometry(self, capacity: int, p_band: float) -> tuple[int, int]:
        fp_bits, _, num_buckets = self.shape(capacity, p_band)
        return fp_bits, num_buckets * BLOCK_BITS

    def manifest_fields(self, capacity: int, p_band: float) -> dict:
        fp_bits, slots, num_buckets = self.shape(capacity, p_band)
        return {"num_buckets": num_buckets, "fp_bits": fp_bits, "bucket_slots": slots}

    def band_false_positive(self, inserted: int, capacity: int, p_band: float,
                            recorded: Optional[dict] = None) -> float:
        fields = recorded or self.manifest_fields(capacity, p_band)
        return _native.cuckoo_fp_rate(float(inserted), int(fields["num_buckets"]), int(fields["fp_bits"]))


BACKENDS: dict[str, BloomBackend] = {b.name: b for b in (PybloomBackend(), BlockedBackend(), CuckooBackend())}
# The low-level API's default backend (LSHBloomIndex.create, sizing.plan): the datasketch-compatible files.
DEFAULT_BLOOM = PybloomBackend.name
BLOOMS = tuple(BACKENDS)
_BY_FORMAT = {b.manifest_format: b for b in BACKENDS.values()}
MANIFEST_FORMATS = tuple(_BY_FORMAT)


def backend(name: str = DEFAULT_BLOOM) -> BloomBackend:
    """The backend called ``name``."""
    try:
        return BACKENDS[name]
    except (KeyError, TypeError):
        raise UsageError(f"bloom must be one of {BLOOMS}, got {name!r}") from None


def validate_bloom(bloom: Any) -> str:
    """``bloom`` if it names a backend (else :class:`~lshbloom_udf.errors.UsageError`, a ``ValueError``)."""
    return backend(bloom).name


def backend_for_format(manifest_format: Any) -> Optional[BloomBackend]:
    """The backend whose manifests have this ``format`` (``None`` if none has)."""
    return _BY_FORMAT.get(manifest_format) if isinstance(manifest_format, str) else None
