"""Verification's exact overlaps alone (``_native.shingle_overlaps``, one thread) on the candidate pairs of a corpus.

    PYTHONPATH=. .venv/bin/python benchmarks/overlap_cost.py --docs 200000 [--native DIR]

Data: ``peers.py --corpus windows`` (350-450-word corpus windows with 30 % of their words replaced, 1 %
planted near-duplicates), whose distinct documents share passages: ~0.3 LSH candidate pairs per document at
2·10^5 (docs/benchmarks.md §2b). Pairs: for each document and band, the earliest document with the same
band key (the pass's kept document in that band), deduplicated: the round-1 candidate pairs of verification.
Timed: CPU seconds of ``shingle_overlaps`` over all pairs on one thread, in verification's order (sorted by
the earlier document), median of ``--repeat``. ``--native DIR``: import ``_native`` from DIR (a copy of another build's ``_native.abi3.so``)
to compare builds in separate processes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import scale  # noqa: E402
import scale_data  # noqa: E402

from lshbloom_udf.config import DEFAULTS, DedupConfig  # noqa: E402
from lshbloom_udf.minhash import normalization_mask  # noqa: E402


def candidate_pairs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(later row, earliest row with the same key in some band), each pair once."""
    rows = np.arange(len(keys), dtype=np.int64)
    later, earlier = [], []
    for i in range(keys.shape[1]):
        _, first, inverse = np.unique(keys[:, i], return_index=True, return_inverse=True)
        holder = first[inverse]
        dup = holder != rows
        later.append(rows[dup])
        earlier.append(holder[dup])
    pairs = np.unique(np.stack([np.concatenate(later), np.concatenate(earlier)], axis=1), axis=0)
    return pairs[:, 0], pairs[:, 1]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=200_000)
    p.add_argument("--native", help="directory holding the _native.abi3.so to time (default: the package's)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "lshbloom-scale"))
    args = p.parse_args(argv)
    if args.native:
        sys.path.insert(0, args.native)
        import _native  # noqa: E402
    else:
        from lshbloom_udf import _native

    params = {"dup_fraction": 0.01, "edit": 0.05, "replace": 0.30, "min_words": 350, "max_words": 450,
              "seed": 1, "max_repeated": 0.10}
    data = scale_data.generate(args.docs, params, args.cache)
    cached = os.path.join(os.path.dirname(data["docs"]), "candidate_pairs.npz")
    if not os.path.exists(cached):
        keys, _, _ = scale.mix_keys(data, DedupConfig().index_params(args.docs))
        np.savez(cached, *candidate_pairs(keys))
    with np.load(cached) as z:
        f_rows, k_rows = z["arr_0"], z["arr_1"]
    order = np.argsort(k_rows, kind="stable")
    f_rows, k_rows = f_rows[order], k_rows[order]
    import pyarrow.parquet as pq

    texts = pq.read_table(data["docs"], columns=["text"]).column(0).to_pylist()
    lefts, rights = [texts[r] for r in f_rows.tolist()], [texts[r] for r in k_rows.tolist()]
    mask = normalization_mask(DEFAULTS["normalize"])
    times = []
    for _ in range(args.repeat):
        t = time.process_time()
        out = _native.shingle_overlaps(lefts, rights, DEFAULTS["ngram"], mask, DEFAULTS["shingle"], 1)
        times.append(time.process_time() - t)
    cpu = statistics.median(times)
    print(f"{len(f_rows):,} pairs ({len(np.unique(f_rows)):,} later, {len(np.unique(k_rows)):,} earlier documents), "
          f"native {args.native or 'package'}: {cpu:.2f} CPU s median of {args.repeat} "
          f"({1e6 * cpu / len(f_rows):.1f} µs per pair); checksum {int(np.asarray(out).sum())}")


if __name__ == "__main__":
    main()
