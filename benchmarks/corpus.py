"""Benchmark documents from the shared corpora, cycled with variation to any size.

The shared corpora (``linux-docs.jsonl.gz``, 2841 docs; ``man-pages.jsonl.gz``,
3185 docs) are read in that order. Round 0 is the originals. Round ``c >= 1``
repeats every original with a deterministic edit (``random.Random`` seeded by
``(c, i)``): with rate ``q`` cycling through 2%, 10%, 30%, 60% by round, each
word is independently dropped with probability ``q/2`` or replaced by a word of
another document with probability ``q/2``. Low rates give near-duplicates of
the original (Jaccard ~0.9-0.98), high rates give distinct documents, so the
stream has both (and a realistic mix of queries that hit and miss).
"""

from __future__ import annotations

import gzip
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "corpus"))
CORPORA = ("linux-docs.jsonl.gz", "man-pages.jsonl.gz")
EDIT_RATES = (0.02, 0.10, 0.30, 0.60)


def read_corpora(paths, sample_fallback: bool = True) -> tuple[list[str], list[str]]:
    """The texts of those of ``paths`` (gzipped JSONL, field ``text``) that exist, in order, and their names.

    With none of them present: the stdlib docstring sample, or nothing without ``sample_fallback``.
    """
    texts, names = [], []
    for path in paths:
        if not os.path.exists(path):
            continue
        names.append(os.path.basename(path))
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                texts.append(json.loads(line)["text"])
    if not texts and sample_fallback:
        from lshbloom_udf.sample import build_sample

        names = ["stdlib docstring sample (no shared corpus found)"]
        texts = [d["text"] for d in build_sample(num_docs=2000)]
    return texts, names


def load_originals(corpus_dir: str = CORPUS_DIR) -> tuple[list[str], list[str]]:
    return read_corpora([os.path.join(corpus_dir, name) for name in CORPORA])


def _variant(text: str, donor: list[str], rate: float, rng: random.Random) -> str:
    words = text.split()
    out = []
    half = rate / 2
    for w in words:
        u = rng.random()
        if u < half:
            continue
        if u < rate and donor:
            out.append(donor[rng.randrange(len(donor))])
        else:
            out.append(w)
    return " ".join(out)


def documents(n: int, corpus_dir: str = CORPUS_DIR) -> tuple[list[str], str]:
    """``n`` documents (originals first, then edited rounds) and a description."""
    originals, names = load_originals(corpus_dir)
    m = len(originals)
    out = list(originals[:n])
    c = 1
    while len(out) < n:
        rate = EDIT_RATES[(c - 1) % len(EDIT_RATES)]
        for i in range(m):
            if len(out) >= n:
                break
            rng = random.Random(c * 1_000_003 + i)
            donor = originals[(i * 7919 + c) % m].split()
            out.append(_variant(originals[i], donor, rate, rng))
        c += 1
    rounds = (n + m - 1) // m
    desc = (
        f"{', '.join(names)} ({m} originals), {n} documents = {min(n, m)} originals"
        + (f" + {n - m} edited copies over {rounds - 1} round(s)" if n > m else "")
    )
    return out, desc


def write_jsonl(texts: list[str], path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"id": i, "text": t}) + "\n")


def write_parquet(texts: list[str], path: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, pa.large_string())})
    pq.write_table(table, path, row_group_size=2048)


def cached(n: int, fmt: str, cache_dir: str) -> tuple[str, str]:
    """Path of ``n`` documents as ``fmt`` (``jsonl`` or ``parquet``) in ``cache_dir``, built once."""
    os.makedirs(cache_dir, exist_ok=True)
    path = os.path.join(cache_dir, f"docs-{n}.{fmt}")
    desc_path = path + ".desc"
    if not (os.path.exists(path) and os.path.exists(desc_path)):
        texts, desc = documents(n)
        tmp = path + ".tmp"
        (write_parquet if fmt == "parquet" else write_jsonl)(texts, tmp)
        os.replace(tmp, path)
        with open(desc_path, "w") as f:
            f.write(desc)
    with open(desc_path) as f:
        return path, f.read()
