"""Where the shared shingles lie: position signals the three counts do not carry (issue 20, English).

    python -m evaluation.study.coverage [--corpus-dir ../shared/corpus] [--out docs/evaluation/coverage]

The counts' rule (``J >= Tj or (C >= Tc and J >= J_c)``) cannot tell two pages from one template (J 0.42-0.45)
from a noisy copy (J 0.32-0.40, docs/evaluation.md §0.8). Two signals look at *where* the shared shingles of the
later document ``d`` lie (computable from the two texts' shingles in order, as the product's overlap loop sees
them), a third at which shared shingles other documents share too:

* **chunk coverage** (:func:`chunk_containments`): cut ``d``'s distinct shingles, in first-occurrence order, into
  ``k`` consecutive chunks; coverage is the share of chunks whose containment in ``S_e`` reaches ``floor``. The
  idea: a noisy copy overlaps everywhere, templated siblings share whole sections and lack others.
* **scattered difference** (:func:`uncovered_runs`): the positions of a text (characters of the squeezed text,
  tokens for words) that no shingle shared with the other document covers, in runs. A character edit leaves about
  one position uncovered (the windows over it are lost, their neighbours still cover up to it), a differing word or
  sentence all of its positions, a truncated or dropped section one long run. ``scattered(L)`` is the share of
  positions in uncovered runs shorter than ``L``, the smaller of the two directions (a partial copy lies whole
  inside the longer document, and what the longer one lacks is one long run). The idea: a noisy copy differs by
  scattered characters (a few per cent), templated siblings by scattered words and sentences (more).
* **template shingles** (the rule's ``signal="template"``): the shingles ``d`` and ``e`` share with another kept
  candidate ``c`` of ``d`` that is not itself a copy of ``e`` (``J(c, e) < distinct_below``) are a template's;
  the Jaccard of ``d`` and ``e`` without them must still reach ``bound``. Needs a third candidate in the stream.

The rules studied (:class:`PositionRule`, :data:`RULES`) keep the counts' rule and ask a Jaccard-branch match
(containment's branch is whole by construction) below ``j_high`` to pass one of these tests too. Scored on the
multilingual study's streams under the shipped candidate (:data:`evaluation.study.multilingual.SHIPPED`) and on
the pools' distinct-source pairs (:mod:`evaluation.study.templated_pairs`); parameters are judged on the tune
side only. Results: docs/evaluation.md §0.8.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
from dataclasses import dataclass
from typing import Optional

import numpy as np

from evaluation.scoring import score
from evaluation.shingling import (
    DENSE_WEIGHT, Shingling, _dense_mask, _squeeze, normalize, shingle_hashes,
)
from evaluation.study.candidates import PassResult, ShingledSplit, verify_with
from lshbloom_udf.config import TEMPLATE_BELOW


def ordered_shingles(text: Optional[str], shingling: Shingling) -> list[str]:
    """The shingles of ``text`` by start position (repeats kept); as a set, :func:`evaluation.shingling.shingles`
    (for ``words`` with the study's joined form: :mod:`evaluation.study.candidates`)."""
    norm = normalize(text or "", shingling.normalize)
    n = shingling.ngram
    if shingling.unit == "words":
        tokens = norm.split()
        if not tokens:
            return []
        grams = [tokens] if len(tokens) < n else [tokens[i:i + n] for i in range(len(tokens) - n + 1)]
        return ["\u2581".join(g) for g in grams]
    s = _squeeze(norm)
    if not s:
        return []
    weights = np.ones(len(s), np.int64)
    if shingling.unit == "mixed":
        weights = np.where(_dense_mask(np.frombuffer(s.encode("utf-32-le"), dtype=np.uint32)), DENSE_WEIGHT, 1)
    cum = np.concatenate(([0], np.cumsum(weights)))
    if cum[-1] < n:
        return [s]
    ends = np.searchsorted(cum, cum[:-1] + n, side="left")
    starts = np.flatnonzero(ends <= len(s))
    return [s[i:j] for i, j in zip(starts.tolist(), ends[starts].tolist())]


def _hashes(seq: list[str]) -> np.ndarray:
    return np.fromiter((hash(s) for s in seq), np.int64, len(seq))


def chunk_containments(text: str, other: np.ndarray, shingling: Shingling, k: int) -> np.ndarray:
    """Containment in ``other`` (sorted distinct hashes) of ``k`` consecutive chunks of ``text``'s distinct
    shingles in first-occurrence order."""
    seq = np.array(list(dict.fromkeys(_hashes(ordered_shingles(text, shingling)).tolist())), np.int64)
    if not len(seq):
        return np.zeros(0)
    hit = np.isin(seq, other)
    k = min(k, len(seq))
    bounds = (np.arange(k + 1) * len(seq)) // k
    return np.array([hit[a:b].mean() for a, b in zip(bounds[:-1], bounds[1:])])


def uncovered_runs(text: str, other: np.ndarray, shingling: Shingling) -> tuple[np.ndarray, int]:
    """(lengths of the runs of ``text``'s positions no shingle shared with ``other`` covers, positions)."""
    seq = ordered_shingles(text, shingling)
    if not seq:
        return np.zeros(0, np.int64), 0
    hit = np.isin(_hashes(seq), other)
    span = (np.full(len(seq), shingling.ngram) if shingling.unit == "words"
            else np.fromiter((len(s) for s in seq), np.int64, len(seq)))
    reach = np.maximum.accumulate(np.where(hit, np.arange(len(seq)) + span, 0))
    miss = reach <= np.arange(len(seq))
    edges = np.flatnonzero(np.diff(np.r_[0, miss.astype(np.int8), 0]))
    return edges[1::2] - edges[::2], len(seq)


def scattered(runs: tuple[np.ndarray, int], max_run: int, min_run: int = 1) -> float:
    lengths, positions = runs
    return float(lengths[(lengths >= min_run) & (lengths < max_run)].sum() / positions) if positions else 0.0


@dataclass(frozen=True)
class PositionRule:
    """A Jaccard-branch match with ``J < j_high`` also needs ``signal`` to pass: ``coverage`` (chunks ``k``,
    ``floor``, at least ``bound`` of them), ``scattered`` (runs shorter than ``max_run``, below ``bound``) or
    ``template`` (Jaccard without the shingles shared with a candidate ``c``, ``J(c, e) < distinct_below``,
    at least ``bound``)."""

    signal: str
    bound: float
    k: int = 8
    floor: float = 0.2
    max_run: int = 40
    j_high: float = TEMPLATE_BELOW  # the bound of the product's template rule, which these signals compete with
    distinct_below: float = 0.4

    def label(self) -> str:
        if self.signal == "template":
            return (f"J without template >= {self.bound:g} (others J(c, e) < {self.distinct_below:g}, "
                    f"J < {self.j_high:g})")
        if self.signal == "coverage":
            return f"coverage k {self.k} floor {self.floor:g} >= {self.bound:g} (J < {self.j_high:g})"
        return f"scattered(L {self.max_run}) < {self.bound:g} (J < {self.j_high:g})"


class PairSignals:
    """The position signals of (later, earlier) text pairs of one split, computed once."""

    def __init__(self, texts, split: ShingledSplit):
        self.texts, self.split, self._cache = texts, split, {}

    def passes(self, later: int, earlier: int, rule: PositionRule, others=()) -> bool:
        if rule.signal == "template":
            return self._without_template(later, earlier, rule, others)
        sh, key = self.split.shingling, (later, earlier, rule.signal, rule.k)
        if key not in self._cache:
            if rule.signal == "coverage":
                self._cache[key] = chunk_containments(self.texts[later], self.split.sets[earlier], sh, rule.k)
            else:
                self._cache[key] = (uncovered_runs(self.texts[later], self.split.sets[earlier], sh),
                                    uncovered_runs(self.texts[earlier], self.split.sets[later], sh))
        got = self._cache[key]
        if rule.signal == "coverage":
            return float((got >= rule.floor).mean()) >= rule.bound
        return min(scattered(r, rule.max_run) for r in got) < rule.bound

    def _jaccard(self, a: int, b: int) -> float:
        inter = self.split.intersection(a, b)
        return inter / (self.split.sizes[a] + self.split.sizes[b] - inter)

    def _without_template(self, later: int, earlier: int, rule: PositionRule, others) -> bool:
        sets = self.split.sets
        third = [c for c in others if c != earlier and self._jaccard(c, earlier) < rule.distinct_below]
        if not third:
            return True  # no third document to tell a template by: the counts decide
        common = np.intersect1d(sets[later], sets[earlier], assume_unique=True)
        template = common[np.isin(common, np.concatenate([sets[c] for c in third]))]
        inter = len(common) - len(template)
        union = self.split.sizes[later] + self.split.sizes[earlier] - len(common) - len(template)
        return union > 0 and inter >= rule.bound * union


def verify_positions(idx: np.ndarray, result: PassResult, split: ShingledSplit, signals: PairSignals, tj: float,
                     tc: Optional[float], floor: Optional[float], rule: Optional[PositionRule]) -> np.ndarray:
    """:func:`evaluation.study.candidates.verify` plus ``rule`` on Jaccard-branch matches (None: the counts')."""

    def accepts(p, later, earlier, inter, union, kept) -> bool:
        by_c = tc is not None and inter >= tc * split.sizes[later] and (floor is None or inter >= floor * union)
        by_j = inter >= tj * union
        if by_j and not by_c and rule is not None and inter < rule.j_high * union:
            others = [int(idx[o]) for o in result.earlier[p] if kept[o]]
            by_j = signals.passes(later, earlier, rule, others)
        return by_j or by_c

    return verify_with(idx, result, split, accepts)


RULES = ([PositionRule("coverage", b, 8, f) for f in (0.1, 0.2, 0.3) for b in (0.75, 1.0)]
         + [PositionRule("scattered", x, max_run=L) for L in (20, 30, 40, 60) for x in (0.06, 0.08, 0.1, 0.12, 0.14)]
         + [PositionRule("template", x, distinct_below=d) for d in (0.3, 0.4) for x in (0.3, 0.4)])


def stream_rows(scorer, splits, cand, rules=RULES) -> list[dict]:
    """One row per rule (None: the counts') x stream: the confusion counts."""
    rows = []
    for split in splits:
        sh = scorer.shingled(split, cand.shingling)
        signals = PairSignals(split.texts, sh)
        for st, idx, res in zip(split.streams, split.index, scorer.passes(split, cand)):
            labels = np.array(st.labels)
            for rule in (None, *rules):
                s = score(labels, verify_positions(idx, res, sh, signals, cand.tj, cand.tc, cand.floor, rule))
                rows.append({"rule": "counts only" if rule is None else rule.label(), "split": split.name,
                             "level": st.level, "tp": s.tp, "fp": s.fp, "fn": s.fn, "precision": s.precision,
                             "f1": s.f1})
    return rows


def pool_rows(corpus_dir: str, part: str, min_jaccard: float = 0.4) -> list[dict]:
    """The English pool's distinct-source pairs with J >= ``min_jaccard`` (templated siblings) and their signals."""
    from evaluation.study.templated_pairs import SHIPPED as SH, pools, similar_pairs

    sources = pools(corpus_dir, part)["en"]
    by_id = {s.id: s.text for s in sources}
    out = []
    for p in similar_pairs(sources):
        if p["jaccard"] < min_jaccard:
            continue
        a, b = by_id[p["a"]], by_id[p["b"]]
        sa, sb = shingle_hashes(a, SH), shingle_hashes(b, SH)
        runs = (uncovered_runs(a, sb, SH), uncovered_runs(b, sa, SH))
        cov = [chunk_containments(x, o, SH, 8) for x, o in ((a, sb), (b, sa))]
        out.append(dict(p, part=part, scattered={L: min(scattered(r, L) for r in runs) for L in (20, 30, 40, 60)},
                        coverage=max(float((c >= 0.2).mean()) for c in cov), runs=runs))
    return out


def duplicate_runs(scorer, splits, cand) -> list[tuple]:
    """Both directions' uncovered runs of every distinct pair of one source the pass proposes and the counts'
    rule accepts by Jaccard alone (J >= Tj, C < Tc): the copies a scattered-difference bound must keep."""
    out, seen = [], set()
    for split in splits:
        sh = scorer.shingled(split, cand.shingling)
        for st, idx, res in zip(split.streams, split.index, scorer.passes(split, cand)):
            for p, earlier in res.earlier.items():
                for q in earlier:
                    a, b = int(idx[p]), int(idx[q])
                    inter = sh.intersection(a, b)
                    if ((split.name, a, b) in seen or st.docs[p].source != st.docs[q].source
                            or inter < cand.tj * (sh.sizes[a] + sh.sizes[b] - inter) or inter >= cand.tc * sh.sizes[a]):
                        continue
                    seen.add((split.name, a, b))
                    out.append((uncovered_runs(split.texts[a], sh.sets[b], cand.shingling),
                                uncovered_runs(split.texts[b], sh.sets[a], cand.shingling)))
    return out


def separation(dups: list[tuple], pairs: list[dict]) -> list[dict]:
    """For run-length bands [lo, hi) and either direction's min or max: how many templated pool pairs lie above
    the 99th percentile (and the maximum) of the duplicate pairs' scattered share."""
    out = []
    for agg, lo, hi in itertools.product((min, max), (1, 2, 3, 4, 6, 8), (20, 40, 80)):
        ref = np.array([agg(scattered(r, hi, lo) for r in d) for d in dups])
        q99, top = float(np.quantile(ref, 0.99)), float(ref.max())
        row = {"direction": agg.__name__, "min_run": lo, "max_run": hi, "dup_pairs": len(ref), "dup_q99": q99}
        for part in ("tune", "heldout"):
            v = np.array([agg(scattered(r, hi, lo) for r in p["runs"]) for p in pairs if p["part"] == part])
            row[part] = {"pairs": len(v), "above_q99": int((v > q99).sum()), "above_max": int((v > top).sum())}
        out.append(row)
    return out


def summarize(rows: list[dict]) -> list[dict]:
    """Per rule: tune and held-out false flags and misses, worst F1, and the streams whose counts changed."""
    base = {(r["split"], r["level"]): r for r in rows if r["rule"] == "counts only"}
    out = []
    for rule in dict.fromkeys(r["rule"] for r in rows):
        mine = [r for r in rows if r["rule"] == rule]
        s = {"rule": rule}
        for part in ("tune", "heldout"):
            sel = [r for r in mine if r["split"].endswith(part)]
            s[part] = {"fp": sum(r["fp"] for r in sel), "fn": sum(r["fn"] for r in sel),
                       "worst_f1": round(min(r["f1"] for r in sel), 4),
                       "en_worst_f1": round(min(r["f1"] for r in sel if r["split"].startswith("en-")), 4),
                       "changed": [f"{r['split']} {r['level']:.0%}: fp {base[(r['split'], r['level'])]['fp']}->"
                                   f"{r['fp']}, fn {base[(r['split'], r['level'])]['fn']}->{r['fn']}"
                                   for r in sel if (r["fp"], r["fn"]) != (base[(r["split"], r["level"])]["fp"],
                                                                          base[(r["split"], r["level"])]["fn"])]}
        out.append(s)
    return out


def seed_rows(split, cand, seeds, rule: Optional[PositionRule] = None) -> list[dict]:
    """One split's streams under ``seeds`` draws of the permutations (the study's signatures use one): how much of
    a stream's F1 is the bands' luck. Per seed and stream: the confusion counts under the counts' rule (and
    ``rule``), and the duplicates no earlier copy of their source shares a band with."""
    from evaluation.shingling import shingles
    from evaluation.study.candidates import pass_decisions, shares_bucket, shingle_split, split_band_keys
    from lshbloom_udf.minhash import signatures

    base = shingle_split(split.texts, cand.shingling, cand.num_perm)
    tokens = [" ".join(shingles(t, cand.shingling)) for t in split.texts]
    b, r = cand.bands
    rows = []
    for seed in seeds:
        sigs = signatures(tokens, num_perm=cand.num_perm, ngram=1, normalize=False, seed=seed)
        sh = ShingledSplit(cand.shingling, sigs, base.has, base.sets, base.sizes)
        keys = split_band_keys(sh, cand.num_perm, b, r)
        signals = PairSignals(split.texts, sh)
        for st, idx in zip(split.streams, split.index):
            res = pass_decisions(idx, keys, sh.has)
            labels = np.array(st.labels)
            unproposed = sum(1 for p in np.flatnonzero(labels) if not any(
                st.docs[q].source == st.docs[p].source and shares_bucket(keys, sh.has, int(idx[p]), int(idx[q]))
                for q in range(p)))
            row = {"split": split.name, "seed": seed, "level": st.level, "unproposed": unproposed}
            for name, rl in (("counts", None), ("rule", rule)):
                s = score(labels, verify_positions(idx, res, sh, signals, cand.tj, cand.tc, cand.floor, rl))
                row[name] = {"fp": s.fp, "fn": s.fn, "f1": s.f1}
            rows.append(row)
    return rows


def main(argv=None) -> int:
    import warnings

    from lshbloom_udf.index import CapacityWarning
    from evaluation.study.multilingual import SHIPPED, Scorer, build_splits

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus-dir", default="../shared/corpus")
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--english-docs", type=int, default=300)
    ap.add_argument("--out", default="docs/evaluation/coverage")
    ap.add_argument("--seeds", type=int, default=0,
                    help="only the English streams under this many permutation draws (seed_rows), then stop")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", CapacityWarning)
    splits, _ = build_splits(args.corpus_dir, args.docs, args.english_docs, 0, log=lambda *a: None)
    every = [s for pair in splits.values() for s in pair]
    if args.seeds:
        rows = [r for split in splits["en"] for r in seed_rows(split, SHIPPED, range(1, args.seeds + 1),
                                                                PositionRule("scattered", 0.12, max_run=40))]
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "seeds.json"), "w") as f:
            json.dump(rows, f, indent=1)
        for r in rows:
            print(f"{r['split']:11s} seed {r['seed']:2d} {r['level']:.0%}: unproposed {r['unproposed']:2d}  counts "
                  f"fp {r['counts']['fp']} fn {r['counts']['fn']} F1 {r['counts']['f1']:.4f}  scattered(L 40) < 0.12 "
                  f"fp {r['rule']['fp']} fn {r['rule']['fn']} F1 {r['rule']['f1']:.4f}")
        return 0
    scorer = Scorer(every)
    summary = summarize(stream_rows(scorer, every, SHIPPED))
    pairs = pool_rows(args.corpus_dir, "tune") + pool_rows(args.corpus_dir, "heldout")
    bands = separation(duplicate_runs(scorer, every, SHIPPED), pairs)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump({"candidate": SHIPPED.label(), "rules": summary, "run_bands": bands,
                   "pool_pairs": [{k: v for k, v in p.items() if k != "runs"} for p in pairs]}, f, indent=1)
    for s in summary:
        print(f"{s['rule']:48s} " + "  ".join(
            f"{p}: fp {s[p]['fp']} fn {s[p]['fn']} worst {s[p]['worst_f1']:.4f} en {s[p]['en_worst_f1']:.4f}"
            for p in ("tune", "heldout")))
    for part, L in itertools.product(("tune", "heldout"), (20, 40)):
        mine = [p for p in pairs if p["part"] == part]
        sc = [p["scattered"][L] for p in mine]
        print(f"{part} pool, {len(sc)} pairs J >= 0.4: scattered(L {L}) quartiles "
              f"{np.round(np.quantile(sc, [0.25, 0.5, 0.75]), 3).tolist()}, max {max(sc):.3f}, >= 0.12: "
              f"{sum(x >= 0.12 for x in sc)}; chunk coverage (k 8, floor 0.2, better direction) 1.0 for "
              f"{sum(p['coverage'] == 1.0 for p in mine)}, >= 0.75 for {sum(p['coverage'] >= 0.75 for p in mine)}")
    worst = {part: max(b[part]["above_q99"] for b in bands) for part in ("tune", "heldout")}
    print(f"scattered share in runs [lo, hi), {len(bands)} bands, vs {bands[0]['dup_pairs']} duplicate pairs: "
          f"at most {worst['tune']} tune / {worst['heldout']} held-out templated pool pairs above the duplicates' "
          f"99th percentile")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
