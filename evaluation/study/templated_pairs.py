"""Distinct source documents a verification rule would call near-duplicates: the precision margin of a rule.

    python -m evaluation.study.templated_pairs [--part tune|heldout] [--corpus-dir ../shared/corpus]

The multilingual study's streams hold a few hundred documents, so the pairs of distinct sources that share much
text (templated pages: man pages of sibling functions, driver documentation written from one template) rarely
meet in them, and a stream's precision says little about them. This looks at every pair of sources of each
pool the study draws from (:func:`evaluation.study.multilingual.build_splits`: ``linux-docs`` for English tune,
``man-pages`` held out, each language's halves), under the product's shingling (mixed 11-grams,
``dehyphen,nfkc,lower,punct``): pairs whose 128-permutation MinHash estimate reaches 0.1 get their exact
``|S_d ∩ S_e|``, ``|S_d|``, ``|S_e|``. A pair is *accepted* by a rule when it verifies in either order (the
smaller document later is containment's worst case). Each pool's sources are distinct by construction (near
copies at word-5-gram, resp. character-5-gram, Jaccard >= 0.3 were removed), so every accepted pair is a false
match the streams could draw. Rules are chosen on ``--part tune`` only.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Optional

import numpy as np

from evaluation.generator.sources import id_split
from evaluation.shingling import Shingling
from evaluation.study.candidates import shingle_split
from evaluation.study.grid import load_pool
from evaluation.study.multilingual import DEHYPHEN, MIN_SOURCES, prepare_multilingual, read_languages

SHIPPED = Shingling("mixed", 11, DEHYPHEN)
RULES = {  # name: (Tj, Tc, containment's Jaccard floor)
    "Tj 0.4 / Tc 0.7 (before)": (0.4, 0.7, None),
    "Tj 0.4 / Tc 0.7, J >= 0.3 (shipped)": (0.4, 0.7, 0.3),
    "Tj 0.4 only": (0.4, None, None),
    "Tj 0.45 / Tc 0.7, J >= 0.3": (0.45, 0.7, 0.3),
}


def verifies(common: int, size_d: int, size_e: int, tj: float, tc: Optional[float], floor: Optional[float]) -> bool:
    union = size_d + size_e - common
    j = common / union if union else 0.0
    c = common / size_d if size_d else 0.0
    return j >= tj or (tc is not None and c >= tc and (floor is None or j >= floor))


def pools(corpus_dir: str, part: str) -> dict[str, list]:
    english = "linux-docs" if part == "tune" else "man-pages"
    out = {"en": load_pool(os.path.join(corpus_dir, f"{english}.jsonl.gz"))[0]}
    for lang, sources in sorted(read_languages(os.path.join(corpus_dir, "multilingual-docs.jsonl.gz")).items()):
        half = [s for s in prepare_multilingual(sources) if (id_split(s.id) < 0.5) == (part == "tune")]
        if len(half) >= MIN_SOURCES:
            out[lang] = half
    return out


def similar_pairs(sources: list, min_estimate: float = 0.1) -> list[dict]:
    """Every pair of sources with MinHash estimate >= ``min_estimate``, with exact counts."""
    sh = shingle_split([s.text for s in sources], SHIPPED, 128)
    out = []
    for i in range(len(sources)):
        near = np.flatnonzero((sh.sigs[i + 1:] == sh.sigs[i]).mean(axis=1) >= min_estimate) + i + 1
        for j in near.tolist():
            common = sh.intersection(i, j)
            small, large = sorted((int(sh.sizes[i]), int(sh.sizes[j])))
            union = small + large - common
            out.append({"a": sources[i].id, "b": sources[j].id, "common": common, "small": small, "large": large,
                        "jaccard": round(common / union, 4), "containment": round(common / small, 4)})
    return out


def accepted(pairs: list[dict], rule: tuple) -> list[dict]:
    return [p for p in pairs if verifies(p["common"], p["small"], p["large"], *rule)
            or verifies(p["common"], p["large"], p["small"], *rule)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus-dir", default="../shared/corpus")
    ap.add_argument("--part", choices=("tune", "heldout"), default="tune")
    ap.add_argument("--json", help="write every accepted pair here")
    args = ap.parse_args(argv)
    report = {}
    for lang, sources in pools(args.corpus_dir, args.part).items():
        pairs = similar_pairs(sources)
        report[lang] = {name: accepted(pairs, rule) for name, rule in RULES.items()}
        print(f"{lang} ({len(sources)} sources): " + "; ".join(f"{n}: {len(a)}" for n, a in report[lang].items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
