"""MLlib ``MinHashLSH.approxSimilarityJoin`` on the study's held-out streams (the issue's set-up), for side-by-side F1.

    python -m evaluation.study.mllib --test ../shared/corpus/man-pages.jsonl.gz --docs 2000 \\
        --levels 0.1,0.5,0.9 [--out docs/evaluation/verified/mllib.csv]

Lowercased ``\\W+`` unigrams, binary ``HashingTF`` (2^18), ``MinHashLSH`` with 5
hash tables, ``approxSimilarityJoin`` of a stream with itself at Jaccard
distance 0.5 (each candidate verified with its exact distance); a document is a
duplicate when it has a pair with an earlier one. ``local[2]``, loopback.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from evaluation.scoring import score
from evaluation.study.grid import Split, load_pool


def mllib_flags(spark, texts: list[str], distance: float = 0.5, tables: int = 5) -> np.ndarray:
    from pyspark.ml.feature import HashingTF, MinHashLSH, RegexTokenizer
    from pyspark.sql import functions as F

    df = spark.createDataFrame(list(enumerate(texts)), "id long, text string")
    tokens = RegexTokenizer(inputCol="text", outputCol="tokens", pattern="\\W+", toLowercase=True).transform(df)
    feats = HashingTF(inputCol="tokens", outputCol="features", binary=True, numFeatures=1 << 18).transform(tokens)
    feats = feats.where(F.size("tokens") > 0).select("id", "features").cache()
    model = MinHashLSH(inputCol="features", outputCol="hashes", numHashTables=tables, seed=1).fit(feats)
    pairs = model.approxSimilarityJoin(feats, feats, distance, distCol="d")
    later = pairs.where(F.col("datasetA.id") < F.col("datasetB.id")).select(F.col("datasetB.id").alias("id")).distinct()
    flags = np.zeros(len(texts), dtype=bool)
    flags[[r["id"] for r in later.collect()]] = True
    feats.unpersist()
    return flags


def main(argv=None) -> int:
    from pyspark.sql import SparkSession

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--test", required=True)
    p.add_argument("--docs", type=int, default=2000)
    p.add_argument("--levels", default="0.1,0.5,0.9")
    p.add_argument("--seed", type=int, default=1, help="the study's held-out seed (its seed + 1)")
    p.add_argument("--out", default="docs/evaluation/verified/mllib.csv")
    args = p.parse_args(argv)
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "8").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    pool, _ = load_pool(args.test)
    split = Split.build("heldout", pool, args.docs, tuple(float(x) for x in args.levels.split(",")), args.seed)
    lines = ["level,tp,fp,fn,precision,recall,f1,seconds"]
    for st, idx in zip(split.streams, split.index):
        t = time.perf_counter()
        flags = mllib_flags(spark, [split.texts[j] for j in idx])
        s = score(st.labels, flags)
        lines.append(f"{st.level:g},{s.tp},{s.fp},{s.fn},{s.precision:.6f},{s.recall:.6f},{s.f1:.6f},"
                     f"{time.perf_counter() - t:.1f}")
        print(lines[-1], flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
