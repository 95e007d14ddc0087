"""A run into a kept index of 10^4 against 10^6 (or 10^7) documents: does the run's time grow with the index?

    PYTHONPATH=. .venv/bin/python benchmarks/online.py --base-docs 10000,1000000 --run-docs 10000 --planted 200 \
        --repeat 3 --json /tmp/online.json

Acceptance: a run of 10^4 new documents (plus planted copies of the first run's documents) into a kept index
of 10^6 documents takes <= 1.2x the same run into a kept index of 10^4, on documents that share no text; every
planted copy flagged and named by ``duplicate_of``. The same at 10^7 against 10^4 (option).

Documents (``scale_data``, as ``scale.py``): 40-80-word corpus windows (~350 bytes) with 30 % of their words
replaced. The usable window starts are split: the base's documents take their windows from the first 90 %
of them, the new documents from the last 10 %, at least ``max_words`` further on, so no window of a new document
overlaps one of the base (their replaced words, drawn with another seed, are single corpus words).

For each base size B (one local[2] session, warmed up first by two small runs into a throw-away index):

1. **Build** a kept index in a fresh directory (under $CROSSRUN_DIR or /tmp) from B distinct documents
   (ids 0..B-1), deduplicated (defaults, ``id_col``, ``duplicate_of``) in runs of at most ``--max-run``
   documents. The first run sizes the index for B + the measured run (``expected_docs``), so the measured
   run adds no filter generation at any B. The index is then copied aside (not timed).
2. **Measured run**, the same for every B: ``--run-docs`` new documents (ids 10^11 + i) and ``--planted``
   near-copies (5 % of their words replaced; ids 10^12 + j) of documents among the first min(B) of the base,
   shuffled. Wall time = ``deduplicate(...)`` plus collecting the flagged rows; ``--repeat`` times, the index
   restored from its copy before each, median reported.

3. **A sequence** (``--sequence K``): K more runs, one after the other into the same index (not restored), each
   of ``--run-docs`` other new documents (windows drawn with seeds 100 + k): every run's wall seconds, their mean,
   and which wrote a delta, merged deltas or folded them into the base (lshbloom_udf.index.deltas), so the
   write buffer's merges and folds are counted in the mean.

Printed per B: median wall seconds, the ratio to the smallest B's, the summary's ``seconds`` per stage and
``verify.cross_run`` (of the median run), distinct documents flagged (must be 0), planted recall (flagged and
``duplicate_of`` = the source's id); the machine load before and after.
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

PARAMS = {"dup_fraction": 0.0, "edit": 0.05, "replace": 0.3, "min_words": 40, "max_words": 80, "seed": 1,
          "max_repeated": 0.1}
NEW_SEED = 2
NEW_SHARE = 0.1  # the last tenth of the usable starts: the new documents' windows
NEW_ID, PLANTED_ID = 10**11, 10**12
CHUNK = 131_072


def windows(tok: dict) -> tuple[np.ndarray, np.ndarray]:
    """Usable starts of the base's windows and of the new documents' (disjoint windows)."""
    starts = scale_data.usable_starts(tok["repeated"], PARAMS["max_words"], PARAMS["max_repeated"])
    cut = starts[int(len(starts) * (1 - NEW_SHARE))]
    return starts[starts < cut - PARAMS["max_words"]], starts[starts >= cut]


def plan(n: int, seed: int, starts: np.ndarray, tok: dict) -> tuple[dict, dict]:
    """``scale_data.plan`` of n distinct documents, their windows drawn from ``starts`` only."""
    p = dict(PARAMS, seed=seed)
    pl = scale_data.plan(n, p, tok["repeated"])
    h = scale_data.draw(seed, scale_data.START, np.arange(n, dtype=np.int64))
    pl["start"] = starts[(h % np.uint64(len(starts))).astype(np.int64)]
    return pl, p


def texts(pl: dict, p: dict, ref: np.ndarray, dupno: np.ndarray, tok: dict):
    words, lens = scale_data.chunk_words(dict(pl, ref=ref, dupno=dupno), 0, len(ref), tok["codes"], p)
    return scale_data.to_arrow(words, lens, tok["blob"], tok["offsets"])


def write(path: str, parts) -> str:
    """Parquet (id, text) from (ids, Arrow text) parts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("id", pa.int64()), ("text", pa.large_string())])
    with pq.ParquetWriter(path, schema) as w:
        for ids, text in parts:
            w.write_table(pa.table([pa.array(ids, pa.int64()), text], schema=schema), row_group_size=16_384)
    return path


def base_parts(pl: dict, p: dict, lo: int, hi: int, tok: dict):
    for a in range(lo, hi, CHUNK):
        ids = np.arange(a, min(hi, a + CHUNK), dtype=np.int64)
        yield ids, texts(pl, p, ids, np.full(len(ids), -1, np.int64), tok)


def measured_file(args, tok, base_pl, base_p, new_starts) -> tuple[str, np.ndarray]:
    """The measured run's Parquet file and the planted copies' sources (planted j copies sources[j])."""
    import pyarrow as pa

    rng = np.random.default_rng(7)
    sources = np.sort(rng.choice(min(args.base_docs), args.planted, replace=False))
    new_pl, new_p = plan(args.run_docs, NEW_SEED, new_starts, tok)
    new = np.arange(args.run_docs, dtype=np.int64)
    ids = np.concatenate([NEW_ID + new, PLANTED_ID + np.arange(args.planted)])
    text = pa.concat_arrays([texts(new_pl, new_p, new, np.full(len(new), -1, np.int64), tok),
                             texts(base_pl, base_p, sources, np.arange(args.planted, dtype=np.int64), tok)])
    perm = rng.permutation(len(ids))
    path = write(os.path.join(args.work, "measured.parquet"), [(ids[perm], text.take(pa.array(perm)))])
    return path, sources


def dedup(spark, path: str, index: str, **sizing):
    """One run into ``index``: (flagged rows as pandas, summary, seconds of the call, seconds in all)."""
    from lshbloom_udf.spark import deduplicate

    t0 = time.monotonic()
    df, summary = deduplicate(spark.read.parquet(path), id_col="id", index_dir=index, duplicate_of=True,
                              progress=False, return_summary=True, **sizing)
    t1 = time.monotonic()
    rows = df.where("is_duplicate").select("id", "duplicate_of").toPandas()
    return rows, summary, t1 - t0, time.monotonic() - t0


def build(args, spark, tok, base_pl, base_p, b: int) -> tuple[str, dict]:
    """A kept index of the base's first b documents, in runs of at most ``--max-run``."""
    index = os.path.join(args.work, f"index-{b}")
    t0, flagged, runs = time.monotonic(), 0, 0
    for lo in range(0, b, args.max_run):
        hi = min(b, lo + args.max_run)
        path = write(os.path.join(args.work, f"base-{lo}.parquet"), base_parts(base_pl, base_p, lo, hi, tok))
        sizing = {"expected_docs": b + args.run_docs + args.planted} if lo == 0 else {}
        rows, summary, _, wall = dedup(spark, path, index, **sizing)
        flagged, runs = flagged + len(rows), runs + 1
        cross = summary["verify"]["cross_run"] or {}
        print(f"  build run {runs}: {hi - lo:,} documents in {wall:.1f} s ({wall / (hi - lo) * 1e6:.1f} µs each), "
              f"{len(rows):,} flagged, {cross.get('looked_up', 0):,} looked up across runs "
              f"({cross.get('seconds', 0.0):.2f} s)", flush=True)
        os.remove(path)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(index) for f in fs)
    return index, {"build_seconds": round(time.monotonic() - t0, 1), "build_runs": runs,
                   "base_flagged": flagged, "index_bytes": size}


def measure(args, spark, index: str, path: str, sources: np.ndarray) -> dict:
    """``--repeat`` measured runs into copies of ``index``: the median's figures."""
    pristine = index + "-pristine"
    shutil.copytree(index, pristine)
    runs = []
    for _ in range(args.repeat):
        shutil.rmtree(index)
        shutil.copytree(pristine, index)
        rows, summary, call, wall = dedup(spark, path, index)
        planted = rows[rows["id"] >= PLANTED_ID]
        named = planted["duplicate_of"].astype("int64").to_numpy() == sources[planted["id"] - PLANTED_ID]
        runs.append({"seconds": round(wall, 2), "call_seconds": round(call, 2),
                     "distinct_flagged": int((rows["id"] < PLANTED_ID).sum()),
                     "planted_recall": int(named.sum()) / max(1, args.planted),
                     "stages": summary["seconds"], "cross_run": summary["verify"]["cross_run"]})
        print(f"    run: {runs[-1]['seconds']} s (call {runs[-1]['call_seconds']} s), distinct flagged "
              f"{runs[-1]['distinct_flagged']}, planted recall {runs[-1]['planted_recall']:.4f}", flush=True)
    shutil.rmtree(pristine)
    median = statistics.median(r["seconds"] for r in runs)
    mid = min(runs, key=lambda r: abs(r["seconds"] - median))
    return {"median_seconds": median, "seconds": [r["seconds"] for r in runs],
            "distinct_flagged": max(r["distinct_flagged"] for r in runs),
            "planted_recall": min(r["planted_recall"] for r in runs),
            "stages": mid["stages"], "cross_run": mid["cross_run"]}


def sequence(args, spark, index: str, tok, new_starts) -> dict:
    """``--sequence`` runs of other new documents into ``index``, one after the other: their seconds and deltas."""
    from lshbloom_udf.index import manifest as mf

    seconds, deltas = [], []
    for k in range(args.sequence):
        pl, p = plan(args.run_docs, 100 + k, new_starts, tok)
        ids = np.arange(args.run_docs, dtype=np.int64)
        path = write(os.path.join(args.work, f"sequence-{k}.parquet"),
                     [(NEW_ID * 2 + k * args.run_docs + ids, texts(pl, p, ids, np.full(len(ids), -1, np.int64), tok))])
        _, _, _, wall = dedup(spark, path, index)
        os.remove(path)
        manifest = mf.read_manifest(index)
        seconds.append(round(wall, 2))
        deltas.append(len(manifest.deltas))
        print(f"    sequence run {k + 1}: {wall:.2f} s, {len(manifest.deltas)} delta(s) pending", flush=True)
    return {"sequence_seconds": seconds, "sequence_mean": round(statistics.mean(seconds), 3),
            "sequence_deltas": deltas}


def warm_up(args, spark, tok, base_pl, base_p, path: str) -> None:
    index = os.path.join(args.work, "warm-index")
    dedup(spark, write(os.path.join(args.work, "warm.parquet"), base_parts(base_pl, base_p, 0, 2000, tok)), index)
    dedup(spark, path, index)
    shutil.rmtree(index)


def session(args):
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the executors' Python: this one
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", args.driver_memory).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def bench(args) -> dict:
    out = {"load_before": os.getloadavg(), "args": {k: v for k, v in vars(args).items() if k != "work"}, "bases": {}}
    tok = scale_data.token_stream(args.cache)
    base_starts, new_starts = windows(tok)
    base_pl, base_p = plan(max(args.base_docs), PARAMS["seed"], base_starts, tok)
    path, sources = measured_file(args, tok, base_pl, base_p, new_starts)
    print(f"load {out['load_before']}; windows: base {len(base_starts):,} starts, new {len(new_starts):,}", flush=True)
    spark = session(args)
    warm_up(args, spark, tok, base_pl, base_p, path)
    for b in sorted(args.base_docs):
        index, res = build(args, spark, tok, base_pl, base_p, b)
        print(f"B = {b:,}: built in {res['build_seconds']} s ({res['build_runs']} run(s), "
              f"{res['index_bytes'] / 2**20:,.1f} MiB, {res['base_flagged']} flagged in the base)", flush=True)
        res.update(measure(args, spark, index, path, sources))
        if args.sequence:
            res.update(sequence(args, spark, index, tok, new_starts))
        out["bases"][b] = res
        shutil.rmtree(index)
    spark.stop()
    out["load_after"] = os.getloadavg()
    smallest = out["bases"][min(args.base_docs)]["median_seconds"]
    for res in out["bases"].values():
        res["ratio"] = round(res["median_seconds"] / smallest, 3)
    return out


def report(out: dict) -> None:
    print(f"\n{'base docs':>10} {'median s':>9} {'ratio':>6} {'runs s':>20} {'cross-run s':>11} {'distinct fl':>11} "
          f"{'recall':>7}")
    for b, r in out["bases"].items():
        print(f"{b:>10,} {r['median_seconds']:>9.2f} {r['ratio']:>6.3f} {str(r['seconds']):>20} "
              f"{r['cross_run']['seconds']:>11.2f} {r['distinct_flagged']:>11} {r['planted_recall']:>7.4f}")
    stages = sorted({k for r in out["bases"].values() for k in r["stages"]})
    print("\nstages (s, median run): " + " | ".join(f"{k}" for k in stages))
    for b, r in out["bases"].items():
        print(f"{b:>10,} " + " | ".join(f"{r['stages'].get(k, float('nan')):.2f}" for k in stages))
    for b, r in out["bases"].items():
        print(f"cross_run B={b:,}: {json.dumps(r['cross_run'])}")
    for b, r in out["bases"].items():
        if "sequence_mean" in r:
            print(f"sequence B={b:,}: mean {r['sequence_mean']} s over {r['sequence_seconds']}, deltas pending "
                  f"{r['sequence_deltas']}")
    print(f"load average before {out['load_before']}, after {out['load_after']}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-docs", default="10000,1000000", help="comma list of kept index sizes")
    p.add_argument("--run-docs", type=int, default=10_000)
    p.add_argument("--planted", type=int, default=200)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--max-run", type=int, default=1_000_000, help="documents per run of a base's build")
    p.add_argument("--sequence", type=int, default=0, help="runs one after the other after the measured ones")
    p.add_argument("--driver-memory", default="6g")
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "lshbloom-scale"))
    p.add_argument("--json", help="write the figures here too")
    args = p.parse_args()
    args.base_docs = [int(x) for x in args.base_docs.split(",")]
    args.work = tempfile.mkdtemp(prefix="lshbloom-online-", dir=os.environ.get("CROSSRUN_DIR"))
    try:
        out = bench(args)
    finally:
        shutil.rmtree(args.work, ignore_errors=True)
    report(out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)


if __name__ == "__main__":
    main()
