"""False flags of a MinHash scheme over distinct random documents (product settings otherwise).

    .venv/bin/python benchmarks/scheme_false_flags.py [--docs 1000000] [--scheme poisson]

Documents of 8 to 300 words drawn uniformly from a 50,000-word vocabulary: two of
them share a word 4-gram with negligible probability, so every flag is false. Band
keys come from ``text_band_keys`` with the product's defaults (T = 0.45, k = 512,
(b, r) = (85, 6), word 4-grams, normalize=all, mix keys) and the given scheme. A
document counts as flagged when one of its keys occurred in the same band for any
earlier document: an upper bound on keep-first's flags (which compares only with
the documents kept), computed exactly per band with numpy (no Bloom filter, so the
count is the scheme's and the band key's alone).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from lshbloom_udf import text_band_keys
from lshbloom_udf.lsh import optimal_params

CHUNK = 50_000


def random_texts(rng: np.random.Generator, vocab: np.ndarray, n: int) -> list:
    lengths = rng.integers(8, 301, n)
    words = vocab[rng.integers(0, len(vocab), lengths.sum())]
    cuts = np.cumsum(lengths)[:-1]
    return [" ".join(doc) for doc in np.split(words, cuts)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--scheme", default="poisson")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    rng = np.random.default_rng(2026)
    vocab = np.array([f"w{i}x{rng.integers(1 << 30)}" for i in range(50_000)])
    b, r = optimal_params(0.45, 512)
    keys = np.empty((args.docs, b), dtype=np.uint64)
    start = time.perf_counter()
    for lo in range(0, args.docs, CHUNK):
        texts = random_texts(rng, vocab, min(CHUNK, args.docs - lo))
        keys[lo:lo + len(texts)], has = text_band_keys(texts, b, r, num_perm=512, ngram=4, seed=1, scheme=args.scheme,
                                                       normalize="all", threads=args.threads, band_key="mix")
        assert has.all()
    keyed = time.perf_counter() - start
    flagged = np.zeros(args.docs, dtype=bool)
    for band in range(b):
        _, first = np.unique(keys[:, band], return_index=True)
        earlier = np.ones(args.docs, dtype=bool)
        earlier[first] = False  # the first document with a key is not flagged by it
        flagged |= earlier
    n = int(flagged.sum())
    print(f"scheme {args.scheme}: {args.docs} distinct random documents, (b, r) = ({b}, {r}), mix keys: "
          f"{n} flagged ({100 * n / args.docs:.4f} %, limit 0.05 %); keys in {keyed:.0f} s "
          f"({keyed / args.docs * 1e6:.1f} us/doc on {args.threads} threads)")


if __name__ == "__main__":
    main()
