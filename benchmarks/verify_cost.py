"""The cost of ``--verify`` (issue 14) beside the unverified job and MLlib's ``MinHashLSH.approxSimilarityJoin``.

    PYTHONPATH=. .venv/bin/python benchmarks/verify_cost.py --docs 1000000 --dup-fractions 0.1,0.5 \\
        [--mllib-timeout 1800] [--json build/verify_cost.json]

Data: ``benchmarks/scale_data.py`` (as ``benchmarks/scale.py``: corpus windows,
40-80 words; a share ``--dup-fractions`` of the documents are planted
near-duplicates with 5 % of their words replaced). Jobs, each one
``spark-submit`` on ``local[2]`` (start-up included, as in scale.py):

- ``mix``: the product's defaults; ``mix-verify``: the same with ``--verify``;
  ``mix-verify-containment``: with ``--containment-threshold 0.8`` too;
  ``permissive-verify`` (``--threshold 0.3 --num-perm 128 --verify-threshold 0.45``)
  and ``permissive-verify-containment``: the permissive candidate stage, without
  and with containment (not run unless named in ``--jobs``);
- ``mllib``: ``benchmarks/mllib_join.py``: the issue's MLlib set-up (lowercased
  ``\\W+`` unigrams, binary ``HashingTF`` 2^18, ``MinHashLSH`` 5 hash tables,
  ``approxSimilarityJoin`` of the data with itself at distance 0.5, a document is
  a duplicate when it has a pair with an earlier one), killed after
  ``--mllib-timeout`` seconds (it grows with the square of the candidates).

Shuffle bytes: the sum of ``Shuffle Bytes Written`` over the tasks of the
job's Spark event log. Scores (false flags among distinct documents, recall
on planted ones) as scale.py's.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import scale  # noqa: E402
import scale_data  # noqa: E402
from bench_all import load_avg  # noqa: E402
from bench_core import machine  # noqa: E402

scale.JOBS["mix-verify"] = ("defaults", ["--band-key", "mix", "--verify"])
# verification by Jaccard or containment (issue 20): the same candidates, J and C from one intersection
scale.JOBS["mix-verify-containment"] = ("defaults", ["--band-key", "mix", "--verify", "--containment-threshold", "0.8"])
# permissive candidates (bands for T = 0.3, 128 permutations) verified at 0.45, without and with containment
scale.JOBS["permissive-verify"] = ("defaults", ["--band-key", "mix", "--threshold", "0.3", "--num-perm", "128",
                                                "--verify", "--verify-threshold", "0.45"])
scale.JOBS["permissive-verify-containment"] = ("defaults", [*scale.JOBS["permissive-verify"][1],
                                                            "--containment-threshold", "0.8"])


def shuffle_bytes(event_dir: str, since: float) -> dict:
    """Shuffle bytes written and read, summed over the tasks of the event logs written after ``since``."""
    written = read = 0
    for path in glob.glob(os.path.join(event_dir, "**", "*"), recursive=True):
        if os.path.isdir(path) or os.path.getmtime(path) < since:
            continue
        with open(path) as f:
            for line in f:
                if '"SparkListenerTaskEnd"' not in line:
                    continue
                m = json.loads(line).get("Task Metrics") or {}
                written += (m.get("Shuffle Write Metrics") or {}).get("Shuffle Bytes Written", 0)
                r = m.get("Shuffle Read Metrics") or {}
                read += r.get("Remote Bytes Read", 0) + r.get("Local Bytes Read", 0)
    return {"shuffle_written": written, "shuffle_read": read}


def run_mllib(args, data: dict, workdir: str, event_conf: list) -> dict:
    out = os.path.join(workdir, "mllib", "out")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    py = sys.executable
    confs = ["spark.ui.enabled=false", "spark.driver.host=127.0.0.1", "spark.driver.bindAddress=127.0.0.1", *event_conf]
    cmd = [os.path.join(os.path.dirname(py), "spark-submit"), "--master", "local[2]", "--driver-memory", args.driver_memory,
           *[x for c in confs for x in ("--conf", c)], os.path.join(HERE, "mllib_join.py"), data["docs"], out]
    env = dict(os.environ, PYSPARK_PYTHON=py, PYSPARK_DRIVER_PYTHON=py, SPARK_LOCAL_IP="127.0.0.1")
    log = os.path.join(workdir, "mllib", "job.log")
    res = {"command": " ".join(cmd), "log": log, "load_before": load_avg()}
    with open(log, "w") as f:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT)
        rc, why = scale.wait_or_kill(proc, log, args.mllib_timeout, args.mllib_timeout)
        res["seconds"] = time.perf_counter() - t
    res["load_after"] = load_avg()
    if rc != 0:
        res["error"] = why or f"exit {rc}"
        return res
    res.update(scale.score(out, data["truth"]))
    shutil.rmtree(out, ignore_errors=True)
    return res


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=1_000_000)
    p.add_argument("--dup-fractions", default="0.1,0.5")
    p.add_argument("--jobs", default="mix,mix-verify,mllib")
    p.add_argument("--mllib-timeout", type=float, default=1800)
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "lshbloom-scale"))
    p.add_argument("--json")
    args = p.parse_args(argv)
    run_args = SimpleNamespace(driver_memory="8g" if args.docs <= 2_000_000 else "14g", conf=[],
                               index_root="/dev/shm" if os.path.isdir("/dev/shm") else None, job_timeout=7200,
                               stall_timeout=900, keep_outputs=False)
    args.driver_memory = run_args.driver_memory
    res = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "runs": {}}
    print(f"machine: {res['machine']}; load {load_avg()}; {res['started']}")
    for frac in (float(x) for x in args.dup_fractions.split(",")):
        params = {"dup_fraction": frac, "edit": 0.05, "replace": 0.30, "min_words": 40, "max_words": 80, "seed": 1,
                  "max_repeated": 0.10}
        data = scale_data.generate(args.docs, params, args.cache)
        workdir = tempfile.mkdtemp(prefix=f"verify-{args.docs}-", dir=args.cache)
        events = os.path.join(workdir, "events")
        os.makedirs(events)
        event_conf = ["spark.eventLog.enabled=true", f"spark.eventLog.dir=file://{events}",
                      "spark.eventLog.compress=false", "spark.eventLog.rolling.enabled=false"]
        run_args.conf = event_conf
        print(f"data: {data['n']:,} documents, {data['planted']:,} planted ({100 * frac:g} %), "
              f"{data['mean_bytes']:.0f} bytes mean; {workdir}", flush=True)
        for job in args.jobs.split(","):
            since = time.time()
            print(f"  running {job} ...", flush=True)
            r = run_mllib(args, data, workdir, event_conf) if job == "mllib" else scale.run_job(run_args, job, data, workdir)
            r.update(shuffle_bytes(events, since))
            r.pop("flags", None)
            res["runs"][f"{frac:g}/{job}"] = r
            verify = (r.get("summary") or {}).get("verify", {})
            print(f"    {job}: {r.get('seconds', 0):.1f} s wall, shuffle written {r['shuffle_written'] / 2**20:,.1f} MB "
                  f"read {r['shuffle_read'] / 2**20:,.1f} MB; "
                  + (f"error {r['error'][:300]}" if "error" in r else
                     f"false flags {r['false_flags']:,}, recall {100 * r['recall']:.2f} %; stages {r.get('stages')}; "
                     f"verify {verify}; load {r.get('load_before')} -> {r.get('load_after')}"), flush=True)
    scale.write_json(args.json, res)


if __name__ == "__main__":
    main()
