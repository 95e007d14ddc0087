"""The driver's exact overlaps with and without its cache of recurring earlier texts, and the pairwise counter,
side by side, by how often a pair's earlier text recurs.

    PYTHONPATH=. .venv/bin/python benchmarks/overlap_reuse.py [--docs 40000] [--threads 2] [--cache-mb 2048]

Data: the first ``--docs`` documents of ``scale_data`` (``--source-docs``) (350-450-word windows of the shared corpora, ~2.4 kB, the
defaults' shingling: mixed 11-grams, ~1,850 shingles a document). Pairs, sorted by the later document as
verification sorts them: each of the later half's documents with ``k`` earlier ones drawn from ``m`` of the
earlier half (``m`` large: mostly distinct candidates, as the pass's false candidates are; ``m`` small: a
template family's anchors). Timed (wall, ``--threads``): ``indexed_overlaps`` as verification calls it (the
later text's set built once; the earlier texts in three pairs or more shingled once before the pairs, within
``--cache-mb``: ``DriverMemory.shingle_cache`` on the driver), the same with no cache (every earlier text shingled
for its pair), and ``shingle_overlaps`` with the later text on its kept side. Their results must be equal.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import scale_data  # noqa: E402
from bench_all import load_avg  # noqa: E402
from bench_core import machine  # noqa: E402

from lshbloom_udf import _native  # noqa: E402
from lshbloom_udf.config import DEFAULTS  # noqa: E402
from lshbloom_udf.minhash import normalization_mask  # noqa: E402

# (candidates per later document, earlier documents they are drawn from; None: all of the earlier half)
CASES = ((2, None), (2, 10000), (4, 2000), (4, 64))


def timed(fn) -> tuple:
    t = time.perf_counter()
    out = np.asarray(fn())
    return out, time.perf_counter() - t


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=40_000)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--cache-mb", type=int, default=2048, help="the cache of recurring earlier texts' lists")
    p.add_argument("--source-docs", type=int, default=200_000, help="the scale_data set the documents come from")
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "lshbloom-scale"))
    args = p.parse_args(argv)
    params = {"dup_fraction": 0.01, "edit": 0.05, "replace": 0.30, "min_words": 350, "max_words": 450,
              "seed": 1, "max_repeated": 0.10}
    import pyarrow.parquet as pq

    data = scale_data.generate(max(args.docs, args.source_docs), params, args.cache)
    texts = pq.read_table(data["docs"], columns=["text"]).slice(0, args.docs).column(0).to_pylist()
    mask, ngram, unit = normalization_mask(DEFAULTS["normalize"]), DEFAULTS["ngram"], DEFAULTS["shingle"]
    print(f"{machine()}, load {load_avg()}; {args.docs} documents of {data['mean_bytes']:.0f} B, "
          f"threads {args.threads}")
    half, rng = args.docs // 2, np.random.default_rng(1)
    for k, m in CASES:
        later = np.repeat(np.arange(half, args.docs), k)
        earlier = rng.integers(0, m or half, len(later))
        pairs = (texts, later.astype(np.uint32), earlier.astype(np.uint32), ngram, mask, unit, args.threads)
        cached, t_cached = timed(lambda: _native.indexed_overlaps(*pairs, args.cache_mb << 20))
        uncached, t_uncached = timed(lambda: _native.indexed_overlaps(*pairs, 0))
        kept_later, t_pairwise = timed(lambda: _native.shingle_overlaps(
            [texts[i] for i in earlier.tolist()], [texts[i] for i in later.tolist()], ngram, mask, unit,
            args.threads))
        assert (cached == kept_later[:, [0, 2, 1]]).all() and (uncached == cached).all()
        n = len(later)
        print(f"  {k} candidates from {m or half:>6} earlier (distinct earlier per pair "
              f"{len(np.unique(earlier)) / n:.3f}): cached {t_cached / n * 1e6:5.1f} us/pair, "
              f"no cache {t_uncached / n * 1e6:5.1f}, pairwise (later kept) {t_pairwise / n * 1e6:5.1f}; "
              f"cached / pairwise {t_cached / t_pairwise:.2f}")


if __name__ == "__main__":
    main()
