"""Running a grid: every configuration of a method on one split's streams, one score row per stream.

A :class:`Split` holds a pool's streams at every level with their distinct
texts indexed once, so signatures (:class:`SignatureCache`, per shingling)
and units (:func:`run_overlap_grid`) are computed once per distinct text and
shared by every stream and every threshold.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from evaluation import baselines as B
from evaluation.generator import (
    NoiseConfig,
    Source,
    Stream,
    VariantCache,
    id_split,
    make_stream,
    prepare_sources,
    read_jsonl,
)
from evaluation.scoring import agreement, score
from evaluation.study.configs import P_EFFECTIVE, MinHashConfig, config_label
from lshbloom_udf.index import IndexParams
from lshbloom_udf.minhash import band_keys, signatures


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


def _row(method: str, params: dict, split: str, stream: Stream, dup: np.ndarray, seconds: float, nbytes: int) -> dict:
    s = score(stream.labels, dup)
    return {
        "method": method,
        "config": config_label(method, params),
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

    Fractions come from a :class:`~evaluation.baselines.UnitTable`
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
