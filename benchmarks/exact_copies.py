"""The exact-copies fast path (issue 36, item 4): a corpus with 30 % byte-identical copies, defaults with
``exact_copies`` on and off side by side in one local[2] session.

    PYTHONPATH=. .venv/bin/python benchmarks/exact_copies.py --docs 200000 --rounds 2

The corpus: ``(1 - copies) · docs`` documents of ~2.4 kB from :mod:`scale_data` (corpus windows of 350-450
words, 30 % of their words replaced, 5 % of them planted near-duplicates with 5 % of their words replaced), then
``copies · docs`` byte-identical copies of them, each placed uniformly after its source (sources drawn uniformly
with replacement: a document may have several copies). Each round runs the defaults (``id_col``, verification)
with the fast path off, then on; a run's time is ``deduplicate`` through collecting the flagged ids (the
decisions), from the same cached input. Reported: each run's wall seconds, the medians' ratio, whether the flags
are equal, and the summaries' counts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import scale_data  # noqa: E402

PARAMS = {"dup_fraction": 0.05, "edit": 0.05, "replace": 0.3, "min_words": 350, "max_words": 450, "seed": 36,
          "max_repeated": 0.1}


def write_corpus(docs: int, copies: float, cache: str, work: str) -> dict:
    """The corpus as one Parquet file (id = processing order, text); its description."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    originals = int(round(docs * (1 - copies)))
    meta = scale_data.generate(originals, PARAMS, cache)
    base = pq.read_table(meta["docs"])
    rng = np.random.default_rng(36)
    n_copies = docs - originals
    sources = rng.integers(0, originals, n_copies)
    keys = np.concatenate([np.arange(originals, dtype=np.float64),
                           sources + 0.5 + rng.random(n_copies) * (originals - 1 - sources)])
    order = np.argsort(keys, kind="stable")
    take = np.concatenate([np.arange(originals), sources])[order]
    table = pa.table({"id": pa.array(np.arange(docs, dtype=np.int64)), "text": base.column("text").take(take)})
    path = os.path.join(work, f"exact-{docs}.parquet")
    pq.write_table(table, path, row_group_size=16_384)
    text_bytes = sum(len(t.as_py().encode()) for t in table.column("text").slice(0, 2000))
    return {"path": path, "documents": docs, "copies": n_copies, "originals": originals,
            "planted_near": meta["planted"], "mean_bytes_sample": text_bytes / min(docs, 2000)}


def run_once(spark, path: str, exact: bool) -> tuple[float, np.ndarray, dict]:
    from lshbloom_udf.spark import deduplicate

    t0 = time.monotonic()
    df, summary = deduplicate(spark.read.parquet(path), id_col="id", exact_copies=exact, progress=False,
                              return_summary=True)
    flagged = np.sort(df.where("is_duplicate").select("id").toPandas()["id"].to_numpy())
    return time.monotonic() - t0, flagged, summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, default=200_000)
    p.add_argument("--copies", type=float, default=0.3)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "lshbloom-scale"))
    p.add_argument("--json", help="write the figures here too")
    args = p.parse_args()
    from pyspark.sql import SparkSession

    work = tempfile.mkdtemp(prefix="lshbloom-exact-bench-")
    corpus = write_corpus(args.docs, args.copies, args.cache, work)
    print(json.dumps(corpus), flush=True)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the executors' Python: this one
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", args.driver_memory).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    run_once(spark, corpus["path"], True)  # warm-up: the JVM, the Python workers, the file's pages
    seconds: dict = {False: [], True: []}
    flags, summaries = {}, {}
    for r in range(args.rounds):
        for exact in (False, True):
            s, flags[exact], summaries[exact] = run_once(spark, corpus["path"], exact)
            seconds[exact].append(round(s, 2))
            print(json.dumps({"round": r, "exact_copies": exact, "seconds": round(s, 2),
                              "flagged": len(flags[exact]), "stages": summaries[exact]["seconds"]}), flush=True)
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    off, on = statistics.median(seconds[False]), statistics.median(seconds[True])
    out = {**corpus, "seconds_off": seconds[False], "seconds_on": seconds[True], "ratio_off_on": round(off / on, 3),
           "equal_flags": bool(np.array_equal(flags[False], flags[True])), "flagged": len(flags[True]),
           "exact_duplicates": summaries[True]["exact_duplicates"],
           "pass_flagged_off": summaries[False]["verify"]["pass_flagged"],
           "candidate_pairs": {"off": summaries[False]["verify"]["candidate_pairs"],
                               "on": summaries[True]["verify"]["candidate_pairs"]},
           "load_average": os.getloadavg(), "cores": os.cpu_count()}
    print(json.dumps(out), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
