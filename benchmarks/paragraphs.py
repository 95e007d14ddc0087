"""Paragraph dedup side by side with dolma 1.2.1: agreement and paragraphs per second per core, in one run.

    PYTHONPATH=. .venv/bin/python benchmarks/paragraphs.py --corpus /work/dolma-exp/bench/c20k.jsonl.gz \
        --workdir /tmp/paragraphs-bench [--json out.json]

The corpus: ``benchmarks/paragraph_corpus.py`` (shared corpora with planted boilerplate lines, a templated-site
family and copied runs of lines). dolma: ``benchmarks/paragraphs_dolma.py`` (one file, one thread: keep-first in
file order; ``skip_empty``, so that blank lines, which lshbloom never removes, are not dolma's either).

lshbloom: the product's core, one thread, in this process: ``ParagraphSpec("newline", normalize="none")`` (the
closest to dolma's exact pieces: only the whitespace inside a line is collapsed) cuts and keys the texts in chunks,
a blocked filter sized for the keys at 1e-6 decides them. Its time is the cutting, keying and deciding; dolma's is
``dolma dedupe``'s wall time less its start-up (``--dryrun``), which includes reading and writing the files.
Agreement: the (document, line) pairs each removed; every disagreement is put in a class.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import paragraphs_dolma  # noqa: E402

CHUNK = 10_000


def load(path: str) -> tuple[list, list]:
    ids, texts = [], []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            ids.append(str(d["id"]))
            texts.append(d["text"])
    return ids, texts


def ours(texts: list, normalize: str, workdir: str) -> tuple[float, int, dict]:
    """(seconds, paragraphs, {document index: [line index, ...]}) of the product's core on one thread."""
    from lshbloom_udf.index import LSHBloomIndex
    from lshbloom_udf.paragraphs import ParagraphSpec

    spec = ParagraphSpec("newline", normalize=normalize)
    path = os.path.join(workdir, f"lshbloom-{normalize}")
    shutil.rmtree(path, ignore_errors=True)
    keys = sum(len(t.split("\n")) for t in texts)  # the filter's capacity: at most one key a line
    removed: dict = {}
    paragraphs = 0
    t0 = time.perf_counter()
    with LSHBloomIndex.create(path, spec.index_params(keys, 1e-6), bloom="blocked") as index:
        for lo in range(0, len(texts), CHUNK):
            p = spec.paragraphs(texts[lo:lo + CHUNK])
            gone = p.removed(index.query_insert(p.keys.reshape(-1, 1)), spec.overlap)
            first = p.first
            paragraphs += len(p.nkeys)
            for d in np.flatnonzero(np.add.reduceat(gone, first[:-1]) if len(gone) else []):
                if p.counts[d]:
                    removed[lo + int(d)] = np.flatnonzero(gone[first[d]:first[d + 1]]).tolist()
    return time.perf_counter() - t0, paragraphs, removed


def disagreements(ids: list, texts: list, mine: dict, theirs: dict) -> dict:
    """The (document, line) pairs one side removed and the other did not, by class, with an example each."""
    index_of = {d: i for i, d in enumerate(ids)}
    a = {(d, j) for d, js in mine.items() for j in js}
    b = {(index_of[d], j) for d, js in theirs.items() for j in js}
    seen_exact: dict = {}
    first_exact: dict = {}
    for d, text in enumerate(texts):
        for j, piece in enumerate(text.split("\n")):
            first_exact.setdefault(piece, (d, j))
            seen_exact[(d, j)] = piece
    out: dict = {}
    for side, pairs in (("lshbloom_only", a - b), ("dolma_only", b - a)):
        for d, j in sorted(pairs):
            piece = seen_exact[(d, j)]
            if side == "lshbloom_only" and first_exact[piece] == (d, j):
                kind = "same words, other whitespace (the first exact copy of this line)"
            elif side == "dolma_only" and " ".join(piece.split()) == "":
                kind = "whitespace-only line (dolma's skip_empty trims less)"
            else:
                kind = "other"
            entry = out.setdefault(side, {}).setdefault(kind, {"count": 0, "example": repr(piece[:80])})
            entry["count"] += 1
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", required=True)
    p.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "lshbloom-paragraphs-bench"))
    p.add_argument("--json")
    args = p.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    ids, texts = load(args.corpus)
    load_before = os.getloadavg()[0]
    dolma = paragraphs_dolma.run_dolma(args.corpus, os.path.join(args.workdir, "dolma"), skip_empty=True,
                                       measure_startup=True)
    dolma_s = dolma["seconds"] - (dolma.get("startup_seconds") or 0.0)
    mine_s, paragraphs, mine = ours(texts, "none", args.workdir)
    normalized_s, _, normalized = ours(texts, "all", args.workdir)
    out = {
        "documents": len(texts), "paragraphs": paragraphs, "dolma_paragraphs": dolma["paragraphs"],
        "dolma_seconds": round(dolma_s, 3), "dolma_wall_seconds": round(dolma["seconds"], 3),
        "lshbloom_seconds": round(mine_s, 3), "lshbloom_normalized_seconds": round(normalized_s, 3),
        "dolma_paragraphs_per_s": round(dolma["paragraphs"] / dolma_s),
        "lshbloom_paragraphs_per_s": round(paragraphs / mine_s),
        "ratio": round((paragraphs / mine_s) / (dolma["paragraphs"] / dolma_s), 2),
        "removed_dolma": sum(map(len, dolma["removed_paragraphs"].values())),
        "removed_lshbloom": sum(map(len, mine.values())),
        "removed_lshbloom_normalized": sum(map(len, normalized.values())),
        "disagreements": disagreements(ids, texts, mine, dolma["removed_paragraphs"]),
        "load": [round(load_before, 2), round(os.getloadavg()[0], 2)], "cpu": os.cpu_count(),
    }
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
