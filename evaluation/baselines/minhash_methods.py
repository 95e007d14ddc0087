"""The MinHash methods: they decide on band collisions, with no Jaccard verification.

``lshbloom``
    this product: :class:`~lshbloom_udf.index.LSHBloomIndex` over the native
    band keys; only non-duplicates are inserted.
``minhashlsh``
    datasketch ``MinHashLSH``, the exact hashmap index: query, and insert the
    document only when no band collides.
``datasketch-lshbloom``
    datasketch ``MinHashLSHBloom`` with the same per-band false-positive rate.

datasketch gets its ``MinHash`` objects either computed by itself from the
product's shingling contract (:func:`datasketch_minhashes`) or holding the
product's own signatures (:func:`minhashes_from_signatures`).
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
import time
from collections.abc import Sequence
from typing import Optional

import numpy as np

from evaluation.baselines.common import RunResult, scratch_dir
from evaluation.baselines.units import reference_shingles
from lshbloom_udf.index import IndexParams, LSHBloomIndex
from lshbloom_udf.minhash import permutations, text_band_keys


def datasketch_minhashes(
    texts: Sequence[Optional[str]], num_perm: int, ngram: int = 1, normalize="none", seed: int = 1, scheme: str = "affine32"
) -> list:
    """datasketch ``MinHash`` objects computed by datasketch itself (``None`` for documents without shingles)."""
    from datasketch import MinHash

    proto = MinHash(num_perm=num_perm, seed=seed, scheme=scheme)
    out = []
    for text in texts:
        shingles = reference_shingles(text, ngram, normalize)
        if not shingles:
            out.append(None)
            continue
        m = MinHash(num_perm=num_perm, seed=seed, scheme=scheme, permutations=proto.permutations)
        m.update_batch(sorted(shingles))
        out.append(m)
    return out


def minhashes_from_signatures(sigs: np.ndarray, has_shingles: np.ndarray, seed: int = 1, scheme: str = "affine32") -> list:
    """datasketch ``MinHash`` objects holding signatures the product computed (bit-identical, tests prove it)."""
    from datasketch import MinHash

    num_perm = sigs.shape[1]
    a, b = permutations(num_perm, seed, scheme)
    perms = (a, b)
    return [
        MinHash(num_perm=num_perm, seed=seed, scheme=scheme, hashvalues=sig, permutations=perms) if has else None
        for sig, has in zip(sigs, has_shingles)
    ]


def lshbloom_decisions(keys: np.ndarray, has_shingles: np.ndarray, params: IndexParams, insert: str = "first") -> RunResult:
    """This product's decisions with a fresh on-disk index (in /dev/shm): keep-first, or any-earlier (``"all"``)."""
    path = tempfile.mkdtemp(prefix="lshbloom-eval-", dir=scratch_dir())
    try:
        start = time.perf_counter()
        with LSHBloomIndex.create(os.path.join(path, "index"), params) as index:
            dup = index.decide(keys, has_shingles, insert)
            stats = index.stats()
        seconds = time.perf_counter() - start
        return RunResult(dup, seconds, stats["bytes_on_disk"], {"b": params.b, "r": params.r})
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _keep_first(minhashes: Sequence, query, insert) -> np.ndarray:
    """datasketch's keep-first loop: a document the index finds is a duplicate, any other is inserted."""
    dup = np.zeros(len(minhashes), dtype=bool)
    for i, m in enumerate(minhashes):
        if m is None:
            continue
        if query(m):
            dup[i] = True
        else:
            insert(i, m)
    return dup


def datasketch_lsh_decisions(minhashes: Sequence, threshold: float, num_perm: int, bands=None) -> RunResult:
    """datasketch ``MinHashLSH`` (exact hashmap index), keep-first: insert only non-duplicates."""
    from datasketch import MinHashLSH

    start = time.perf_counter()
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm, params=tuple(bands) if bands else None)
    dup = _keep_first(minhashes, lsh.query, lambda i, m: lsh.insert(i, m, check_duplication=False))
    seconds = time.perf_counter() - start
    size = len(pickle.dumps(lsh, protocol=pickle.HIGHEST_PROTOCOL))
    return RunResult(dup, seconds, size, {"b": lsh.b, "r": lsh.r})


def datasketch_lshbloom_decisions(
    minhashes: Sequence, threshold: float, num_perm: int, capacity: int, p_band: float, bands=None
) -> RunResult:
    """datasketch ``MinHashLSHBloom`` with per-band rate ``p_band``, keep-first."""
    from datasketch import MinHashLSHBloom

    path = tempfile.mkdtemp(prefix="datasketch-bloom-", dir=scratch_dir())
    try:
        start = time.perf_counter()
        lsh = MinHashLSHBloom(
            threshold=threshold, num_perm=num_perm, n=capacity, fp=p_band, save_dir=path,
            params=tuple(bands) if bands else None,
        )
        dup = _keep_first(minhashes, lsh.query, lambda i, m: lsh.insert(m))
        lsh.sync()
        seconds = time.perf_counter() - start
        size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
        return RunResult(dup, seconds, size, {"b": lsh.b, "r": lsh.r})
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run_lshbloom(
    texts: Sequence[Optional[str]],
    threshold: float = 0.5,
    num_perm: int = 256,
    ngram: int = 1,
    normalize="none",
    scheme: str = "affine32",
    seed: int = 1,
    p_effective: float = 1e-5,
    bands=None,
    capacity: Optional[int] = None,
) -> RunResult:
    """End to end: band keys then the index. ``seconds`` includes the MinHash work."""
    params = IndexParams.for_threshold(
        capacity or max(1, len(texts)), threshold, num_perm, bands=bands, ngram=ngram, normalize=normalize,
        scheme=scheme, seed=seed, p_effective=p_effective,
    )
    start = time.perf_counter()
    keys, has = text_band_keys(list(texts), **params.signature_kwargs())
    key_seconds = time.perf_counter() - start
    res = lshbloom_decisions(keys, has, params)
    res.seconds += key_seconds
    return res
