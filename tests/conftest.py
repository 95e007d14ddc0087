"""Shared fixtures: one local[2] SparkSession for the whole test session (``make test`` runs one session per core,
pytest-xdist's processes, each with its own)."""

from __future__ import annotations

import os
import sys

import pytest

from spark_support import JVM_OPTIONS

# Executors are Python workers started by Spark: make them use this interpreter.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# The JVMs the tests start in child processes without a Spark conf of theirs (the installed wheel's job,
# the notebooks' kernels, the Connect server, the standalone cluster's daemons and executors) take the
# session's JIT and GC options from the java launcher's own variable.
os.environ.setdefault("JDK_JAVA_OPTIONS", JVM_OPTIONS)


def pytest_collection_modifyitems(items):
    """Every test that uses a SparkSession is marked ``spark`` (``make test-fast`` runs the others)."""
    for item in items:
        if {"spark", "cluster"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("lshbloom-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # The session outlives every test; their local checkpoints stay cached until the JVM's
        # garbage collector lets Spark clean them, and the 100 MB document test needs room beside them
        # (2g ran out of heap there once the suite grew past ~560 tests).
        .config("spark.driver.memory", "3g")
        .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """A standalone master and two workers on loopback (tests/cluster_support.py), shared by the tests that need one.

    The workers' Python has PySpark but not this package: each job names its
    executors' Python (the driver's PYSPARK_PYTHON, or a packed environment).
    """
    from cluster_support import pyspark_only_python, standalone_cluster

    root = tmp_path_factory.mktemp("cluster")
    with standalone_cluster(root, pyspark_only_python(root)) as running:
        yield running
