"""Helpers of the deployment tests (tests/deploy/): the built wheel, fresh venvs, a packed environment."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What `pip install` of the wheel may bring: the runtime dependencies and theirs (pyproject.toml).
RUNTIME_DISTRIBUTIONS = {
    "lshbloom-spark", "pyspark", "py4j", "numpy", "pyarrow", "pandas", "scipy",
    "python-dateutil", "pytz", "tzdata", "six",
    "pip", "setuptools", "wheel",  # the venv's own
}
# A job ships neither: the native module reads and writes the index format itself.
TEST_ONLY_DISTRIBUTIONS = {"pybloomfiltermmap3", "datasketch"}


def built_wheel() -> str:
    """The wheel in ``$LSHBLOOM_WHEEL_DIR`` (``make test`` built it just before), or ``make wheel`` now.

    ``make wheel`` is incremental (cargo's cache in native/target), a few
    seconds when nothing changed, and checks the wheel with ``auditwheel``.
    """
    wheel_dir = os.environ.get("LSHBLOOM_WHEEL_DIR")
    if not wheel_dir:
        done = subprocess.run(["make", "-s", "wheel"], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        wheel_dir = os.path.join(ROOT, "dist")
    wheels = glob.glob(os.path.join(wheel_dir, "lshbloom_spark-*.whl"))
    assert len(wheels) == 1, f"expected one wheel in {wheel_dir}, found {wheels}"
    return wheels[0]


def clean_env(**extra) -> dict:
    """This process's environment without what would let a child see the repository or this venv."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON",
                        "PYSPARK_SUBMIT_ARGS", "LSHBLOOM_TEST_FAULT", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env.update(extra)
    return env


def run(cmd, timeout=600, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kwargs)
    assert done.returncode == 0, f"{cmd} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done


def fresh_venv(path, wheel: str) -> str:
    """``python3 -m venv PATH`` then ``pip install WHEEL`` (from PyPI or pip's cache); returns its bin directory.

    ``--no-compile`` only skips writing .pyc files, to save time.
    """
    run([sys.executable, "-m", "venv", path], env=clean_env())
    bindir = os.path.join(path, "bin")
    run([os.path.join(bindir, "python"), "-m", "pip", "install", "-q", "--no-compile", wheel], env=clean_env())
    return bindir


def installed_distributions(bindir: str) -> set:
    out = run([os.path.join(bindir, "python"), "-m", "pip", "list", "--format", "json"], env=clean_env()).stdout
    return {d["name"].lower().replace("_", "-") for d in json.loads(out)}


def pack_environment(venv, output) -> str:
    """``venv-pack`` the venv into ``output`` (.tar.gz), leaving PySpark out.

    On a cluster the executors import the cluster's own PySpark (Spark puts its
    pyspark.zip first on their PYTHONPATH), so a packed copy would go unused;
    leaving it out halves the archive. Fast compression: the archive is made and
    unpacked once per test run.
    """
    venv_pack = os.path.join(os.path.dirname(sys.executable), "venv-pack")
    run([venv_pack, "-q", "-p", venv, "-o", output, "--compress-level", "1",
         "--exclude", "lib/python*/site-packages/pyspark/*"])
    return str(output)
