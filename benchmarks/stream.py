"""A stream against a growing kept index vs one batch job on the same documents (issue 36).

    PYTHONPATH=. .venv/bin/python benchmarks/stream.py --batches 10 --per-batch 100000 --planted 1000
    PYTHONPATH=. .venv/bin/python benchmarks/stream.py --batches 100 --per-batch 100000 --no-batch  # issue 48

The documents are ``crossrun.py``'s (``scale_data``: distinct windows of 350-450 corpus words with 30 % of their
words replaced, ~2.4 kB; the last batch followed by ``--planted`` near-copies of first-batch documents, Jaccard
≈ 0.72), one Parquet file per batch in a landing directory. In one local[2] session, side by side:

- ``stream``: ``StreamDedup`` over the landing directory (``maxFilesPerTrigger=1``: one file a micro-batch,
  ``availableNow``), defaults, ``id_col``, ``duplicate_of``, no ``expected_docs`` (the index is sized by the
  first batch and grows by generations), each batch written to Parquet and committed with the index;
- ``batch``: one ``spark_jobs``-equivalent run (``deduplicate`` + a Parquet write) over all the files, into a
  new index.

Both after a warm-up (a 10,000-document batch run and stream), so that neither pays the JVM's first-use costs
alone. Reported: wall seconds of each and their ratio (the same cores: docs/s per core), distinct documents flagged,
planted recall (flagged with ``duplicate_of`` naming the source), and the grown index's false-positive rate
against ``p_effective``; ``late_over_early``: the mean seconds of the last ten micro-batches over that of batches
2-11.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import crossrun  # noqa: E402
import scale_data  # noqa: E402


def quality(spark, output: str, sources: np.ndarray) -> dict:
    """Distinct documents flagged and planted recall of an output (id, is_duplicate, duplicate_of)."""
    rows = spark.read.parquet(output).where("is_duplicate").select("id", "duplicate_of").toPandas()
    planted = rows[rows["id"] >= crossrun.PLANTED_ID]
    right = planted["duplicate_of"].astype("int64") == sources[planted["id"] - crossrun.PLANTED_ID]
    return {"distinct_flagged": int((rows["id"] < crossrun.PLANTED_ID).sum()), "planted_found": int(right.sum())}


def run_stream(spark, landing: str, work: str) -> dict:
    from lshbloom_udf.spark.streaming import StreamDedup

    schema = spark.read.parquet(landing).schema
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(landing)
    writer = StreamDedup(os.path.join(work, "stream-index"), os.path.join(work, "stream-out"), id_col="id",
                         duplicate_of=True, progress=False)
    t0 = time.monotonic()
    writer.start(stream, os.path.join(work, "ck"), trigger={"availableNow": True}).awaitTermination()
    seconds = time.monotonic() - t0
    batches = list(writer.progress)
    keep = ("batch", "documents", "duplicates", "seconds", "stages", "cross_run")
    return {"seconds": seconds, "batches": [{k: e[k] for k in keep} for e in batches], "index": batches[-1]["index"]}


def run_batch(spark, paths: list, work: str) -> dict:
    from lshbloom_udf.spark import deduplicate

    t0 = time.monotonic()
    ordered = functools.reduce(lambda a, b: a.union(b), (spark.read.parquet(p) for p in paths))  # the files' order
    out, summary = deduplicate(ordered, id_col="id", duplicate_of=True, progress=False,
                               index_dir=os.path.join(work, "batch-index"), return_summary=True)
    out.write.parquet(os.path.join(work, "batch-out"))
    return {"seconds": time.monotonic() - t0, "stages": summary["seconds"], "index": summary["index"]}


def batch_growth(batches: list) -> dict:
    """The mean seconds of the last ten micro-batches over that of batches 2-11 (issue 48: <= 1.2), and the
    cross-run step's in each (does a batch's cost grow with the index it joins?)."""
    seconds = [float(b["seconds"]) for b in batches]
    cross = [float((b.get("cross_run") or {}).get("seconds", 0.0)) for b in batches]
    if len(seconds) < 12:
        return {"ratio": None, "seconds": seconds}
    early, late = seconds[1:11], seconds[-10:]
    return {"early_mean": sum(early) / 10, "late_mean": sum(late) / 10, "ratio": sum(late) / sum(early),
            "cross_run_early_mean": sum(cross[1:11]) / 10, "cross_run_late_mean": sum(cross[-10:]) / 10,
            "seconds": seconds}


def warm_up(spark, first: str, work: str, documents: int = 10000) -> None:
    """One small batch run and one small stream before the measured ones, so that neither pays the JVM's and
    the Python workers' first-use costs the other does not."""
    from lshbloom_udf.spark import deduplicate
    from lshbloom_udf.spark.streaming import StreamDedup

    landing = os.path.join(work, "warm-landing")
    os.makedirs(landing)
    spark.read.parquet(first).limit(documents).write.parquet(os.path.join(landing, "part"))
    df = spark.read.parquet(os.path.join(landing, "part"))
    deduplicate(df, id_col="id", duplicate_of=True, progress=False,
                index_dir=os.path.join(work, "warm-index")).write.parquet(os.path.join(work, "warm-out"))
    stream = spark.readStream.schema(df.schema).parquet(os.path.join(landing, "part"))
    StreamDedup(os.path.join(work, "warm-stream-index"), os.path.join(work, "warm-stream-out"), id_col="id",
                duplicate_of=True, progress=False).start(
        stream, os.path.join(work, "warm-ck"), trigger={"availableNow": True}).awaitTermination()


def main() -> None:
    from pyspark.sql import SparkSession

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batches", type=int, default=10)
    p.add_argument("--per-batch", type=int, default=100000)
    p.add_argument("--planted", type=int, default=1000)
    p.add_argument("--driver-memory", default="6g")
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "lshbloom-scale"))
    p.add_argument("--json", help="write the figures here too")
    p.add_argument("--no-batch", action="store_true", help="the stream only (no one-job run to compare with)")
    args = p.parse_args()
    args.work = tempfile.mkdtemp(prefix="lshbloom-stream-", dir=os.environ.get("STREAM_DIR"))
    try:
        paths, sources = crossrun.write_batches(args, scale_data.token_stream(args.cache))
        landing = os.path.join(args.work, "landing")
        os.makedirs(landing)
        for t, path in enumerate(paths):  # oldest first: the file source takes them in this order
            os.rename(path, os.path.join(landing, os.path.basename(path)))
            os.utime(os.path.join(landing, os.path.basename(path)), (1e9 + t, 1e9 + t))
        paths = [os.path.join(landing, os.path.basename(p)) for p in paths]
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.driver.memory", args.driver_memory).getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        warm_up(spark, paths[0], args.work)
        stream = run_stream(spark, landing, args.work)
        stream.update(quality(spark, os.path.join(args.work, "stream-out"), sources))
        batch = None if args.no_batch else run_batch(spark, paths, args.work)
        if batch is not None:
            batch.update(quality(spark, os.path.join(args.work, "batch-out"), sources))
        spark.stop()
    finally:
        shutil.rmtree(args.work, ignore_errors=True)
    documents = args.batches * args.per_batch + args.planted
    out = {"documents": documents, "batches": args.batches, "cores": 2, "load": os.getloadavg(),
           "stream_over_batch": stream["seconds"] / batch["seconds"] if batch else None,
           "late_over_early": batch_growth(stream["batches"]),
           "stream": stream, "batch": batch,
           "distinct_flagged_share": stream["distinct_flagged"] / (args.batches * args.per_batch),
           "planted_recall": stream["planted_found"] / max(1, args.planted),
           "false_positive_now": stream["index"].get("expected_false_positive"),
           "p_effective": stream["index"].get("p_effective")}
    print(json.dumps(out, indent=1, default=str))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)


if __name__ == "__main__":
    main()
