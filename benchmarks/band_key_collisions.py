"""How often datasketch's band key makes two unrelated documents collide.

    .venv/bin/python benchmarks/band_key_collisions.py [--corpus PATH.jsonl.gz ...]

``MinHashLSHBloom`` (and, for compatibility, this project) keys a band by the
*sum* of its r MinHash values mod 2^61-1. The sum is not spread over 2^61 values:
a MinHash value is the minimum of S hashes, about 2^32 / S, so for documents of
~1000 distinct shingles the keys of a band fall in a range of ~10^8. Two
documents whose bands differ still get the same key with probability ~10^-8 per
band, which the Bloom sizing (p_effective, and the paper's b/N term with
N = 2^61-1) does not count.

Part 1 counts, on the corpus itself, the pairs of documents that share a band key
against the pairs that share the band's values exactly (the extra pairs are
spurious). Part 2 extrapolates to larger corpora by drawing each document's r
minima from the exact distribution (2^32 * Beta(1, S)) with S sampled from the
corpus's distinct-shingle counts, and prints the fraction of *distinct* documents
that keep-first would flag because an earlier document collides in some band.
Both parts run for each band key: ``sum`` (datasketch's, the default) and
``mix`` (``--band-key mix``: a 64-bit hash of the band's values).
"""

from __future__ import annotations

import argparse
import os
import platform

import numpy as np

from lshbloom_udf import _native, band_keys, optimal_params, signatures
from lshbloom_udf.config import DEFAULTS, PRESETS
from lshbloom_udf.minhash import BAND_KEYS, normalization_mask

from corpus import CORPORA, CORPUS_DIR, read_corpora

DEFAULT_CORPORA = [os.path.join(CORPUS_DIR, n) for n in CORPORA]
CONFIGS = {"paper": PRESETS["paper"], "defaults": DEFAULTS}


def colliding_pairs(values: np.ndarray) -> int:
    _, counts = np.unique(values, axis=0, return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", nargs="+", default=DEFAULT_CORPORA)
    parser.add_argument("--sizes", nargs="+", type=int, default=[10**5, 10**6, 10**7])
    args = parser.parse_args()
    texts, _ = read_corpora(args.corpus, sample_fallback=False)
    if not texts:
        raise SystemExit("no corpus found; pass --corpus PATH.jsonl.gz")
    print(f"machine: {platform.processor() or platform.machine()}, corpus: {len(texts)} documents from {', '.join(map(os.path.basename, args.corpus))}")
    rng = np.random.default_rng(0)
    for name, c in CONFIGS.items():
        num_perm, ngram, normalize = c["num_perm"], c["ngram"], c["normalize"]
        b, r = optimal_params(c["threshold"], num_perm)
        label = f"{name}: T {c['threshold']}, {num_perm} permutations, {ngram}-grams, normalize {normalize}"
        sig = signatures(texts, num_perm=num_perm, ngram=ngram, normalize=normalize, scheme=c["scheme"], seed=c["seed"])
        by_values = sum(colliding_pairs(sig[:, i * r : (i + 1) * r]) for i in range(b))
        pairs = len(texts) * (len(texts) - 1) // 2
        print(f"\n{label}: b x r = {b} x {r}")
        mask = normalization_mask(normalize)
        sizes = np.array([max(1, len(_native.shingles(t, ngram, mask))) for t in texts])
        drawn = {n: rng.choice(sizes, n) for n in args.sizes}
        for band_key in BAND_KEYS:
            keys = band_keys(sig, b, r, band_key=band_key)
            by_key = sum(colliding_pairs(keys[:, i]) for i in range(b))
            per_pair_band = (by_key - by_values) / (pairs * b)
            print(f"  band key {band_key}: median key {np.median(keys):.3g}")
            print(f"    corpus: {by_key} band-sharing pairs by key, {by_values} by values -> {by_key - by_values} spurious ({per_pair_band:.2e} per pair and band)")
            for n, s in drawn.items():
                minima = np.floor(2.0**32 * rng.beta(1, s[:, None], size=(n, r))).clip(max=2**32 - 1).astype(np.uint32)
                key = band_keys(minima, 1, r, band_key=band_key)[:, 0]
                seen_before = 1 - len(np.unique(key)) / n
                flagged = 1 - (1 - seen_before) ** b
                print(f"    {n:>12,} distinct documents: {seen_before:.2e} collide with an earlier one per band -> ~{flagged:.2%} wrongly flagged over {b} bands")


if __name__ == "__main__":
    main()
