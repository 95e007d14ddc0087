"""MLlib's near-duplicate detection, the issue's set-up: ``spark-submit mllib_join.py <docs.parquet> <out>``.

Lowercased ``\\W+`` unigrams, binary ``HashingTF`` (2^18 features),
``MinHashLSH`` with 5 hash tables, ``approxSimilarityJoin`` of the data with
itself at Jaccard distance 0.5 (MLlib verifies each candidate pair with its
exact distance); a document is a duplicate when it has a pair with an earlier
one (``id`` = processing order). Writes ``id, is_duplicate`` as Parquet.
"""

import sys

from pyspark.ml.feature import HashingTF, MinHashLSH, RegexTokenizer
from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def main(src: str, out: str) -> None:
    spark = SparkSession.builder.appName("mllib-minhashlsh-join").getOrCreate()
    df = spark.read.parquet(src).select("id", "text")
    tokens = RegexTokenizer(inputCol="text", outputCol="tokens", pattern="\\W+", toLowercase=True).transform(df)
    feats = HashingTF(inputCol="tokens", outputCol="features", binary=True, numFeatures=1 << 18).transform(tokens)
    feats = feats.where(F.size("tokens") > 0).select("id", "features")  # MinHashLSH refuses empty vectors
    model = MinHashLSH(inputCol="features", outputCol="hashes", numHashTables=5, seed=1).fit(feats)
    pairs = model.approxSimilarityJoin(feats, feats, 0.5, distCol="distance")
    dups = (pairs.where(F.col("datasetA.id") < F.col("datasetB.id")).select(F.col("datasetB.id").alias("id"))
            .distinct().withColumn("is_duplicate", F.lit(True)))
    flags = df.select("id").join(dups, "id", "left").select("id", F.coalesce("is_duplicate", F.lit(False)).alias("is_duplicate"))
    flags.write.mode("overwrite").parquet(out)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
