"""The exact-copies fast path on the study's held-out streams (issue 36, item 4): the job's decisions with
``exact_copies`` on and off, per stream, in one local[2] session.

    PYTHONPATH=. .venv/bin/python benchmarks/exact_copies_heldout.py --corpus-dir ../shared/corpus

The streams are :func:`evaluation.study.multilingual.build_splits`'s held-out halves (every language, levels
10 / 50 / 90 %, seed 0: the study's). Each stream is one ``deduplicate`` run with the defaults (``id_col``,
``duplicate_of``), once with the fast path and once without; reported per stream: documents, byte-identical
copies found, flags that differ, ``duplicate_of`` that differ; then the totals. The streams' copies all carry
crawl noise (no byte-identical ones): ``--add-copies f`` inserts ``f · n`` byte-identical copies of random
documents of each stream, each uniformly after its source (seed 36), so that the fast path has work.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

from pyspark.sql import types as T

SCHEMA = T.StructType([T.StructField("pos", T.LongType()), T.StructField("id", T.StringType()),
                       T.StructField("text", T.StringType())])


def decisions(spark, rows, exact: bool):
    from lshbloom_udf.spark import deduplicate

    df = spark.createDataFrame(rows, SCHEMA).repartitionByRange(2, "pos").sortWithinPartitions("pos")
    out, summary = deduplicate(df, id_col="id", duplicate_of=True, exact_copies=exact, progress=False,
                               return_summary=True)
    return {r["id"]: (r["is_duplicate"], r["duplicate_of"]) for r in out.collect()}, summary


def with_copies(texts: list, share: float, seed: int = 36) -> list:
    """``texts`` with ``round(share · n)`` byte-identical copies of random ones, each placed after its source."""
    rng = random.Random(seed)
    out = list(texts)
    for _ in range(round(share * len(texts))):
        source = rng.randrange(len(out))
        out.insert(rng.randrange(source + 1, len(out) + 1), out[source])
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus-dir", default="../shared/corpus")
    p.add_argument("--add-copies", type=float, default=0.0, help="byte-identical copies added, a share of a stream")
    p.add_argument("--json", help="write the figures here too")
    args = p.parse_args()
    from pyspark.sql import SparkSession

    from evaluation.study.multilingual import build_splits

    splits, _ = build_splits(args.corpus_dir, 200, 300, 0, log=lambda *a: None)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    totals = {"streams": 0, "documents": 0, "exact_duplicates": 0, "flags_differ": 0, "duplicate_of_differ": 0,
              "flagged": 0}
    for lang, (_, held) in splits.items():
        for level, st in zip((0.1, 0.5, 0.9), held.streams):
            texts = with_copies([d.text for d in st.docs], args.add_copies)
            rows = [(i, str(i), t) for i, t in enumerate(texts)]
            on, summary = decisions(spark, rows, True)
            off, _ = decisions(spark, rows, False)
            flags = sum(on[k][0] != off[k][0] for k in on)
            sources = sum(on[k][0] and off[k][0] and on[k][1] != off[k][1] for k in on)
            line = {"stream": f"{lang} {level:.0%}", "documents": len(rows),
                    "exact_duplicates": summary["exact_duplicates"], "flagged": summary["duplicates"],
                    "flags_differ": flags, "duplicate_of_differ": sources}
            print(json.dumps(line), flush=True)
            totals["streams"] += 1
            for k in ("documents", "exact_duplicates", "flags_differ", "duplicate_of_differ"):
                totals[k] += line[k]
            totals["flagged"] += line["flagged"]
    spark.stop()
    print(json.dumps(totals), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(totals, f, indent=2)


if __name__ == "__main__":
    main()
