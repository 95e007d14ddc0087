# Databricks notebook source
# MAGIC %md
# MAGIC # Near-duplicate removal with LSHBloom on Databricks
# MAGIC
# MAGIC Deduplicates a small real corpus end to end with `lshbloom_udf.deduplicate`: the bundled sample
# MAGIC (standard-library docstrings plus near-duplicate edits), keep-first decisions with the default settings
# MAGIC (Jaccard threshold 0.45 over normalized word 4-grams, 512 permutations), flagged documents shown next to the kept document they
# MAGIC duplicate, the run's summary, and a second batch deduplicated against the first by reusing the index.
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

# COMMAND ----------

index_dir = os.path.join(tempfile.mkdtemp(prefix="lshbloom-"), "index")  # driver-local disk
# expected_docs sizes the index for every batch it will hold (default: the size of this input).
result = deduplicate(batch1, text_col="text", id_col="id", index_dir=index_dir, expected_docs=len(docs), return_summary=True)
flagged = result.df.cache()
display(flagged.groupBy("is_duplicate").count())

# COMMAND ----------

# MAGIC %md
# MAGIC ## 3. Flagged documents and the kept document they duplicate
# MAGIC The index does not store which document matched, so for display we pick the kept document with the highest
# MAGIC MinHash Jaccard estimate, from the same signatures the run used (bit-identical to datasketch's `MinHash`).

# COMMAND ----------

from lshbloom_udf import signatures

# the shingling and MinHash settings the run used
SHINGLING = {name: DEFAULTS[name] for name in ("num_perm", "ngram", "normalize", "seed", "scheme")}

rows = flagged.select("id", "text", "source", "is_duplicate").collect()
kept = [r for r in rows if not r["is_duplicate"] and r["text"]]
kept_signatures = signatures([r["text"] for r in kept], **SHINGLING)


def best_kept_match(text):
    estimates = (kept_signatures == signatures([text], **SHINGLING)[0]).mean(axis=1)
    best = int(estimates.argmax())
    return float(estimates[best]), kept[best]


pairs = []
for r in [r for r in rows if r["is_duplicate"]][:5]:
    score, match = best_kept_match(r["text"])
    pairs.append((r["id"], match["id"], round(score, 2), r["source"] == match["source"], r["text"][:200], match["text"][:200]))
display(spark.createDataFrame(pairs, "duplicate string, kept string, jaccard double, same_source boolean, duplicate_text string, kept_text string"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## 4. The summary

# COMMAND ----------

print(result.summary_text())
print(json.dumps(result.summary["seconds"], indent=2))

# COMMAND ----------

# MAGIC %md
# MAGIC ## 5. A second batch against the same index
# MAGIC Reopening `index_dir` checks the manifest and keeps the index's sizing; batch-2 documents that near-duplicate
# MAGIC anything kept in batch 1 are flagged. Other parameters on the same index are refused.

# COMMAND ----------

result2 = deduplicate(batch2, id_col="id", index_dir=index_dir, return_summary=True)
print(result2.summary_text())
first_sources = {r["source"] for r in rows}
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
