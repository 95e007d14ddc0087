"""Choosing each method's configuration from its grid rows, and the study's reports.

:func:`select` keeps the configuration with the best worst F1 over the
duplication levels (ties: higher mean F1, then the cheaper configuration);
:func:`pareto_rows` times each selected method end to end;
:func:`results_markdown` and :func:`write_csv` write what the study found.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Sequence

import numpy as np

from evaluation import baselines as B
from evaluation.scoring import score
from evaluation.study.configs import P_EFFECTIVE, PAPER, MinHashConfig, config_from_params, config_label
from evaluation.study.grid import Split


def summarize(rows: Sequence[dict]) -> list[dict]:
    """Per (method, config, split): worst, mean F1 over levels and the level of the worst."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["method"], r["config"], r["split"]), []).append(r)
    out = []
    for (method, config, split), rs in groups.items():
        f1 = [r["f1"] for r in rs]
        worst = min(rs, key=lambda r: r["f1"])
        out.append({
            "method": method, "config": config, "split": split, "params": rs[0]["params"],
            "worst_f1": min(f1), "mean_f1": float(np.mean(f1)), "worst_level": worst["level"],
            "min_precision": min(r["precision"] for r in rs), "min_recall": min(r["recall"] for r in rs),
            "seconds": float(np.sum([r["seconds"] for r in rs])), "index_bytes": max(r["index_bytes"] for r in rs),
            "levels": len(rs),
        })
    return out


def _cost(params: dict) -> tuple:
    # cheaper first: fewer permutations, smaller n-grams, less normalization
    return (params.get("num_perm", 0), params.get("ngram") or 0, len(str(params.get("normalize", ""))))


def select(summary: Sequence[dict], method: str, split: str) -> dict:
    """The configuration with the best worst-level F1 (ties: mean F1, then cheaper)."""
    cands = [s for s in summary if s["method"] == method and s["split"] == split]
    if not cands:
        raise ValueError(f"no results for {method} on {split}")
    return max(cands, key=lambda s: (round(s["worst_f1"], 4), round(s["mean_f1"], 4), tuple(-x for x in _cost(json.loads(s["params"])))))

def agreement_summary(rows: Sequence[dict]) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for a in rows:
        groups.setdefault((a["reference"], a["config"], a["split"]), []).append(a)
    return [
        {"reference": ref, "config": c, "split": sp, "streams": len(rs), "identical_streams": sum(bool(r["identical"]) for r in rs),
         "documents": sum(r["n"] for r in rs), "disagreements": sum(r["only_a"] + r["only_b"] for r in rs)}
        for (ref, c, sp), rs in groups.items()
    ]


def pareto_rows(split: Split, selected: dict, chosen: MinHashConfig, baselines: Sequence[str]) -> list[dict]:
    i = int(np.argmin([abs(st.level - 0.5) for st in split.streams]))
    st = split.streams[i]
    texts = st.texts
    out = []

    def add(method, config, res):
        s = score(st.labels, res.duplicate)
        out.append({"method": method, "config": config, "level": st.level, "docs": len(texts), "f1": round(s.f1, 6),
                    "precision": round(s.precision, 6), "recall": round(s.recall, 6),
                    "seconds": round(res.seconds, 4), "index_bytes": res.index_bytes})

    for name, c in (("lshbloom", chosen), ("lshbloom-paper", PAPER)):
        add(name, c.label(), B.run_lshbloom(texts, c.threshold, c.num_perm, c.ngram, c.normalize, c.scheme, c.seed, P_EFFECTIVE))
    if "minhashlsh" in selected:
        c = config_from_params(selected["minhashlsh"]["params"])
        start = time.perf_counter()
        mh = B.datasketch_minhashes(texts, c.num_perm, c.ngram, c.normalize, c.seed, c.scheme)
        mh_s = time.perf_counter() - start
        res = B.datasketch_lsh_decisions(mh, c.threshold, c.num_perm)
        res.seconds += mh_s
        add("minhashlsh", c.label(), res)
    for name in baselines:
        p = json.loads(selected[name]["params"])
        method = B.overlap_method(name, p.get("ngram"))
        res = method.run(texts, p["threshold"])  # through its real Bloom filter (or CCNet's hash set)
        add(name, config_label(name, p), res)
        # the grid's bulk computation (exact unit sets) against the real run, on this stream
        bulk = B.UnitTable(method, texts).fractions(np.arange(len(texts)))
        out[-1]["decisions_differing_from_grid"] = int(np.count_nonzero(method.decide(bulk, p["threshold"]) != res.duplicate))
        out[-1]["max_fraction_difference"] = float(np.abs(bulk - res.extra["fractions"]).max()) if len(texts) else 0.0
    return out


def results_markdown(result: dict, tune_summary: Sequence[dict], held_rows: Sequence[dict], pareto: Sequence[dict]) -> str:
    """Tables of the study's outcome (written to results.md, quoted by docs/evaluation.md)."""
    lines = [f"Pools: tuning `{result['pools']['tune']['name']}` ({result['pools']['tune']['kept']} sources), "
             f"held-out `{result['pools']['heldout']['name']}` ({result['pools']['heldout']['kept']} sources); "
             f"{result['docs_per_stream']} documents per stream, levels {', '.join(f'{l:.0%}' for l in result['levels'])}, "
             f"seed {result['seed']}, grid `{result['grid']}`, {result['seconds']:.0f} s.", ""]
    lines += ["### Selected configurations (tuning streams: worst and mean F1 over levels)", "",
              "| method | configuration | worst F1 | mean F1 |", "|---|---|---|---|"]
    for m, s in result["selected"].items():
        lines.append(f"| {m} | {s['config']} | {s['tune_worst_f1']:.4f} | {s['tune_mean_f1']:.4f} |")
    lines += ["", "### Held-out streams, F1 per duplication level", ""]
    levels = sorted({r["level"] for r in held_rows})
    lines.append("| method | configuration | " + " | ".join(f"{l:.0%}" for l in levels) + " | worst |")
    lines.append("|---|---|" + "---|" * (len(levels) + 1))
    groups: dict[tuple, dict] = {}
    for r in held_rows:
        groups.setdefault((r["method"], r["config"]), {})[r["level"]] = r
    for (m, c), by in groups.items():
        f1 = [by[l]["f1"] if l in by else float("nan") for l in levels]
        lines.append(f"| {m} | {c} | " + " | ".join(f"{x:.3f}" for x in f1) + f" | **{min(f1):.3f}** |")
    lines += ["", "### Held-out precision / recall per level (LSHBloom chosen vs paper)", "",
              "| level | chosen P | chosen R | paper P | paper R |", "|---|---|---|---|---|"]
    ch = groups.get(("lshbloom", MinHashConfig(**{k: result["chosen"][k] for k in ("threshold", "num_perm", "ngram", "normalize", "scheme", "seed")}).label()), {})
    pa = groups.get(("lshbloom-paper", PAPER.label()), {})
    for l in levels:
        if l in ch and l in pa:
            lines.append(f"| {l:.0%} | {ch[l]['precision']:.3f} | {ch[l]['recall']:.3f} | {pa[l]['precision']:.3f} | {pa[l]['recall']:.3f} |")
    lines += ["", "### Agreement with datasketch on the same streams", "",
              "| reference | configuration | split | streams identical | documents | disagreements |", "|---|---|---|---|---|---|"]
    for a in result["agreement"]:
        lines.append(f"| {a['reference']} | {a['config']} | {a['split']} | {a['identical_streams']}/{a['streams']} | {a['documents']} | {a['disagreements']} |")
    lines += ["", "### Cost on the balanced held-out stream (single process)", "",
              "| method | configuration | F1 | seconds | index bytes | decisions ≠ grid computation |", "|---|---|---|---|---|---|"]
    for p in pareto:
        differ = p.get("decisions_differing_from_grid")
        lines.append(f"| {p['method']} | {p['config']} | {p['f1']:.3f} | {p['seconds']:.2f} | {p['index_bytes']:,} | "
                     f"{'–' if differ is None else differ} |")
    return "\n".join(lines) + "\n"


def write_csv(path: str, rows: Sequence[dict]) -> None:
    if not rows:
        return
    fields = list(rows[0])
    for r in rows:
        for k in r:
            if k not in fields:
                fields.append(k)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
