"""The sharded pass against the driver pass at scale: seconds, peak driver memory, peak task memory, per-key costs.

    PYTHONPATH=. .venv/bin/python benchmarks/sharded.py --docs 1000000 [--json build/sharded.json]

Method: the data set of ``benchmarks/scale.py`` (``scale_data.generate``: the
same cached Parquet file, planted near-duplicates and truth). Two
``spark-submit`` runs of this checkout's job on ``local[2]``, product defaults
with band key mix, each into a fresh kept ``--index-dir`` under
``--index-root``: ``driver-all`` (``--insert all``: the driver pass under the
rule the sharded pass decides) and ``sharded`` (``--pass sharded``, default
``--shard-memory``). Their flags must be the same up to Bloom false positives
(counted). Wall time from launch to exit; the process tree is polled (every
0.5 s, ``scale.TreePeaks``): peak RSS of the Python driver (it maps the whole
index in the driver pass), of the JVM (driver and executor in local mode), of
all Python workers together and of the largest single Python worker (one
task: in the sharded pass it holds one shard's filter at a time).

Per-key costs for ``plan --pass sharded`` (in this process, one core): the
native test-and-set (``BlockedFile.add``) of 10^7 random keys into a filter of
``--shard-memory`` bytes, and the explode step (``sharded.exploder``) per key;
from the jobs, the decision stage's seconds x 2 cores / (documents x b): the
all-in cost per key of the sharded pass (explode, shuffle, sort, test-and-set,
index version written) and of the keys stage per document.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import scale  # noqa: E402
import scale_data  # noqa: E402
from bench_all import load_avg  # noqa: E402
from bench_core import machine  # noqa: E402

from lshbloom_udf.config import DEFAULTS  # noqa: E402
from lshbloom_udf.index import backend  # noqa: E402

JOBS = {
    "driver-all": ("defaults", ["--band-key", "mix", "--insert", "all"]),
    "sharded": ("defaults", ["--band-key", "mix", "--pass", "sharded"]),
}


class Peaks(scale.TreePeaks):
    """TreePeaks plus the largest single Python worker (one task)."""

    def __init__(self, pid: int, interval: float = 0.5):
        super().__init__(pid, interval)
        self.peak["py_worker_max_rss"] = 0

    def sample(self) -> None:
        import psutil

        super().sample()
        try:
            root = psutil.Process(self.pid)
            procs = root.children(recursive=True)
        except psutil.Error:
            return
        for p in procs:
            try:
                if self.kind(p) == "py_workers":
                    self.peak["py_worker_max_rss"] = max(self.peak["py_worker_max_rss"], p.memory_info().rss)
            except psutil.Error:
                continue


def native_add_ns(shard_memory: int, n: int = 10_000_000) -> float:
    """ns per key of the native test-and-set into one shard-sized filter (random keys, one core)."""
    from lshbloom_udf.index.params import per_band_p

    kind = backend("blocked")
    p_band = per_band_p(DEFAULTS["p_effective"], 85)
    capacity = 1
    while kind.file_bytes(capacity * 2, p_band) <= shard_memory:
        capacity *= 2
    keys = np.random.default_rng(1).integers(0, 1 << 61, n, dtype=np.uint64)
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        path = os.path.join(d, "shard.bbf")
        kind.create_file(path, capacity, p_band, 0)
        f = kind.file_class.open(path, True)
        t = time.perf_counter()
        for lo in range(0, n, 1 << 20):
            f.add(keys[lo : lo + (1 << 20)])
        seconds = time.perf_counter() - t
        f.close()
    return seconds / n * 1e9


def explode_ns(b: int = 85, rows: int = 20_000) -> float:
    """ns per key of the explode step (rows of b keys to (shard, row, key) triples), one core."""
    import pyarrow as pa

    from lshbloom_udf.spark.passes.sharded.shuffle import exploder

    keys = np.random.default_rng(2).integers(0, 1 << 61, (rows, b), dtype=np.uint64)
    batch = pa.RecordBatch.from_arrays(
        [pa.array(np.arange(rows, dtype=np.int64)),
         pa.array([keys[i].tobytes() for i in range(rows)], pa.binary()),
         pa.array(np.ones(rows, dtype=bool))], names=["row", "keys", "active"])
    fn = exploder(b, 64)
    t = time.perf_counter()
    for _ in range(5):
        for _out in fn([batch]):
            pass
    return (time.perf_counter() - t) / (5 * rows * b) * 1e9


def compare_flags(jobs: dict) -> dict:
    a, b = jobs.get("driver-all", {}).get("flags"), jobs.get("sharded", {}).get("flags")
    if a is None or b is None:
        return {}
    return {"only_driver": int(np.count_nonzero(a & ~b)), "only_sharded": int(np.count_nonzero(b & ~a)),
            "both": int(np.count_nonzero(a & b))}


def per_key_costs(res: dict) -> dict:
    """All-in costs per key / per document on this machine's 2 cores, from the jobs' stage seconds.

    The driver-pass job times its keys stage (one Spark job, overlapped with the
    pass); the sharded job computes the keys inside its decision stage, so its
    decision cost per key is that stage less the driver-pass job's keys.
    """
    jobs = {j: r for j, r in res["jobs"].items() if "stages" in r}
    keys_s = next((r["stages"]["keys"] for r in jobs.values() if "keys" in r["stages"]), None)
    out = {}
    for job, r in jobs.items():
        n, b, st = res["data"]["n"], r["params"]["b"], r["stages"]
        keys = st.get("keys", keys_s)
        decide = st.get("sharded_pass", st.get("driver_pass")) - (keys if "keys" not in st and keys is not None else 0)
        out[job] = {"decide_ns_per_key_core": decide * 2 / (n * b) * 1e9,
                    "keys_ns_per_doc_core": keys * 2 / n * 1e9 if keys is not None else None}
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=1_000_000)
    p.add_argument("--jobs", default="driver-all,sharded")
    p.add_argument("--json")
    args, rest = p.parse_known_args(argv)
    sargs = scale.parse_args(["--docs", str(args.docs), "--jobs", "", *rest])
    scale.JOBS.update(JOBS)
    res = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "load_before": load_avg(),
           "jobs": {}}
    params = {"dup_fraction": sargs.dup_fraction, "edit": sargs.edit, "replace": sargs.replace,
              "min_words": sargs.words[0], "max_words": sargs.words[1], "seed": sargs.seed,
              "max_repeated": sargs.max_repeated}
    res["data"] = data = scale_data.generate(args.docs, params, sargs.cache)
    workdir = tempfile.mkdtemp(prefix=f"sharded-{args.docs}-", dir=sargs.cache)
    print(f"machine: {res['machine']}; load {res['load_before']}; {data['n']:,} documents; logs in {workdir}", flush=True)
    scale.TreePeaks = Peaks  # run_job polls with it
    for job in args.jobs.split(","):
        print(f"  running {job} ...", flush=True)
        res["jobs"][job] = scale.run_job(sargs, job, data, workdir)
        r = res["jobs"][job]
        if "error" in r:
            print(r["error"], flush=True)
            continue
        t = r["tree"]
        print(f"  {job}: {r['seconds']:.1f} s; stages {json.dumps({k: round(v, 1) for k, v in r['stages'].items()})}; "
              f"peak RSS MB: python driver {t['py_driver_rss'] / 2**20:.0f}, JVM {t['jvm_rss'] / 2**20:.0f}, "
              f"python workers {t['py_workers_rss'] / 2**20:.0f} (largest {t['py_worker_max_rss'] / 2**20:.0f}); "
              f"duplicates {r['duplicates']:,}; index {r['index_bytes'] / 2**20:.0f} MB; load "
              f"{r['load_before']} -> {r['load_after']}", flush=True)
    res["flags"] = compare_flags(res["jobs"])
    res["costs"] = {"native_add_ns_per_key": native_add_ns(DEFAULTS["shard_memory"]),
                    "explode_ns_per_key": explode_ns(), **per_key_costs(res)}
    res["load_after"] = load_avg()
    print("flags:", json.dumps(res["flags"]))
    print("costs:", json.dumps(res["costs"], indent=1))
    for r in res["jobs"].values():
        r.pop("flags", None)
    scale.write_json(args.json, res)


if __name__ == "__main__":
    main()
