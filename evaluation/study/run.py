"""The study from end to end: :func:`run_study` takes the protocol's steps in order, one function each.

The protocol, the selection criterion and the outputs are described in
:mod:`evaluation.study`.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from dataclasses import dataclass
from typing import Optional

from evaluation.generator import DEFAULT_LEVELS
from evaluation.study.configs import GRIDS, PAPER, Grid, MinHashConfig, config_from_params
from evaluation.study.grid import (
    SignatureCache,
    Split,
    load_pool,
    run_datasketch,
    run_lshbloom_grid,
    run_overlap_grid,
)
from evaluation.study.selection import (
    agreement_summary,
    pareto_rows,
    results_markdown,
    select,
    summarize,
    write_csv,
)
from lshbloom_udf.index import CapacityWarning


@dataclass
class StudyConfig:
    tune: str
    test: Optional[str] = None  # None: the other half of an id split of ``tune``
    out_dir: str = "docs/evaluation"
    docs: int = 2000
    levels: tuple[float, ...] = DEFAULT_LEVELS
    seed: int = 0
    grid: str = "default"
    min_words: int = 50
    plots: bool = True
    baselines: tuple[str, ...] = ("ccnet", "dolma", "dolma-ngram", "dclm")


@dataclass
class _Pools:
    """The tuning and held-out splits, the pools' names and what cleaning each pool reported."""

    tune: Split
    test: Split
    names: tuple[str, str]
    reports: tuple[dict, dict]


@dataclass
class _Tuning:
    """What the tuning streams decided: every grid row, LSHBloom's choice and each method's selection."""

    grid_rows: list[dict]
    agree_rows: list[dict]
    summary: list[dict]
    chosen: MinHashConfig
    methods: list[str]
    selected: dict


def run_study(cfg: StudyConfig, log=print) -> dict:
    with warnings.catch_warnings():
        # every stream's index is sized to the stream exactly; the 90 % fill warning is expected
        warnings.simplefilter("ignore", CapacityWarning)
        return _run_study(cfg, log or (lambda *a: None))


def _run_study(cfg: StudyConfig, log=print) -> dict:
    if cfg.grid not in GRIDS:
        raise ValueError(f"unknown grid {cfg.grid!r}; choose from {sorted(GRIDS)}")
    grid = GRIDS[cfg.grid]
    os.makedirs(cfg.out_dir, exist_ok=True)
    t0 = time.perf_counter()

    pools = _build_splits(cfg, log, t0)
    tuning = _tune(cfg, grid, pools.tune, log, t0)
    held_rows = _score_heldout(cfg, pools.test, tuning, log, t0)
    held_summary = summarize(held_rows)

    # 5. cost: each selected method end to end on the balanced held-out stream
    log(f"Pareto timings (held-out, level closest to 50 %) ({time.perf_counter() - t0:.0f} s)")
    pareto = pareto_rows(pools.test, tuning.selected, tuning.chosen, cfg.baselines)
    write_csv(os.path.join(cfg.out_dir, "pareto.csv"), pareto)

    result = _result(cfg, pools, tuning, held_summary, t0)
    _write_reports(cfg, grid, result, tuning, held_rows, pareto, log)
    log(f"done in {time.perf_counter() - t0:.0f} s")
    return result


def _build_splits(cfg: StudyConfig, log, t0: float) -> _Pools:
    """The two pools (two files, or the two halves of an id split of one) and their streams."""
    if cfg.test is None:
        tune_pool, tune_rep = load_pool(cfg.tune, cfg.min_words, split="a")
        test_pool, test_rep = load_pool(cfg.tune, cfg.min_words, split="b")
        names = (f"{_stem(cfg.tune)}[a]", f"{_stem(cfg.tune)}[b]")
    else:
        tune_pool, tune_rep = load_pool(cfg.tune, cfg.min_words)
        test_pool, test_rep = load_pool(cfg.test, cfg.min_words)
        names = (_stem(cfg.tune), _stem(cfg.test))
    log(f"pools: tune {names[0]} {tune_rep}; held-out {names[1]} {test_rep}")
    tune = Split.build("tune", tune_pool, cfg.docs, cfg.levels, cfg.seed)
    test = Split.build("heldout", test_pool, cfg.docs, cfg.levels, cfg.seed + 1)
    log(f"streams: {len(cfg.levels)} levels x {cfg.docs} docs; distinct texts tune {len(tune.texts)}, held-out {len(test.texts)}"
        f" ({time.perf_counter() - t0:.0f} s)")
    return _Pools(tune, test, names, (tune_rep, test_rep))


def _tune(cfg: StudyConfig, grid: Grid, tune: Split, log, t0: float) -> _Tuning:
    """Steps 1-3 on the tuning streams: every method's grid, then each method's selection (grid.csv, selected.csv)."""
    # 1. LSHBloom grid on the tuning streams
    log("LSHBloom grid (tuning streams)")
    tune_cache = SignatureCache(tune)
    configs = grid.minhash_configs()
    grid_rows = run_lshbloom_grid(tune, configs, tune_cache, log)
    summary = summarize(grid_rows)
    chosen_s = select(summary, "lshbloom", "tune")
    chosen = config_from_params(chosen_s["params"])
    log(f"chosen: {chosen.label()} (worst F1 on tuning streams {chosen_s['worst_f1']:.4f})")

    # 2. datasketch MinHashLSH: the threshold x num_perm grid at the paper's shingling, and the chosen configuration
    agree_rows: list[dict] = []
    if grid.minhashlsh:
        log(f"datasketch MinHashLSH grid (tuning streams) ({time.perf_counter() - t0:.0f} s)")
        ds_cfgs = grid.minhashlsh_configs()
        ds_cfgs += [chosen] if chosen not in ds_cfgs else []
        rows, agree = run_datasketch(tune, ds_cfgs, tune_cache, bloom=False, log=log)
        grid_rows += rows
        agree_rows += agree

    # 3. overlap baselines
    for name in cfg.baselines:
        log(f"{name} grid (tuning streams)")
        ngrams = grid.overlap_ngrams if name in ("dolma-ngram", "dclm") else (None,)
        grid_rows += run_overlap_grid(tune, name, ngrams, grid.overlap_thresholds, log)
    log(f"  ({time.perf_counter() - t0:.0f} s)")

    # the paper's configuration on the tuning streams too
    grid_rows += [dict(r, method="lshbloom-paper") for r in run_lshbloom_grid(tune, [PAPER], tune_cache, log=None)]
    summary = summarize(grid_rows)
    write_csv(os.path.join(cfg.out_dir, "grid.csv"), grid_rows)

    methods = ["lshbloom", "lshbloom-paper"] + (["minhashlsh"] if grid.minhashlsh else []) + list(cfg.baselines)
    selected = {m: select(summary, m, "tune") for m in methods}
    write_csv(os.path.join(cfg.out_dir, "selected.csv"), [dict(s, method=m) for m, s in selected.items()])
    return _Tuning(grid_rows, agree_rows, summary, chosen, methods, selected)


def _score_heldout(cfg: StudyConfig, test: Split, tuning: _Tuning, log, t0: float) -> list[dict]:
    """Step 4: the selected configurations on the held-out streams (heldout.csv), and datasketch agreement (agreement.csv).

    Adds the held-out agreement rows to ``tuning.agree_rows``.
    """
    chosen, selected = tuning.chosen, tuning.selected
    log(f"held-out streams ({time.perf_counter() - t0:.0f} s)")
    test_cache = SignatureCache(test)
    held_rows = run_lshbloom_grid(test, [chosen], test_cache, log)
    held_rows += [dict(r, method="lshbloom-paper") for r in run_lshbloom_grid(test, [PAPER], test_cache, log)]
    for m in tuning.methods:
        s = selected[m]
        p = json.loads(s["params"])
        if m == "minhashlsh":
            rows, agree = run_datasketch(test, [config_from_params(p)], test_cache, bloom=False, log=log)
            held_rows += rows
        elif m in cfg.baselines:
            held_rows += run_overlap_grid(test, m, [p.get("ngram")], [p["threshold"]], log)
    # agreement with datasketch on the held-out streams: chosen and paper, exact and Bloom
    for c in (chosen, PAPER):
        name = "chosen" if c == chosen else "paper"
        rows, agree = run_datasketch(test, [c], test_cache, log=log, references=("minhashlsh", "datasketch-lshbloom"))
        tuning.agree_rows += [dict(a, product=name) for a in agree]
        held_rows += [dict(r, method=f"datasketch-lshbloom-{name}") for r in rows if r["method"] == "datasketch-lshbloom"]
    write_csv(os.path.join(cfg.out_dir, "heldout.csv"), held_rows)
    write_csv(os.path.join(cfg.out_dir, "agreement.csv"), tuning.agree_rows)
    return held_rows


def _result(cfg: StudyConfig, pools: _Pools, tuning: _Tuning, held_summary: list[dict], t0: float) -> dict:
    """The study's outcome as ``summary.json`` records it."""
    names, (tune_rep, test_rep) = pools.names, pools.reports
    return {
        "pools": {"tune": {"name": names[0], **tune_rep}, "heldout": {"name": names[1], **test_rep}},
        "docs_per_stream": cfg.docs,
        "levels": list(cfg.levels),
        "seed": cfg.seed,
        "grid": cfg.grid,
        "chosen": tuning.chosen.params(),
        "paper": PAPER.params(),
        "selected": {m: {"config": s["config"], "tune_worst_f1": s["worst_f1"], "tune_mean_f1": s["mean_f1"]}
                     for m, s in tuning.selected.items()},
        "heldout": {f"{s['method']} {s['config']}": {"worst_f1": s["worst_f1"], "mean_f1": s["mean_f1"],
                                                      "worst_level": s["worst_level"], "min_precision": s["min_precision"],
                                                      "min_recall": s["min_recall"]}
                    for s in held_summary},
        "agreement": agreement_summary(tuning.agree_rows),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def _write_reports(cfg: StudyConfig, grid: Grid, result: dict, tuning: _Tuning, held_rows: list[dict],
                   pareto: list[dict], log) -> None:
    """summary.json, results.md and, when asked for (and matplotlib is installed), the plots."""
    with open(os.path.join(cfg.out_dir, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2, sort_keys=True)
    with open(os.path.join(cfg.out_dir, "results.md"), "w", encoding="utf-8") as f:
        f.write(results_markdown(result, tuning.summary, held_rows, pareto))
    if cfg.plots:
        from evaluation import plots

        written = plots.make_all(cfg.out_dir, tuning.grid_rows, held_rows, pareto, tuning.chosen.label(), grid)
        result["plots"] = written
        log(f"plots: {', '.join(os.path.basename(p) for p in written) or 'none (matplotlib missing)'}")


def _stem(path: str) -> str:
    base = os.path.basename(path)
    for ext in (".gz", ".jsonl", ".json"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base
