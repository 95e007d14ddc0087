"""Cuckoo filters against blocked Bloom filters: bytes against classic Bloom bits, and driver-pass keys/s.

    .venv/bin/python benchmarks/filters.py [--docs N] [--bands B] [--repeat R]

1. Bytes. ``lshbloom plan --docs 1e9`` (the job's defaults: 64 bands, growth) for
   blocked, cuckoo and pybloomfiltermmap3, each against the classic formula
   ``b·(−n ln p / ln² 2)`` bits at the plan's per-band rate and at p_effective's
   (a fixed index); the same at ``p_effective = 1e-10``.
2. The 1e-10 filters, filled: a cuckoo filter sized for 10^6 keys at that
   per-band rate (too low to measure: ~1e-12), filled to capacity: its load,
   slots per bucket, fingerprint bits and the closed-form rate at that fill,
   with the false positives of 10^7 queries (expected: 0).
3. Driver pass. The same (N, B) band-key matrix (random keys, a quarter of the
   rows sharing one band key with an earlier row) through
   ``BlockedBands.query_insert`` and ``CuckooBands.query_insert``, each on
   fresh filters sized for N documents at the defaults' per-band rate, in
   ``/dev/shm`` when present; the decisions are checked equal first (Bloom
   false positives apart: none expected at this rate), then timed, R times
   alternately, best of R. keys/s = N·B / seconds.
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

from lshbloom_udf import _native
from lshbloom_udf.__main__ import plan_defaults
from lshbloom_udf.index import backend
from lshbloom_udf.sizing import plan

KEY_RANGE = (1 << 61) - 1


def plan_bytes(docs: int, p_effective: float) -> dict:
    """``lshbloom plan`` with the job's defaults (growth included) for each backend, against classic Bloom bits
    at the plan's per-band rate and at p_effective's (a fixed index's)."""
    settings = {k: v for k, v in plan_defaults().items() if k in ("threshold", "num_perm", "ngram", "bands", "growth")}
    out = {}
    for bloom in ("blocked", "cuckoo", "pybloomfiltermmap3"):
        p = plan(docs, p_effective=p_effective, bloom=bloom, **settings)
        fixed_p = -np.expm1(np.log1p(-p_effective) / p.b)
        classic_fixed = p.b * docs * -np.log(fixed_p) / np.log(2) ** 2 / 8
        out[bloom] = {"bytes": p.index_bytes, "vs_classic": p.index_bytes / p.formula_index_bytes,
                      "vs_classic_at_p_effective": p.index_bytes / classic_fixed, "p_band": p.p_band, "b": p.b}
    out["classic_formula_bytes"] = p.formula_index_bytes
    out["new_index_default"] = plan_defaults()["bloom"]
    return out


def fill_stats(p_band: float, capacity: int = 10**6, queries: int = 10**7) -> dict:
    fp, num_buckets, fp_bits, stored = _native.cuckoo_measure_fp(capacity, p_band, queries, 3)
    slots = 512 // fp_bits
    classic = -capacity * np.log(p_band) / np.log(2) ** 2
    return {"p_band": p_band, "capacity": capacity, "fp_bits": fp_bits, "slots": slots, "num_buckets": num_buckets,
            "load": stored / (num_buckets * slots), "bits_per_key": num_buckets * 512 / capacity,
            "vs_classic": num_buckets * 512 / classic,
            "analytic_rate": _native.cuckoo_fp_rate(stored, num_buckets, fp_bits),
            "queries": queries, "false_positives": fp}


def band_matrix(n: int, b: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, KEY_RANGE, (n, b), dtype=np.uint64)
    dup = np.flatnonzero(rng.random(n) < 0.25)
    dup = dup[dup > 0]
    src = (rng.random(dup.size) * dup).astype(np.int64)
    band = rng.integers(0, b, dup.size)
    keys[dup, band] = keys[src, band]
    return keys


def run_pass(bloom: str, keys: np.ndarray, p_band: float, root: str) -> tuple[np.ndarray, float]:
    kind = backend(bloom)
    n, b = keys.shape
    directory = tempfile.mkdtemp(prefix=f"bench-{bloom}-", dir=root)
    try:
        paths = [os.path.join(directory, kind.file_name(i)) for i in range(b)]
        for i, path in enumerate(paths):
            kind.create_file(path, n, p_band, i)
        with kind.open_bands(paths, True) as bands:
            start = time.perf_counter()
            flags = np.concatenate([bands.query_insert(keys[s:s + 8192]) for s in range(0, n, 8192)])
            seconds = time.perf_counter() - start
        return flags, seconds
    finally:
        shutil.rmtree(directory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--bands", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    root = "/dev/shm" if os.path.isdir("/dev/shm") else None
    report = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load "
                         f"{os.getloadavg()[0]:.2f}",
              "plan_1e9_defaults": plan_bytes(10**9, 1e-5), "plan_1e9_p_eff_1e-10": plan_bytes(10**9, 1e-10)}
    report["fill_at_p_eff_1e-10"] = fill_stats(report["plan_1e9_p_eff_1e-10"]["cuckoo"]["p_band"])
    p_band = -np.expm1(np.log1p(-1e-5) / args.bands)
    keys = band_matrix(args.docs, args.bands)
    best = {"blocked": float("inf"), "cuckoo": float("inf")}
    reference = None
    for _ in range(args.repeat):
        for bloom in best:
            flags, seconds = run_pass(bloom, keys, p_band, root)
            reference = flags if reference is None else reference
            assert (flags == reference).all(), f"{bloom} decided otherwise"
            best[bloom] = min(best[bloom], seconds)
    report["driver_pass"] = {
        "docs": args.docs, "bands": args.bands, "p_band": p_band, "duplicates": int(reference.sum()),
        **{f"{k}_keys_per_s": args.docs * args.bands / v for k, v in best.items()},
        "cuckoo_over_blocked": best["blocked"] / best["cuckoo"],
    }
    report["load_after"] = os.getloadavg()[0]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
