"""Shared fixtures: one local[2] SparkSession for the whole test session (``make test`` runs one session per core,
pytest-xdist's processes, each with its own)."""

from __future__ import annotations

import os
import sys
import uuid

import pytest

from cluster_support import RUN_ENV, shared_cluster, stop_shared_cluster
from spark_support import JVM_OPTIONS

# Executors are Python workers started by Spark: make them use this interpreter.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# The JVMs the tests start in child processes without a Spark conf of theirs (the installed wheel's job,
# the notebooks' kernels, the Connect server, the standalone cluster's daemons and executors) take the
# session's JIT and GC options from the java launcher's own variable.
os.environ.setdefault("JDK_JAVA_OPTIONS", JVM_OPTIONS)


def pytest_configure(config):
    """The run's id, set where the run starts: pytest-xdist's workers, started after this, inherit it."""
    os.environ.setdefault(RUN_ENV, f"{os.getpid()}-{uuid.uuid4().hex[:8]}")


def pytest_sessionfinish(session):
    """At the run's end (in pytest-xdist's controller, after every worker): stop the run's cluster, if any."""
    if not hasattr(session.config, "workerinput"):
        stop_shared_cluster()


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
def cluster():
    """A standalone master and two workers on loopback (tests/cluster_support.py), one for the whole run: started by
    the first test that needs it, in whichever pytest process, and stopped when the run ends.

    The workers' Python has PySpark but not this package: each job names its
    executors' Python (the driver's PYSPARK_PYTHON, or a packed environment).
    """
    return shared_cluster()
