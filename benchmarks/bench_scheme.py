"""MinHash schemes side by side in one process, one core: affine32 vs poisson, datasketch, rensa.

    .venv/bin/python benchmarks/bench_scheme.py [--docs N] [--others N] [--repeat R]

Shingles: the corpus's word 4-grams (normalize=all, the product's), and character
9-grams made in Python and fed through the same native path (whitespace replaced
by U+2423 so each 9-gram is one token, then ngram=1). For each k in 128, 256, 512:
``lshbloom_udf.signatures`` with ``affine32`` and ``poisson`` (the word table warm,
as in a Spark task; shingling included), and on ``--others`` documents
datasketch's ``MinHash.update_batch`` and, when installed, rensa's ``RMinHash``
and ``CMinHash`` (shingles given ready-made: their shingling is not timed).
Prints the median CPU ns per document and per distinct shingle of ``--repeat`` runs, and the
floor of the native path (poisson at k = 2: shingling and hashing).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import time

from datasketch import MinHash

from lshbloom_udf import _native, signatures
from lshbloom_udf.minhash import normalization_mask

from corpus import CORPUS_DIR
from bench_core import machine

KS = (128, 256, 512)
# The corpus beside the main checkout (../../shared), else the machine's shared copy (from a worktree).
CORPUS = next((p for p in (os.path.join(CORPUS_DIR, "linux-docs.jsonl.gz"), "/work/shared/corpus/linux-docs.jsonl.gz")
               if os.path.exists(p)), os.path.join(CORPUS_DIR, "linux-docs.jsonl.gz"))


def load(path: str, n: int) -> list:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line, _ in zip(f, range(n))]
    return [t for t in texts if t and t.split()]


def char_token_texts(texts: list, n: int = 9) -> list:
    """Each text as its character n-grams, one token each (whitespace runs become one U+2423 first)."""
    out = []
    for t in texts:
        s = "\u2423".join(t.lower().split())
        out.append(" ".join(s[i:i + n] for i in range(max(1, len(s) - n + 1))))
    return out


def median_time(fn, repeat: int) -> float:
    """Median CPU seconds of this process (one thread works): robust to other processes sharing the cores."""
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return statistics.median(times)


def others(shingle_lists: list, k: int, repeat: int) -> dict:
    """Seconds for datasketch and rensa over ready-made shingle lists."""
    as_bytes = shingle_lists
    as_str = [[s.decode("utf-8") for s in sh] for sh in shingle_lists]

    def ds():
        for sh in as_bytes:
            m = MinHash(num_perm=k, seed=1)
            m.update_batch(sh)

    out = {"datasketch update_batch": median_time(ds, max(1, repeat // 2))}
    try:
        from rensa import CMinHash, RMinHash
    except ImportError:
        return out

    def rensa(cls):
        def run():
            for sh in as_str:
                m = cls(num_perm=k, seed=1)
                m.update(sh)
                m.digest()
        return run

    out["rensa RMinHash"] = median_time(rensa(RMinHash), repeat)
    out["rensa CMinHash"] = median_time(rensa(CMinHash), repeat)
    return out


def bench(name: str, texts: list, ngram: int, normalize: str, n_others: int, repeat: int) -> None:
    mask = normalization_mask(normalize)
    shingle_lists = [_native.shingles(t, ngram, mask) for t in texts]
    total = sum(map(len, shingle_lists))
    sub = shingle_lists[:n_others]
    sub_total = sum(map(len, sub))
    print(f"\n{name}: {len(texts)} docs, {total / len(texts):.0f} distinct shingles/doc")
    print(f"{'k':>4} {'method':<26} {'us/doc':>9} {'ns/shingle':>11} {'vs affine32':>12}")
    for k in KS:
        rows = {}
        for scheme in ("affine32", "poisson"):
            signatures(texts[:50], k, ngram, 1, scheme, normalize)  # warm the word table and the code
            rows[f"lshbloom {scheme}"] = (median_time(lambda: signatures(texts, k, ngram, 1, scheme, normalize),
                                                      repeat), len(texts), total)
        if k == KS[0]:
            # The sketch's share: poisson with k = 2 is shingling + xxh3 + a negligible sketch.
            rows["lshbloom poisson k=2 (floor)"] = (
                median_time(lambda: signatures(texts, 2, ngram, 1, "poisson", normalize), repeat), len(texts), total)
        for label, secs in others(sub, k, repeat).items():
            rows[label] = (secs, len(sub), sub_total)
        base = rows["lshbloom affine32"][0] / rows["lshbloom affine32"][2]
        for label, (secs, docs, shingles) in rows.items():
            print(f"{k:>4} {label:<26} {secs / docs * 1e6:>9.1f} {secs / shingles * 1e9:>11.1f} "
                  f"{base / (secs / shingles):>11.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=CORPUS)
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--others", type=int, default=200, help="documents for datasketch and rensa (slower)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    texts = load(args.corpus, args.docs)
    print(f"machine: {machine()}; SIMD {_native.simd_backend()}; load average at start "
          f"{open('/proc/loadavg').read().split()[:3]}")
    bench("word 4-grams (normalize=all)", texts, 4, "all", args.others, args.repeat)
    bench("char 9-grams (lowercase, whitespace as U+2423)", char_token_texts(texts), 1, "none", args.others,
          args.repeat)
    print(f"\nload average at end {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
