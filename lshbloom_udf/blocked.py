"""The blocked Bloom backend (``--bloom blocked``): one 512-bit block per key per band.

An :class:`~lshbloom_udf.index.LSHBloomIndex` created with ``bloom="blocked"``
decides exactly as the compatible one ("keep first": a document is a
duplicate iff one of its ``b`` band keys is in that band's filter; only
non-duplicates are inserted, in order), with the same transactions, capacity
checks and run records, but each band's filter touches one cache line per key
instead of ``k`` scattered ones. The price is space: the filters are sized
with the exact false-positive rate of a blocked filter
(``_native.blocked_num_blocks``: a Poisson mixture over block loads), which at
the low per-band rates LSHBloom uses is larger than the textbook split-block
estimate and than a classic Bloom filter at the same rate.

The files are *not* pybloomfiltermmap3 files: datasketch cannot read such an
index. Its directory holds ``band-{i}.bbf`` and ``manifest.json`` with its own
format name and version (``lshbloom-blocked-index``, 1), so neither kind of
index is ever opened as the other. This module holds what is particular to
the blocked files; the index itself is :mod:`lshbloom_udf.index`.
"""

from __future__ import annotations

import numpy as np

from lshbloom_udf import _native

FORMAT_NAME = "lshbloom-blocked-index"
FORMAT_VERSION = 1
BLOOM_FORMAT = f"lshbloom-blocked-512x16-v{_native.BLOCKED_FORMAT_VERSION}"
_SEED_DOMAIN = 0x424C4B44  # "BLKD"
BLOCK_BITS = 512
# A key sets one bit in each of a block's 16 lanes of 32 bits.
KEY_BITS_PER_BLOCK = 16


def band_file_name(i: int) -> str:
    return f"band-{i}.bbf"


def band_seed(band: int) -> int:
    """The deterministic 64-bit hash seed of band ``band`` (same parameters, byte-identical files)."""
    return int(np.random.SeedSequence([_SEED_DOMAIN, band]).generate_state(1, dtype=np.uint64)[0])


def blocked_index_bytes(capacity: int, p_band: float, b: int) -> int:
    """Bytes on disk of a blocked index (``b`` band files; manifest excluded)."""
    return b * (64 + BLOCK_BITS // 8 * _native.blocked_num_blocks(capacity, p_band))


def band_false_positive_rate(inserted: int, num_blocks: int) -> float:
    """The false-positive rate of one band's blocked filter holding ``inserted`` keys."""
    return _native.blocked_fp_rate(float(inserted), int(num_blocks))
