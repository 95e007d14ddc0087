"""Near-duplicate removal with LSHBloom as a Spark batch job.

    lshbloom dedup --input docs.jsonl --output out/ [options]
    python -m lshbloom_udf dedup ...
    spark-submit spark_jobs/dedup.py ...          (the same job, for spark-submit)

Reads ``--input`` with any Spark data source (``--input-format``, default json),
decides keep-first near-duplicates over ``--text-column`` and writes, by
``--mode``:

- ``flag`` (default): every input row once, plus a boolean ``is_duplicate``;
- ``filter``: the rows kept; ``duplicates``: the rows removed.

Output is Parquet by default (``--output-format``, any Spark source). A summary
(documents, duplicates, rate, index size, seconds per stage) is printed and
written as JSON to ``<output>.summary.json`` (``--summary-path`` to change),
next to the output directory, on the output's file system.

Settings come from, in rising priority: ``lshbloom_udf.config.DEFAULTS``
(same as ``conf/default.toml``) or ``--preset``, ``--config FILE.toml`` (a
``[dedup]`` table), and the flags (:mod:`lshbloom_udf.job.cli`). With
``--index-dir`` the index is kept; running again with it deduplicates new
input against everything kept before.

Exit status: 0 on success, 2 on bad input or parameters (one ``error:`` line
on stderr, no traceback), 1 on other failures.

Reliability (docs/reliability.md): the output is written to
``<output>.lshbloom-tmp`` and renamed into place; with ``--index-dir`` the
job holds the index's lock for its whole run (a second job on the same index
fails at start), works on a staging copy of the index, and commits the output
and the index together (journal + renames). A job killed at any moment and
run again with the same command gives the output and index of an
uninterrupted run. Running again a job that completed reproduces its result
without ingesting the documents a second time (``--force-new-ingest`` to
ingest them anyway).
"""

from lshbloom_udf.job.cli import build_parser, config_from
from lshbloom_udf.job.dedup import main, run

__all__ = ["build_parser", "config_from", "main", "run"]
