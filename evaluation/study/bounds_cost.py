"""The recall cost of verification's bounded candidates (issue 33) on the multilingual study's streams.

    python -m evaluation.study.bounds_cost [--corpus-dir ../shared/corpus] [--docs 200] [--english-docs 300]
        [--out docs/evaluation/multilingual]

The job checks a flagged document against at most ``CANDIDATES_PER_DOCUMENT`` candidates a round, round 2's
buckets offering only their first ``ANCHORS_PER_BUCKET`` holders (``lshbloom_udf.spark.verify.sources``, "Bounds").
This scores the shipped row (:data:`evaluation.study.multilingual.SHIPPED`) on every tune and held-out stream of
every language (English: ``linux-docs`` tune, ``man-pages`` held out) twice, bounded as the job is and unbounded,
from the same pass: per stream the confusion counts both ways, the documents whose decision differs, and the
documents whose candidates the bounds cut in each round. Writes ``bounds_cost[_<docs>_<english-docs>].json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np

from evaluation.scoring import score
from evaluation.study.candidates import BOUNDED, Bounds, verify
from evaluation.study.multilingual import SHIPPED, Scorer, build_splits


def stream_rows(scorer: Scorer, splits, cand=SHIPPED, bounds: Bounds = BOUNDED) -> list[dict]:
    """One row per stream: scores under ``bounds`` and unbounded, the decisions that differ, the cuts."""
    rows = []
    for split in splits:
        sh = scorer.shingled(split, cand.shingling)
        lang, part = split.name.rsplit("-", 1)
        for st, idx, res in zip(split.streams, split.index, scorer.passes(split, cand)):
            labels = np.array(st.labels)
            stats: dict = {}
            flags = {}
            for name, b in (("bounded", bounds), ("unbounded", None)):
                flags[name] = verify(idx, res, sh, cand.tj, cand.tc, cand.floor, cand.template_max_df, b,
                                     stats if b else None)
            row = {"lang": lang, "split": part, "level": st.level, "docs": len(idx), "duplicates": int(labels.sum()),
                   "pass_flags": int(res.flags.sum()), "round1_cut": stats.get("round1_cut", 0),
                   "round2_cut": stats.get("round2_cut", 0),
                   "changed": int(np.sum(flags["bounded"] != flags["unbounded"]))}
            for name, f in flags.items():
                s = score(labels, f)
                row[name] = {"tp": s.tp, "fp": s.fp, "fn": s.fn, "precision": round(s.precision, 6),
                             "recall": round(s.recall, 6), "f1": round(s.f1, 6)}
            rows.append(row)
    return rows


def table(rows: list[dict], part: str) -> str:
    """Markdown: per language and level, bounded F1 / P / R, unbounded F1, decisions changed, cuts."""
    out = ["| language | level | bounded F1 (P / R) | unbounded F1 (P / R) | decisions changed | cut r1 / r2 |",
           "|---|---|---|---|---|---|"]
    for r in (r for r in rows if r["split"] == part):
        b, u = r["bounded"], r["unbounded"]
        out.append(f"| {r['lang']} | {r['level']:.0%} | {b['f1']:.3f} ({b['precision']:.3f} / {b['recall']:.3f}) | "
                   f"{u['f1']:.3f} ({u['precision']:.3f} / {u['recall']:.3f}) | {r['changed']} | "
                   f"{r['round1_cut']} / {r['round2_cut']} |")
    return "\n".join(out)


def main(argv=None) -> int:
    from lshbloom_udf.index import CapacityWarning

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus-dir", default="../shared/corpus")
    p.add_argument("--docs", type=int, default=200, help="documents per multilingual stream (at most)")
    p.add_argument("--english-docs", type=int, default=300, help="documents per English stream")
    p.add_argument("--english-only", action="store_true", help="only the English streams")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--anchors", type=int, default=BOUNDED.anchors, help="bounds other than the job's: anchors")
    p.add_argument("--per-document", type=int, default=BOUNDED.per_document,
                   help="bounds other than the job's: candidates a document and round")
    p.add_argument("--out", default="docs/evaluation/multilingual")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore", CapacityWarning)
    t0 = time.monotonic()
    splits, _ = build_splits(args.corpus_dir, args.docs, args.english_docs, args.seed, log=lambda *a: None,
                             languages=("en",) if args.english_only else None)
    ordered = [s for pair in splits.values() for s in pair]
    bounds = Bounds(args.anchors, args.per_document)
    rows = stream_rows(Scorer(ordered), ordered, bounds=bounds)
    for part in ("tune", "heldout"):
        print(f"#### {part}\n\n{table(rows, part)}\n")
    os.makedirs(args.out, exist_ok=True)
    default = (args.docs, args.english_docs, args.english_only, bounds) == (200, 300, False, BOUNDED)
    variant = f"_{args.docs}_{args.english_docs}" + ("_en" if args.english_only else "")
    variant += "" if bounds == BOUNDED else f"_a{bounds.anchors}_k{bounds.per_document}"
    name = "bounds_cost" + ("" if default else variant)
    with open(os.path.join(args.out, f"{name}.json"), "w") as f:
        json.dump({"candidate": SHIPPED.label(), "bounds": [bounds.anchors, bounds.per_document], "docs": args.docs,
                   "english_docs": args.english_docs, "seconds": round(time.monotonic() - t0, 1), "streams": rows},
                  f, indent=1)
    print(f"{time.monotonic() - t0:.0f} s; changed decisions: {sum(r['changed'] for r in rows)} "
          f"of {sum(r['pass_flags'] for r in rows)} flags")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
