"""F1 of the two insert rules, keep-first (--insert first) and any-earlier (--insert all), on the evaluation streams.

    PYTHONPATH=. .venv/bin/python benchmarks/insert_rules.py [--corpus ../shared/corpus] [--json build/rules.json]

The streams of the evaluation study (docs/evaluation.md §1, ``make evaluate``):
tuning pool linux-docs, held-out pool man-pages, 2000 documents per stream at
levels 10 %-90 %, seeds 0 and 1. Each stream is decided by the product's index
(``lshbloom_decisions``) with the chosen defaults (T=0.45, k=512, word 4-grams,
normalization all) and the paper preset (T=0.5, k=256, unigrams, legacy), under
both rules, on the same band keys; precision, recall and F1 against the
stream's labels (a document is a duplicate when an earlier document of the same
source appeared).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from evaluation.baselines.minhash_methods import lshbloom_decisions  # noqa: E402
from evaluation.generator import DEFAULT_LEVELS  # noqa: E402
from evaluation.scoring import score  # noqa: E402
from evaluation.study.grid import Split, load_pool  # noqa: E402
from lshbloom_udf.index import CapacityWarning, IndexParams  # noqa: E402
from lshbloom_udf.minhash import text_band_keys  # noqa: E402

CONFIGS = {
    "chosen": dict(threshold=0.45, num_perm=512, ngram=4, normalize="all", scheme="affine32", band_key="mix"),
    "paper": dict(threshold=0.5, num_perm=256, ngram=1, normalize="none", scheme="legacy", band_key="sum"),
}


def rows_for(split: Split, name: str, cfg: dict) -> list[dict]:
    cfg = dict(cfg)
    params = IndexParams.for_threshold(1, cfg.pop("threshold"), cfg.pop("num_perm"), **cfg)
    keys, has = text_band_keys(split.texts, **params.signature_kwargs())
    out = []
    for stream, idx in zip(split.streams, split.index):
        sized = dataclasses.replace(params, capacity=len(idx))
        row = {"split": split.name, "config": name, "level": stream.level}
        for rule in ("first", "all"):
            res = lshbloom_decisions(np.ascontiguousarray(keys[idx]), has[idx], sized, insert=rule)
            s = score(stream.labels, res.duplicate)
            row.update({f"{rule}_p": s.precision, f"{rule}_r": s.recall, f"{rule}_f1": s.f1,
                        f"{rule}_flagged": int(np.count_nonzero(res.duplicate))})
        out.append(row)
    return out


def table(rows: list[dict]) -> str:
    lines = ["| split | config | level | keep-first P / R / F1 | any-earlier P / R / F1 | flagged first → all |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['split']} | {r['config']} | {r['level']:.0%} | {r['first_p']:.3f} / {r['first_r']:.3f} / "
                     f"**{r['first_f1']:.3f}** | {r['all_p']:.3f} / {r['all_r']:.3f} / **{r['all_f1']:.3f}** | "
                     f"{r['first_flagged']} → {r['all_flagged']} |")
    for split in sorted({r["split"] for r in rows}):
        for name in CONFIGS:
            sel = [r for r in rows if r["split"] == split and r["config"] == name]
            if sel:
                lines.append(f"| {split} | {name} | worst / mean | {min(r['first_f1'] for r in sel):.3f} / "
                             f"{np.mean([r['first_f1'] for r in sel]):.3f} | {min(r['all_f1'] for r in sel):.3f} / "
                             f"{np.mean([r['all_f1'] for r in sel]):.3f} | |")
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", default=os.path.join(ROOT, "..", "shared", "corpus"))
    p.add_argument("--docs", type=int, default=2000)
    p.add_argument("--json")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    tune_pool, _ = load_pool(os.path.join(args.corpus, "linux-docs.jsonl.gz"), 50)
    test_pool, _ = load_pool(os.path.join(args.corpus, "man-pages.jsonl.gz"), 50)
    splits = [Split.build("tune", tune_pool, args.docs, DEFAULT_LEVELS, 0),
              Split.build("heldout", test_pool, args.docs, DEFAULT_LEVELS, 1)]
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CapacityWarning)  # each stream's index is sized to the stream exactly
        for split in splits:
            for name, cfg in CONFIGS.items():
                rows += rows_for(split, name, cfg)
    print(table(rows))
    print(f"({time.perf_counter() - t0:.0f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
