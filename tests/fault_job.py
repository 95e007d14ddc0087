"""``spark-submit tests/fault_job.py ARGS``: the product's job, with the faults ``LSHBLOOM_TEST_FAULT`` asks for.

The reliability tests submit this instead of ``spark_jobs/dedup.py``: it
installs the fault hooks (``tests/fault_injection.py``) in the driver, then
runs the job exactly as ``spark_jobs/dedup.py`` does.
"""

import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fault_injection  # noqa: E402

if __name__ == "__main__":
    fault_injection.install_from_env()
    runpy.run_path(os.path.join(os.path.dirname(HERE), "spark_jobs", "dedup.py"), run_name="__main__")
