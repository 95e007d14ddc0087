"""Cumulative stage timings of the native keys path for the defaults, one thread (no Spark).

    .venv/bin/python benchmarks/keys_stages.py [--docs 20000] [--parquet PATH] [--multilingual]

Writes the first ``--docs`` documents of the scale benchmark's Parquet file (``benchmarks/scale_data.py``,
350-450 words, ~2.4 kB, generated and cached if needed) -- or, with ``--multilingual``, the documents of
``multilingual-docs.jsonl.gz`` -- to a file of U+0001-separated texts, then runs the Rust example
``native/examples/keys_stages.rs`` on it: normalize; + shingle windows; + xxh3 of every window;
+ poisson sketch + mix band keys (the whole keys path), best of ``--repeat``, in ms, us/document and
ns/shingle. For instruction counts independent of the machine's load::

    valgrind --tool=callgrind native/target/release/examples/keys_stages DOCS_FILE 1 keys
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

SCALE_PARAMS = {"dup_fraction": 0.01, "edit": 0.05, "replace": 0.30, "min_words": 350, "max_words": 450,
                "seed": 1, "max_repeated": 0.10}


def scale_texts(n: int, parquet: str | None) -> list[str]:
    import pyarrow.parquet as pq

    if parquet is None:
        import scale_data

        parquet = scale_data.generate(max(n, 200_000), SCALE_PARAMS,
                                      os.path.join(tempfile.gettempdir(), "lshbloom-scale"))["docs"]
    texts: list = []
    for batch in pq.ParquetFile(parquet).iter_batches(batch_size=8192, columns=["text"]):
        texts.extend(batch.column(0).to_pylist())
        if len(texts) >= n:
            break
    return texts[:n]


def multilingual_texts() -> list[str]:
    from corpus import CORPUS_DIR

    path = next(p for p in (os.path.join(CORPUS_DIR, "multilingual-docs.jsonl.gz"),
                            "/work/shared/corpus/multilingual-docs.jsonl.gz") if os.path.exists(p))
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=20_000)
    p.add_argument("--parquet")
    p.add_argument("--multilingual", action="store_true")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "lshbloom-keys-stages.txt"))
    args = p.parse_args()
    texts = multilingual_texts() if args.multilingual else scale_texts(args.docs, args.parquet)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\u0001".join(t.replace("\u0001", " ") for t in texts))
    manifest = os.path.join(ROOT, "native", "Cargo.toml")
    subprocess.run(["cargo", "run", "-q", "--release", "--manifest-path", manifest, "--example", "keys_stages",
                    "--", args.out, str(args.repeat)], check=True)


if __name__ == "__main__":
    main()
