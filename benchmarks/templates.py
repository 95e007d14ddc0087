"""Verification on a family of templated pages: candidate pairs, time and decisions against the same number of
pages without a template (issue "Bounded verification").

    PYTHONPATH=. .venv/bin/python benchmarks/templates.py --pages 20000 [--pages 200000] [--json build/templates.json]

Data (generated here, cached under ``--cache``): ``--pages`` pages of one template (a header and a footer of
``--template-words`` words in all, around ``--body-words`` words of each page's own: the template is 40-60 % of a
page, as one web shop, forum or generated-doc site in a crawl), words drawn from a synthetic vocabulary of 50,000
words; 1 % of the pages are planted near-copies of an earlier page (2 % of its own words replaced), placed after
it. The control has the same pages with a header and footer of their own (no template). Each is one Parquet
file (``id`` = processing order, ``text``) and a truth file, in :mod:`scale_data`'s format.

Job: ``spark-submit spark_jobs/dedup.py`` with the defaults (``benchmarks/scale.py``'s runner: wall time from
launch to exit, peak memory by process kind, stages from the summary), on ``local[2]``. Printed per data set:
wall seconds, verification's candidate pairs (and per flagged page), verification seconds by stage, false flags
among distinct pages, recall of the planted copies, and the ratio of the templated job's wall time to the
control's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import scale  # noqa: E402
from bench_all import load_avg  # noqa: E402
from bench_core import machine  # noqa: E402

VOCAB = 50_000
LETTERS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)


def vocabulary(rng: np.random.Generator) -> np.ndarray:
    lengths = rng.integers(3, 10, VOCAB)
    return np.array([LETTERS[rng.integers(0, 26, n)].tobytes().decode() for n in lengths], dtype=object)


def generate(pages: int, templated: bool, args) -> dict:
    """The cached data set: Parquet and truth paths (:func:`scale.score` reads them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    key = f"templates-{pages}-{int(templated)}-{args.template_words}-{args.body_words}-{args.seed}-v1"
    out = os.path.join(args.cache, key)
    meta_path = os.path.join(out, "meta.json")
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            return json.load(f)
    rng = np.random.default_rng(args.seed)
    vocab = vocabulary(rng)
    planted_n = pages // 100
    distinct = pages - planted_n
    # a planted copy follows its source: sources are drawn among the distinct pages before its place
    place = np.sort(rng.choice(np.arange(1, pages), planted_n, replace=False))
    planted = np.zeros(pages, bool)
    planted[place] = True
    source = np.full(pages, -1, np.int64)
    head_n = args.template_words // 2
    shared = rng.integers(0, VOCAB, args.template_words)
    bodies, frames, at = [], [], []  # each distinct page's own words, header + footer, and place
    texts = []
    for i in range(pages):
        if planted[i]:
            s = int(rng.integers(0, len(bodies)))
            body = bodies[s].copy()
            edits = rng.random(len(body)) < 0.02
            body[edits] = rng.integers(0, VOCAB, int(edits.sum()))
            source[i], frame = at[s], frames[s]
        else:
            body = rng.integers(0, VOCAB, args.body_words)
            frame = shared if templated else rng.integers(0, VOCAB, args.template_words)
            bodies.append(body)
            frames.append(frame)
            at.append(i)
        words = np.concatenate([frame[:head_n], body, frame[head_n:]])
        texts.append(" ".join(vocab[words]))
    os.makedirs(out, exist_ok=True)
    docs = os.path.join(out, "docs.parquet")
    pq.write_table(pa.table({"id": pa.array(np.arange(pages, dtype=np.int64)), "text": pa.array(texts)}), docs,
                   row_group_size=16_384)
    truth = os.path.join(out, "truth.npz")
    np.savez(truth, planted=planted, source=source)
    meta = {"docs": docs, "truth": truth, "n": pages, "templated": templated, "planted": int(planted_n),
            "distinct": int(distinct), "mean_bytes": float(np.mean([len(t) for t in texts])),
            "template_share": args.template_words / (args.template_words + args.body_words)}
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=2)
    return meta


def run(args, pages: int) -> dict:
    res = {}
    for name, templated in (("templated", True), ("control", False)):
        data = generate(pages, templated, args)
        workdir = tempfile.mkdtemp(prefix=f"lshbloom-templates-{name}-", dir=args.cache)
        got = scale.run_job(args, "mix", data, workdir)
        got.pop("flags", None)
        res[name] = {"data": data, **got}
        v = (got.get("summary") or {}).get("verify") or {}
        print(f"{pages:>8,} {name:9s} {got.get('seconds', float('nan')):7.1f} s  "
              f"{'error: ' + got['error'][:300] if 'error' in got else ''}"
              f"pass flagged {v.get('pass_flagged', 0):,}, candidate pairs {v.get('candidate_pairs', 0):,} "
              f"({v.get('candidate_pairs', 0) / max(1, v.get('pass_flagged', 0)):.1f} per flagged page), "
              f"verify {v.get('seconds', 0):.1f} s {v.get('stages', {})}, false flags {got.get('false_flags')}, "
              f"recall {got.get('recall', float('nan')):.4f}, peak RSS {got.get('tree', {}).get('total_rss', 0) / 2**30:.2f} GiB",
              flush=True)
    if "seconds" in res["templated"] and "seconds" in res["control"]:
        res["ratio"] = res["templated"]["seconds"] / res["control"]["seconds"]
        print(f"{pages:>8,} templated / control wall time: {res['ratio']:.2f}x", flush=True)
    return res


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pages", type=int, action="append", help="pages per data set, repeatable (default 20000)")
    p.add_argument("--template-words", type=int, default=250)
    p.add_argument("--body-words", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "lshbloom-templates"))
    p.add_argument("--index-root", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    p.add_argument("--driver-memory", default="8g")
    p.add_argument("--job-timeout", type=float, default=3600)
    p.add_argument("--stall-timeout", type=float, default=900)
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--keep-outputs", action="store_true")
    p.add_argument("--json")
    args = p.parse_args(argv)
    os.makedirs(args.cache, exist_ok=True)
    print(f"machine: {machine()}; load before: {load_avg()}", flush=True)
    results = {pages: run(args, pages) for pages in args.pages or [20_000]}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "results": results}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
