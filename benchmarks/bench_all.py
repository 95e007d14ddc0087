"""The whole benchmark suite in one run, every figure a ratio against datasketch 2.x
measured side by side on the same documents (``make bench``).

    .venv/bin/python benchmarks/bench_all.py [--docs 20000] [--sig-docs 6000] [--json out.json]
                                             [--skip-spark] [--skip-minhashlsh]

1. Signatures (256 permutations, unigrams, affine32, one core): ours (Arrow
   buffers, fused band keys) vs ``MinHash.update_batch``; ns per (shingle x
   permutation) against the AVX2 limit.
2. Driver pass (b = 42): native ``query_insert`` over pybloomfiltermmap3 files
   and over blocked filters vs datasketch ``MinHashLSHBloom`` query+insert,
   same band keys, files in /dev/shm.
3. Throughput and size (issue 4 item 6), ``--docs`` documents from
   ``benchmarks/corpus.py`` (the shared corpora cycled with edits), read from one
   Parquet file by everybody: datasketch MinHashLSH, datasketch MinHashLSHBloom,
   this project's API (one process, compatible and blocked), and the
   ``spark-submit`` job on ``local[2]`` (wall time, JVM start-up included).
   docs/s, ratio to the single-process datasketch MinHash + MinHashLSHBloom
   pipeline, index bytes. Decisions are compared where they must be equal.
   Beside the job, the floor under any Spark job here
   (``benchmarks/spark_floor.py``): spark-submit start-up alone, and start-up +
   reading and writing the documents; their ratios are the ceiling of the job's.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import corpus  # noqa: E402
from bench_core import bench_signatures, datasketch_keep_first, machine  # noqa: E402
from datasketch import MinHash, MinHashLSH, MinHashLSHBloom  # noqa: E402

from lshbloom_udf import IndexParams, LSHBloomIndex, _native, arrow_band_keys, signatures, text_band_keys  # noqa: E402
from lshbloom_udf.index import BLOOMS  # noqa: E402

SHM = "/dev/shm" if os.path.isdir("/dev/shm") else None
CACHE = os.path.join(tempfile.gettempdir(), "lshbloom-bench")


def load_avg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


def cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return ", ".join(x for x in ("avx2", "avx512f", "sha_ni") if x in flags)
    except OSError:
        pass
    return "n/a"


def cpu_mhz() -> float:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    return float(line.split(":")[1])
    except OSError:
        pass
    return float("nan")


# --------------------------------------------------------------------------
# 2. driver pass


def bench_driver(texts, repeat):
    params = IndexParams.for_threshold(capacity=len(texts), threshold=0.5, num_perm=256)
    keys, has = text_band_keys(texts, **params.signature_kwargs())
    keys, n = keys[has], int(np.count_nonzero(has))

    def run(bloom):
        # Median of `repeat` runs (datasketch runs once; see bench_core.best_of).
        times, flags, size = [], None, 0
        for _ in range(repeat):
            d = tempfile.mkdtemp(dir=SHM)
            try:
                with LSHBloomIndex.create(os.path.join(d, "ix"), params, bloom=bloom) as index:
                    t0 = time.perf_counter()
                    flags = index.query_insert(keys)
                    times.append(time.perf_counter() - t0)
                    size = index.stats()["bytes_on_disk"]
            finally:
                shutil.rmtree(d)
        return float(np.median(times)), flags, size

    # Ours before and after datasketch (mean of the two medians): this machine
    # is shared, and datasketch's single pass takes seconds.
    before = {bloom: run(bloom) for bloom in BLOOMS}
    sig = signatures([t for t, h in zip(texts, has) if h], num_perm=256)
    ds_flags, ds_time = datasketch_keep_first(sig, len(texts), params.p_band, SHM)

    after = {bloom: run(bloom) for bloom in BLOOMS}

    def mean_of(bloom):
        t0, flags, size = before[bloom]
        t1, _, _ = after[bloom]
        return (t0 + t1) / 2, flags, size

    compat_time, compat_flags, compat_size = mean_of("pybloomfiltermmap3")
    blocked_time, blocked_flags, blocked_size = mean_of("blocked")
    if compat_flags.tolist() != ds_flags:
        raise SystemExit("driver-pass decisions differ from datasketch: not benchmarking")
    return {
        "docs": n,
        "b": params.b,
        "r": params.r,
        "p_band": params.p_band,
        "duplicates": int(compat_flags.sum()),
        "blocked_decisions_differ": int(np.count_nonzero(blocked_flags != compat_flags)),
        "datasketch_docs_per_s": n / ds_time,
        "compat_docs_per_s": n / compat_time,
        "blocked_docs_per_s": n / blocked_time,
        "compat_speedup": ds_time / compat_time,
        "blocked_speedup": ds_time / blocked_time,
        "compat_bytes": compat_size,
        "blocked_bytes": blocked_size,
    }


# --------------------------------------------------------------------------
# 3. throughput and size


def read_texts(path):
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=["text"]).column("text")


def datasketch_minhashes(path):
    t = time.perf_counter()
    texts = read_texts(path).to_pylist()
    out = []
    for text in texts:
        m = MinHash(num_perm=256, seed=1)
        m.update_batch([s.encode("utf-8") for s in set((text or "").split())])
        out.append((m, bool((text or "").split())))
    return out, time.perf_counter() - t


def datasketch_lshbloom(minhashes, n, p_band):
    d = tempfile.mkdtemp(dir=SHM)
    try:
        t = time.perf_counter()
        lsh = MinHashLSHBloom(threshold=0.5, num_perm=256, n=n, fp=p_band, save_dir=d)
        flags = []
        for m, active in minhashes:
            if not active:
                flags.append(False)
                continue
            dup = lsh.query(m)
            if not dup:
                lsh.insert(m)
            flags.append(dup)
        elapsed = time.perf_counter() - t
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        del lsh
    finally:
        shutil.rmtree(d)
    return np.array(flags), elapsed, size


def datasketch_minhashlsh(minhashes):
    t = time.perf_counter()
    lsh = MinHashLSH(threshold=0.5, num_perm=256)
    flags = []
    for i, (m, active) in enumerate(minhashes):
        if not active:
            flags.append(False)
            continue
        dup = bool(lsh.query(m))
        if not dup:
            lsh.insert(i, m)
        flags.append(dup)
    elapsed = time.perf_counter() - t
    size = len(pickle.dumps(lsh, protocol=pickle.HIGHEST_PROTOCOL))
    return np.array(flags), elapsed, size


def ours_api(path, n, bloom):
    d = tempfile.mkdtemp(dir=SHM)
    _native.reset_word_table()  # cold: the kernel benchmarks saw these words on this thread
    try:
        t = time.perf_counter()
        params = IndexParams.for_threshold(capacity=n, threshold=0.5, num_perm=256)
        keys, active = arrow_band_keys(read_texts(path), **params.signature_kwargs())
        with LSHBloomIndex.create(os.path.join(d, "ix"), params, bloom=bloom) as index:
            flags = index.query_insert(keys, active)
            size = index.stats()["bytes_on_disk"]
        elapsed = time.perf_counter() - t
    finally:
        shutil.rmtree(d)
    return flags, elapsed, size


def spark_submit(script, args, tree=None):
    """``spark-submit`` of ``script`` with the benchmark's options; (seconds, process). Start-up included."""
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = os.path.abspath(tree) + os.pathsep + env.get("PYTHONPATH", "")
    py = sys.executable
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = py
    env["PYSPARK_DRIVER_PYTHON"] = py
    cmd = [
        os.path.join(os.path.dirname(py), "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
        "--driver-memory", "2g", script, *args,
    ]
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    return time.perf_counter() - t, proc


def failure(proc):
    tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
    return {"error": f"spark-submit exited {proc.returncode}:\n{tail}"}


def spark_floor(path, n, mode):
    """The floor under any Spark job here (benchmarks/spark_floor.py): start-up only, or start-up + read + write."""
    out = tempfile.mkdtemp(prefix="lshbloom-bench-floor-")
    try:
        script = os.path.join(ROOT, "benchmarks", "spark_floor.py")
        elapsed, proc = spark_submit(script, [mode, path, os.path.join(out, "out")])
        if proc.returncode != 0:
            return failure(proc)
        return {"seconds": elapsed, "docs_per_s": n / elapsed}
    finally:
        shutil.rmtree(out, ignore_errors=True)


def spark_job(path, n, extra=(), tree=None):
    """One ``spark-submit`` of ``dedup.py`` (of checkout ``tree``, default this one), wall time included start-up."""
    out = tempfile.mkdtemp(prefix="lshbloom-bench-out-")
    root = os.path.abspath(tree) if tree else ROOT
    args = [
        "--input", path, "--input-format", "parquet", "--output", os.path.join(out, "out"),
        "--threshold", "0.5", "--num-perm", "256", "--ngram", "1", "--normalize", "none",
        "--quiet", "--summary-path", os.path.join(out, "summary.json"), *extra,
    ]
    try:
        elapsed, proc = spark_submit(os.path.join(root, "spark_jobs", "dedup.py"), args, tree)
        if proc.returncode != 0:
            return failure(proc)
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        import pyarrow.parquet as pq

        flags = pq.read_table(os.path.join(out, "out"), columns=["id", "is_duplicate"]).to_pandas().sort_values("id")
        return {
            "seconds": elapsed,
            "docs_per_s": n / elapsed,
            "stages": summary.get("seconds", {}),
            "duplicates": int(summary["duplicates"]),
            "bytes": summary.get("index", {}).get("bytes_on_disk"),
            "flags": flags["is_duplicate"].to_numpy(),
        }
    finally:
        shutil.rmtree(out, ignore_errors=True)


def bench_throughput(n, skip_spark, skip_minhashlsh, spark_extra, before_tree=None):
    path, desc = corpus.cached(n, "parquet", CACHE)
    res = {"docs": n, "corpus": desc}
    minhashes, t_mh = datasketch_minhashes(path)
    p_band = IndexParams.for_threshold(capacity=n, threshold=0.5, num_perm=256).p_band
    ds_flags, t_bloom, ds_bytes = datasketch_lshbloom(minhashes, n, p_band)
    base = t_mh + t_bloom
    res["datasketch_minhash_s"] = t_mh
    res["datasketch_lshbloom"] = {"seconds": base, "docs_per_s": n / base, "bytes": ds_bytes, "duplicates": int(ds_flags.sum())}
    if not skip_minhashlsh:
        lsh_flags, t_lsh, lsh_bytes = datasketch_minhashlsh(minhashes)
        res["datasketch_minhashlsh"] = {
            "seconds": t_mh + t_lsh, "docs_per_s": n / (t_mh + t_lsh), "bytes": lsh_bytes, "duplicates": int(lsh_flags.sum()),
        }
    del minhashes
    for name, bloom in (("api_compat", "pybloomfiltermmap3"), ("api_blocked", "blocked")):
        flags, t, size = ours_api(path, n, bloom)
        res[name] = {"seconds": t, "docs_per_s": n / t, "bytes": size, "duplicates": int(flags.sum()),
                     "decisions_differ_from_datasketch": int(np.count_nonzero(flags != ds_flags))}
    if res["api_compat"]["decisions_differ_from_datasketch"]:
        raise SystemExit("API decisions differ from datasketch MinHashLSHBloom: not benchmarking")
    if not skip_spark:
        runs = [("spark_job", (), None)] + [(name, extra, None) for name, extra in spark_extra]
        if before_tree:
            runs.append(("spark_job_before", (), before_tree))
        for name, extra, tree in runs:
            job = spark_job(path, n, extra, tree)
            if "flags" in job:
                job["decisions_differ_from_datasketch"] = int(np.count_nonzero(job.pop("flags") != ds_flags))
            res[name] = job
        for mode in ("start", "copy"):
            res[f"spark_floor_{mode}"] = spark_floor(path, n, mode)
    for key in list(res):
        v = res[key]
        if isinstance(v, dict) and "seconds" in v:
            v["ratio_vs_datasketch_lshbloom"] = base / v["seconds"]
    return res


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=20_000, help="documents for the throughput/size runs")
    parser.add_argument("--sig-docs", type=int, default=6_000, help="documents for the kernel benchmarks")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("--skip-minhashlsh", action="store_true")
    parser.add_argument("--spark-blocked", action="store_true", help="also run the job with --bloom blocked")
    parser.add_argument("--spark-before", metavar="CHECKOUT",
                        help="also run the job of an older checkout (with its built module), for a before/after profile")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()

    info = {
        "machine": machine(),
        "cpu_flags": cpu_flags(),
        "cpu_mhz": cpu_mhz(),
        "simd_backend": _native.simd_backend(),
        "load_before": load_avg(),
        "python": platform.python_version(),
    }
    print(f"machine: {info['machine']}; {info['cpu_flags']}; kernel backend {info['simd_backend']}; load {info['load_before']}")
    texts, _ = corpus.documents(args.sig_docs)
    print(f"kernels: {args.sig_docs} documents ({corpus.__name__}.documents)")
    sig = bench_signatures(texts, args.repeat)
    # AVX2 limit of the affine32 update: 3 vector ops (vpmulld, vpaddd, vpminud)
    # per 8 (hash x permutation) cells; at best 4 vector ops issue per cycle, so
    # >= 3/32 cycle per cell.
    ghz = info["cpu_mhz"] / 1000
    sig["avx2_limit_ns_per_cell"] = 3 / 32 / ghz if ghz == ghz else None
    print(
        f"signatures (k=256, unigrams, one core): datasketch {sig['datasketch_docs_per_s']:,.0f} docs/s; "
        f"ours {sig['signatures_docs_per_s']:,.0f} docs/s ({sig['signatures_speedup']:.1f}x), "
        f"fused band keys {sig['fused_band_keys_docs_per_s']:,.0f} docs/s ({sig['fused_speedup']:.1f}x), "
        f"fused from Arrow {sig['arrow_fused_docs_per_s']:,.0f} docs/s ({sig['arrow_fused_speedup']:.1f}x); "
        f"{sig['ns_per_shingle_x_perm']:.3f} ns per distinct shingle x permutation, all work included "
        f"(AVX2 limit of the update alone {sig['avx2_limit_ns_per_cell']:.3f} ns at {ghz:.2f} GHz)"
    )
    drv = bench_driver(texts, args.repeat)
    print(
        f"driver pass (b={drv['b']}, r={drv['r']}, p_band {drv['p_band']:.3g}): datasketch {drv['datasketch_docs_per_s']:,.0f} docs/s; "
        f"native pybloomfiltermmap3 {drv['compat_docs_per_s']:,.0f} docs/s ({drv['compat_speedup']:.1f}x, decisions equal); "
        f"blocked {drv['blocked_docs_per_s']:,.0f} docs/s ({drv['blocked_speedup']:.1f}x, {drv['blocked_decisions_differ']} decisions differ); "
        f"index {drv['compat_bytes']:,} vs {drv['blocked_bytes']:,} bytes"
    )
    extra = [("spark_job_blocked", ("--bloom", "blocked"))] if args.spark_blocked else []
    thr = bench_throughput(args.docs, args.skip_spark, args.skip_minhashlsh, extra, args.spark_before)
    print(f"throughput and size: {thr['corpus']}")
    print(f"  {'pipeline':34s} {'seconds':>8s} {'docs/s':>9s} {'vs ds LSHBloom':>14s} {'index bytes':>13s} {'dups':>6s}")
    labels = {
        "datasketch_minhashlsh": "datasketch MinHash + MinHashLSH",
        "datasketch_lshbloom": "datasketch MinHash + MinHashLSHBloom",
        "api_compat": "lshbloom API (pybloomfiltermmap3)",
        "api_blocked": "lshbloom API (blocked)",
        "spark_job": "spark-submit local[2] (compatible)",
        "spark_job_blocked": "spark-submit local[2] (blocked)",
        "spark_job_before": "spark-submit, --spark-before checkout",
        # The ceiling of any Spark job's ratio on this machine: its start-up, and start-up + read + write.
        "spark_floor_start": "floor: spark-submit start-up only",
        "spark_floor_copy": "floor: start-up + read + write",
    }
    for key, label in labels.items():
        v = thr.get(key)
        if v is None:
            continue
        if "error" in v:
            print(f"  {label:34s} failed: {v['error']}")
            continue
        size = f"{v['bytes']:,}" if v.get("bytes") is not None else "-"
        dups = f"{v['duplicates']:d}" if "duplicates" in v else "-"
        print(f"  {label:34s} {v['seconds']:8.2f} {v['docs_per_s']:9,.0f} {v['ratio_vs_datasketch_lshbloom']:13.1f}x {size:>13s} {dups:>6s}")
    for key in ("spark_job", "spark_job_blocked", "spark_job_before"):
        if key in thr and "stages" in thr[key]:
            print(f"  {key} stages (s): {thr[key]['stages']}")
    info["load_after"] = load_avg()
    print(f"load average before {info['load_before']}, after {info['load_after']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**info, "signatures": sig, "driver_pass": drv, "throughput": thr}, f, indent=2, default=str)


if __name__ == "__main__":
    main()
