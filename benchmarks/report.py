"""The run report's cost and the keep order's: at N documents, the report against the job it reports on, and the
job with ``--order-by 'score DESC'`` against the job without it.

    PYTHONPATH=. .venv/bin/python benchmarks/report.py --docs 1000000 --json /tmp/report.json

Acceptance (issue "Choose which copy survives"): the report of 10^6 documents is written in <= 10 % of the job's
time. The sort's cost is measured at 10^6 and 10^7 (no target: it is reported).

Documents: ``scale_data`` (as ``scale.py``: 40-80-word corpus windows, 5 % planted near-copies), with two columns
added: ``site`` (the id modulo 7: the report's group column) and ``score`` (a hash of the id modulo 100: the keep
order, ties broken by the id). Two spark-submit jobs, one after the other, each in its own local[2] JVM
(``--driver-memory``, 6g by default), the defaults with ``--id-column id --duplicate-of``:

1. **report**: ``--report --report-by site`` in input order. The job's ``seconds.job_total`` (read, dedup, write,
   commit: the summary's) against the report's own seconds (the job prints them: it reads the output back,
   aggregates it and writes the HTML file).
2. **order**: the same job with ``--order-by 'score DESC'`` and no report. Its ``job_total`` against job 1's.

Printed: both jobs' seconds, the report's share, the sort's cost (seconds and ratio), duplicates found by each,
and the load before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import scale_data  # noqa: E402
from bench_all import load_avg  # noqa: E402

PARAMS = {"dup_fraction": 0.05, "edit": 0.05, "replace": 0.3, "min_words": 40, "max_words": 80, "seed": 1,
          "max_repeated": 0.1}


def with_columns(docs: str, out: str) -> str:
    """``docs`` (id, text) with ``site`` and ``score`` added, written once to ``out``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    if os.path.exists(out):
        return out
    with pq.ParquetWriter(out + ".tmp", pa.schema([("id", pa.int64()), ("text", pa.large_string()),
                                                   ("site", pa.string()), ("score", pa.int64())])) as w:
        for batch in pq.ParquetFile(docs).iter_batches(batch_size=131_072):
            ids = batch.column("id").to_numpy()
            site = pa.array(np.char.add("site-", (ids % 7).astype(str)))
            score = pa.array(scale_data.mix64(ids.astype(np.uint64)) % np.uint64(100)).cast(pa.int64())
            w.write_table(pa.Table.from_arrays([batch.column("id"), batch.column("text"), site, score],
                                               ["id", "text", "site", "score"]))
    os.rename(out + ".tmp", out)
    return out


def job(args, data: str, work: str, name: str, extra: list) -> dict:
    """One spark-submit of the job; its summary, wall seconds and the report's seconds (None: no report)."""
    out = os.path.join(work, name)
    cmd = [os.path.join(os.path.dirname(sys.executable), "spark-submit"), "--master", "local[2]",
           "--driver-memory", args.driver_memory, "--conf", "spark.ui.enabled=false",
           "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
           os.path.join(ROOT, "spark_jobs", "dedup.py"), "--input", data, "--input-format", "parquet",
           "--output", out, "--index-dir", out + ".index", "--id-column", "id", "--duplicate-of", "--quiet", *extra]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    load = load_avg()
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"{name}: exit {done.returncode}\n{done.stderr[-3000:]}")
    with open(out + ".summary.json") as f:
        summary = json.load(f)
    report = re.search(r"^report +\S+ \(([\d.]+) s\)", done.stdout, re.M)
    return {"wall": wall, "job_total": summary["seconds"]["job_total"], "duplicates": summary["duplicates"],
            "report": float(report[1]) if report else None, "load_before": load, "load_after": load_avg(),
            "seconds": summary["seconds"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--cache-dir", default=os.path.join(tempfile.gettempdir(), "lshbloom-scale-data"))
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    data = scale_data.generate(args.docs, PARAMS, args.cache_dir)
    docs = with_columns(data["docs"], data["docs"].replace("docs.parquet", "docs-site-score.parquet"))
    work = args.work_dir or tempfile.mkdtemp(prefix="lshbloom-report-bench-")
    res = {"docs": args.docs, "machine": os.uname().nodename, "cores": os.cpu_count()}
    res["report"] = job(args, docs, work, "report", ["--report", "--report-by", "site"])
    res["order"] = job(args, docs, work, "order", ["--order-by", "score DESC"])
    r, o = res["report"], res["order"]
    res["report_share"] = r["report"] / r["job_total"]
    res["sort_seconds"] = o["job_total"] - r["job_total"]
    res["sort_ratio"] = o["job_total"] / r["job_total"]
    print(f"{args.docs:,} documents ({os.cpu_count()} cores), load {r['load_before']} -> {o['load_after']}")
    print(f"job (input order)        {r['job_total']:8.1f} s   duplicates {r['duplicates']:,}")
    print(f"report                   {r['report']:8.1f} s   {100 * res['report_share']:.1f} % of the job")
    print(f"job --order-by score DESC {o['job_total']:7.1f} s   duplicates {o['duplicates']:,}   "
          f"sort +{res['sort_seconds']:.1f} s ({res['sort_ratio']:.2f}x)")
    print("stages (input order):", json.dumps(r["seconds"]))
    print("stages (order-by):   ", json.dumps(o["seconds"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
