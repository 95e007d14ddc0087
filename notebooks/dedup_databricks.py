# Databricks notebook source
# MAGIC %md
# MAGIC # Near-duplicate removal with LSHBloom on Databricks
# MAGIC
# MAGIC Deduplicates a small real corpus end to end with `lshbloom_udf.deduplicate`: the bundled sample
# MAGIC (standard-library docstrings plus near-duplicate edits), keep-first decisions with the default settings
# MAGIC (`DEFAULTS`, printed below), verified, flagged documents shown next to the kept document they duplicate
# MAGIC (`duplicate_of`), the longest or newest document kept (`order_by`), the run's summary, and a second batch
# MAGIC deduplicated against the first by reusing the index.
# MAGIC
# MAGIC **Setup.** Install the `lshbloom-spark` wheel (`make wheel`, uploaded to a Unity Catalog volume) as a cluster
# MAGIC library, or for this notebook with the `%pip install` cell below (both reach the driver and the workers; it has a
# MAGIC native extension, so not as a zip). Databricks Runtime 17+ (Spark 4); see docs/deployment.md.
# MAGIC The index is written on the driver's local disk (the sequential pass runs there); keep it on a path that
# MAGIC survives the cluster (copy it to a volume) if you want to deduplicate later batches against it.

# COMMAND ----------

# MAGIC %pip install /Volumes/main/default/libs/lshbloom_spark-0.1.0-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl

# COMMAND ----------

import json
import os
import tempfile

from lshbloom_udf import IndexMismatchError, deduplicate
from lshbloom_udf.config import DEFAULTS
from lshbloom_udf.sample import build_sample

print(DEFAULTS)

# COMMAND ----------

# MAGIC %md
# MAGIC ## 1. The sample corpus
# MAGIC `source` numbers the original docstring a document comes from: documents sharing a `source` are planted
# MAGIC near-duplicates. The first 400 documents are batch 1, the rest batch 2 ("new data arriving later").

# COMMAND ----------

NUM_DOCS = 600
docs = build_sample(num_docs=NUM_DOCS, duplicate_fraction=0.25, seed=7)
schema = "id string, text string, source long"
batch1 = spark.createDataFrame([(d["id"], d["text"], d["source"]) for d in docs[:400]], schema)
batch2 = spark.createDataFrame([(d["id"], d["text"], d["source"]) for d in docs[400:]], schema)
display(batch1.limit(5))

# COMMAND ----------

# MAGIC %md
# MAGIC ## 2. Deduplicate
# MAGIC Band keys are computed on the workers (vectorized, per Arrow batch); the keep-first Bloom-filter pass runs
# MAGIC on the driver, partition by partition; `is_duplicate` is joined back on `id` (checked to be unique).
# MAGIC `verify=True` checks every flag with the exact Jaccard similarity of the two documents and removes the flags
# MAGIC the filters gave without it; `duplicate_of=True` adds `duplicate_of` (the id of the earlier kept document) and
# MAGIC `similarity` (their exact Jaccard).

# COMMAND ----------

index_dir = os.path.join(tempfile.mkdtemp(prefix="lshbloom-"), "index")  # driver-local disk
# expected_docs sizes the index for every batch it will hold (default: the size of this input).
result = deduplicate(batch1, text_col="text", id_col="id", index_dir=index_dir, expected_docs=len(docs),
                     verify=True, duplicate_of=True, return_summary=True)
flagged = result.df.cache()
display(flagged.groupBy("is_duplicate").count())

# COMMAND ----------

# MAGIC %md
# MAGIC ## 3. Flagged documents and the kept document they duplicate
# MAGIC The index stores no texts, so the pass alone cannot say which document matched; verification does.

# COMMAND ----------

from pyspark.sql import functions as F

pairs = flagged.where("duplicate_of is not null").alias("d").join(flagged.alias("k"), F.col("d.duplicate_of") == F.col("k.id"))
display(pairs.select(F.col("d.id").alias("duplicate"), F.col("k.id").alias("kept"), F.round("d.similarity", 2).alias("jaccard"),
                     (F.col("d.source") == F.col("k.source")).alias("same_source"),
                     F.substring("d.text", 1, 200).alias("duplicate_text"), F.substring("k.text", 1, 200).alias("kept_text")).limit(5))

# COMMAND ----------

# MAGIC %md
# MAGIC ## 3b. Which document is kept
# MAGIC Keep-first keeps the first document of a group in processing order (input order by default). `order_by` takes
# MAGIC Spark Column expressions: `F.length("text").desc()` keeps the longest of each group, `F.col("ts").desc()` the
# MAGIC newest. (A string such as `"-ts"` is a column name, not a descending order: it is refused.)

# COMMAND ----------

longest = deduplicate(batch1, id_col="id", order_by=F.length("text").desc(), verify=True, duplicate_of=True, progress=False)
longest_pairs = longest.where("duplicate_of is not null").alias("d").join(
    longest.alias("k"), F.col("d.duplicate_of") == F.col("k.id")).select(
    F.length("d.text").alias("duplicate_length"), F.length("k.text").alias("kept_length"))
keeps_longest = longest_pairs.where("kept_length < duplicate_length").count() == 0
print("keep-longest: every kept document at least as long as its duplicates:", keeps_longest)
display(longest_pairs.limit(5))

# COMMAND ----------

dated = batch1.withColumn("ts", F.date_add(F.lit("2024-01-01").cast("date"), (F.abs(F.hash("id")) % 365).cast("int")))
newest = deduplicate(dated, id_col="id", order_by=[F.col("ts").desc()], verify=True, duplicate_of=True, progress=False)
newest_pairs = newest.where("duplicate_of is not null").alias("d").join(
    newest.alias("k"), F.col("d.duplicate_of") == F.col("k.id")).select("d.id", "d.ts", F.col("k.ts").alias("kept_ts"))
print("keep-newest: every kept document at least as new:", newest_pairs.where("kept_ts < ts").count() == 0)
display(newest_pairs.limit(5))

# COMMAND ----------

# MAGIC ## 4. The summary

# COMMAND ----------

print(result.summary_text())
print(json.dumps(result.summary["seconds"], indent=2))

# COMMAND ----------

# MAGIC %md
# MAGIC The run report: one self-contained HTML page (counts, similarities, the largest groups, removed documents beside
# MAGIC their kept one, the index's fill, the stage seconds). The job writes it with `--report`.

# COMMAND ----------

from lshbloom_udf.report import report_html

displayHTML(report_html(result))

# COMMAND ----------

# MAGIC %md
# MAGIC ## 5. A second batch against the same index
# MAGIC Reopening `index_dir` checks the manifest and keeps the index's sizing; batch-2 documents that near-duplicate
# MAGIC anything kept in batch 1 are flagged, verified against batch 1's records (a sketch of each document it kept,
# MAGIC beside the index) and named in `duplicate_of`. Other parameters on the same index are refused.

# COMMAND ----------

result2 = deduplicate(batch2, id_col="id", index_dir=index_dir, verify=True, duplicate_of=True, return_summary=True)
print(result2.summary_text())
first_sources = {r["source"] for r in flagged.select("source").collect()}
across = result2.df.where("is_duplicate").where(result2.df.source.isin(sorted(first_sources)))
print(across.count(), "batch-2 documents flagged as near-duplicates of batch-1 documents")
display(across.limit(5))

# COMMAND ----------

try:
    deduplicate(batch2, id_col="id", index_dir=index_dir, threshold=0.8)
except IndexMismatchError as e:
    print("refused:", e)

# COMMAND ----------

# MAGIC %md
# MAGIC To write the kept documents: `deduplicate(df, id_col="id", mode="filter").write.parquet(...)`; for
# MAGIC large inputs prefer the batch job as a Databricks Python wheel task (entry point `lshbloom-dedup`, the job's flags
# MAGIC as parameters; docs/deployment.md).

# COMMAND ----------

# MAGIC %md
# MAGIC ## 6. A stream: files arriving in a landing directory
# MAGIC Each micro-batch is one run of a kept index, committed with its output (`<output>/batch=<n>`) and its flags,
# MAGIC exactly once: a batch Spark replays after a failure gets the flags it committed, whatever the order of its
# MAGIC rows, and inserts nothing (docs/reliability.md, streams). On Databricks read the landing volume with Auto Loader
# MAGIC (`spark.readStream.format("cloudFiles").option("cloudFiles.format", "json").schema(schema).load(path)`) and
# MAGIC keep `index_dir` on the driver's disk, copied to a volume between queries; here, Spark's file source.

# COMMAND ----------

from lshbloom_udf.spark.streaming import StreamDedup

stream_root = tempfile.mkdtemp(prefix="lshbloom-stream-")
landing = os.path.join(stream_root, "landing")
for n, part in enumerate((docs[:300], docs[300:])):  # two files arrive
    batch_path = os.path.join(landing, f"part-{n}.json")
    os.makedirs(landing, exist_ok=True)
    with open(batch_path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"id": d["id"], "text": d["text"], "source": d["source"]}) + "\n" for d in part)
    os.utime(batch_path, (1e9 + n, 1e9 + n))  # the file source takes the oldest file first
arriving = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(landing)
stream_writer = StreamDedup(os.path.join(stream_root, "index"), os.path.join(stream_root, "out"), id_col="id",
                            expected_docs=len(docs), duplicate_of=True, progress=False)
query = stream_writer.start(arriving, os.path.join(stream_root, "checkpoint"), trigger={"availableNow": True})
query.awaitTermination()
for batch in stream_writer.progress:
    print(f"batch {batch['batch']}: {batch['documents']} documents, {batch['duplicates']} duplicates, "
          f"index holds {batch['index']['inserted_total']}")
streamed = spark.read.parquet(os.path.join(stream_root, "out"))
display(streamed.groupBy("batch", "is_duplicate").count().orderBy("batch", "is_duplicate"))
