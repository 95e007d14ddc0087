"""Sizing and error of an LSHBloom index (the paper's §4.3–4.5).

Each of the ``b`` bands gets a Bloom filter sized for ``n`` documents at the
per-band false-positive rate ``p``, chosen so that the probability that *any*
band reports a false hit is the user's effective overhead ``p_eff``:

    1 - (1 - p)^b = p_eff   =>   p = 1 - (1 - p_eff)^(1/b) = -expm1(log1p(-p_eff) / b)

An optimal Bloom filter for ``n`` items at rate ``p`` needs

    m = -n ln p / (ln 2)^2  bits per band,  b·m bits in all.

(pybloomfiltermmap3 rounds the hash count down to ``floor(log2(1/p))`` and
``m`` up to whole bytes; :func:`bloom_file_bytes` gives the exact file size.)

With ``N = 2^61 - 1`` band-key values, a band-key collision adds ``b/N`` to
the Bloom error, and the document-level error rates become (eqs. 3–4)

    FP_bloom = FP_lsh + (1 - FP_lsh)(p_eff + b/N)
    FN_bloom = (1 - (p_eff + b/N)) FN_lsh

where ``FP_lsh``/``FN_lsh`` are the S-curve integrals of :mod:`lshbloom_udf.lsh`.

A blocked index (``bloom="blocked"``) sets 16 bits per key in one 512-bit
block; its block count is the smallest whose exact false-positive rate is
within ``p`` (:mod:`lshbloom_udf.index.backends`), larger than ``m`` at low rates.
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import asdict, dataclass

from lshbloom_udf.index.backends import BLOOM_FORMAT, BLOOM_PREAMBLE_BYTES, backend
from lshbloom_udf.index.fs import human_bytes
from lshbloom_udf.index.params import per_band_p, validate_capacity, validate_p_effective
from lshbloom_udf.lsh import (
    false_negative_probability,
    false_positive_probability,
    optimal_params,
    validate_bands,
    validate_num_perm,
    validate_threshold,
)

KEY_RANGE = (1 << 61) - 1
# Defined with the index (which validates its own parameters) and re-exported here, the sizing module.
__all__ = [
    "BLOOM_PREAMBLE_BYTES",
    "KEY_RANGE",
    "Plan",
    "bloom_file_bytes",
    "human_bytes",
    "optimal_bits",
    "per_band_p",
    "plan",
    "validate_capacity",
    "validate_p_effective",
]


def optimal_bits(n: int, p: float) -> float:
    """Bits of an optimal Bloom filter for ``n`` items at false-positive rate ``p``."""
    return -n * math.log(p) / (math.log(2) ** 2)


def bloom_file_bytes(capacity: int, p: float) -> int:
    """Exact size of one pybloomfiltermmap3 file for ``capacity`` items at rate ``p``."""
    return backend(BLOOM_FORMAT).file_bytes(capacity, p)


@dataclass(frozen=True)
class Plan:
    docs: int
    bloom: str
    threshold: float
    num_perm: int
    ngram: int
    b: int
    r: int
    p_effective: float
    p_band: float
    hashes_per_band: int
    bits_per_band: int
    formula_bits_per_band: float
    index_bytes: int
    formula_index_bytes: float
    lsh_false_positive: float
    lsh_false_negative: float
    lshbloom_false_positive: float
    lshbloom_false_negative: float
    shm_free_bytes: int
    ram_bytes: int
    fits_in_shm: bool
    fits_in_ram: bool

    def to_dict(self) -> dict:
        return asdict(self)

    def to_text(self) -> str:
        where = "/dev/shm" if self.fits_in_shm else ("RAM (not /dev/shm)" if self.fits_in_ram else "disk only")
        return "\n".join(
            [
                f"documents (capacity)     {self.docs:,}",
                f"Bloom filters            {self.bloom}",
                f"threshold / num_perm     {self.threshold} / {self.num_perm} (ngram {self.ngram})",
                f"bands b x rows r         {self.b} x {self.r}",
                f"p_effective / per band   {self.p_effective:.3g} / {self.p_band:.6g}",
                f"hashes per band          {self.hashes_per_band}",
                f"bits per band            {self.bits_per_band:,}  (formula {self.formula_bits_per_band:,.0f})",
                f"index size               {human_bytes(self.index_bytes)}  ({self.index_bytes:,} bytes)",
                f"LSH FP / FN (integrals)  {self.lsh_false_positive:.6g} / {self.lsh_false_negative:.6g}",
                f"LSHBloom FP / FN         {self.lshbloom_false_positive:.6g} / {self.lshbloom_false_negative:.6g}",
                f"fits here in             {where}  (/dev/shm free {human_bytes(self.shm_free_bytes)}, RAM {human_bytes(self.ram_bytes)})",
            ]
        )


def _shm_free() -> int:
    try:
        return shutil.disk_usage("/dev/shm").free
    except OSError:
        return 0


def _ram_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def plan(
    docs: int,
    threshold: float = 0.5,
    num_perm: int = 256,
    p_effective: float = 1e-5,
    ngram: int = 1,
    bands: tuple[int, int] | None = None,
    bloom: str = "pybloomfiltermmap3",
) -> Plan:
    """Size an index of ``bloom`` filters for ``docs`` documents before running anything."""
    validate_capacity(docs)
    validate_threshold(threshold)
    validate_num_perm(num_perm)
    validate_p_effective(p_effective)
    if bands is None:
        b, r = optimal_params(threshold, num_perm)
    else:
        b, r = bands
        validate_bands(b, r, num_perm)
    p = per_band_p(p_effective, b)
    kind = backend(bloom)
    hashes, bits = kind.geometry(docs, p)
    index_bytes = kind.index_bytes(docs, p, b)
    fp_lsh = false_positive_probability(threshold, b, r)
    fn_lsh = false_negative_probability(threshold, b, r)
    bloom_error = p_effective + b / KEY_RANGE
    shm, ram = _shm_free(), _ram_bytes()
    return Plan(
        docs=docs,
        bloom=bloom,
        threshold=threshold,
        num_perm=num_perm,
        ngram=ngram,
        b=b,
        r=r,
        p_effective=p_effective,
        p_band=p,
        hashes_per_band=hashes,
        bits_per_band=bits,
        formula_bits_per_band=optimal_bits(docs, p),
        index_bytes=index_bytes,
        formula_index_bytes=b * optimal_bits(docs, p) / 8,
        lsh_false_positive=fp_lsh,
        lsh_false_negative=fn_lsh,
        lshbloom_false_positive=fp_lsh + (1 - fp_lsh) * bloom_error,
        lshbloom_false_negative=(1 - bloom_error) * fn_lsh,
        shm_free_bytes=shm,
        ram_bytes=ram,
        fits_in_shm=index_bytes < shm,
        fits_in_ram=index_bytes < ram,
    )
