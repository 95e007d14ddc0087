"""Are a generated corpus's distinct documents distinct under the defaults' shingles? Exact Jaccard of sampled pairs.

    PYTHONPATH=. .venv/bin/python benchmarks/distinctness.py --docs 1000000 --words 350 450 --replace 0.3

For the documents ``scale_data`` would generate with these parameters (words only: no file is written), the
exact Jaccard similarity of the shingle sets of the defaults (``_native.shingles`` with the default unit,
n-gram and normalization) for three kinds of pairs, ``--pairs`` of each:

- **overlapping**: two distinct documents whose corpus windows overlap (starts closer than the shorter one);
- **random**: two distinct documents drawn at random;
- **planted**: a planted near-duplicate and its source.

A corpus of distinct documents has overlapping and random pairs far below the defaults' threshold; the
share of overlapping pairs among all pairs is printed too (how many documents have such a neighbour).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import scale_data  # noqa: E402

from lshbloom_udf import _native  # noqa: E402
from lshbloom_udf.config import DEFAULTS, DedupConfig  # noqa: E402
from lshbloom_udf.minhash import normalization_mask  # noqa: E402


def texts_of(ids: np.ndarray, pl: dict, tok: dict, params: dict) -> list[str]:
    """The texts of the documents at ``ids`` (file positions), as ``scale_data.generate`` writes them."""
    sub = {k: v for k, v in pl.items()}
    sub["ref"], sub["dupno"] = pl["ref"][ids], pl["dupno"][ids]
    words, lens = scale_data.chunk_words(sub, 0, len(ids), tok["codes"], params)
    return scale_data.to_arrow(words, lens, tok["blob"], tok["offsets"]).to_pylist()


def jaccard(a: str, b: str, spec: dict) -> float:
    sa, sb = set(_native.shingles(a, **spec)), set(_native.shingles(b, **spec))
    return len(sa & sb) / max(1, len(sa | sb))


def pairs(pl: dict, n_pairs: int, rng: np.random.Generator) -> dict:
    """File positions of the three kinds of pairs, and the mean number of distinct documents whose window overlaps
    a distinct document's."""
    distinct = np.flatnonzero(~pl["planted"])
    start = pl["start"][pl["ref"][distinct]]
    length = pl["length"][pl["ref"][distinct]]
    order = np.argsort(start, kind="stable")
    s = start[order]
    # windows overlapping window i: starts in (s_i - max length, s_i + length_i)
    lo = np.searchsorted(s, s - int(length.max()), side="right")
    hi = np.searchsorted(s, s + length[order], side="left")
    neighbours = hi - lo - 1
    pick = rng.choice(len(s), size=n_pairs)
    pick = pick[neighbours[pick] > 0]
    other = lo[pick] + (rng.random(len(pick)) * (neighbours[pick])).astype(np.int64)
    other += other >= pick  # skip the document itself
    overlapping = np.stack([distinct[order[pick]], distinct[order[other]]], axis=1)
    random = rng.choice(distinct, size=(n_pairs, 2))
    planted = np.flatnonzero(pl["planted"])
    dup = rng.choice(planted, size=min(n_pairs, len(planted)), replace=False)
    return {"overlapping": overlapping, "random": random, "planted": np.stack([pl["source"][dup], dup], axis=1),
            "neighbours": float(neighbours.mean())}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=1_000_000)
    p.add_argument("--words", type=int, nargs=2, default=(350, 450), metavar=("MIN", "MAX"))
    p.add_argument("--replace", type=float, default=0.30)
    p.add_argument("--pairs", type=int, default=2000)
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "lshbloom-scale"))
    args = p.parse_args(argv)
    params = {"dup_fraction": 0.01, "edit": 0.05, "replace": args.replace, "min_words": args.words[0],
              "max_words": args.words[1], "seed": 1, "max_repeated": 0.10}
    spec = {"ngram": DEFAULTS["ngram"], "normalize": normalization_mask(DEFAULTS["normalize"]),
            "unit": DEFAULTS["shingle"]}
    tok = scale_data.token_stream(args.cache)
    pl = scale_data.plan(args.docs, params, tok["repeated"])
    got = pairs(pl, args.pairs, np.random.default_rng(1))
    print(f"{args.docs:,} documents, {args.words[0]}-{args.words[1]} words, replace {args.replace:g}; shingles {spec}; "
          f"threshold {DEFAULTS['threshold']}, verify_threshold {DEFAULTS['verify_threshold']}")
    print(f"distinct documents whose windows overlap a distinct document's: {got['neighbours']:.1f} on average")
    for kind in ("overlapping", "random", "planted"):
        ids = got[kind]
        if not len(ids):
            print(f"{kind:<12} no pairs")
            continue
        texts = texts_of(ids.ravel(), pl, tok, params)
        j = np.array([jaccard(texts[2 * i], texts[2 * i + 1], spec) for i in range(len(ids))])
        q = np.quantile(j, [0.5, 0.9, 0.99])
        band = DedupConfig().index_params(args.docs)
        # the chance that the pair shares a band (is an LSH candidate) with the defaults' (b, r) at this N
        candidate = 1 - (1 - j ** band.r) ** band.b
        print(f"{kind:<12} {len(j):>6} pairs: Jaccard mean {j.mean():.3f}, median {q[0]:.3f}, p90 {q[1]:.3f}, "
              f"p99 {q[2]:.3f}, max {j.max():.3f}; >= threshold {100 * (j >= DEFAULTS['threshold']).mean():.1f} %; "
              f"mean P(candidate) with (b, r) = ({band.b}, {band.r}) {candidate.mean():.2e}")
        if kind == "overlapping":
            print(f"{'':<12} earlier overlapping windows x P(candidate): {got['neighbours'] / 2 * candidate.mean():.3f} "
                  "expected candidates per distinct document")


if __name__ == "__main__":
    main()
