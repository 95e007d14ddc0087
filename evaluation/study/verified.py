"""Verified vs unverified decisions (``verify=True``, issue 14) on the study's streams.

    python -m evaluation.study.verified --tune ../shared/corpus/linux-docs.jsonl.gz \\
        --test ../shared/corpus/man-pages.jsonl.gz [--third build/docstrings.jsonl.gz] --docs 2000 \\
        --out docs/evaluation/verified

The same streams as the study (:class:`~evaluation.study.grid.Split`,
same pools, sizes, levels and seeds). For each configuration the pass's
keep-first decisions come from the product's index
(:func:`~evaluation.baselines.lshbloom_decisions`) and are then
verified by :func:`verify_decisions`, the rule of :mod:`lshbloom_udf.spark.verify`
in one process: a flag stays when an earlier document the pass kept shares a
(band, key) with the document and their exact shingle-set Jaccard is
``>= T_v``. A *permissive* configuration bands for a lower threshold ``T_b``
(more candidates: the S-curve moves left) and verifies at ``T_v``. The best
verified configuration is chosen on the tuning streams (worst F1 over levels,
then mean) and reported on the held-out ones.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from lshbloom_udf import _native
from evaluation import baselines as B
from evaluation.generator import DEFAULT_LEVELS
from evaluation.scoring import score
from evaluation.study.candidates import BOUNDED, Bounds, PassResult, bucket_ids, decide
from evaluation.study.configs import P_EFFECTIVE, MinHashConfig
from evaluation.study.grid import SignatureCache, Split, load_pool
from lshbloom_udf.index import CapacityWarning, IndexParams
from lshbloom_udf.minhash import band_keys, normalization_mask


def verify_decisions(keys: np.ndarray, has: np.ndarray, flags: np.ndarray, shingles: Sequence[frozenset],
                     threshold: float, chained: bool = True, containment: Optional[float] = None,
                     floor: Optional[float] = None, bounds: Optional[Bounds] = BOUNDED) -> np.ndarray:
    """The pass's ``flags`` that an earlier kept document sharing a (band, key) verifies.

    A pair verifies when its exact Jaccard is ``>= threshold`` or, given
    ``containment``, when ``|S_later ∩ S_earlier| / |S_later| >= containment``
    (a partial copy: a truncation or an excerpt of the earlier document) and, given ``floor``, the
    Jaccard is ``>= floor`` too (``containment_min_jaccard``).
    Kept documents: those the pass kept and (``chained``) those verification
    unflagged before (in processing order: the job's round 2); without ``chained`` only the pass's.
    Each round looks at the candidates ``bounds`` chooses (the job's, by default; None: all of them):
    :func:`evaluation.study.candidates.decide`.
    """

    def verifies(p: int, q: int, kept) -> bool:
        a, s = shingles[p], shingles[q]
        inter = len(a & s)
        union = len(a | s)
        return inter >= threshold * union or (containment is not None and inter >= containment * len(a)
                                              and (floor is None or inter >= floor * union))

    result = PassResult.of(np.asarray(flags, dtype=bool), bucket_ids(keys), np.asarray(has, dtype=bool))
    return decide(result, verifies, bounds, chained)


@dataclass(frozen=True)
class Verified:
    """A configuration of the study: banding at ``band.threshold``, verification at ``verify`` (None: off)."""

    band: MinHashConfig
    verify: Optional[float]
    band_key: str = "mix"
    chained: bool = True

    def label(self) -> str:
        v = "unverified" if self.verify is None else f"verified at {self.verify:g}" + ("" if self.chained else " (pass-kept only)")
        return f"{self.band.label()} ({self.band_key}), {v}"


def configurations() -> list[Verified]:
    """The defaults and the paper's, unverified and verified, and permissive candidate stages for both."""
    out = []
    for t_v, k, n, norm, scheme, key in ((0.45, 512, 4, "nfkc,lower,punct", "affine32", "mix"),
                                         (0.5, 256, 1, "none", "legacy", "sum")):
        for t_b in (0.25, 0.3, 0.35, 0.4, t_v):
            cfg = MinHashConfig(threshold=t_b, num_perm=k, ngram=n, normalize=norm, scheme=scheme)
            if t_b == t_v:
                out.append(Verified(cfg, None, key))
            out.append(Verified(cfg, t_v, key))
            out.append(Verified(cfg, t_v, key, chained=False))
    return out


def shingle_sets(texts: Sequence[str], cfg: MinHashConfig) -> list[frozenset]:
    mask = normalization_mask(cfg.normalize)
    return [frozenset(_native.shingles(t, cfg.ngram, mask)) for t in texts]


def run_split(split: Split, configs: Sequence[Verified], log=print) -> list[dict]:
    rows = []
    cache = SignatureCache(split)
    sets: dict = {}
    for v in sorted(configs, key=lambda c: c.band.shingling):
        sigs, has, _ = cache.get(v.band)
        key = (v.band.ngram, v.band.normalize)
        if key not in sets:
            sets[key] = shingle_sets(split.texts, v.band)
        b, r = v.band.bands
        keys = band_keys(sigs, b, r, v.band_key)
        for st, idx in zip(split.streams, split.index):
            params = IndexParams(b=b, r=r, capacity=len(idx), num_perm=v.band.num_perm, threshold=v.band.threshold,
                                 ngram=v.band.ngram, normalize=v.band.normalize, scheme=v.band.scheme,
                                 seed=v.band.seed, p_effective=P_EFFECTIVE, band_key=v.band_key)
            flags = B.lshbloom_decisions(keys[idx], has[idx], params).duplicate
            start = time.perf_counter()
            if v.verify is not None:
                flags = verify_decisions(keys[idx], has[idx], flags, [sets[key][j] for j in idx], v.verify,
                                         v.chained)
            s = score(st.labels, flags)
            rows.append({"config": v.label(), "split": split.name, "level": round(st.level, 4), "tp": s.tp,
                         "fp": s.fp, "fn": s.fn, "precision": round(s.precision, 6), "recall": round(s.recall, 6),
                         "f1": round(s.f1, 6), "verify_seconds": round(time.perf_counter() - start, 4)})
        if log:
            f1 = [r_["f1"] for r_ in rows[-len(split.streams):]]
            log(f"  {split.name} {v.label():70s} worst F1 {min(f1):.4f} mean {np.mean(f1):.4f}")
    return rows


def table(rows: Sequence[dict], split: str, configs: Sequence[str]) -> str:
    levels = sorted({r["level"] for r in rows if r["split"] == split})
    head = "| configuration | " + " | ".join(f"{lvl:.0%}" for lvl in levels) + " | worst |"
    lines = [head, "|---" * (len(levels) + 2) + "|"]
    for c in configs:
        f1 = {r["level"]: r["f1"] for r in rows if r["split"] == split and r["config"] == c}
        if f1:
            lines.append(f"| {c} | " + " | ".join(f"{f1[lvl]:.3f}" for lvl in levels) + f" | **{min(f1.values()):.3f}** |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tune", help="the tuning corpus (the best verified configuration is chosen on it)")
    p.add_argument("--test", required=True)
    p.add_argument("--third", help="a third held-out corpus (e.g. build/docstrings.jsonl.gz)")
    p.add_argument("--docs", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="docs/evaluation/verified")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore", CapacityWarning)
    t0 = time.monotonic()
    configs = configurations()
    os.makedirs(args.out, exist_ok=True)
    rows: list[dict] = []
    for i, (name, path) in enumerate((("tune", args.tune), ("heldout", args.test), ("third", args.third))):
        if path is None:
            continue
        pool, _ = load_pool(path)
        # the study's seeds: tuning seed, held-out seed + 1 (the third corpus is held out too, as in its §5b run)
        split = Split.build(name, pool, args.docs, DEFAULT_LEVELS, args.seed + min(i, 1))
        rows += run_split(split, configs)
    labels = [c.label() for c in configs]

    def worst_mean(c, split="tune"):
        f1 = [r["f1"] for r in rows if r["split"] == split and r["config"] == c]
        return (min(f1), float(np.mean(f1)))

    best = {fam: max((c for c in configs if c.verify is not None and c.band.scheme == fam),
                     key=lambda c: worst_mean(c.label())).label() for fam in ("affine32", "legacy")} if args.tune else {}
    md = [f"Streams: {args.docs} documents, levels {', '.join(f'{x:.0%}' for x in DEFAULT_LEVELS)}, seed {args.seed}; "
          f"{time.monotonic() - t0:.0f} s.", "", f"Best verified (tuning streams, worst then mean F1): {best}", ""]
    for split in ("tune", "heldout", "third"):
        if any(r["split"] == split for r in rows):
            md += [f"#### {split}", "", table(rows, split, labels), ""]
    with open(os.path.join(args.out, "verified.csv"), "w") as f:
        f.write(",".join(rows[0]) + "\n")
        f.writelines(",".join(f'"{v}"' if isinstance(v, str) else str(v) for v in r.values()) + "\n" for r in rows)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("\n".join(md))
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump({"best_verified": best, "seconds": time.monotonic() - t0}, f, indent=1)
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
