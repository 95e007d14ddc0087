"""A kept index fed batch after batch (issue 33, item 3): false flags across runs, planted recall, record cost.

    PYTHONPATH=. .venv/bin/python benchmarks/crossrun.py batches --batches 10 --per-batch 20000 --planted 1000
    PYTHONPATH=. .venv/bin/python benchmarks/crossrun.py pairs --pairs 20000

``batches``: ``--batches`` x ``--per-batch`` distinct documents of ~2.4 kB (``scale_data``: corpus windows of
350-450 words, 30 % of their words replaced; windows overlap more as N grows, so distinct pairs reach Jaccard
0.2-0.35), the last batch followed by ``--planted`` near-duplicates of first-batch documents (5 % of their words
replaced: Jaccard ≈ 0.72). Each batch is one ``deduplicate`` run (defaults, ``id_col``, ``duplicate_of``) into
one kept index, in one local[2] session. Reported per batch: distinct documents flagged, the cross-run step's
figures, seconds; at the end: distinct flagged over all batches, planted recall (flagged and ``duplicate_of``
naming the source), record bytes per document.

``pairs``: estimated against exact decisions. Pairs of corpus windows at a random shift (Jaccard 0-0.9) and
truncations (one keeps 30-95 % of the other: containment 1), each with its exact ``J`` and ``C``
(``_native.shingle_overlaps``) and the records' estimates (:mod:`lshbloom_udf.spark.verify.crossrun`), among the pairs
that share a band (the only ones the cross-run step judges); precision and recall of the estimated decision
against the exact one under the defaults' rule.
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

import scale_data  # noqa: E402

PARAMS = {"dup_fraction": 0.0, "edit": 0.05, "replace": 0.3, "min_words": 350, "max_words": 450, "seed": 33,
          "max_repeated": 0.1}
PLANTED_ID = 10**12  # planted j has id PLANTED_ID + j


def texts(pl: dict, ids: np.ndarray, tok: dict):
    sub = dict(pl, ref=pl["ref"][ids], dupno=pl["dupno"][ids])
    words, lens = scale_data.chunk_words(sub, 0, len(ids), tok["codes"], PARAMS)
    return scale_data.to_arrow(words, lens, tok["blob"], tok["offsets"])


def write_batches(args, tok) -> tuple[list, np.ndarray]:
    """The batches as Parquet files (id, text); the planted copies' sources (ids)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = args.batches * args.per_batch
    pl = scale_data.plan(n, PARAMS, tok["repeated"])
    rng = np.random.default_rng(7)
    sources = np.sort(rng.choice(args.per_batch, args.planted, replace=False))
    plp = dict(pl, ref=np.concatenate([pl["ref"], sources]),
               dupno=np.concatenate([pl["dupno"], np.arange(args.planted)]))
    paths = []
    for t in range(args.batches):
        ids = np.arange(t * args.per_batch, (t + 1) * args.per_batch)
        if t == args.batches - 1:
            ids = np.concatenate([ids, n + np.arange(args.planted)])
        out_ids = np.where(ids >= n, PLANTED_ID + ids - n, ids)
        path = os.path.join(args.work, f"batch-{t}.parquet")
        pq.write_table(pa.table({"id": pa.array(out_ids, pa.int64()), "text": texts(plp, ids, tok)}), path)
        paths.append(path)
    return paths, sources


def batches(args) -> dict:
    from pyspark.sql import SparkSession

    from lshbloom_udf.spark import deduplicate

    tok = scale_data.token_stream(args.cache)
    paths, sources = write_batches(args, tok)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the executors' Python: this one
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", args.driver_memory).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    index = os.path.join(args.work, "index")
    per_batch, false_total, found, t_all = [], 0, 0, time.monotonic()
    for t, path in enumerate(paths):
        t0 = time.monotonic()
        sizing = {"p_effective": args.p_effective} if args.p_effective is not None else {}
        df, summary = deduplicate(spark.read.parquet(path), id_col="id", index_dir=index, duplicate_of=True,
                                  progress=False, return_summary=True, **sizing)
        rows = df.where("is_duplicate").select("id", "duplicate_of").toPandas()
        seconds = time.monotonic() - t0
        planted = rows[rows["id"] >= PLANTED_ID]
        false = int((rows["id"] < PLANTED_ID).sum())
        right = planted["duplicate_of"].astype("int64") == sources[planted["id"] - PLANTED_ID]
        found += int(right.sum())
        false_total += false
        v = summary["verify"]
        line = {"batch": t, "seconds": round(seconds, 1), "pass_flagged": v["pass_flagged"], "distinct_flagged": false,
                "unverifiable": v["unverifiable"], "cross_run": v["cross_run"], "stages": summary["seconds"]}
        per_batch.append(line)
        print(json.dumps(line), flush=True)
    manifest = json.load(open(os.path.join(index, "manifest.json")))
    rec = [r["records"] for r in manifest["runs"]]
    n_distinct = args.batches * args.per_batch
    out = {"batches": args.batches, "per_batch": args.per_batch, "planted": args.planted,
           "distinct_flagged": false_total, "distinct_flagged_share": false_total / n_distinct,
           "planted_recall": found / max(1, args.planted),
           "record_bytes_per_document": sum(r["bytes"] for r in rec) / sum(r["documents"] for r in rec),
           "records_documents": sum(r["documents"] for r in rec),
           "index_band_bytes": sum(os.path.getsize(os.path.join(index, f)) for f in os.listdir(index)
                                   if "band-" in f),
           "seconds_per_batch": round((time.monotonic() - t_all) / args.batches, 1), "per_batch_detail": per_batch}
    spark.stop()
    return out


def pairs(args) -> dict:
    """Estimated vs exact decisions on band-sharing pairs (see the module docs)."""
    import pyarrow as pa

    from lshbloom_udf import _native
    from lshbloom_udf.config import DedupConfig
    from lshbloom_udf.minhash import normalization_mask
    from lshbloom_udf.spark.verify.crossrun import estimated_jaccard
    from lshbloom_udf.spark.records import sketch_batch
    from lshbloom_udf.spark.verify.rule import VerifyRule

    config = DedupConfig()
    spec = config.index_params().key_spec
    rule = VerifyRule(config.verify_threshold, config.containment_threshold, config.containment_min_jaccard)
    tok = scale_data.token_stream(args.cache)
    codes, rng = tok["codes"], np.random.default_rng(11)
    starts = scale_data.usable_starts(tok["repeated"], 2 * PARAMS["max_words"], PARAMS["max_repeated"])
    m = args.pairs
    length = rng.integers(PARAMS["min_words"], PARAMS["max_words"] + 1, m)
    start = rng.choice(starts, m)
    trunc = rng.random(m) < 0.3  # truncations: containment 1
    shift = np.where(trunc, 0, (length * rng.uniform(0.0, 0.9, m)).astype(int))
    length_b = np.where(trunc, (length * rng.uniform(0.3, 0.95, m)).astype(int), length)

    def words_at(s, n):
        w = [codes[a:a + b].copy() for a, b in zip(s, n)]
        for x in w:  # 10 % of the words replaced, independently in each document
            hit = rng.random(len(x)) < 0.1
            x[hit] = codes[rng.integers(0, len(codes), hit.sum())]
        return w

    def as_text(ws):
        blob, off = tok["blob"], tok["offsets"]
        return pa.array([" ".join(bytes(blob[off[c]:off[c + 1] - 1]).decode() for c in x) for x in ws])

    a, b = as_text(words_at(start, length)), as_text(words_at(start + shift, length_b))
    sk_a, n_a, _ = sketch_batch(a, spec, 2)
    sk_b, n_b, _ = sketch_batch(b, spec, 2)
    band_keys = functools.partial(_native.sketch_band_keys, b=spec.b, r=spec.r)
    shared = (band_keys(sk_a) == band_keys(sk_b)).any(axis=1)
    ov = _native.shingle_overlaps(a.to_pylist(), b.to_pylist(), spec.ngram, normalization_mask(spec.normalize),
                                  spec.shingle, 2)
    # b is the later document d (the truncation), a the earlier e.
    exact, _, _ = rule.judge(ov[:, 0], ov[:, 2], ov[:, 1])
    mask = np.uint8((1 << args.bits) - 1)  # the records' bits: 4 in a local index's lookup layout, 8 scanned
    j = estimated_jaccard((sk_b & mask) == (sk_a & mask), spec.b, spec.r, args.bits)
    n_b64, n_a64 = n_b.astype(np.float64), n_a.astype(np.float64)
    est, _, _ = rule.judge(j * (n_b64 + n_a64) / (1 + j), n_b64, n_a64)
    jx = ov[:, 0] / (ov[:, 1] + ov[:, 2] - ov[:, 0])
    s = shared
    tp, fp, fn = int((est & exact & s).sum()), int((est & ~exact & s).sum()), int((~est & exact & s).sum())
    cx = ov[:, 0] / np.maximum(ov[:, 2], 1)

    def bins(value, among, edges):
        out = []
        for lo, hi in zip(edges[:-1], edges[1:]):
            at = among & (value >= lo) & (value < hi)
            out.append({"from": lo, "to": hi, "pairs": int(at.sum()), "exact_verified": int((exact & at).sum()),
                        "estimate_verified": int((est & at).sum()), "disagree": int(((est != exact) & at).sum())})
        return out

    return {"pairs": m, "candidates": int(s.sum()), "exact_positive": int((exact & s).sum()),
            "precision": tp / max(1, tp + fp), "recall": tp / max(1, tp + fn), "false_positive": fp,
            "false_negative": fn, "jaccard_error_sd": float(np.std((j - jx)[s])),
            "jaccard_error_mean": float(np.mean((j - jx)[s])),
            "size_error_sd": float(np.std(n_b64 / np.maximum(ov[:, 2], 1) - 1)),
            "shifted_by_jaccard": bins(jx, s & ~trunc, [0, 0.2, 0.3, 0.35, 0.38, 0.42, 0.45, 0.5, 1.01]),
            "truncations_by_containment": bins(cx, s & trunc & (jx >= rule.containment_min_jaccard + 0.03),
                                               [0, 0.6, 0.65, 0.68, 0.72, 0.75, 0.8, 1.01])}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["batches", "pairs"])
    p.add_argument("--batches", type=int, default=10)
    p.add_argument("--per-batch", type=int, default=20000)
    p.add_argument("--planted", type=int, default=1000)
    p.add_argument("--pairs", type=int, default=20000)
    p.add_argument("--bits", type=int, default=4, choices=[4, 8], help="pairs: the bits kept of each sketch value")
    p.add_argument("--driver-memory", default="6g")
    p.add_argument("--p-effective", type=float, help="size the new index at this rate (default: the job's)")
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "lshbloom-scale"))
    p.add_argument("--json", help="write the figures here too")
    args = p.parse_args()
    args.work = tempfile.mkdtemp(prefix="lshbloom-crossrun-", dir=os.environ.get("CROSSRUN_DIR"))
    try:
        out = batches(args) if args.what == "batches" else pairs(args)
    finally:
        shutil.rmtree(args.work, ignore_errors=True)
    text = json.dumps({k: v for k, v in out.items() if k != "per_batch_detail"}, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
