"""Core kernels against datasketch 2.x, side by side in one process, one core.

    .venv/bin/python benchmarks/bench_core.py [--docs N] [--corpus PATH.jsonl.gz ...]

1. Signatures (256 permutations, unigrams, affine32): ``lshbloom_udf.signatures``
   and the fused ``text_band_keys`` against ``MinHash.update_batch``, docs/s,
   and ns per (shingle x permutation).
2. Driver pass (b=42, r=6, T=0.5): ``LSHBloomIndex.query_insert`` against the
   ``MinHashLSHBloom`` query-then-insert loop, on the same band keys and the
   same file format (pybloomfiltermmap3) in ``/dev/shm`` when present.
Decisions are checked equal before any figure is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time

import numpy as np
from datasketch import MinHash, MinHashLSHBloom

from lshbloom_udf import IndexParams, LSHBloomIndex, arrow_band_keys, band_keys, signatures, text_band_keys

from corpus import CORPORA, CORPUS_DIR, read_corpora

DEFAULT_CORPORA = [os.path.join(CORPUS_DIR, n) for n in CORPORA]


def datasketch_keep_first(sig, capacity: int, p_band: float, root) -> tuple[list, float]:
    """datasketch ``MinHashLSHBloom`` query-then-insert-if-new over signature rows (T=0.5, 256 perms).

    Returns ``(flags, seconds)``. The MinHash objects are rebuilt from the
    signatures beforehand, so that only query + insert is timed.
    """
    minhashes = [MinHash(num_perm=256, seed=1, hashvalues=row, scheme="affine32") for row in sig]
    ds_dir = tempfile.mkdtemp(dir=root)
    try:
        lsh = MinHashLSHBloom(threshold=0.5, num_perm=256, n=capacity, fp=p_band, save_dir=ds_dir)
        t = time.perf_counter()
        flags = []
        for m in minhashes:
            dup = lsh.query(m)
            if not dup:
                lsh.insert(m)
            flags.append(dup)
        return flags, time.perf_counter() - t
    finally:
        shutil.rmtree(ds_dir)


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def best_of(fn, repeat):
    """Median time of ``repeat`` runs (not the best: datasketch runs once, and on a
    shared machine a best-of-N would favour whichever side is repeated) and the last result."""
    from lshbloom_udf import _native

    times = []
    result = None
    for _ in range(repeat):
        # Cold word table each time: repeats over the same documents must not
        # find every word's SHA-1 already computed by the previous repeat.
        if hasattr(_native, "reset_word_table"):
            _native.reset_word_table()
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times)), result


def bench_signatures(texts, repeat, slices=8):
    """Interleaved: the documents are cut into ``slices`` slices and every slice
    is timed with datasketch and then with each of our variants, one after the
    other, so that both sides see the same machine load (this machine is
    shared). Datasketch runs once; each of ours runs ``repeat`` passes (median).
    Each variant runs on its own thread, so its table of word hashes (kept per
    thread) warms up over one pass exactly as in one long Spark task, and is
    emptied before every pass: no pass finds the words of an earlier one.
    """
    import pyarrow as pa
    from concurrent.futures import ThreadPoolExecutor

    from lshbloom_udf import _native

    n = len(texts)
    bounds = [round(i * n / slices) for i in range(slices + 1)]
    parts = [texts[a:b] for a, b in zip(bounds, bounds[1:])]
    shingle_parts = [[[s.encode("utf-8") for s in set(t.split())] for t in part] for part in parts]
    total_shingles = sum(len(s) for part in shingle_parts for s in part)
    columns = [pa.array(part, pa.large_string()) for part in parts]

    def datasketch_part(shingle_sets):
        out = []
        for shingles in shingle_sets:
            m = MinHash(num_perm=256, seed=1)
            m.update_batch(shingles)
            out.append(m.hashvalues)
        return np.array(out).reshape(len(shingle_sets), 256)

    variants = {
        "signatures": lambda i: signatures(parts[i], num_perm=256),
        "fused": lambda i: text_band_keys(parts[i], 42, 6),
        "arrow": lambda i: arrow_band_keys(columns[i], 42, 6),
    }
    pools = {name: ThreadPoolExecutor(max_workers=1) for name in variants}
    ds_time = 0.0
    ds_sig = []
    times = {name: [0.0] * repeat for name in variants}
    results = {name: [None] * slices for name in variants}
    reset = getattr(_native, "reset_word_table", lambda: None)
    try:
        for rep in range(repeat):
            for name in variants:
                pools[name].submit(reset).result()
            for i in range(slices):
                if rep == 0:
                    t = time.perf_counter()
                    ds_sig.append(datasketch_part(shingle_parts[i]))
                    ds_time += time.perf_counter() - t
                for name, fn in variants.items():
                    t = time.perf_counter()
                    results[name][i] = pools[name].submit(fn, i).result()
                    times[name][rep] += time.perf_counter() - t
    finally:
        for pool in pools.values():
            pool.shutdown()
    our_sig = np.concatenate(results["signatures"])
    if not np.array_equal(np.concatenate(ds_sig), our_sig):
        raise SystemExit("signatures differ from datasketch: not benchmarking")
    arrow_keys = np.concatenate([k for k, _ in results["arrow"]])
    if not np.array_equal(arrow_keys, band_keys(our_sig, 42, 6)):
        raise SystemExit("Arrow band keys differ from the signatures' band keys: not benchmarking")
    our_time, fused_time, arrow_time = (float(np.median(times[k])) for k in ("signatures", "fused", "arrow"))
    return {
        "docs": n,
        "shingles": total_shingles,
        "datasketch_docs_per_s": n / ds_time,
        "signatures_docs_per_s": n / our_time,
        "fused_band_keys_docs_per_s": n / fused_time,
        "signatures_speedup": ds_time / our_time,
        "fused_speedup": ds_time / fused_time,
        "arrow_fused_docs_per_s": n / arrow_time,
        "arrow_fused_speedup": ds_time / arrow_time,
        # All the work (tokenizing, SHA-1, ...) per distinct shingle x permutation.
        "ns_per_shingle_x_perm": our_time / (total_shingles * 256) * 1e9,
    }


def bench_driver_pass(texts, repeat):
    params = IndexParams.for_threshold(capacity=len(texts), threshold=0.5, num_perm=256)
    keys, has = text_band_keys(texts, **params.signature_kwargs())
    keys, n = keys[has], int(np.count_nonzero(has))
    root = "/dev/shm" if os.path.isdir("/dev/shm") else None
    b, r = params.b, params.r

    sig = signatures([t for t, h in zip(texts, has) if h], num_perm=256)
    ds_flags, ds_time = datasketch_keep_first(sig, len(texts), params.p_band, root)

    def ours():
        d = tempfile.mkdtemp(dir=root)
        try:
            with LSHBloomIndex.create(d, params) as index:
                t0 = time.perf_counter()
                flags = index.query_insert(keys)
                return time.perf_counter() - t0, flags
        finally:
            shutil.rmtree(d)

    our_time = float("inf")
    for _ in range(repeat):
        elapsed, flags = ours()
        our_time = min(our_time, elapsed)
    if flags.tolist() != ds_flags:
        raise SystemExit("driver-pass decisions differ from datasketch: not benchmarking")
    return {
        "docs": n,
        "b": b,
        "r": r,
        "duplicates": int(flags.sum()),
        "datasketch_docs_per_s": n / ds_time,
        "native_docs_per_s": n / our_time,
        "speedup": ds_time / our_time,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=6000)
    parser.add_argument("--corpus", nargs="*", default=DEFAULT_CORPORA)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    texts, names = read_corpora(args.corpus)
    texts = texts[: args.docs]
    print(f"machine: {machine()}")
    print(f"corpus:  {', '.join(names)}: {len(texts)} documents")
    sig = bench_signatures(texts, args.repeat)
    print(
        f"signatures (k=256, unigrams): datasketch {sig['datasketch_docs_per_s']:,.0f} docs/s, "
        f"ours {sig['signatures_docs_per_s']:,.0f} docs/s ({sig['signatures_speedup']:.1f}x), "
        f"fused band keys {sig['fused_band_keys_docs_per_s']:,.0f} docs/s ({sig['fused_speedup']:.1f}x), "
        f"{sig['ns_per_shingle_x_perm']:.3f} ns per shingle x permutation"
    )
    drv = bench_driver_pass(texts, args.repeat)
    print(
        f"driver pass (b={drv['b']}, r={drv['r']}): datasketch {drv['datasketch_docs_per_s']:,.0f} docs/s, "
        f"ours {drv['native_docs_per_s']:,.0f} docs/s ({drv['speedup']:.1f}x); {drv['duplicates']} duplicates, decisions equal"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "corpus": names, "signatures": sig, "driver_pass": drv}, f, indent=2)


if __name__ == "__main__":
    main()
