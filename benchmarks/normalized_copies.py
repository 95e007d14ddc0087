"""Byte-identical copies against copies after normalization in the shared corpora (docs/benchmarks.md, "Exact copies").

    PYTHONPATH=. .venv/bin/python benchmarks/normalized_copies.py [--corpus-dir ../shared/corpus]

For each corpus: its documents, how many repeat an earlier document's text byte for byte (what the exact-copy
step takes off the pass), and how many repeat an earlier document's distinct shingle set under the defaults (what
a hash of the normalized text would take: the same shingles, so the same signature and keys).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os


def copies(texts: list) -> tuple[int, int]:
    """(byte-identical repeats, repeats of an earlier document's shingle set) among ``texts``."""
    from lshbloom_udf import _native
    from lshbloom_udf.config import DedupConfig
    from lshbloom_udf.minhash import normalization_mask

    spec = DedupConfig().index_params().key_spec
    hashes, offsets = _native.shingle_hash_sets(texts, spec.ngram, normalization_mask(spec.normalize), spec.shingle, 2)
    sets = [hashlib.sha256(hashes[offsets[i]:offsets[i + 1]].tobytes()).digest()
            for i in range(len(texts)) if offsets[i + 1] > offsets[i]]
    return len(texts) - len(set(texts)), len(sets) - len(set(sets))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus-dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "corpus"))
    args = p.parse_args()
    for name in ("linux-docs", "man-pages", "multilingual-docs"):
        with gzip.open(os.path.join(args.corpus_dir, f"{name}.jsonl.gz"), "rt") as f:
            texts = [json.loads(line)["text"] for line in f]
        raw, normalized = copies(texts)
        print(f"{name}: {len(texts):,} documents, {raw:,} byte-identical copies, {normalized:,} repeat an earlier "
              "shingle set")


if __name__ == "__main__":
    main()
