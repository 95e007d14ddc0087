"""Type stubs for ``lshbloom_udf._native``, the Rust core (pyo3, abi3).

Every batch function releases the GIL while it works. Array arguments are used
in place when they have the expected dtype and are C-contiguous, and copied
otherwise (other integer dtypes accepted where noted, with a range check).

Schemes: ``"affine32"`` (datasketch 2.x), ``"legacy"`` (datasketch < 2.0) or
``"poisson"`` (xxh3-64 shingle hashes, independent rows, O(shingles + k log k)).
``normalize`` is a bitmask of :data:`NORM_NFKC`, :data:`NORM_LOWER`,
:data:`NORM_PUNCT`, :data:`NORM_DEHYPHEN` (applied first, then the others in
that order). ``unit`` is one of :data:`SHINGLE_UNITS`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from os import PathLike
from types import TracebackType
from typing import Final, Literal, Optional, Union, final

import numpy as np
import numpy.typing as npt
from typing_extensions import Self  # typing.Self is Python 3.11+; the package supports 3.10

__version__: Final[str]

NORM_NFKC: Final[int]
"""Normalization flag: Unicode NFKC."""
NORM_LOWER: Final[int]
"""Normalization flag: lowercase."""
NORM_PUNCT: Final[int]
"""Normalization flag: Unicode punctuation to space."""
NORM_DEHYPHEN: Final[int]
"""Normalization flag: remove a hyphen after a letter with the line break after it ("docu-\\n ment" -> "document")."""
SHINGLE_UNITS: Final[list[str]]
"""The shingle units: ``["words", "chars", "mixed"]``."""
PUNCT_UNICODE_VERSION: Final[str]
"""Unicode version of the punctuation table behind :data:`NORM_PUNCT`."""

_StrPath = str | PathLike[str]
_Scheme = Literal["affine32", "legacy", "poisson"]
_BandKey = Literal["sum", "mix"]
_U64Array = npt.NDArray[np.uint64] | npt.NDArray[np.int64] | npt.NDArray[np.uint32]
"""uint64 in place; int64 (>= 0) and uint32 are converted."""
_U32Array = npt.NDArray[np.uint32] | npt.NDArray[np.uint64] | npt.NDArray[np.int64]
"""uint32 in place; uint64 / int64 values < 2**32 are converted."""
_Offsets = npt.NDArray[np.int32] | npt.NDArray[np.int64]
"""Arrow offsets: int32 (string) or int64 (large_string), length N + 1."""

# ---------------------------------------------------------------------------
# Shingling and MinHash


def shingles(
    text: str | None, ngram: int, normalize: int = 0, unit: Literal["words", "chars", "mixed"] = "words"
) -> list[bytes]:
    """The distinct shingles of ``text`` (UTF-8) in ``unit``, sorted bytewise.

    ``None`` or an empty text gives ``[]``. ``"words"``: word ``ngram``-grams
    of Python's ``str.split()`` tokens joined by one space (fewer than
    ``ngram`` tokens: one shingle of all). ``"chars"``: windows of ``ngram``
    code points of the text with Python whitespace deleted. ``"mixed"``: as
    ``"chars"``, Han/kana/Hangul code points weighing 3, each shingle the
    shortest run of weight ``>= ngram``. For both, a text too short for one
    window gives one shingle of all of it.
    """


@final
class SignatureSettings:
    """How texts become MinHash signatures, validated once and passed whole to
    :func:`minhash` and :func:`minhash_band_keys` (texts as a sequence or
    an :class:`ArrowTexts`).

    ``perm_a``/``perm_b`` are the permutation parameters of ``scheme`` (one per
    permutation, ``k = len(perm_a)``; odd and < ``2**32`` for ``"affine32"``;
    for ``"poisson"``, ``k`` copies of the xxh3 seed and ``k`` zeros);
    shingles are ``ngram``-grams of ``unit`` (see :func:`shingles`) after
    ``normalize``; ``threads`` native threads share the rows (contiguous
    ranges) -- the result never depends on it.
    """

    def __init__(
        self,
        perm_a: _U64Array,
        perm_b: _U64Array,
        scheme: _Scheme,
        ngram: int,
        normalize: int,
        threads: int = 1,
        unit: Literal["words", "chars", "mixed"] = "words",
    ) -> None: ...
    @property
    def num_perm(self) -> int: ...
    @property
    def scheme(self) -> _Scheme: ...
    @property
    def ngram(self) -> int: ...
    @property
    def normalize(self) -> int: ...
    @property
    def unit(self) -> Literal["words", "chars", "mixed"]: ...
    @property
    def threads(self) -> int: ...


@final
class BandSettings:
    """How a signature becomes band keys: ``b`` bands of ``r`` values (``b * r``
    must not exceed the signature length, checked where the two meet), each
    keyed by ``band_key``: the sum of the band's values mod ``2**61 - 1``
    (``"sum"``, datasketch's) or a 64-bit hash of them mod ``2**61 - 1`` (``"mix"``).
    """

    def __init__(self, b: int, r: int, band_key: _BandKey = "sum") -> None: ...
    @property
    def b(self) -> int: ...
    @property
    def r(self) -> int: ...
    @property
    def band_key(self) -> _BandKey: ...


@final
class ArrowTexts:
    """An Arrow string column given as its buffers (``offsets``, UTF-8
    ``data``, optional per-row ``valid``): :func:`minhash` and
    :func:`minhash_band_keys` read it in place (zero copy)."""

    def __init__(
        self,
        offsets: _Offsets,
        data: npt.NDArray[np.uint8],
        valid: npt.NDArray[np.bool_] | None = None,
    ) -> None: ...


_Texts = Iterable[str | None] | ArrowTexts


def minhash(texts: _Texts, settings: SignatureSettings) -> npt.NDArray[np.uint32]:
    """MinHash signatures, shape ``(N, k)`` uint32 (``k = settings.num_perm``).

    Rows without shingles stay at ``2**32 - 1``.
    """


def band_keys(signatures: _U32Array, b: int, r: int, band_key: _BandKey = "sum") -> npt.NDArray[np.uint64]:
    """Band keys of an ``(N, k)`` signature matrix, shape ``(N, b)`` uint64
    (needs ``b * r <= k``): the sum of each band's ``r`` values mod ``2**61 - 1``
    (``"sum"``, datasketch's), or a 64-bit hash of them mod ``2**61 - 1`` (``"mix"``).
    """


def minhash_band_keys(
    texts: _Texts,
    settings: SignatureSettings,
    bands: BandSettings,
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
    """Fused MinHash + band keys without materializing signatures:
    ``(keys (N, b) uint64, has_shingles (N,) bool)``.
    """


def shingle_overlaps(
    lefts: Iterable[str | None],
    rights: Iterable[str | None],
    ngram: int,
    normalize: int = 0,
    unit: Literal["words", "chars", "mixed"] = "words",
    threads: int = 1,
) -> npt.NDArray[np.int64]:
    """``(|S_l ∩ S_r|, |S_l|, |S_r|)`` of each aligned pair of texts, shape (N, 3), on ``threads`` threads.

    ``S`` is the set :func:`shingles` gives; the shingles' bytes are compared
    (exact). Consecutive pairs with the same right text shingle it once.
    """

def indexed_overlaps(
    texts: Iterable[str | None],
    lefts: npt.NDArray[np.uint32],
    rights: npt.NDArray[np.uint32],
    ngram: int,
    normalize: int = 0,
    unit: Literal["words", "chars", "mixed"] = "words",
    threads: int = 1,
    cache_bytes: int = 0,
) -> npt.NDArray[np.int64]:
    """``(|S_l ∩ S_r|, |S_l|, |S_r|)`` of each pair ``(texts[lefts[i]], texts[rights[i]])``, shape (N, 3), on
    ``threads`` threads: as :func:`shingle_overlaps` (exact). A left text's set is built once for its consecutive
    pairs (sort them by it); a right text in three pairs or more is shingled once before them, the most frequent
    first, while their lists stay within ``cache_bytes``."""


def shingle_hash_sets(
    texts: Iterable[str | None],
    ngram: int,
    normalize: int = 0,
    unit: Literal["words", "chars", "mixed"] = "words",
    threads: int = 1,
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """Each text's distinct shingles (:func:`shingles`) as sorted xxh3-64 hashes: ``(hashes, offsets)``, text
    ``i``'s at ``hashes[offsets[i]:offsets[i + 1]]`` (``len(texts) + 1`` offsets), on ``threads`` threads.

    Hashes, not bytes: two distinct shingles may share one (about ``m² / 2^65`` among ``m`` shingles); what
    verification's template rule counts, never its exact overlaps.
    """


@final
class PairIndex:
    """The (band, key) pairs of a few documents (an (F, b) uint64 key matrix), to find the documents of many
    that share one (verification's round-1 candidates on the driver)."""

    def __init__(self, keys: _U64Array) -> None: ...
    @property
    def b(self) -> int: ...
    def matches(
        self, keys: _U64Array, only: npt.NDArray[np.bool_] | None = None
    ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
        """``(j, f)``: document ``j`` of ``keys`` ((M, b)) shares a (band, key) with indexed document ``f``, one
        entry per shared band; ``only`` (M bools): only those documents of ``keys``."""


def sketch_band_keys(sketches: npt.NDArray[np.uint8], b: int, r: int) -> _U64Array:
    """The (m, b) band keys of b-bit MinHash sketches ((m, k) uint8): band ``i``'s from bytes ``[i·r, (i+1)·r)``,
    packed little-endian up to 8 bytes, else folded (cross-run verification's candidates)."""


def shared_band_pairs(
    keys: _U64Array, anchors: int, threads: int = 1
) -> tuple[
    npt.NDArray[np.uint32], npt.NDArray[np.uint32], npt.NDArray[np.uint32], npt.NDArray[np.uint32]
]:
    """``(later, earlier, bands, smallest_bucket)``: the documents of ``keys`` ((n, b), in row order) where
    ``earlier`` is one of the first ``anchors`` documents of a bucket (band, key) that ``later`` is in, each pair
    once, sorted, with the number of such bands and the fewest documents in one of those buckets; on up to
    ``threads`` threads (verification's round-2 candidates on the driver)."""


def lookup_records(
    arrays: tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint8], npt.NDArray[np.uint16], npt.NDArray[np.uint8]],
    keys: npt.NDArray[np.uint32],
    values: npt.NDArray[np.uint8],
    group_rows: int,
    fence_every: int,
    cap: int,
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
    """``(query, position)`` of the records of one run sharing a band with each query, once per band shared:
    ``arrays`` ``(fence, fragment, group, sketch)`` (:mod:`lshbloom_udf.index.lookup`), ``keys`` the queries'
    ``(q, b)`` 32-bit keys, ``values`` their bands' ``(q, b, r)`` 4-bit values; at most ``cap`` records per query
    and band, the earliest."""

# ---------------------------------------------------------------------------
# Paragraphs (docs/algorithm.md §10)

PARAGRAPH_SEPARATORS: Final[list[str]]
"""The separators ``paragraph_keys_of`` cuts at: ``newline`` (every line) and ``blank`` (runs of blank lines)."""

def paragraph_keys_of(
    texts: Union[Sequence[Optional[str]], ArrowTexts],
    separator: str,
    min_chars: int,
    ngram: int,
    normalize: int,
    seed: int,
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32], npt.NDArray[np.uint32], npt.NDArray[np.uint32],
           npt.NDArray[np.uint64]]:
    """``(counts, starts, ends, nkeys, keys)`` of ``texts``' paragraphs, flat: paragraphs per document, each
    paragraph's span ``[start, end)`` in code points and number of keys, and the keys in order (the GIL
    released)."""

def file_checksum(path: _StrPath) -> int:
    """xxh3-64 of the whole file at ``path``, read through a memory map (the GIL released)."""

def bytes_checksum(data: bytes) -> int:
    """xxh3-64 of ``data``."""

def input_sums(texts: ArrowTexts, rows: npt.NDArray[np.int64]) -> tuple[int, int, int, int, int, int, int]:
    """``(documents, content xxhash64 sum, content hash sum, sequence xxhash64 sum, sequence hash sum, longest
    text's bytes, all texts' bytes)`` of ``texts`` at row ids ``rows``: the sums of Spark's ``xxhash64`` and
    ``hash`` (seed 42) that the input check's aggregation computes, for a part of the rows (sums add up)."""

def bloom_geometry(
    capacity: int, error_rate: float, num_hashes: int | None = None
) -> tuple[int, int]:
    """``(num_hashes, num_bits)`` exactly as pybloomfiltermmap3 sizes a filter."""


def reset_word_table() -> None:
    """Forget the calling thread's table of word hashes.

    Short shingles' SHA-1 values are kept per thread across calls (they depend
    on no parameter); results never depend on the table. Benchmarks call this
    to time a cold start.
    """


def simd_backend() -> str:
    """The widest MinHash/Bloom kernel this CPU runs: ``"avx512"``, ``"avx2"`` or ``"generic"``
    (detected at run time; one wheel runs everywhere)."""


# ---------------------------------------------------------------------------
# Bloom filters (pybloomfiltermmap3 file format)


class _Mapped:
    """What every open filter handle offers (one file, or a band set): a
    context manager over memory-mapped files, synced when closed."""

    @property
    def writable(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    def sync(self) -> None:
        """Flush the mapping to the file(s)."""

    def close(self) -> None:
        """Sync and unmap; further use raises ``ValueError``. Idempotent."""

    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...
    def __len__(self) -> int: ...


class _FilterFile(_Mapped):
    """What every memory-mapped filter file offers (:class:`BloomFile`, :class:`BlockedFile`, :class:`CuckooFile`)."""

    @classmethod
    def open(cls, path: _StrPath, writable: bool = False) -> Self:
        """Open an existing filter file (read-only unless ``writable``)."""

    @property
    def num_bits(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def error_rate(self) -> float: ...
    @property
    def elem_count(self) -> int: ...
    @property
    def path(self) -> str: ...
    @property
    def file_size(self) -> int: ...
    def contains(self, keys: _U64Array) -> npt.NDArray[np.bool_]:
        """Membership of each key; the result has the shape of ``keys``."""

    def add(self, keys: _U64Array) -> npt.NDArray[np.bool_]:
        """Add keys in order; ``True`` where the key was already present
        (pybloomfilter's ``add`` return value). Needs a writable file.
        """


class _BandFilterSet(_Mapped):
    """The ``b`` band filters of an index, one file per band, driven together
    (:class:`BandFilters`, :class:`BlockedBands`, :class:`CuckooBands`)."""

    def __init__(self, paths: Sequence[_StrPath], writable: bool = False) -> None: ...
    @property
    def num_bands(self) -> int: ...
    @property
    def paths(self) -> list[str]: ...
    @property
    def elem_counts(self) -> list[int]: ...
    def query(self, keys: _U64Array) -> npt.NDArray[np.bool_]:
        """``(N, b)`` keys -> ``(N,)`` bool: any band key present in its band's filter."""

    def insert(self, keys: _U64Array) -> None:
        """Insert every row's band keys (``(N, b)``)."""

    def query_insert(self, keys: _U64Array) -> npt.NDArray[np.bool_]:
        """The sequential LSHBloom decision over ``(N, b)`` keys in row order:
        a row is a duplicate if any key is present (counting rows before it in
        this batch); only non-duplicates are inserted. The bit positions of the
        next row are computed and prefetched while the current row is decided.
        """

    def test_insert(self, keys: _U64Array) -> npt.NDArray[np.bool_]:
        """The "any earlier" decision over ``(N, b)`` keys in row order: every
        key of every row is inserted, and a row is a duplicate if any of its
        keys was present before it (counting rows before it in this batch).
        """


@final
class BloomFile(_FilterFile):
    """One pybloomfiltermmap3 filter file, memory-mapped.

    Bit positions are MurmurHash3_x64_128 of the key's 8 little-endian bytes per
    stored seed, ``(h1 ^ h2) % num_bits`` -- the same answers as
    ``pybloomfilter.BloomFilter`` on the same file, both ways.
    """

    @staticmethod
    def create(path: _StrPath, capacity: int, error_rate: float, seeds: Sequence[int]) -> BloomFile:
        """Create (truncate) a writable filter file; ``seeds`` are in ``[0, 2**32)``."""

    @property
    def num_hashes(self) -> int: ...
    @property
    def seeds(self) -> list[int]: ...


@final
class BandFilters(_BandFilterSet):
    """The ``b`` band filters of an LSHBloom index, one :class:`BloomFile` per band."""


# ---------------------------------------------------------------------------
# Blocked Bloom filters (``--bloom blocked``; not pybloomfiltermmap3 files)

BLOCKED_FORMAT_VERSION: Final[int]
"""Version of the blocked filter file format (``band-{i}.bbf``)."""


def blocked_num_blocks(capacity: int, error_rate: float) -> int:
    """512-bit blocks a blocked filter needs so that its exact false-positive
    rate at ``capacity`` keys is at most ``error_rate``."""


def blocked_fp_rate(n: float, num_blocks: int) -> float:
    """Exact false-positive rate of a blocked filter holding ``n`` keys:
    ``sum_j Poisson(j; n/B) * (1 - (31/32)**j)**16``."""


def blocked_fp_rate_textbook(n: float, num_blocks: int) -> float:
    """The textbook estimate ``(1 - (31/32)**(n/B))**16`` (underestimates at low rates)."""


def blocked_measure_fp(capacity: int, error_rate: float, queries: int, seed: int = 0) -> tuple[int, int]:
    """Build an in-memory filter sized for ``(capacity, error_rate)``, insert
    ``capacity`` pseudo-random keys, query ``queries`` others:
    ``(false positives, num_blocks)``."""


class _LineFile(_FilterFile):
    """A filter file of 64-byte lines with one 64-bit hash seed (:class:`BlockedFile`, :class:`CuckooFile`)."""

    @classmethod
    def create(cls, path: _StrPath, capacity: int, error_rate: float, seed: int) -> Self:
        """Create (truncate) a writable filter file sized for ``capacity`` keys at ``error_rate``."""

    @property
    def seed(self) -> int: ...


@final
class BlockedFile(_LineFile):
    """One blocked Bloom filter file (16 lanes x 32 bits per block, one bit per lane per key)."""

    @property
    def num_blocks(self) -> int: ...


@final
class BlockedBands(_BandFilterSet):
    """The ``b`` blocked band filters of an index; same methods as :class:`BandFilters`."""


# ---------------------------------------------------------------------------
# Cuckoo filters (``--bloom cuckoo``): one 64-byte line per bucket

CUCKOO_FORMAT_VERSION: Final[int]
"""Version of the cuckoo filter file format (``band-{i}.cbf``)."""


def cuckoo_geometry(capacity: int, error_rate: float) -> tuple[int, int, int]:
    """``(fp_bits, slots, num_buckets)`` of the smallest cuckoo filter whose
    false-positive rate at ``capacity`` keys is at most ``error_rate``."""


def cuckoo_fp_rate(n: float, num_buckets: int, fp_bits: int) -> float:
    """False-positive rate of a cuckoo filter holding ``n`` keys:
    ``1 - (1 - 1/(2**fp_bits - 1))**(2n/num_buckets)``."""


def cuckoo_measure_fp(capacity: int, error_rate: float, queries: int, seed: int = 0) -> tuple[int, int, int, int]:
    """Build an in-memory filter sized for ``(capacity, error_rate)``, insert
    ``capacity`` pseudo-random keys, query ``queries`` others:
    ``(false positives, num_buckets, fp_bits, keys stored)``."""


@final
class CuckooFile(_LineFile):
    """One cuckoo filter file (buckets of one 64-byte line, ``fp_bits``-bit fingerprints)."""

    @property
    def num_buckets(self) -> int: ...
    @property
    def fp_bits(self) -> int: ...
    @property
    def slots(self) -> int: ...


@final
class CuckooBands(_BandFilterSet):
    """The ``b`` cuckoo band filters of an index; same methods as :class:`BandFilters`."""
