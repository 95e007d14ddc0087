"""Tables, files and plots of the multilingual study (:mod:`evaluation.study.multilingual`)."""

from __future__ import annotations

import csv
import json
import os
from collections import defaultdict
from typing import Sequence

KIND_ORDER = ("original", "html", "pdf", "ocr_chars", "glued", "hyphen", "cjk_space", "boilerplate", "truncate",
              "drop", "composed")


def _prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / (tp + fn) if tp + fn else 1.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def _pool(rows: Sequence[dict]) -> tuple[float, float, float]:
    return _prf(sum(r["tp"] for r in rows), sum(r["fp"] for r in rows), sum(r["fn"] for r in rows))


def language_table(rows: Sequence[dict], names: Sequence[str], split: str) -> str:
    """Per language: worst-level F1, and precision/recall pooled over the levels, for each reported row."""
    langs = sorted({r["lang"] for r in rows}, key=lambda x: (x != "en", x))
    head = "| configuration | " + " | ".join(langs) + " |"
    lines = [head, "|---" * (len(langs) + 1) + "|"]
    for name in names:
        cells = []
        for lang in langs:
            rs = [r for r in rows if r["row"] == name and r["lang"] == lang and r["split"] == split]
            p, rec, _ = _pool(rs)
            cells.append(f"{min(r['f1'] for r in rs):.3f} ({p:.3f}/{rec:.3f})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def level_table(rows: Sequence[dict], name: str, split: str) -> str:
    langs = sorted({r["lang"] for r in rows}, key=lambda x: (x != "en", x))
    levels = sorted({r["level"] for r in rows})
    lines = ["| language | " + " | ".join(f"{lvl:.0%} P / R / F1" for lvl in levels) + " | shingles/doc |",
             "|---" * (len(levels) + 2) + "|"]
    for lang in langs:
        rs = {r["level"]: r for r in rows if r["row"] == name and r["lang"] == lang and r["split"] == split}
        cells = [f"{rs[lvl]['precision']:.3f} / {rs[lvl]['recall']:.3f} / **{rs[lvl]['f1']:.3f}**" for lvl in levels]
        spd = sum(r["shingles_per_doc"] for r in rs.values()) / len(rs)
        lines.append(f"| {lang} | " + " | ".join(cells) + f" | {spd:.0f} |")
    return "\n".join(lines)


def kind_counts(rows: Sequence[dict], name: str, split: str, english: bool) -> dict:
    acc = defaultdict(lambda: [0, 0, 0])
    for r in rows:
        if r["row"] == name and r["split"] == split and (r["lang"] == "en") == english:
            for k, c in r["kinds"].items():
                acc[k] = [a + b for a, b in zip(acc[k], c)]
    return acc


def kind_table(rows: Sequence[dict], names: Sequence[str], split: str) -> str:
    """Per kind of copy (all levels): precision / recall / F1, English and the other languages apart."""
    lines = ["| kind | " + " | ".join(f"{n} en | {n} other" for n in names) + " |",
             "|---" * (2 * len(names) + 1) + "|"]
    tables = [(kind_counts(rows, n, split, True), kind_counts(rows, n, split, False)) for n in names]
    for kind in KIND_ORDER:
        cells = []
        for en, other in tables:
            for acc in (en, other):
                if kind in acc and sum(acc[kind]) > 0:
                    p, r, f = _prf(*acc[kind])
                    cells.append(f"{p:.3f} / {r:.3f} / {f:.3f} (n={acc[kind][0] + acc[kind][2]})")
                else:
                    cells.append("–")
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _plots(out: str, rows: Sequence[dict], names: Sequence[str]) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # the eval extra is optional
        return []
    langs = sorted({r["lang"] for r in rows}, key=lambda x: (x != "en", x))
    fig, ax = plt.subplots(figsize=(10, 4))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        f1 = [min(r["f1"] for r in rows if r["row"] == name and r["lang"] == lang and r["split"] == "heldout")
              for lang in langs]
        ax.bar([x + i * width for x in range(len(langs))], f1, width, label=name)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(langs))], langs)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("held-out F1 (worst level)")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "f1_by_language.png"), dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(10, 4))
    kinds = [k for k in KIND_ORDER if k != "original"]
    for i, name in enumerate(names):
        en, other = kind_counts(rows, name, "heldout", True), kind_counts(rows, name, "heldout", False)
        rec = [_prf(*[a + b for a, b in zip(en.get(k, [0, 0, 0]), other.get(k, [0, 0, 0]))])[1] for k in kinds]
        ax.bar([x + i * width for x in range(len(kinds))], rec, width, label=name)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(kinds))], kinds, rotation=30)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("held-out recall")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "recall_by_kind.png"), dpi=110)
    plt.close(fig)
    return ["f1_by_language.png", "recall_by_kind.png"]


def write_report(out: str, rows: Sequence[dict], reported: dict, summary: dict) -> None:
    os.makedirs(out, exist_ok=True)
    names = list(reported)
    with open(os.path.join(out, "rows.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["row", "config", "lang", "split", "level", "tp", "fp", "fn", "precision", "recall", "f1",
                    "shingles_per_doc"])
        for r in rows:
            w.writerow([r["row"], r["config"], r["lang"], r["split"], r["level"], r["tp"], r["fp"], r["fn"],
                        f"{r['precision']:.4f}", f"{r['recall']:.4f}", f"{r['f1']:.4f}", f"{r['shingles_per_doc']:.1f}"])
    md = ["Rows: " + "; ".join(f"**{n}** = {c.label()}" for n, c in reported.items()), "",
          "### Held-out, per language: worst-level F1 (precision / recall pooled over the levels)", "",
          language_table(rows, names, "heldout"), "",
          "### Tune, per language", "", language_table(rows, names, "tune"), ""]
    for name in ("shipped", "chosen", "defaults today"):
        md += [f"### Held-out per level: {name}", "", level_table(rows, name, "heldout"), ""]
    md += ["### Held-out per kind of copy (precision / recall / F1, all levels)", "",
           kind_table(rows, ["shipped", "chosen", "defaults today"], "heldout"), ""]
    plots = _plots(out, rows, names)
    md += [f"![{p}]({p})" for p in plots]
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, default=str)
