"""The dedup job as a function a scheduler calls: a Databricks "Python wheel task".

A wheel task names a package and an entry point and passes its parameters as
``sys.argv[1:]`` (``parameters: ["--input", "...", ...]``; ``named_parameters``
arrive as ``--name=value``, which the job's flags accept too). The entry point
is looked up in the wheel's metadata: this package declares
``lshbloom-dedup = "lshbloom_udf.tasks:dedup_task"`` among its console scripts
(``[project.scripts]``), so the task is::

    python_wheel_task:
      package_name: lshbloom-spark
      entry_point: lshbloom-dedup
      parameters: ["--input", "/Volumes/main/raw/docs/", "--output", "/Volumes/main/dedup/out", ...]

The flags are those of ``lshbloom dedup`` (:mod:`lshbloom_udf.job`); see
docs/deployment.md.
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

PROG = "lshbloom-dedup"


def dedup_task(argv: Optional[Sequence[str]] = None) -> None:
    """Run the dedup job with ``argv`` (default ``sys.argv[1:]``) in the session the platform provides.

    Unlike ``lshbloom dedup``, which exits, this returns normally when the job
    succeeds, and raises :class:`SystemExit` with the job's exit code (2 for
    bad flags or input, 1 otherwise) when it fails, so that the task fails.
    The SparkSession is taken with ``getOrCreate()`` and handed to the job: on
    Databricks that is the cluster's session, which the job uses and leaves
    running (the job only stops a session it created itself).
    """
    from pyspark.sql import SparkSession

    from lshbloom_udf.__main__ import default_worker_python
    from lshbloom_udf.job import main

    args = list(sys.argv[1:] if argv is None else argv)
    default_worker_python()  # only matters when no session exists yet (run outside a platform)
    spark = SparkSession.builder.getOrCreate()
    try:
        main(args, prog=PROG, spark=spark)
    except SystemExit as e:
        if e.code not in (0, None):
            raise
