"""The study's figures, after the paper's (F1 heatmaps, F1/P/R vs duplication level, Pareto plots).

matplotlib is optional (``pip install lshbloom-spark[eval]``); without it
:func:`make_all` writes nothing and returns an empty list.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import numpy as np

DPI = 80
COLORS = {
    "lshbloom": "C0", "lshbloom-paper": "C1", "minhashlsh": "C2", "ccnet": "C3", "dolma": "C4",
    "dolma-ngram": "C5", "dclm": "C6",
}


def _plt():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _worst(rows: Sequence[dict]) -> dict:
    """(method, params json) -> worst F1 over levels on the tuning split."""
    out: dict[tuple, float] = {}
    for r in rows:
        if r["split"] != "tune":
            continue
        k = (r["method"], r["params"])
        out[k] = min(out.get(k, 1.0), r["f1"])
    return out


def _save(fig, path: str) -> str:
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def _heat(ax, plt, mat, xlabels, ylabels, title, vmin=0.0):
    im = ax.imshow(mat, origin="lower", aspect="auto", vmin=vmin, vmax=1.0, cmap="viridis")
    ax.set_xticks(range(len(xlabels)), [str(x) for x in xlabels], fontsize=7)
    ax.set_yticks(range(len(ylabels)), [f"{y:g}" for y in ylabels], fontsize=7)
    ax.set_title(title, fontsize=8)
    for i in range(mat.shape[0]):
        for j in range(mat.shape[1]):
            if not np.isnan(mat[i, j]):
                ax.text(j, i, f"{mat[i, j]:.2f}", ha="center", va="center", fontsize=6,
                        color="white" if mat[i, j] < 0.6 else "black")
    return im


def heatmaps_minhash(out_dir: str, rows: Sequence[dict], grid) -> list[str]:
    """Worst-level F1 over threshold (y) x num_perm (x), one panel per method / n-gram / normalization."""
    from lshbloom_udf.minhash import normalization_name

    plt = _plt()
    worst = _worst(rows)
    panels = []
    for method in ("lshbloom", "minhashlsh"):
        for norm in map(normalization_name, grid.normalizations):
            for n in grid.ngrams:
                mat = np.full((len(grid.thresholds), len(grid.num_perms)), np.nan)
                for (m, pj), f in worst.items():
                    if m != method:
                        continue
                    p = json.loads(pj)
                    if p["ngram"] == n and p["normalize"] == norm and p["threshold"] in grid.thresholds and p["num_perm"] in grid.num_perms:
                        mat[grid.thresholds.index(p["threshold"]), grid.num_perms.index(p["num_perm"])] = f
                if np.count_nonzero(~np.isnan(mat)) > 1:  # a single cell (the chosen configuration) is no heatmap
                    panels.append((method, norm, n, mat))
    if not panels:
        return []
    cols = len(grid.ngrams)
    nrows = -(-len(panels) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(2.9 * cols, 2.5 * nrows), squeeze=False, constrained_layout=True)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    im = None
    for ax, (method, norm, n, mat) in zip(axes.flat, panels):
        short = {"none": "none", "nfkc,lower,punct": "all"}.get(norm, norm)
        im = _heat(ax, plt, mat, grid.num_perms, grid.thresholds, f"{method} n={n} norm={short}")
        ax.set_xlabel("num_perm", fontsize=7)
        ax.set_ylabel("threshold", fontsize=7)
    fig.suptitle("Worst F1 over duplication levels 10-90 % (tuning streams)", fontsize=9)
    fig.colorbar(im, ax=axes, shrink=0.6)
    return [_save(fig, os.path.join(out_dir, "heatmap_minhash.png"))]


NUMERIC = ("level", "docs", "duplicates", "tp", "fp", "fn", "precision", "recall", "f1", "seconds", "index_bytes")


def _load_csv(path: str) -> list[dict]:
    import csv

    if not os.path.exists(path):
        return []
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in NUMERIC:
            if r.get(k) not in (None, ""):
                r[k] = float(r[k])
    return rows


def replot(out_dir: str, grid_name: str = "default") -> list[str]:
    """Redraw the figures from a study's CSV files."""
    from evaluation.study import GRIDS

    return make_all(out_dir, _load_csv(os.path.join(out_dir, "grid.csv")), _load_csv(os.path.join(out_dir, "heldout.csv")),
                    _load_csv(os.path.join(out_dir, "pareto.csv")), "", GRIDS[grid_name])


def heatmaps_ngram(out_dir: str, rows: Sequence[dict], grid) -> list[str]:
    plt = _plt()
    worst = _worst(rows)
    panels = []
    for method in ("dolma-ngram", "dclm"):
        mat = np.full((len(grid.overlap_thresholds), len(grid.overlap_ngrams)), np.nan)
        for (m, pj), f in worst.items():
            p = json.loads(pj)
            if m == method and p["ngram"] in grid.overlap_ngrams and p["threshold"] in grid.overlap_thresholds:
                mat[grid.overlap_thresholds.index(p["threshold"]), grid.overlap_ngrams.index(p["ngram"])] = f
        if not np.isnan(mat).all():
            panels.append((method, mat))
    if not panels:
        return []
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 2.6), squeeze=False)
    for ax, (method, mat) in zip(axes.flat, panels):
        im = _heat(ax, plt, mat, grid.overlap_ngrams, grid.overlap_thresholds, method)
        ax.set_xlabel("n-gram size", fontsize=7)
        ax.set_ylabel("overlap threshold", fontsize=7)
    fig.colorbar(im, ax=axes, shrink=0.8)
    fig.suptitle("N-gram methods: worst F1 over levels (tuning streams)", fontsize=9)
    return [_save(fig, os.path.join(out_dir, "heatmap_ngram.png"))]


def paragraph_thresholds(out_dir: str, rows: Sequence[dict]) -> list[str]:
    plt = _plt()
    worst = _worst(rows)
    fig, ax = plt.subplots(figsize=(3.6, 2.6))
    drawn = False
    for method in ("ccnet", "dolma"):
        pts = sorted((json.loads(pj)["threshold"], f) for (m, pj), f in worst.items() if m == method)
        if pts:
            ax.plot(*zip(*pts), marker="o", label=method, color=COLORS[method])
            drawn = True
    if not drawn:
        plt.close(fig)
        return []
    ax.set_xlabel("overlap threshold T")
    ax.set_ylabel("worst F1 over levels")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7)
    ax.set_title("Paragraph-level methods (tuning streams)", fontsize=9)
    return [_save(fig, os.path.join(out_dir, "paragraph_f1_vs_threshold.png"))]


def by_level(out_dir: str, held_rows: Sequence[dict]) -> list[str]:
    plt = _plt()
    series: dict[str, dict[float, dict]] = {}
    for r in held_rows:
        if r["method"].startswith("datasketch-lshbloom"):
            continue
        series.setdefault(f"{r['method']} ({r['config']})", {})[r["level"]] = r
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2), sharex=True)
    for name, by in series.items():
        method = name.split(" ")[0]
        lv = sorted(by)
        for ax, metric in zip(axes, ("f1", "precision", "recall")):
            ax.plot([l * 100 for l in lv], [by[l][metric] for l in lv], marker=".", label=name,
                    color=COLORS.get(method), linestyle="--" if method == "lshbloom-paper" else "-")
    for ax, metric in zip(axes, ("F1", "precision", "recall")):
        ax.set_title(metric, fontsize=9)
        ax.set_xlabel("duplicates in stream (%)", fontsize=8)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, fontsize=7)
    fig.suptitle("Held-out streams: selected configuration of each method", fontsize=9)
    return [_save(fig, os.path.join(out_dir, "heldout_by_level.png"))]


def pareto(out_dir: str, pareto_rows: Sequence[dict]) -> list[str]:
    plt = _plt()
    if not pareto_rows:
        return []
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    for ax, key, label in ((axes[0], "seconds", "wall-clock seconds (single process)"), (axes[1], "index_bytes", "index bytes")):
        for p in pareto_rows:
            x = max(p[key], 1e-3)
            ax.scatter([x], [p["f1"]], color=COLORS.get(p["method"]), label=p["method"], s=30)
            ax.annotate(p["method"], (x, p["f1"]), fontsize=6, xytext=(3, 3), textcoords="offset points")
        ax.set_xscale("log")
        from matplotlib.ticker import NullFormatter

        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(label, fontsize=8)
        ax.set_ylabel("F1", fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3)
    fig.suptitle("F1 vs cost on the balanced held-out stream", fontsize=9)
    return [_save(fig, os.path.join(out_dir, "pareto.png"))]


def make_all(out_dir: str, grid_rows, held_rows, pareto_rows, chosen_label: str, grid) -> list[str]:
    if _plt() is None:
        return []
    written = []
    written += heatmaps_minhash(out_dir, grid_rows, grid)
    written += heatmaps_ngram(out_dir, grid_rows, grid)
    written += paragraph_thresholds(out_dir, grid_rows)
    written += by_level(out_dir, held_rows)
    written += pareto(out_dir, pareto_rows)
    return written
