"""MinHash signatures and LSH band keys, datasketch-compatible.

A document becomes a set of shingles of one unit (``shingle``, after the
optional normalization):

- ``"words"`` (default): the tokens of Python's ``str.split()`` (runs of
  Unicode whitespace as Python defines it), joined into word n-grams by one
  space; fewer than ``n`` tokens give one shingle of all of them;
- ``"chars"``: every window of ``n`` code points of the text with all
  whitespace (``str.isspace()``) deleted;
- ``"mixed"``: as ``"chars"``, but Han, kana and Hangul code points weigh 3
  and others 1, and a shingle is the shortest run of weight ``>= n``;

an empty or null document gives none (docs/algorithm.md gives the exact
rules). Each shingle is hashed with ``sha1_hash32`` (the
first 4 bytes of its SHA-1, little-endian) and the signature keeps, for each
of ``k`` random permutations ``π_j``, the minimum ``π_j(h)`` over the shingles:

    affine32 (datasketch >= 2):  π_j(h) = a_j · fmix32(h) + b_j  mod 2^32
    legacy   (datasketch <  2):  π_j(h) = ((a_j · h + b_j) mod 2^64) mod (2^61 - 1) & (2^32 - 1)

with ``(a, b)`` drawn from ``numpy.random.RandomState(seed)`` exactly as
datasketch draws them, so the same text, seed and ``k`` give bit-identical
signatures. ``P[min π(A) = min π(B)] = J(A, B)``, so matching signature
positions estimate Jaccard similarity.

``poisson`` (not datasketch's) hashes each shingle with xxh3-64 under
``seed`` and lets the hash drive a rate-``k`` Poisson process of arrivals in
random rows; row ``j`` is the earliest arrival in row ``j`` over the shingles.
Rows are independent MinHash values, as with ``k`` permutations, at a cost of
O(shingles + k log k) instead of O(shingles x k) (docs/algorithm.md §2.1).

Band keys: band ``i`` of ``b`` bands of ``r`` rows is ``sig[i·r:(i+1)·r]`` and
its key is the exact sum of those values mod ``2^61 - 1`` — datasketch's
``MinHashLSHBloom`` band hash. Documents sharing any band key are candidate
near-duplicates.

The hot loops run in the native module with the GIL released.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Optional, Union, cast

import numpy as np

from lshbloom_udf import _native
from lshbloom_udf.compat import COMPAT_DEFAULTS as _D
from lshbloom_udf.lsh import validate_bands, validate_num_perm

SCHEMES = ("affine32", "legacy", "poisson")
MERSENNE_PRIME = (1 << 61) - 1

# Normalization steps, applied in this order before shingling. The native
# module takes them as a bit mask. "all" (and True) means nfkc, lower and punct:
# dehyphen (join words hyphenated across a line break) is only ever named.
NORMALIZATION_STEPS = {"dehyphen": 8, "nfkc": 1, "lower": 2, "punct": 4}
ALL_STEPS = ("nfkc", "lower", "punct")

# Shingle units (see the module docstring).
SHINGLE_UNITS = ("words", "chars", "mixed")
# The shingle units and band keys (BAND_KEYS) as the native module types them: what validate_shingle and
# validate_band_key return.
ShingleUnit = Literal["words", "chars", "mixed"]
BandKey = Literal["sum", "mix"]

Normalize = Union[bool, str, Sequence[str], None]


def normalization_mask(normalize: Normalize) -> int:
    """The native bit mask for a normalization spec.

    ``False``/``None``/``""`` is none; ``True`` is all of NFKC, lowercase and
    punctuation-to-space; a string such as ``"nfkc,lower"`` or
    ``"dehyphen,all"`` or a sequence of step names picks steps.
    """
    all_mask = sum(NORMALIZATION_STEPS[s] for s in ALL_STEPS)
    if normalize is None or normalize is False:
        return 0
    if normalize is True:
        return all_mask
    steps = [s.strip() for s in normalize.split(",")] if isinstance(normalize, str) else list(normalize)
    mask = 0
    for step in steps:
        if step in ("", "none"):
            continue
        if step == "all":
            mask |= all_mask
        elif step in NORMALIZATION_STEPS:
            mask |= NORMALIZATION_STEPS[step]
        else:
            raise ValueError(
                f"unknown normalization step {step!r}; choose from {sorted(NORMALIZATION_STEPS)} or 'all'/'none'"
            )
    return mask


def normalization_name(normalize: Normalize) -> str:
    """Canonical text form of a normalization spec, e.g. ``"nfkc,lower,punct"`` or ``"none"``."""
    mask = normalization_mask(normalize)
    return ",".join(name for name, bit in NORMALIZATION_STEPS.items() if mask & bit) or "none"


def validate_shingle(shingle: Any) -> ShingleUnit:
    if shingle not in SHINGLE_UNITS:
        raise ValueError(f"shingle must be one of {SHINGLE_UNITS}, got {shingle!r}")
    return cast(ShingleUnit, shingle)


def validate_scheme(scheme: str) -> None:
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")


def validate_ngram(ngram: int) -> None:
    if isinstance(ngram, bool) or not isinstance(ngram, (int, np.integer)) or ngram < 1:
        raise ValueError(f"ngram must be an integer >= 1, got {ngram!r}")


def validate_seed(seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")


@functools.lru_cache(maxsize=32)
def permutations(num_perm: int, seed: int = _D["seed"], scheme: str = _D["scheme"]) -> tuple[np.ndarray, np.ndarray]:
    """The ``(a, b)`` permutation parameters datasketch's ``MinHash`` draws, as uint64 arrays.

    For ``poisson`` (no permutations): ``k`` copies of ``seed`` and ``k`` zeros, what the native module takes.
    """
    validate_num_perm(num_perm)
    validate_seed(seed)
    validate_scheme(scheme)
    gen = np.random.RandomState(seed)
    a: np.ndarray
    b: np.ndarray
    if scheme == "poisson":
        # No permutations: the native sketch takes k copies of the xxh3 seed (and k zeros).
        a = np.full(num_perm, seed, dtype=np.uint64)
        b = np.zeros(num_perm, dtype=np.uint64)
    elif scheme == "legacy":
        # datasketch < 2 draws (a, b) interleaved per permutation, a >= 1.
        drawn = np.array(
            [(gen.randint(1, MERSENNE_PRIME, dtype=np.uint64), gen.randint(0, MERSENNE_PRIME, dtype=np.uint64))
             for _ in range(num_perm)],
            dtype=np.uint64,
        )
        a, b = drawn[:, 0], drawn[:, 1]
    else:
        # All of a first (odd, so the map is a bijection on 32 bits), then all of b.
        a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
        b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    a = np.ascontiguousarray(a, dtype=np.uint64)
    b = np.ascontiguousarray(b, dtype=np.uint64)
    a.setflags(write=False)
    b.setflags(write=False)
    return a, b


def _texts_list(texts: Sequence[Optional[str]]) -> list:
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not a single string")
    texts = list(texts)
    for i, text in enumerate(texts):
        if text is not None and not isinstance(text, str):
            raise TypeError(f"texts[{i}] is {type(text).__name__}, expected str or None")
    return texts


# The signature settings' defaults are config.py's (_D); text_band_keys takes the same settings in the same order.
def signatures(texts: Sequence[Optional[str]], num_perm: int = _D["num_perm"], ngram: int = _D["ngram"],
               seed: int = _D["seed"], scheme: str = _D["scheme"], normalize: Normalize = _D["normalize"],
               threads: int = 1, shingle: str = _D["shingle"]) -> np.ndarray:
    """MinHash signatures of ``texts`` as a ``(len(texts), num_perm)`` uint32 array.

    Row ``i`` equals ``datasketch.MinHash(num_perm, seed, scheme=scheme)``
    updated with the ``shingle`` shingles of ``texts[i]`` (UTF-8) (``affine32``,
    ``legacy``; for ``poisson`` see the module docstring). A null or empty text
    has no shingles: its row is all ``2**32 - 1``. ``threads`` native threads
    share the rows (same result for any count).
    """
    settings = _signature_settings(num_perm, ngram, seed, scheme, normalize, threads, shingle)
    return _native.minhash(_texts_list(texts), settings)


BAND_KEYS = ("sum", "mix")


def validate_band_key(band_key: Any) -> BandKey:
    if band_key not in BAND_KEYS:
        raise ValueError(f"band_key must be one of {BAND_KEYS}, got {band_key!r}")
    return cast(BandKey, band_key)


def band_keys(signatures: np.ndarray, b: int, r: int, band_key: str = _D["band_key"]) -> np.ndarray:
    """Band keys of signatures: a ``(N, b)`` uint64 array.

    ``band_key="sum"`` (datasketch's ``_band_hash``): the sum of the band's
    ``r`` values mod 2^61-1. ``"mix"``: a 64-bit hash of the values mod
    2^61-1, which unlike the sum is uniform over the key range (the sum of
    ``r`` minima collides between distinct documents at scale:
    docs/algorithm.md §7), but is not datasketch's.
    """
    sig = np.asarray(signatures)
    if sig.ndim != 2:
        raise ValueError(f"signatures must be a 2-D (documents, num_perm) array, got shape {sig.shape}")
    if sig.dtype != np.uint32:
        if sig.size and (sig.min() < 0 or sig.max() > 0xFFFFFFFF):
            raise ValueError("signature values must fit in 32 bits")
        sig = sig.astype(np.uint32)
    validate_bands(b, r, sig.shape[1])
    return _native.band_keys(np.ascontiguousarray(sig), int(b), int(r), validate_band_key(band_key))


@dataclass(frozen=True)
class KeySpec:
    """How a document becomes its ``b`` band keys: every keying setting in one value.

    The executors get it with their tasks (it pickles); ``IndexParams.key_spec``
    builds it from an index's parameters. Checked when made, in the order a user
    sees the errors: ``ngram``, ``(b, r)``, then the signature's settings.
    """

    # No defaults here: every caller has all of them (text_band_keys' arguments, IndexParams' fields).
    b: int
    r: int
    num_perm: int
    ngram: int
    seed: int
    scheme: str
    normalize: Normalize
    band_key: str
    shingle: str

    def __post_init__(self) -> None:
        validate_ngram(self.ngram)
        validate_bands(self.b, self.r, self.num_perm)
        validate_shingle(self.shingle)
        permutations(self.num_perm, self.seed, self.scheme)  # checks num_perm, seed and scheme
        normalization_mask(self.normalize)
        validate_band_key(self.band_key)

    def native_settings(self, threads: int = 1) -> tuple:
        """The native ``(SignatureSettings, BandSettings)`` of these keys, computed by ``threads`` threads."""
        signature = _signature_settings(self.num_perm, self.ngram, self.seed, self.scheme, self.normalize, threads,
                                        self.shingle)
        band_key = cast(BandKey, self.band_key)  # checked by __post_init__
        return signature, _native.BandSettings(int(self.b), int(self.r), band_key)

    def keys(self, texts, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """``(keys (N, b) uint64, has_shingles (N,))`` of ``texts``: a sequence of ``str``/``None``, or a
        pyarrow string array (read through its buffers, without copying)."""
        rows = _native.ArrowTexts(*_arrow_buffers(texts)) if _is_arrow(texts) else _texts_list(texts)
        return _native.minhash_band_keys(rows, *self.native_settings(threads))


def text_band_keys(
    texts: Sequence[Optional[str]],
    b: int,
    r: int,
    num_perm: int = _D["num_perm"],
    ngram: int = _D["ngram"],
    seed: int = _D["seed"],
    scheme: str = _D["scheme"],
    normalize: Normalize = _D["normalize"],
    threads: int = 1,
    band_key: str = _D["band_key"],
    shingle: str = _D["shingle"],
) -> tuple[np.ndarray, np.ndarray]:
    """Band keys (see :func:`band_keys`) straight from texts without materializing the signatures.

    ``texts``: a sequence of ``str``/``None``, or a pyarrow string array (read
    through its buffers, without copying). Returns ``(keys, has_shingles)``: a
    ``(N, b)`` uint64 array and a boolean array that is False for null/empty
    documents (whose keys are meaningless). ``threads`` native threads share
    the rows (same result for any count). :meth:`KeySpec.keys` with the
    settings as one value.
    """
    return KeySpec(b, r, num_perm, ngram, seed, scheme, normalize, band_key, shingle).keys(texts, threads)


# The same function under the name it had when Arrow arrays had a function of their own.
arrow_band_keys = text_band_keys


def _signature_settings(num_perm, ngram, seed, scheme, normalize: Normalize, threads, shingle: str = _D["shingle"]):
    validate_ngram(ngram)
    unit = validate_shingle(shingle)
    a, b = permutations(num_perm, seed, scheme)
    return _native.SignatureSettings(a, b, scheme, int(ngram), normalization_mask(normalize), int(threads), unit)


def _is_arrow(texts) -> bool:
    # By module name: a list of strings never imports pyarrow.
    return type(texts).__module__.split(".")[0] == "pyarrow"


def arrow_texts(array):
    """A pyarrow string array as ``_native.ArrowTexts`` (read in place by the native functions that take texts)."""
    return _native.ArrowTexts(*_arrow_buffers(array))


def _arrow_buffers(array) -> tuple:
    """``(offsets, data, validity or None)`` of a pyarrow string array, as numpy views of its buffers (what
    ``_native.ArrowTexts`` holds)."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_string(array.type):
        offset_type = np.int32
    elif pa.types.is_large_string(array.type):
        offset_type = np.int64
    else:
        raise TypeError(f"text column must be a string column, got Arrow type {array.type}")
    validity, offsets_buf, data_buf = array.buffers()
    n = len(array)
    offsets = np.frombuffer(offsets_buf, dtype=offset_type, count=n + 1,
                            offset=array.offset * np.dtype(offset_type).itemsize)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, dtype=np.uint8)
    valid = None
    if validity is not None and array.null_count:
        valid = array.is_valid().to_numpy(zero_copy_only=False)
    return offsets, data, valid
