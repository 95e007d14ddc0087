"""LSHBloom deduplication of a Spark DataFrame: :func:`deduplicate`.

A run has four stages (:mod:`lshbloom_udf.spark.pipeline`):

1. **Pin (executors, JVM only)** — the input, read once, gets a deterministic
   row id (:func:`~lshbloom_udf.spark.keys.row_id`) and is checkpointed.
2. **Checks** — :mod:`~lshbloom_udf.spark.ingest`: one aggregation counts,
   fingerprints and checks the ids; a kept index may already hold the input.
3. **Keys and driver pass, overlapped** — a ``mapInArrow`` function turns the
   text of each Arrow batch into ``b`` band keys per document in native code
   (:mod:`~lshbloom_udf.spark.keys`) on every executor at once, and sends them
   to the driver as it goes (:mod:`~lshbloom_udf.spark.passes.driver.stream`), where the
   index decides them keep-first in row order
   (:mod:`~lshbloom_udf.spark.passes.driver`).
4. **Join** — :mod:`~lshbloom_udf.spark.join`: the duplicates come back as a
   small DataFrame joined to the pinned rows as the mode says.

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
