"""The tuning study: every method's parameter grid on labelled streams, then held-out scores.

Protocol (the paper's §5.1, with one change of criterion):

1. Build labelled streams (:mod:`~lshbloom_udf.evaluation.generator`) at
   duplication levels 10 %..90 % from a *tuning* pool and, separately, from a
   *held-out* pool (another corpus, or the other half of an id split).
2. On the tuning streams, run each method over its grid: LSHBloom over
   threshold x num_perm x n-gram size x normalization; datasketch MinHashLSH
   over threshold x num_perm (at the paper's shingling and at the chosen one);
   CCNet and Dolma over the overlap threshold; Dolma-Ngram and DCLM over
   n-gram size x overlap threshold.
3. Select each method's configuration by the **worst F1 over the duplication
   levels** (ties: higher mean F1, then the cheaper configuration). The paper
   tuned on one balanced stream; a default must also hold when duplicates are
   rare, where precision matters most.
4. Score every selected configuration, and the paper's LSHBloom configuration,
   on the held-out streams; measure agreement of LSHBloom with datasketch
   ``MinHashLSH`` and ``MinHashLSHBloom`` on the same streams; time each
   selected method end to end and record its index bytes (Pareto plots).

Outputs in ``out_dir``: ``grid.csv`` (one row per method, configuration,
split and level), ``selected.csv``, ``heldout.csv``, ``agreement.csv``,
``pareto.csv``, ``summary.json``, ``results.md`` and, when matplotlib is
installed, the PNG plots.
"""

from __future__ import annotations

import csv
import json
import math
import os
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import numpy as np

from lshbloom_udf.evaluation import baselines as B
from lshbloom_udf.evaluation.generator import (
    DEFAULT_LEVELS,
    NoiseConfig,
    Source,
    Stream,
    VariantCache,
    id_split,
    make_stream,
    prepare_sources,
    read_jsonl,
)
from lshbloom_udf.evaluation.scoring import agreement, score
from lshbloom_udf.index import CapacityWarning, IndexParams
from lshbloom_udf.lsh import optimal_params
from lshbloom_udf.minhash import band_keys, normalization_name, signatures

P_EFFECTIVE = 1e-5


# --------------------------------------------------------------------------
# configurations


@dataclass(frozen=True)
class MinHashConfig:
    threshold: float
    num_perm: int
    ngram: int = 1
    normalize: str = "none"
    scheme: str = "affine32"
    seed: int = 1

    @property
    def bands(self) -> tuple[int, int]:
        return optimal_params(self.threshold, self.num_perm)

    def label(self) -> str:
        return f"T={self.threshold:g} k={self.num_perm} n={self.ngram} norm={self.normalize}" + (
            f" {self.scheme}" if self.scheme != "affine32" else ""
        )

    def params(self) -> dict:
        b, r = self.bands
        return {**asdict(self), "b": b, "r": r}

    @property
    def shingling(self) -> tuple:
        return (self.num_perm, self.ngram, self.normalize, self.scheme, self.seed)


# The paper's LSHBloom configuration (conf/paper.toml): unigrams, T = 0.5, 256 permutations,
# no normalization, datasketch < 2 permutations.
PAPER = MinHashConfig(threshold=0.5, num_perm=256, ngram=1, normalize="none", scheme="legacy")


@dataclass(frozen=True)
class Grid:
    thresholds: tuple[float, ...]
    num_perms: tuple[int, ...]
    ngrams: tuple[int, ...]
    normalizations: tuple[str, ...]
    overlap_thresholds: tuple[float, ...]
    overlap_ngrams: tuple[int, ...]
    minhashlsh: bool = True
    # datasketch MinHashLSH's grid (at the paper's shingling): None = the LSHBloom grid's values
    minhashlsh_thresholds: Optional[tuple[float, ...]] = None
    minhashlsh_num_perms: Optional[tuple[int, ...]] = None

    def minhash_configs(self) -> list[MinHashConfig]:
        return [
            MinHashConfig(t, k, n, normalization_name(z))
            for z in self.normalizations
            for n in self.ngrams
            for k in self.num_perms
            for t in self.thresholds
        ]

    def minhashlsh_configs(self) -> list[MinHashConfig]:
        """datasketch MinHashLSH's threshold x num_perm grid at the paper's shingling (unigrams, no normalization)."""
        return [
            MinHashConfig(t, k, 1, "none")
            for k in (self.minhashlsh_num_perms or self.num_perms)
            for t in (self.minhashlsh_thresholds or self.thresholds)
        ]


GRIDS = {
    # a few seconds: for tests and smoke runs
    "tiny": Grid((0.4, 0.6), (64, 128), (1, 3), ("none", "all"), (0.2, 0.6, 1.0), (2, 5), True),
    # the default: a few minutes on two (shared) cores with --docs 2000
    "default": Grid(
        (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8),
        (64, 128, 256, 512),
        (1, 2, 3, 4, 5),
        ("none", "all"),
        (0.2, 0.4, 0.6, 0.8, 1.0),
        (2, 5, 13),
        True,
        (0.3, 0.4, 0.5, 0.6, 0.7, 0.8),
        (128, 256),
    ),
    # the paper's full grid (§5.1.5) plus ours: tens of minutes
    "full": Grid(
        (0.2, 0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8, 0.9),
        (32, 48, 64, 128, 256, 512),
        (1, 2, 3, 4, 5, 7),
        ("none", "lower", "nfkc,lower", "all"),
        (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
        (1, 2, 5, 7, 13, 26),
        True,
    ),
}


# --------------------------------------------------------------------------
# data


@dataclass
class Split:
    """The streams of one pool at every level, with their distinct texts indexed once."""

    name: str
    streams: list[Stream]
    texts: list[str] = field(default_factory=list)  # distinct texts
    index: list[np.ndarray] = field(default_factory=list)  # per stream: rows into ``texts``

    @classmethod
    def build(cls, name: str, sources: Sequence[Source], num_docs: int, levels: Iterable[float], seed: int,
              noise: NoiseConfig = NoiseConfig()) -> "Split":
        cache = VariantCache(sources, seed, noise)
        streams = [make_stream(sources, num_docs, lvl, seed, noise, cache, name) for lvl in levels]
        split = cls(name, streams)
        pos: dict[tuple[str, int], int] = {}
        for st in streams:
            rows = []
            for d in st.docs:
                if d.key not in pos:
                    pos[d.key] = len(split.texts)
                    split.texts.append(d.text)
                rows.append(pos[d.key])
            split.index.append(np.asarray(rows, dtype=np.int64))
        return split


def load_pool(path: str, min_words: int = 50, split: Optional[str] = None, salt: str = "lshbloom-eval") -> tuple[list[Source], dict]:
    """Prepared sources of a JSONL file; ``split="a"``/``"b"`` keeps one half of an id split."""
    sources = read_jsonl(path)
    if split is not None:
        if split not in ("a", "b"):
            raise ValueError(f"split must be 'a' or 'b', got {split!r}")
        sources = [s for s in sources if (id_split(s.id, salt) < 0.5) == (split == "a")]
    return prepare_sources(sources, min_words=min_words)


# --------------------------------------------------------------------------
# running


def _row(method: str, params: dict, split: str, stream: Stream, dup: np.ndarray, seconds: float, nbytes: int) -> dict:
    s = score(stream.labels, dup)
    return {
        "method": method,
        "config": _config_label(method, params),
        "params": json.dumps(params, sort_keys=True),
        "split": split,
        "level": round(stream.level, 4),
        "docs": len(stream.docs),
        "duplicates": s.duplicates,
        "tp": s.tp,
        "fp": s.fp,
        "fn": s.fn,
        "precision": round(s.precision, 6),
        "recall": round(s.recall, 6),
        "f1": round(s.f1, 6),
        "seconds": round(seconds, 6),
        "index_bytes": int(nbytes),
    }


def _config_label(method: str, params: dict) -> str:
    if "num_perm" in params:
        return MinHashConfig(**{k: params[k] for k in ("threshold", "num_perm", "ngram", "normalize", "scheme", "seed")}).label()
    parts = [f"T={params['threshold']:g}"]
    if params.get("ngram") is not None:
        parts.append(f"n={params['ngram']}")
    return " ".join(parts)


class SignatureCache:
    """Signatures of a split's distinct texts per shingling, with the seconds they took per document."""

    def __init__(self, split: Split):
        self.split = split
        self._sigs: dict[tuple, tuple[np.ndarray, np.ndarray, float]] = {}

    def get(self, cfg: MinHashConfig) -> tuple[np.ndarray, np.ndarray, float]:
        key = cfg.shingling
        if key not in self._sigs:
            start = time.perf_counter()
            sigs = signatures(self.split.texts, num_perm=cfg.num_perm, ngram=cfg.ngram, seed=cfg.seed,
                              scheme=cfg.scheme, normalize=cfg.normalize)
            per_doc = (time.perf_counter() - start) / max(1, len(self.split.texts))
            has = ~(sigs == np.uint32(0xFFFFFFFF)).all(axis=1)
            self._sigs[key] = (sigs, has, per_doc)
        return self._sigs[key]

    def drop(self, keep: Iterable[tuple] = ()) -> None:
        keep = set(keep)
        for k in list(self._sigs):
            if k not in keep:
                del self._sigs[k]


def run_lshbloom_grid(split: Split, configs: Sequence[MinHashConfig], cache: SignatureCache, log=print) -> list[dict]:
    rows = []
    configs = sorted(configs, key=lambda c: c.shingling)
    last = None
    for cfg in configs:
        if cfg.shingling != last:
            cache.drop()
            last = cfg.shingling
        sigs, has, per_doc = cache.get(cfg)
        b, r = cfg.bands
        keys = band_keys(sigs, b, r)
        for st, idx in zip(split.streams, split.index):
            params = IndexParams(b=b, r=r, capacity=len(idx), num_perm=cfg.num_perm, threshold=cfg.threshold,
                                 ngram=cfg.ngram, normalize=cfg.normalize, scheme=cfg.scheme, seed=cfg.seed,
                                 p_effective=P_EFFECTIVE)
            res = B.lshbloom_decisions(keys[idx], has[idx], params)
            rows.append(_row("lshbloom", cfg.params(), split.name, st, res.duplicate,
                             res.seconds + per_doc * len(idx), res.index_bytes))
        if log:
            worst = min(r_["f1"] for r_ in rows[-len(split.streams):])
            log(f"  lshbloom {cfg.label():40s} worst F1 {worst:.4f}")
    cache.drop()
    return rows


def run_datasketch(split: Split, configs: Sequence[MinHashConfig], cache: SignatureCache, bloom: bool = False,
                   lshbloom_rows: Optional[Sequence[dict]] = None, log=print,
                   references: Optional[Sequence[str]] = None) -> tuple[list[dict], list[dict]]:
    """datasketch ``MinHashLSH`` (or ``MinHashLSHBloom``) on the product's bit-identical signatures.

    ``references`` runs several of ``"minhashlsh"``, ``"datasketch-lshbloom"`` on
    the same ``MinHash`` objects (default: the one ``bloom`` names). The objects
    are built once per shingling and stream and shared by every threshold.
    Returns score rows and agreement rows against LSHBloom's decisions (recomputed here).
    """
    refs = tuple(references) if references else (("datasketch-lshbloom",) if bloom else ("minhashlsh",))
    rows, agree = [], []
    groups: dict[tuple, list[MinHashConfig]] = {}
    for cfg in sorted(configs, key=lambda c: (c.shingling, c.threshold)):
        groups.setdefault(cfg.shingling, []).append(cfg)
    for group in groups.values():
        sigs, has, per_doc = cache.get(group[0])
        keys = {cfg: band_keys(sigs, *cfg.bands) for cfg in group}
        by_cfg: dict[tuple, list[dict]] = {}
        for st, idx in zip(split.streams, split.index):
            start = time.perf_counter()
            mh = B.minhashes_from_signatures(sigs[idx], has[idx], seed=group[0].seed, scheme=group[0].scheme)
            mh_seconds = time.perf_counter() - start
            for cfg in group:
                b, r = cfg.bands
                params = IndexParams(b=b, r=r, capacity=len(idx), num_perm=cfg.num_perm, threshold=cfg.threshold,
                                     ngram=cfg.ngram, normalize=cfg.normalize, scheme=cfg.scheme, seed=cfg.seed,
                                     p_effective=P_EFFECTIVE)
                ours = B.lshbloom_decisions(keys[cfg][idx], has[idx], params).duplicate
                for method in refs:
                    if method == "datasketch-lshbloom":
                        res = B.datasketch_lshbloom_decisions(mh, cfg.threshold, cfg.num_perm, len(idx), params.p_band, bands=(b, r))
                    elif method == "minhashlsh":
                        res = B.datasketch_lsh_decisions(mh, cfg.threshold, cfg.num_perm, bands=(b, r))
                    else:
                        raise ValueError(f"unknown datasketch reference {method!r}")
                    row = _row(method, cfg.params(), split.name, st, res.duplicate,
                               res.seconds + mh_seconds + per_doc * len(idx), res.index_bytes)
                    rows.append(row)
                    by_cfg.setdefault((method, cfg), []).append(row)
                    a = agreement(ours, res.duplicate)
                    agree.append({"reference": method, "config": cfg.label(), "split": split.name, "level": round(st.level, 4),
                                  **{k: v for k, v in a.to_dict().items()}})
                    by_cfg.setdefault(("agree", method, cfg), []).append(a.to_dict())
        if log:
            for cfg in group:
                for method in refs:
                    worst = min(r_["f1"] for r_ in by_cfg[(method, cfg)])
                    ident = all(x["identical"] for x in by_cfg[("agree", method, cfg)])
                    log(f"  {method} {cfg.label():40s} worst F1 {worst:.4f} identical to lshbloom: {ident}")
    cache.drop()
    return rows, agree


def run_overlap_grid(split: Split, method: str, ngrams: Sequence[Optional[int]], thresholds: Sequence[float], log=print,
                     tokens: Optional[dict] = None) -> list[dict]:
    """The duplicated fractions of every stream, for each n-gram size; every threshold is then free.

    Fractions come from a :class:`~lshbloom_udf.evaluation.baselines.UnitTable`
    over the split's distinct texts (exact unit sets, computed in bulk; the
    methods' Bloom filters can only add a false "seen" at rate 1e-5), so
    ``seconds`` and ``index_bytes`` here are those of the bulk computation
    (``8`` bytes per distinct unit of the stream), not of the method:
    :func:`pareto_rows` runs each selected method through its real Bloom filter.
    ``tokens`` caches token tables per method between calls.
    """
    rows = []
    tokens = {} if tokens is None else tokens
    for n in ngrams:
        m = B.overlap_method(method, n)
        start = time.perf_counter()
        if isinstance(m, B.NgramOverlap):
            if method not in tokens:
                tokens[method] = B.TokenTable(m.tokenizer, split.texts)
            table = B.UnitTable(m, split.texts, tokens[method])
        else:
            table = B.UnitTable(m, split.texts)
        build = (time.perf_counter() - start) / max(1, len(split.streams))
        per_t: dict[float, list[dict]] = {t: [] for t in thresholds}
        for st, idx in zip(split.streams, split.index):
            start = time.perf_counter()
            frac = table.fractions(idx)
            seconds = time.perf_counter() - start + build
            nbytes = 8 * table.distinct_units(idx)
            for t in thresholds:
                params = {"threshold": t, "ngram": n}
                rows.append(_row(method, params, split.name, st, m.decide(frac, t), seconds, nbytes))
                per_t[t].append(rows[-1])
        if log:
            best = max(thresholds, key=lambda t: min(r["f1"] for r in per_t[t]))
            log(f"  {method} n={n}: best T={best:g} worst F1 {min(r['f1'] for r in per_t[best]):.4f}")
    return rows


# --------------------------------------------------------------------------
# selection


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


# --------------------------------------------------------------------------
# the whole study


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


def _config_from_params(params: str | dict) -> MinHashConfig:
    p = json.loads(params) if isinstance(params, str) else params
    return MinHashConfig(p["threshold"], p["num_perm"], p["ngram"], p["normalize"], p.get("scheme", "affine32"), p.get("seed", 1))


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

    # 1. LSHBloom grid on the tuning streams
    log("LSHBloom grid (tuning streams)")
    tune_cache = SignatureCache(tune)
    configs = grid.minhash_configs()
    grid_rows = run_lshbloom_grid(tune, configs, tune_cache, log)
    summary = summarize(grid_rows)
    chosen_s = select(summary, "lshbloom", "tune")
    chosen = _config_from_params(chosen_s["params"])
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

    # 4. held-out streams: selected configurations
    log(f"held-out streams ({time.perf_counter() - t0:.0f} s)")
    test_cache = SignatureCache(test)
    held_rows = run_lshbloom_grid(test, [chosen], test_cache, log)
    held_rows += [dict(r, method="lshbloom-paper") for r in run_lshbloom_grid(test, [PAPER], test_cache, log)]
    for m in methods:
        s = selected[m]
        p = json.loads(s["params"])
        if m == "minhashlsh":
            rows, agree = run_datasketch(test, [_config_from_params(p)], test_cache, bloom=False, log=log)
            held_rows += rows
        elif m in cfg.baselines:
            held_rows += run_overlap_grid(test, m, [p.get("ngram")], [p["threshold"]], log)
    # agreement with datasketch on the held-out streams: chosen and paper, exact and Bloom
    for c in (chosen, PAPER):
        name = "chosen" if c == chosen else "paper"
        rows, agree = run_datasketch(test, [c], test_cache, log=log, references=("minhashlsh", "datasketch-lshbloom"))
        agree_rows += [dict(a, product=name) for a in agree]
        held_rows += [dict(r, method=f"datasketch-lshbloom-{name}") for r in rows if r["method"] == "datasketch-lshbloom"]
    write_csv(os.path.join(cfg.out_dir, "heldout.csv"), held_rows)
    write_csv(os.path.join(cfg.out_dir, "agreement.csv"), agree_rows)
    held_summary = summarize(held_rows)

    # 5. cost: each selected method end to end on the balanced held-out stream
    log(f"Pareto timings (held-out, level closest to 50 %) ({time.perf_counter() - t0:.0f} s)")
    pareto = pareto_rows(test, selected, chosen, cfg.baselines)
    write_csv(os.path.join(cfg.out_dir, "pareto.csv"), pareto)

    result = {
        "pools": {"tune": {"name": names[0], **tune_rep}, "heldout": {"name": names[1], **test_rep}},
        "docs_per_stream": cfg.docs,
        "levels": list(cfg.levels),
        "seed": cfg.seed,
        "grid": cfg.grid,
        "chosen": chosen.params(),
        "paper": PAPER.params(),
        "selected": {m: {"config": s["config"], "tune_worst_f1": s["worst_f1"], "tune_mean_f1": s["mean_f1"]} for m, s in selected.items()},
        "heldout": {f"{s['method']} {s['config']}": {"worst_f1": s["worst_f1"], "mean_f1": s["mean_f1"],
                                                      "worst_level": s["worst_level"], "min_precision": s["min_precision"],
                                                      "min_recall": s["min_recall"]}
                    for s in held_summary},
        "agreement": _agreement_summary(agree_rows),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    with open(os.path.join(cfg.out_dir, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2, sort_keys=True)
    with open(os.path.join(cfg.out_dir, "results.md"), "w", encoding="utf-8") as f:
        f.write(results_markdown(result, summary, held_rows, pareto))
    if cfg.plots:
        from lshbloom_udf.evaluation import plots

        written = plots.make_all(cfg.out_dir, grid_rows, held_rows, pareto, chosen.label(), grid)
        result["plots"] = written
        log(f"plots: {', '.join(os.path.basename(p) for p in written) or 'none (matplotlib missing)'}")
    log(f"done in {time.perf_counter() - t0:.0f} s")
    return result


def _stem(path: str) -> str:
    base = os.path.basename(path)
    for ext in (".gz", ".jsonl", ".json"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base


def _agreement_summary(rows: Sequence[dict]) -> list[dict]:
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
        c = _config_from_params(selected["minhashlsh"]["params"])
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
        add(name, _config_label(name, p), res)
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
