"""Issue 33's driver out of memory: a default spark-submit (Spark's 1 GiB driver, nothing set) on 204 MB.

    PYTHONPATH=. .venv/bin/python benchmarks/driver_memory.py [--distinct 1500] [--copies 6] [--kb 22.7] \\
        [--driver-memory 1g] [--json build/driver_memory.json]

Data: ``--distinct`` documents of random words (3-9 letters, ~``--kb`` kB each), the whole set written
``--copies`` times into one JSON-lines file (copy c of document i at row c * distinct + i): 9,000
documents, 204 MB, where every row from ``distinct`` on is an exact copy of an earlier one, so the
right flags are known exactly. The job: ``spark-submit spark_jobs/dedup.py --input in.jsonl --output
out --index-dir idx`` on ``local[2]`` with no ``--driver-memory`` (or the one given), as the README shows.
Before the derived budgets it died with ``java.lang.OutOfMemoryError: Java heap space`` in verification
(one ``toArrow`` of every candidate's text: two task results of 95-99 MB into the 1 GiB heap).

Reported: exit status, wall seconds, whether the flags are exactly the copies, the summary's
``verify.memory`` (the driver's figures and budgets, where the similarities ran), and the peak RSS of
the spark-submit tree by kind (JVM, driver Python, Python workers; psutil every 0.5 s, scale.py's poller).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from scale import TreePeaks  # noqa: E402

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def write_input(path: str, distinct: int, copies: int, kb: float, seed: int = 33) -> int:
    """The input file; its bytes."""
    rng = random.Random(seed)
    docs = []
    for _ in range(distinct):
        words, size = [], 0
        while size < kb * 1000:
            w = "".join(rng.choice(LETTERS) for _ in range(rng.randint(3, 9)))
            words.append(w)
            size += len(w) + 1
        docs.append(" ".join(words))
    with open(path, "w", encoding="utf-8") as f:
        for c in range(copies):
            for i, text in enumerate(docs):
                f.write(json.dumps({"id": f"c{c}-d{i}", "text": text}) + "\n")
    return os.path.getsize(path)


def flags_exact(out: str, distinct: int) -> tuple[bool, int]:
    """(every copy flagged and no first occurrence, rows read) from the job's parquet output."""
    import pyarrow.parquet as pq

    table = pq.read_table(out, columns=["id", "is_duplicate"])
    got = dict(zip(table.column("id").to_pylist(), table.column("is_duplicate").to_pylist()))
    return all(flag == (not key.startswith("c0-")) for key, flag in got.items()), len(got)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--distinct", type=int, default=1500)
    ap.add_argument("--copies", type=int, default=6)
    ap.add_argument("--kb", type=float, default=22.7, help="kB of text per document (default %(default)s)")
    ap.add_argument("--driver-memory", default=None, help="default: none given (Spark's 1g)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="lshbloom-driver-memory-")
    try:
        inp = os.path.join(work, "in.jsonl")
        size = write_input(inp, args.distinct, args.copies, args.kb)
        out, idx = os.path.join(work, "out"), os.path.join(work, "idx")
        py = sys.executable
        cmd = [os.path.join(os.path.dirname(py), "spark-submit"), "--master", "local[2]",
               *(["--driver-memory", args.driver_memory] if args.driver_memory else []),
               "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
               os.path.join(ROOT, "spark_jobs", "dedup.py"), "--input", inp, "--output", out, "--index-dir", idx]
        env = dict(os.environ, PYSPARK_PYTHON=py, PYSPARK_DRIVER_PYTHON=py, SPARK_LOCAL_IP="127.0.0.1")
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        log = os.path.join(work, "job.log")
        with open(log, "w") as f:
            t = time.perf_counter()
            proc = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT)
            poller = TreePeaks(proc.pid)
            poller.start()
            try:
                rc = proc.wait(timeout=args.timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = None
            seconds = time.perf_counter() - t
            peaks = poller.stop()
        res = {"documents": args.distinct * args.copies, "input_bytes": size, "driver_memory": args.driver_memory,
               "exit": rc, "seconds": round(seconds, 1),
               "peak_rss_mb": {k: round(peaks[f"{k}_rss"] / 2**20) for k in ("jvm", "py_driver", "py_workers")}}
        if rc == 0:
            with open(out + ".summary.json") as f:
                summary = json.load(f)
            res["flags_exact"], res["rows"] = flags_exact(out, args.distinct)
            res.update(duplicates=summary["duplicates"], verify_memory=summary["verify"].get("memory"),
                       stages=summary["seconds"], verify_stages=summary["verify"]["stages"])
        else:
            with open(log) as f:
                lines = f.readlines()
            res["error"] = "".join([ln for ln in lines if "Error" in ln or "error" in ln][:5] or lines[-20:])
        print(json.dumps(res, indent=2))
        if args.json:
            os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
            with open(args.json, "w") as f:
                json.dump(res, f, indent=2)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
