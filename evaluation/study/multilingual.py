"""The multilingual + crawl-noise study: one shingling default for every script and kind of copy.

    python -m evaluation.study.multilingual [--docs 200] [--english-docs 300] [--out docs/evaluation/multilingual]
    (make evaluate-multilingual)

Protocol (docs/evaluation.md, first section):

* Pools: each language of ``multilingual-docs.jsonl.gz`` (sources of at least
  ``MIN_CHARS`` non-space characters, exact and near copies removed with
  character 5-gram Jaccard >= 0.3), split by a stable hash of the source id into
  a *tune* and a *held-out* half (disjoint sources); English tunes on
  ``linux-docs`` and is held out on ``man-pages``.
* Streams: at 10 %, 50 % and 90 % duplicates, copies of the kinds of
  :mod:`evaluation.generator.crawl` (each records its kind).
* Candidates (:mod:`evaluation.shingling`): words/chars/mixed units, n, dehyphen,
  banding threshold, ``num_perm``, verification Jaccard ``tj`` and containment
  ``tc``; decided as the product does (:mod:`evaluation.study.candidates`).
* Screening (the budget): stage 1 scores every unit × threshold × (off, tj × tc)
  at 256 permutations on the tune streams; stage 2 tries 128/256/512 and finer
  ``tj`` for the best few; the choice keeps precision >= 0.99 on every tune
  stream, maximizes the worst tune-stream F1 (then the mean, then the lower
  cost), and is then scored held out.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from typing import Optional, Sequence

import numpy as np

from evaluation.generator.crawl import CrawlNoise, crawl_variant, kinds_for
from evaluation.generator.sources import Source, char_five_grams, id_split, near_copy_groups
from evaluation.generator.streams import ORIGINAL, VariantCache, _rng, make_stream
from evaluation.scoring import score
from evaluation.shingling import Shingling
from evaluation.study.candidates import (
    BOUNDED, ShingledSplit, pass_decisions, shingle_split, split_band_keys, verify,
)
from evaluation.study.grid import Split, load_pool
from lshbloom_udf.lsh import optimal_params

LEVELS = (0.1, 0.5, 0.9)
MIN_CHARS = 400
MIN_SOURCES = 60  # a language with fewer sources per half is reported as too small (ko: 3 documents)
NORM = ("nfkc", "lower", "punct")
DEHYPHEN = ("dehyphen",) + NORM
UNITS = ([Shingling("words", n, NORM) for n in (3, 4, 5)] + [Shingling("words", n, DEHYPHEN) for n in (3, 4, 5)]
         + [Shingling("chars", n, NORM) for n in (5, 7, 9, 11, 13)]
         + [Shingling("mixed", n, NORM) for n in (7, 9, 11, 13)])
THRESHOLDS = (0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
PERMS = (128, 256, 512)
TJ = (0.4, 0.5, 0.6)
TC = (None, 0.7, 0.8, 0.9)
# containment's Jaccard floor (containment_min_jaccard) with each Tc; the floor first, so that it wins a tie
# (the tune streams cannot tell them apart; the tune pool's distinct pairs can: docs/evaluation.md §0.5)
TC_FLOOR = (0.3, None)


@dataclass(frozen=True)
class Candidate:
    shingling: Shingling
    threshold: float
    num_perm: int
    tj: Optional[float] = None  # None: no verification
    tc: Optional[float] = None
    floor: Optional[float] = None  # containment's Jaccard floor (containment_min_jaccard), with tc
    template_max_df: Optional[int] = None  # the template rule (template_max_df), with tj
    # None: the grid's shared signatures (affine32, seed 1, at the largest k: one draw for every row); a scheme: the
    # product's own signatures under it (seed 1, exactly num_perm permutations), as the job computes them.
    scheme: Optional[str] = None
    # verification's candidates bounded as the job bounds them (evaluation.study.candidates.Bounds); False: all
    bounded: bool = True

    def label(self) -> str:
        v = "unverified" if self.tj is None else f"Tj {self.tj:g}" + (f" / Tc {self.tc:g}" if self.tc else "")
        v += f" (J >= {self.floor:g})" if self.tc and self.floor else ""
        v += f", templates df >= {self.template_max_df}" if self.tj is not None and self.template_max_df else ""
        v += ", unbounded candidates" if self.tj is not None and not self.bounded else ""
        k = f"k {self.num_perm}" + (f" {self.scheme}" if self.scheme else "")
        return f"{self.shingling.label()} T {self.threshold:g} {k} {v}"

    @property
    def bounds(self):
        """The verification bounds this row decides with (None: unbounded)."""
        return BOUNDED if self.bounded else None

    @property
    def bands(self) -> tuple[int, int]:
        return _bands(self.threshold, self.num_perm)

    def to_dict(self) -> dict:
        b, r = self.bands
        return {"unit": self.shingling.unit, "ngram": self.shingling.ngram,
                "normalize": ",".join(self.shingling.normalize), "threshold": self.threshold,
                "num_perm": self.num_perm, "b": b, "r": r, "verify": self.tj is not None, "tj": self.tj, "tc": self.tc,
                "containment_min_jaccard": self.floor, "template_max_df": self.template_max_df}


@functools.lru_cache(maxsize=None)
def _bands(threshold: float, num_perm: int) -> tuple[int, int]:
    return optimal_params(threshold, num_perm)


DEFAULTS_TODAY = Candidate(Shingling("words", 4, NORM), 0.45, 512)
PAPER_ROW = Candidate(Shingling("words", 1, ()), 0.5, 256)
# What the product ships (lshbloom_udf/config.py): the study's unit, bands for T 0.3 at 256 permutations (64 x 4,
# for the pass's flags at scale: docs/evaluation.md §0.2), Tj 0.4, Tc 0.7 with Jaccard >= 0.3, and the template rule
# at max_df 5 (a stream keeps fewer than the product's sample of 1024: every kept document counts, §0.8), over the
# product's own signatures (poisson, seed 1).
SHIPPED = Candidate(Shingling("mixed", 11, DEHYPHEN), 0.3, 256, 0.4, 0.7, 0.3, 5, "poisson")


def read_languages(path: str) -> dict[str, list[Source]]:
    by_lang: dict[str, list[Source]] = defaultdict(list)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                by_lang[d["lang"]].append(Source(str(d["id"]), d["text"]))
    return dict(by_lang)


def prepare_multilingual(sources: Sequence[Source], min_chars: int = MIN_CHARS) -> list[Source]:
    """Long enough sources, exact copies and character-5-gram near copies (Jaccard >= 0.3) removed."""
    seen, kept = set(), []
    for s in sources:
        if sum(not c.isspace() for c in s.text) >= min_chars and s.text not in seen:
            seen.add(s.text)
            kept.append(s)
    owner = near_copy_groups(kept, 0.3, shingle=char_five_grams) if kept else []
    return [s for s, o in zip(kept, owner) if o < 0]


class CrawlVariantCache(VariantCache):
    """Variant v of a source: the kinds of :mod:`~evaluation.generator.crawl` in turn from a per-source offset."""

    def __init__(self, sources: Sequence[Source], seed: int, noise: CrawlNoise):
        super().__init__(sources, seed, None)
        self.crawl = noise

    def get(self, source_id: str, v: int) -> tuple[str, str]:
        key = (source_id, v)
        if key not in self._cache:
            src = self.by_id[source_id].text
            if v == 0:
                self._cache[key] = (src, ORIGINAL)
            else:
                kinds = kinds_for(src)
                kind = kinds[(v - 1 + _rng("offset", self.seed, source_id).randrange(len(kinds))) % len(kinds)]
                self._cache[key] = crawl_variant(src, kind, _rng("variant", self.seed, source_id, v), self.crawl)
        return self._cache[key]


def build_split(name: str, sources: Sequence[Source], num_docs: int, seed: int) -> Split:
    """Streams at :data:`LEVELS` (as many documents as the pool allows, at most ``num_docs``)."""
    num_docs = min(num_docs, int(len(sources) / (1 - min(LEVELS))))
    cache = CrawlVariantCache(sources, seed, CrawlNoise())
    split = Split(name, [make_stream(sources, num_docs, lvl, seed, cache=cache, name=name) for lvl in LEVELS])
    pos: dict = {}
    for st in split.streams:
        rows = []
        for d in st.docs:
            rows.append(pos.setdefault(d.key, len(pos)))
            if rows[-1] == len(split.texts):
                split.texts.append(d.text)
        split.index.append(np.asarray(rows, dtype=np.int64))
    return split


def build_splits(corpus_dir: str, docs: int, english_docs: int, seed: int, log=print,
                 languages: Optional[Sequence[str]] = None) -> tuple[dict, dict]:
    """``{language: (tune Split, held-out Split)}`` (of ``languages``, or all) and what was skipped."""
    splits, skipped = {}, {}
    english = [("en", load_pool(os.path.join(corpus_dir, f"{c}.jsonl.gz"))[0]) for c in ("linux-docs", "man-pages")]
    splits["en"] = (build_split("en-tune", english[0][1], english_docs, seed),
                    build_split("en-heldout", english[1][1], english_docs, seed + 1))
    for lang, sources in sorted(read_languages(os.path.join(corpus_dir, "multilingual-docs.jsonl.gz")).items()):
        if languages is not None and lang not in languages:
            continue
        pool = prepare_multilingual(sources)
        halves = [[s for s in pool if (id_split(s.id) < 0.5) == first] for first in (True, False)]
        if min(len(h) for h in halves) < MIN_SOURCES:
            skipped[lang] = f"{len(sources)} documents, {len(pool)} usable: too few for two halves"
            continue
        splits[lang] = (build_split(f"{lang}-tune", halves[0], docs, seed),
                        build_split(f"{lang}-heldout", halves[1], docs, seed + 1))
        log(f"  {lang}: {len(sources)} documents, {len(pool)} sources, halves {len(halves[0])}/{len(halves[1])}, "
            f"{len(splits[lang][0].streams[0].docs)} documents a stream")
    return splits, skipped


class Scorer:
    """Scores candidates on splits, caching shingled splits, band keys and pass decisions."""

    def __init__(self, splits: Sequence[Split], max_perm: int = max(PERMS)):
        self.splits = list(splits)
        self.max_perm = max_perm
        self._shingled: dict = {}
        self._passes: dict = {}
        self.seconds = defaultdict(float)

    def shingled(self, split: Split, shingling: Shingling, scheme: Optional[str] = None,
                 num_perm: Optional[int] = None) -> ShingledSplit:
        """The split's shingle sets and signatures: the grid's shared ones, or with ``scheme`` the product's own at
        ``num_perm`` (:attr:`Candidate.scheme`)."""
        key = (split.name, shingling, scheme, num_perm if scheme else None)
        if key not in self._shingled:
            t = time.perf_counter()
            self._shingled[key] = (shingle_split(split.texts, shingling, self.max_perm) if scheme is None else
                                   shingle_split(split.texts, shingling, num_perm, scheme=scheme))
            self.seconds["shingle+minhash"] += time.perf_counter() - t
        return self._shingled[key]

    def drop(self, shingling: Shingling) -> None:
        """Free one shingling's sets (the grid visits shinglings one after another)."""
        for key in [k for k in self._shingled if k[1] == shingling]:
            del self._shingled[key]
        for key in [k for k in self._passes if k[1].shingling == shingling]:
            del self._passes[key]

    def passes(self, split: Split, cand: Candidate) -> list:
        band = replace(cand, tj=None, tc=None, floor=None, bounded=True)
        key = (split.name, band)
        if key not in self._passes:
            t = time.perf_counter()
            sh = self.shingled(split, cand.shingling, cand.scheme, cand.num_perm)
            b, r = cand.bands
            keys = split_band_keys(sh, cand.num_perm, b, r)
            self._passes[key] = [pass_decisions(idx, keys, sh.has) for idx in split.index]
            self.seconds["band+pass"] += time.perf_counter() - t
        return self._passes[key]

    def rows(self, cand: Candidate, splits: Optional[Sequence[Split]] = None) -> list[dict]:
        """One row per stream: language, split, level, the confusion counts, and counts per kind of copy."""
        out = []
        for split in splits or self.splits:
            sh = self.shingled(split, cand.shingling)
            for st, idx, res in zip(split.streams, split.index, self.passes(split, cand)):
                t = time.perf_counter()
                flags = res.flags if cand.tj is None else verify(idx, res, sh, cand.tj, cand.tc, cand.floor,
                                                                    cand.template_max_df, cand.bounds)
                self.seconds["verify"] += time.perf_counter() - t
                labels = np.array(st.labels)
                s = score(labels, flags)
                kinds = np.array([d.kind.split(":")[0] for d in st.docs])
                per_kind = {k: [int(np.sum(m & labels & flags)), int(np.sum(m & ~labels & flags)),
                                int(np.sum(m & labels & ~flags))] for k in set(kinds.tolist()) for m in [kinds == k]}
                lang, part = split.name.rsplit("-", 1)
                out.append({"config": cand.label(), "lang": lang, "split": part, "level": st.level, "tp": s.tp,
                            "fp": s.fp, "fn": s.fn, "precision": s.precision, "recall": s.recall, "f1": s.f1,
                            "kinds": per_kind, "shingles_per_doc": float(np.mean(sh.sizes[idx]))})
        return out


MIN_PRECISION = 0.99


def objective(rows: Sequence[dict]) -> tuple:
    """(every stream's precision >= MIN_PRECISION, worst stream F1, mean F1): higher is better.

    Precision is a constraint, not a trade: a wrongly removed document is lost data.
    """
    f1 = [r["f1"] for r in rows]
    return (min(r["precision"] for r in rows) >= MIN_PRECISION, round(min(f1), 4), round(float(np.mean(f1)), 4))


def screen(scorer: Scorer, tune: Sequence[Split], log=print) -> list[tuple[tuple, Candidate]]:
    """Stage 1: every unit × threshold × verification at 256 permutations, on the tune streams."""
    ranked = []
    for sh in UNITS:
        best = None
        for t in THRESHOLDS:
            for tj, tc, fl in [(None, None, None)] + [(a, c, f) for a in TJ for c in TC
                                                       for f in (TC_FLOOR if c else (None,))]:
                cand = Candidate(sh, t, 256, tj, tc, fl)
                obj = objective(scorer.rows(cand, tune))
                ranked.append((obj, cand))
                best = max(best, (obj, cand), key=lambda x: x[0]) if best else (obj, cand)
        log(f"  {sh.label():32s} best {best[1].label():60s} P>={MIN_PRECISION} {best[0][0]} worst F1 {best[0][1]:.4f} "
            f"mean {best[0][2]:.4f}")
        scorer.drop(sh)
    ranked.sort(key=lambda x: x[0], reverse=True)
    return ranked


def refine(scorer: Scorer, tune: Sequence[Split], finalists: Sequence[Candidate], log=print) -> list[tuple]:
    """Stage 2: num_perm 128/256/512 and tj in steps of 0.05 around each finalist."""
    ranked = []
    for base in finalists:
        tjs = (None,) if base.tj is None else sorted({min(max(round(base.tj + d, 2), min(TJ)), max(TJ))
                                                      for d in (-0.05, 0.0, 0.05)})
        for k in PERMS:
            for tj in tjs:
                cand = replace(base, num_perm=k, tj=tj)
                obj = objective(scorer.rows(cand, tune))
                ranked.append((obj, cand))
                log(f"  {cand.label():72s} P>={MIN_PRECISION} {obj[0]} worst F1 {obj[1]:.4f} mean {obj[2]:.4f}")
    return ranked


def choose(ranked: Sequence[tuple], tolerance: float = 0.002) -> Candidate:
    """Among the precise configurations (all of them if none is), the best worst-F1; among those within
    ``tolerance`` of it, the fewest permutations, then the best mean."""
    pool = [x for x in ranked if x[0][0]] or list(ranked)
    top = max(o[1] for o, _ in pool)
    near = [(o, c) for o, c in pool if o[1] >= top - tolerance]
    return min(near, key=lambda x: (x[1].num_perm, -x[0][2], -x[0][1]))[1]


def run(corpus_dir: str, out: str, docs: int = 200, english_docs: int = 300, seed: int = 0,
        finalists: int = 4, log=print) -> dict:
    t0 = time.monotonic()
    splits, skipped = build_splits(corpus_dir, docs, english_docs, seed, log)
    tune = [s[0] for s in splits.values()]
    held = [s[1] for s in splits.values()]
    scorer = Scorer(tune + held)
    n_verify = 1 + len(TJ) * (1 + (len(TC) - 1) * len(TC_FLOOR))
    log(f"stage 1 ({len(UNITS)} shinglings × {len(THRESHOLDS)} thresholds × {n_verify} verifications)")
    ranked = screen(scorer, tune, log)
    seen_units, picks = set(), []
    for _, cand in ranked:  # the best few, at most two per unit family so the finalists differ
        fam = cand.shingling.unit
        if sum(p.shingling.unit == fam for p in picks) < 2 and (cand.shingling, cand.threshold) not in seen_units:
            picks.append(cand)
            seen_units.add((cand.shingling, cand.threshold))
        if len(picks) == finalists:
            break
    log("stage 2")
    refined = refine(scorer, tune, picks, log)
    chosen = choose(refined)
    if chosen.shingling.unit != "words" and "dehyphen" not in chosen.shingling.normalize:
        # dehyphen only joins what punctuation removal and whitespace deletion join anyway; keep it if it costs nothing
        alt = replace(chosen, shingling=replace(chosen.shingling, normalize=DEHYPHEN))
        if objective(scorer.rows(alt, tune)) >= objective(scorer.rows(chosen, tune)):
            chosen = alt
    log(f"chosen: {chosen.label()}")
    reported = {"shipped": SHIPPED, "chosen": chosen, "defaults today": DEFAULTS_TODAY, "paper preset": PAPER_ROW}
    for i, c in enumerate(picks):
        reported.setdefault(f"finalist {i + 1}", c)
    rows = []
    for name, cand in reported.items():
        for r in scorer.rows(cand):
            rows.append(dict(r, row=name))
    from evaluation.study.multilingual_report import write_report

    summary = {"chosen": chosen.to_dict(), "chosen_label": chosen.label(), "skipped": skipped,
               "stage1_top": [(o, c.label()) for o, c in ranked[:15]],
               "stage2": [(o, c.label()) for o, c in sorted(refined, key=lambda x: x[0], reverse=True)],
               "seconds": round(time.monotonic() - t0, 1), "timing": dict(scorer.seconds),
               "docs": docs, "english_docs": english_docs, "seed": seed,
               "streams": {lang: [len(s.docs) for s in sp[0].streams] for lang, sp in splits.items()}}
    write_report(out, rows, reported, summary)
    return summary


def main(argv=None) -> int:
    import argparse
    import warnings

    from lshbloom_udf.index import CapacityWarning

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus-dir", default="../shared/corpus",
                   help="holds multilingual-docs, linux-docs and man-pages .jsonl.gz")
    p.add_argument("--docs", type=int, default=200, help="documents per multilingual stream (at most)")
    p.add_argument("--english-docs", type=int, default=300, help="documents per English stream")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="docs/evaluation/multilingual")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore", CapacityWarning)
    summary = run(args.corpus_dir, args.out, args.docs, args.english_docs, args.seed)
    print(json.dumps({k: summary[k] for k in ("chosen_label", "seconds", "timing")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
