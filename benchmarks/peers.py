"""Peers side by side: the product's defaults, rensa and datasketch on the same documents and the same shingles.

    PYTHONPATH=. .venv/bin/python benchmarks/peers.py --docs 200000 --docs 1000000 [--corpus windows] [--json build/peers.json]

Needs ``pip install rensa datasketch`` (benchmark-only; datasketch is in the test extra).

Method:

1. **Data** (``benchmarks/scale_data.py``): N documents of 350-450 words (~2.4 kB) as one Parquet file,
   99 % distinct, plus 1 % planted near-duplicates (5 % of an earlier document's words replaced; Jaccard
   ~0.74 to their source under the defaults' shingles), with the truth beside it. The rule for the distinct
   documents: **distinct under the defaults' shingles**, i.e. no pair of them is an LSH candidate of the
   defaults' bands more often than two random documents of the language are. ``--corpus independent``
   (default): every word drawn independently from the shared corpora's word frequencies (``replace`` = 1);
   distinct pairs have Jaccard ~0.001 (max ~0.005 in 2,000 pairs), ``benchmarks/distinctness.py``.
   ``--corpus windows`` (a stress test of verification, not a corpus of distinct documents): corpus windows
   with 30 % of their words replaced. The shared corpora have only 166,705 usable 450-word starts, so at
   10^6 each window overlaps ~2,460 others at Jaccard ~0.05 (p99 0.12, max ~0.19 under the defaults'
   character 11-grams): never a duplicate (below ``verify_threshold``), but at (b, r) = (64, 4) the tail makes
   ~1.3 LSH candidate pairs per document, all of which verification must reject.
2. **The product**: ``spark-submit spark_jobs/dedup.py`` with its defaults on ``local[2]`` (2 cores), wall
   time from launch to exit, start-up included (``scale.run_job``). ``--job mix`` (default) keeps a new index
   (``--index-dir``: its files and the kept documents' records, which verification across runs reads);
   ``--job mix-no-index`` is a one-off run that keeps none, as the peers keep none.
3. **rensa** (Rust MinHash from PyPI, 1 core): a fresh Python process reads the Parquet file in batches,
   computes the product's own shingles of every document (``_native.shingles`` with the default unit, n-gram
   and normalization: the same shingles, made by the fastest shingler there is), rensa's fastest bulk path
   (``RMinHash.digest_matrix_from_token_byte_sets``, ``num_perm`` of the defaults), band keys with the
   defaults' (b, r), and keep-first over exact per-band key sets (no Bloom false positives: generous to the
   peer). Wall time from launch to exit.
4. **datasketch** (1 core): the same, with ``MinHash.update_batch``, timed on the first ``--datasketch-sample``
   documents and extrapolated linearly (it takes hours at 10^6); marked as such.

Reported: wall, cores, documents per second per core, false flags among distinct documents, recall on the
planted ones, and the product's per-core ratio to each peer. Machine and load are printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import scale  # noqa: E402
import scale_data  # noqa: E402
from bench_all import load_avg  # noqa: E402
from bench_core import machine  # noqa: E402

from lshbloom_udf import _native  # noqa: E402
from lshbloom_udf.config import DEFAULTS, DedupConfig  # noqa: E402
from lshbloom_udf.minhash import normalization_mask  # noqa: E402

BATCH = 8192


def default_shingling() -> dict:
    """The defaults' shingling, as keywords of ``_native.shingles`` (the unit only where the build has units)."""
    spec = {"ngram": DEFAULTS["ngram"], "normalize": normalization_mask(DEFAULTS["normalize"])}
    if "shingle" in DEFAULTS:
        spec["unit"] = DEFAULTS["shingle"]
    return spec


def default_bands() -> tuple[int, int, int]:
    """(num_perm, b, r) of the defaults."""
    p = DedupConfig().index_params(1)
    return p.num_perm, p.b, p.r


def batches(path: str, limit: int | None = None):
    """The ``text`` column of ``path`` in lists of up to BATCH documents (the first ``limit`` only if given)."""
    import pyarrow.parquet as pq

    left = limit
    for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH, columns=["text"]):
        texts = batch.column(0).to_pylist()
        if left is not None:
            texts, left = texts[:left], left - len(texts[:left])
        yield texts
        if left == 0:
            return


def keep_first(keys: np.ndarray, seen: list[set]) -> np.ndarray:
    """Keep-first over exact per-band key sets: a row is a duplicate when any band key was kept before."""
    flags = np.zeros(len(keys), dtype=bool)
    for i, row in enumerate(keys.tolist()):
        if any(k in s for k, s in zip(row, seen)):
            flags[i] = True
        else:
            for k, s in zip(row, seen):
                s.add(k)
    return flags


def signatures_rensa(shingles: list[list[bytes]], num_perm: int) -> np.ndarray:
    from rensa import RMinHash

    matrix = RMinHash.digest_matrix_from_token_byte_sets(shingles, num_perm=num_perm, seed=1)
    return np.asarray(matrix.to_rows(), dtype=np.uint32).reshape(len(shingles), num_perm)


def signatures_datasketch(shingles: list[list[bytes]], num_perm: int) -> np.ndarray:
    from datasketch import MinHash

    out = np.empty((len(shingles), num_perm), dtype=np.uint32)
    for i, s in enumerate(shingles):
        m = MinHash(num_perm=num_perm, seed=1)
        m.update_batch(s)
        out[i] = m.hashvalues
    return out


def run_peer(peer: str, path: str, out: str, limit: int | None) -> None:
    """One peer's whole pipeline in this process (``--peer``): flags to ``out`` (.npy)."""
    num_perm, b, r = default_bands()
    spec = default_shingling()
    signatures = {"rensa": signatures_rensa, "datasketch": signatures_datasketch}[peer]
    seen: list[set] = [set() for _ in range(b)]
    flags = []
    for texts in batches(path, limit):
        shingles = [_native.shingles(t, **spec) for t in texts]
        keys = _native.band_keys(signatures(shingles, num_perm), b, r, "mix")
        flags.append(keep_first(keys, seen))
    np.save(out, np.concatenate(flags) if flags else np.zeros(0, dtype=bool))


def timed_peer(peer: str, data: dict, workdir: str, limit: int | None) -> dict:
    """A peer in a fresh interpreter (start-up included): wall, CPU seconds of the child, flags."""
    out = os.path.join(workdir, f"{peer}.npy")
    cmd = [sys.executable, os.path.abspath(__file__), "--peer", peer, "--data", data["docs"], "--flags", out]
    if limit:
        cmd += ["--limit", str(limit)]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, check=True, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "docs": limit or data["n"], "flags": np.load(out)}


def score(flags: np.ndarray, truth_path: str) -> dict:
    with np.load(truth_path) as truth:
        planted = truth["planted"][: len(flags)]
    distinct = int((~planted).sum())
    return {"false_flags": int(flags[~planted].sum()), "false_flag_share": int(flags[~planted].sum()) / max(distinct, 1),
            "recall": float(flags[planted].mean()) if planted.any() else float("nan")}


# Share of a distinct document's words replaced (scale_data), per --corpus (see the docstring).
CORPORA = {"independent": 1.0, "windows": 0.30}


def measure(n: int, args) -> dict:
    params = {"dup_fraction": 0.01, "edit": 0.05, "replace": CORPORA[args.corpus], "min_words": args.words[0],
              "max_words": args.words[1], "seed": 1, "max_repeated": 0.10}
    data = scale_data.generate(n, params, args.cache)
    workdir = tempfile.mkdtemp(prefix=f"peers-{n}-", dir=args.cache)
    res = {"n": n, "corpus": args.corpus, "job": args.job, "mean_bytes": data["mean_bytes"], "load_before": load_avg()}
    job_args = SimpleNamespace(driver_memory="8g", conf=[], index_root=args.index_root, job_timeout=7200,
                               stall_timeout=900, keep_outputs=False)
    job = scale.run_job(job_args, args.job, data, workdir)
    if "error" in job:
        raise SystemExit(f"the product's job failed: {job['error']}")
    res["product"] = {"wall_s": job["seconds"], "cpu_s": job.get("tree", {}).get("total_cpu_s"), "cores": 2, "docs": n,
                      "false_flags": job["false_flags"], "false_flag_share": job["false_flag_share"],
                      "recall": job["recall"], "stages": job["stages"]}
    for peer, limit in (("rensa", None), ("datasketch", min(args.datasketch_sample, n))):
        got = timed_peer(peer, data, workdir, limit)
        res[peer] = {"wall_s": got["wall_s"], "cpu_s": got["cpu_s"], "cores": 1, "docs": got["docs"],
                     **score(got["flags"], data["truth"])}
        if got["docs"] < n:  # extrapolated: the per-document cost of the sample times N
            res[peer]["extrapolated_wall_s"] = got["wall_s"] * n / got["docs"]
    res["load_after"] = load_avg()
    return res


def per_core(part: dict, n: int) -> float:
    wall = part.get("extrapolated_wall_s", part["wall_s"])
    return n / wall / part["cores"]


def report(res: dict) -> None:
    n = res["n"]
    print(f"\n{n:,} documents, corpus {res['corpus']}, product job {res.get('job', 'mix')} (mean {res['mean_bytes']:.0f} bytes); load {res['load_before']} -> {res['load_after']}",
          flush=True)
    print(f"{'system':<12} {'cores':>5} {'wall s':>9} {'cpu s':>9} {'docs/s/core':>12} {'false flags':>12} {'recall':>8}  vs product")
    product = per_core(res["product"], n)
    for name in ("product", "rensa", "datasketch"):
        part = res[name]
        wall = part.get("extrapolated_wall_s", part["wall_s"])
        note = " (extrapolated from %d docs)" % part["docs"] if "extrapolated_wall_s" in part else ""
        ratio = "" if name == "product" else f"{product / per_core(part, n):.2f}x"
        cpu = part.get("cpu_s")
        cpu = "" if cpu is None else f"{cpu * n / part['docs']:>9.1f}"
        print(f"{name:<12} {part['cores']:>5} {wall:>9.1f} {cpu:>9} {per_core(part, n):>12,.0f} {part['false_flags']:>12,} "
              f"{part['recall']:>8.4f}  {ratio}{note}", flush=True)
    stages = res["product"].get("stages", {})
    print("product stages (s): " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(stages.items())), flush=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, action="append", help="documents (repeatable; default 200000)")
    p.add_argument("--corpus", choices=tuple(CORPORA), default="independent",
                   help="distinct documents: independent words (default) or overlapping corpus windows (a stress test)")
    p.add_argument("--words", type=int, nargs=2, default=(350, 450), metavar=("MIN", "MAX"))
    p.add_argument("--datasketch-sample", type=int, default=5000, help="documents datasketch is timed on")
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "lshbloom-scale"))
    p.add_argument("--index-root", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--job", choices=("mix", "mix-no-index"), default="mix",
                   help="the product's job (benchmarks/scale.py): the defaults into a kept index (mix, default), or a "
                        "one-off run that keeps none, as the peers keep none (mix-no-index)")
    p.add_argument("--peer", choices=("rensa", "datasketch"), help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--flags", help=argparse.SUPPRESS)
    p.add_argument("--limit", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.peer:
        return run_peer(args.peer, args.data, args.flags, args.limit)
    num_perm, b, r = default_bands()
    print(f"machine: {machine()}; defaults: {default_shingling()}, num_perm {num_perm}, (b, r) = ({b}, {r})")
    results = []
    for n in args.docs or [200_000]:
        # Reported and saved as each size ends: a long run stopped later keeps the sizes it finished.
        results.append(measure(n, args))
        report(results[-1])
        if args.json:
            os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
            with open(args.json, "w") as f:
                json.dump({"machine": machine(), "results": results}, f, indent=2, default=str)


if __name__ == "__main__":
    main()
