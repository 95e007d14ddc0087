"""LSHBloom deduplication of a Spark DataFrame: :func:`deduplicate`.

A run has three stages (:mod:`lshbloom_udf.spark.pipeline`):

1. **Keys (executors, in parallel)** — :mod:`~lshbloom_udf.spark.keys`: a
   ``mapInArrow`` function turns the text column of each Arrow batch into
   ``b`` band keys per document in native code and tags every row with a
   deterministic row id; the result is checkpointed.
2. **Driver pass (sequential)** — :mod:`~lshbloom_udf.spark.driver_pass`: the
   keys, packed in chunks, stream to the driver in partition order and the
   index decides them keep-first (:mod:`~lshbloom_udf.spark.ingest` first checks
   ids and whether a kept index already ingested the input).
3. **Join** — :mod:`~lshbloom_udf.spark.join`: the duplicates come back as a
   small DataFrame joined to the input as the mode says.

Documents whose text is null or empty have no shingles: they are never
queried nor inserted and come out with ``is_duplicate = false``. The summary
and the commit still to do come back in a :class:`DedupResult`
(:mod:`~lshbloom_udf.spark.result`).
"""

from lshbloom_udf.config import DEFAULTS, DedupConfig
from lshbloom_udf.errors import DedupInputError, IndexMismatchError
from lshbloom_udf.spark.api import deduplicate, run
from lshbloom_udf.spark.result import DedupResult, format_summary

__all__ = ["DEFAULTS", "DedupConfig", "DedupInputError", "DedupResult", "IndexMismatchError", "deduplicate",
           "format_summary", "run"]
