"""The least any ``spark-submit`` job on this machine costs: the floor under the whole-job ratio.

``start``: start the JVM and a SparkSession, read the input's schema, stop.
``copy``: the same, plus read every row of the input and write it back as
Parquet, which any job that outputs the documents must do at least. Run by
``bench_all.py`` beside the dedup job with the same spark-submit options.
"""

import sys

from pyspark.sql import SparkSession


def main(mode: str, source: str, target: str) -> None:
    spark = SparkSession.builder.appName(f"lshbloom-floor-{mode}").getOrCreate()
    df = spark.read.parquet(source)
    if mode == "copy":
        df.write.mode("overwrite").parquet(target)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
