"""``spark-submit spark_jobs/dedup.py --input ... --output ...``: the dedup job (:mod:`lshbloom_udf.job`).

The same job runs from an installed package as ``lshbloom dedup ...`` or
``python -m lshbloom_udf dedup ...``; see ``--help`` for every flag.
"""

from lshbloom_udf.job import build_parser, main, run  # noqa: F401  (build_parser, run: for tests and callers)

if __name__ == "__main__":
    main(prog="spark-submit spark_jobs/dedup.py")
