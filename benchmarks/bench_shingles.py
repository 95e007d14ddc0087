"""Shingle units side by side: native signatures against datasketch ``update_batch`` over the same shingles.

    .venv/bin/python benchmarks/bench_shingles.py [--docs N] [--repeat R] [--json PATH]

For each corpus (``linux-docs.jsonl.gz``; the Chinese and Japanese documents
of ``multilingual-docs.jsonl.gz``) and each unit (words with ngram 4, chars
and mixed with ngram 5; normalization ``all``; 256 permutations, affine32,
one thread), in one process:

- native: ``lshbloom_udf.signatures`` (shingling + SHA-1 + permutations), the
  median of ``repeat`` runs from a cold word table, in ns per document and
  per distinct shingle;
- datasketch: ``MinHash(256).update_batch`` over the same distinct shingles
  (UTF-8, as ``_native.shingles`` gives them; building the shingles is not
  timed on its side), once.

The two signature matrices are checked equal before any figure is printed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import time

import numpy as np
from datasketch import MinHash

from lshbloom_udf import _native, signatures
from lshbloom_udf.minhash import normalization_mask

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_core import machine  # noqa: E402
from corpus import CORPUS_DIR  # noqa: E402

UNITS = (("words", 4), ("chars", 5), ("mixed", 5))
NORMALIZE = "all"
NUM_PERM = 256


def read(path: str, langs=None) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        docs = (json.loads(line) for line in f)
        return [d["text"] for d in docs if langs is None or d.get("lang") in langs]


def bench_unit(texts: list[str], unit: str, ngram: int, repeat: int) -> dict:
    flags = normalization_mask(NORMALIZE)
    times = []
    for _ in range(repeat):
        _native.reset_word_table()
        t = time.perf_counter()
        ours = signatures(texts, num_perm=NUM_PERM, ngram=ngram, normalize=NORMALIZE, shingle=unit)
        times.append(time.perf_counter() - t)
    shingle_sets = [_native.shingles(text, ngram, flags, unit) for text in texts]
    theirs = np.empty_like(ours)
    t = time.perf_counter()
    for i, shingles in enumerate(shingle_sets):
        m = MinHash(num_perm=NUM_PERM)
        m.update_batch(shingles)
        theirs[i] = m.hashvalues
    ds_seconds = time.perf_counter() - t
    nonempty = np.array([bool(s) for s in shingle_sets])
    if not np.array_equal(ours[nonempty], theirs[nonempty]):
        raise SystemExit(f"{unit}: signatures differ from datasketch's")
    shingles = sum(len(s) for s in shingle_sets)
    native = statistics.median(times)
    return {
        "unit": unit, "ngram": ngram, "docs": len(texts), "distinct_shingles_per_doc": shingles / len(texts),
        "native_ns_per_doc": native / len(texts) * 1e9, "native_ns_per_shingle": native / shingles * 1e9,
        "datasketch_ns_per_doc": ds_seconds / len(texts) * 1e9, "datasketch_ns_per_shingle": ds_seconds / shingles * 1e9,
        "speedup": ds_seconds / native,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1200, help="at most this many documents per corpus")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--corpus-dir", default=CORPUS_DIR)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    corpora = {
        "linux-docs": read(os.path.join(args.corpus_dir, "linux-docs.jsonl.gz")),
        "multilingual zh/ja": read(os.path.join(args.corpus_dir, "multilingual-docs.jsonl.gz"), {"zh-cn", "zh-tw", "ja"}),
    }
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.2f}; SIMD {_native.simd_backend()}")
    print(f"{NUM_PERM} permutations, affine32, normalize {NORMALIZE}, one thread; datasketch update_batch over the same shingles")
    results = []
    for name, texts in corpora.items():
        texts = texts[: args.docs]
        print(f"\n{name}: {len(texts)} documents, {sum(map(len, texts)) / len(texts):,.0f} code points each")
        print(f"{'unit':>8} {'n':>2} {'shingles/doc':>12} {'ours ns/doc':>12} {'ns/shingle':>10} "
              f"{'datasketch ns/doc':>18} {'ns/shingle':>10} {'ratio':>6}")
        for unit, ngram in UNITS:
            r = {"corpus": name, **bench_unit(texts, unit, ngram, args.repeat)}
            results.append(r)
            print(f"{unit:>8} {ngram:>2} {r['distinct_shingles_per_doc']:>12,.0f} {r['native_ns_per_doc']:>12,.0f} "
                  f"{r['native_ns_per_shingle']:>10,.1f} {r['datasketch_ns_per_doc']:>18,.0f} "
                  f"{r['datasketch_ns_per_shingle']:>10,.1f} {r['speedup']:>5.1f}x")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": machine(), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
