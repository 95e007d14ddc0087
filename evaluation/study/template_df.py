"""Template shingles by document frequency: the signal verification's per-pair work cannot see (issue 20, English).

    python -m evaluation.study.template_df [--corpus-dir ../shared/corpus]

A shingle that many distinct documents of a corpus hold (a man page's header and footer, a driver page's
boilerplate) says little about whether two documents are copies. The rule studied: a Jaccard-branch match with
``J < j_high`` must still reach ``bound`` on the shingles held by fewer than ``max_df`` documents of the pool the
stream is drawn from (its distinct sources: :func:`evaluation.study.templated_pairs.pools`), or with ``--df-from``
of the stream itself (copies included) or of the stream's documents the banding pass keeps (the copies it flags
left out). This needs every shingle's document frequency over the corpus, a pass over all shingles that the
product's verification (work proportional to the flagged candidates) does not make; it is measured here to say
whether the signal separates templated siblings from noisy copies at all (docs/evaluation.md §0.8).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os

import numpy as np

from evaluation.scoring import score
from evaluation.shingling import shingle_hashes
from evaluation.study.candidates import BOUNDED, PassResult, ShingledSplit, verify_with
from lshbloom_udf.config import TEMPLATE_BELOW, TEMPLATE_MIN_JACCARD


def document_frequencies(texts, shingling) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct shingle hashes, the number of ``texts`` holding each)."""
    every = np.concatenate([shingle_hashes(t, shingling) for t in texts])
    return np.unique(every, return_counts=True)


def rare(hashes: np.ndarray, df: tuple[np.ndarray, np.ndarray], max_df: int) -> np.ndarray:
    """The ``hashes`` held by fewer than ``max_df`` pool documents (absent from the pool: 0)."""
    keys, counts = df
    at = np.clip(np.searchsorted(keys, hashes), 0, len(keys) - 1)
    found = keys[at] == hashes
    return hashes[~found | (counts[at] < max_df)]


def verify_df(idx: np.ndarray, result: PassResult, split: ShingledSplit, df, cand, rule,
              bounds=BOUNDED, stats=None) -> np.ndarray:
    """:func:`evaluation.study.candidates.verify` with ``rule = (max_df, bound, j_high)`` on Jaccard-branch
    matches (None: the counts' rule), among the candidates ``bounds`` chooses (None: all)."""

    def accepts(p, later, earlier, inter, union, kept) -> bool:
        by_c = cand.tc is not None and inter >= cand.tc * split.sizes[later] and (
            cand.floor is None or inter >= cand.floor * union)
        by_j = inter >= cand.tj * union
        if by_j and not by_c and rule is not None and inter < rule[2] * union:
            a, b = rare(split.sets[later], df, rule[0]), rare(split.sets[earlier], df, rule[0])
            common = len(np.intersect1d(a, b, assume_unique=True))
            rest = len(a) + len(b) - common
            by_j = rest > 0 and common >= rule[1] * rest
        return by_j or by_c

    return verify_with(idx, result, split, accepts, bounds, stats)


def pool_pairs(sources, df, rules) -> dict:
    """The pool's distinct-source pairs the counts' rule accepts by Jaccard alone (J >= 0.4, C < 0.7 in both
    orders), and how many each rule still accepts (its rare-shingle Jaccard >= bound): the templated siblings."""
    from evaluation.study.templated_pairs import SHIPPED as SH, similar_pairs

    by_id = {s.id: s.text for s in sources}
    pairs = [p for p in similar_pairs(sources) if p["jaccard"] >= 0.4 and p["containment"] < 0.7]
    out = {"pairs": len(pairs), "names": [f"{p['a']} / {p['b']}" for p in pairs]}
    for rule in rules:
        kept = []
        for p in pairs:
            a, b = (rare(shingle_hashes(by_id[x], SH), df, rule[0]) for x in (p["a"], p["b"]))
            common = len(np.intersect1d(a, b, assume_unique=True))
            rest = len(a) + len(b) - common
            kept.append(p["jaccard"] >= rule[2] or (rest > 0 and common >= rule[1] * rest))
        out[str(rule)] = int(sum(kept))
    return out


def counted_df(split: ShingledSplit, idx: np.ndarray, result: PassResult, df_from: str):
    """The frequencies a job could count itself: over a stream's documents (``"stream"``, copies included) or over
    those its pass keeps (``"kept"``: the copies the bands propose are flagged, so they do not count)."""
    counted = [i for i, flagged in zip(idx.tolist(), result.flags) if df_from == "stream" or not flagged]
    return np.unique(np.concatenate([split.sets[i] for i in counted]), return_counts=True)


# The rule's J bound is the product's; the grid varies max_df and the floor around the product's.
RULES = [None] + [(m, x, TEMPLATE_BELOW) for m, x in itertools.product((3, 5, 10, 20), (0.3, 0.4))]


def shipped_rule(max_df: int) -> tuple:
    """The product's template rule at ``max_df`` (:func:`verify_df`'s ``rule``)."""
    return max_df, TEMPLATE_MIN_JACCARD, TEMPLATE_BELOW


def seed_rows(split, sources, cand, seeds, rule, df_from: str = "pool", scheme: str = "affine32") -> list[dict]:
    """The English held-out streams under ``seeds`` draws of ``scheme``'s permutations (the study's signatures are
    ``affine32``'s; the product's defaults use ``poisson``, seed 1), the counts' rule and ``rule`` (its frequencies
    counted as ``--df-from`` says)."""
    from evaluation.shingling import shingles
    from evaluation.study.candidates import pass_decisions, shingle_split, split_band_keys
    from lshbloom_udf.minhash import signatures

    pool_df = document_frequencies([s.text for s in sources], cand.shingling)
    base = shingle_split(split.texts, cand.shingling, cand.num_perm)
    tokens = [" ".join(shingles(t, cand.shingling)) for t in split.texts]
    rows = []
    for seed in seeds:
        sigs = signatures(tokens, num_perm=cand.num_perm, ngram=1, normalize=False, seed=seed, scheme=scheme)
        sh = ShingledSplit(cand.shingling, sigs, base.has, base.sets, base.sizes)
        keys = split_band_keys(sh, cand.num_perm, *cand.bands)
        for st, idx in zip(split.streams, split.index):
            res = pass_decisions(idx, keys, sh.has)
            df = pool_df if df_from == "pool" else counted_df(sh, idx, res, df_from)
            row = {"seed": seed, "level": st.level}
            for name, rl in (("counts", None), ("df", rule)):
                s = score(np.array(st.labels), verify_df(idx, res, sh, df, cand, rl))
                row[name] = {"fp": s.fp, "fn": s.fn, "precision": round(s.precision, 4), "f1": round(s.f1, 4)}
            rows.append(row)
    return rows


def seeds_main(args, split, sources) -> int:
    """``--seeds``: the English held-out streams under that many draws, printed and written to
    ``template_df_seeds[_<df-from>_<scheme>_df<max-df>].json``."""
    from evaluation.study.multilingual import SHIPPED

    rows = seed_rows(split, sources, SHIPPED, range(1, args.seeds + 1), shipped_rule(args.max_df), args.df_from,
                     args.scheme)
    for r in rows:
        print(r)
    os.makedirs(args.out, exist_ok=True)
    default = (args.df_from, args.scheme, args.max_df) == ("pool", "affine32", 20)
    variant = "" if default else f"_{args.df_from}_{args.scheme}_df{args.max_df}"
    with open(os.path.join(args.out, f"template_df_seeds{variant}.json"), "w") as f:
        json.dump(rows, f, indent=1)
    return 0


def sampled_df(kept_sets: list, background_sets: list, sample: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """The frequencies the product counts when the stream is part of a larger run: over a uniform sample of up to
    ``sample`` of the stream's kept documents and ``background_sets`` (lshbloom_udf/spark/verify/templates.py)."""
    every = kept_sets + background_sets
    chosen = rng.choice(len(every), size=min(sample, len(every)), replace=False)
    return np.unique(np.concatenate([every[i] for i in chosen]), return_counts=True)


def background_main(args, splits) -> int:
    """``--background N``: the English streams as part of a run of N more English documents (the other sources of
    their own pool first, then the other corpus), the product's rule (max_df over a sample of 1024 kept documents),
    ``--draws`` samples each; printed and written to ``template_df_background.json``."""
    from evaluation.study.multilingual import SHIPPED, Scorer
    from evaluation.study.templated_pairs import pools

    rows = []
    english = {part: pools(args.corpus_dir, part)["en"] for part in ("tune", "heldout")}
    for i, part in enumerate(("tune", "heldout")):
        split = splits["en"][i]
        scorer = Scorer([split])
        sh = scorer.shingled(split, SHIPPED.shingling)
        other = english["heldout" if part == "tune" else "tune"]
        for st, idx, res in zip(split.streams, split.index, scorer.passes(split, SHIPPED)):
            used = {d.source for d in st.docs}
            rest = [s.text for s in english[part] if s.id not in used] + [s.text for s in other]
            rng = np.random.default_rng(args.max_df)
            texts = [rest[j] for j in rng.permutation(len(rest))[:args.background]]
            background = [shingle_hashes(t, SHIPPED.shingling) for t in texts]
            kept = [sh.sets[t] for t, f in zip(idx.tolist(), res.flags) if not f]
            base = score(np.array(st.labels), verify_df(idx, res, sh, None, SHIPPED, None))
            row = {"part": part, "level": st.level, "background": len(background), "kept": len(kept),
                   "counts": [base.fp, base.fn, round(base.f1, 4)], "draws": []}
            for _ in range(args.draws):
                df = sampled_df(kept, background, 1024, rng)
                s = score(np.array(st.labels), verify_df(idx, res, sh, df, SHIPPED, shipped_rule(args.max_df)))
                row["draws"].append([s.fp, s.fn, round(s.f1, 4)])
            print(row)
            rows.append(row)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"template_df_background_{args.background}.json"), "w") as f:
        json.dump(rows, f, indent=1)
    return 0


def main(argv=None) -> int:
    import warnings

    from lshbloom_udf.index import CapacityWarning
    from evaluation.study.multilingual import SHIPPED, Scorer, build_splits
    from evaluation.study.templated_pairs import pools

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus-dir", default="../shared/corpus")
    ap.add_argument("--out", default="docs/evaluation/coverage")
    ap.add_argument("--df-from", choices=("pool", "stream", "kept"), default="pool",
                    help="count document frequencies over the pool's distinct sources, over each stream, or over "
                         "the stream's documents the pass keeps (its copies, flagged, do not count)")
    ap.add_argument("--seeds", type=int, default=0,
                    help="only the English held-out streams under this many permutation draws, then stop")
    ap.add_argument("--scheme", choices=("affine32", "poisson"), default="affine32",
                    help="with --seeds: the permutations drawn (poisson at seed 1: the product's own signatures)")
    ap.add_argument("--max-df", type=int, default=20,
                    help=f"with --seeds: the rule's max_df (J' >= {TEMPLATE_MIN_JACCARD} below J {TEMPLATE_BELOW})")
    ap.add_argument("--background", type=int, default=0,
                    help="only the English streams inside a run of this many more English documents, the product's "
                         "sample of 1024 kept documents, then stop")
    ap.add_argument("--draws", type=int, default=3, help="with --background: samples drawn per stream")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", CapacityWarning)
    splits, _ = build_splits(args.corpus_dir, 200, 300, 0, log=lambda *a: None)
    if args.background:
        return background_main(args, splits)
    if args.seeds:
        return seeds_main(args, splits["en"][1], pools(args.corpus_dir, "heldout")["en"])
    scorer = Scorer([s for pair in splits.values() for s in pair])
    totals: dict = {}
    for i, part in enumerate(("tune", "heldout")):
        for lang, sources in pools(args.corpus_dir, part).items():
            split = splits[lang][i]
            df = document_frequencies([s.text for s in sources], SHIPPED.shingling)
            if lang == "en":
                templated = pool_pairs(sources, df, RULES[1:])
                print(f"en {part} pool: {templated}")
                totals[("pool", part)] = templated
            sh = scorer.shingled(split, SHIPPED.shingling)
            for st, idx, res in zip(split.streams, split.index, scorer.passes(split, SHIPPED)):
                if args.df_from != "pool":
                    df = counted_df(sh, idx, res, args.df_from)
                for rule in RULES:
                    s = score(np.array(st.labels), verify_df(idx, res, sh, df, SHIPPED, rule))
                    t = totals.setdefault((str(rule), part), {"fp": 0, "fn": 0, "worst_f1": 1.0, "en_10": None})
                    t["fp"], t["fn"], t["worst_f1"] = t["fp"] + s.fp, t["fn"] + s.fn, min(t["worst_f1"], s.f1)
                    if lang == "en" and st.level == 0.1:
                        t["en_10"] = (s.fp, s.fn, round(s.f1, 4))
    rows = [{"rule": r, "part": p, **v} for (r, p), v in totals.items()]
    for r in rows:
        if r["rule"] == "pool":
            continue
        print(f"{r['rule']:16s} {r['part']:8s} fp {r['fp']} fn {r['fn']} worst F1 {r['worst_f1']:.4f} "
              f"en 10 % (fp, fn, F1) {r['en_10']}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"template_df_{args.df_from}.json"), "w") as f:
        json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
