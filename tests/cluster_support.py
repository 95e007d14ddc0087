"""A Spark standalone cluster on loopback addresses for the tests (tests/conftest.py's ``cluster`` fixture).

A master and two 1-core workers started from the installed PySpark. The
workers' own Python is a bare venv that can import PySpark and nothing else
(not numpy, not this package): an executor only gets what the job ships or
names (``PYSPARK_PYTHON`` of the driver, ``--archives`` of a packed
environment).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time

import pytest


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def can_bind(host: str) -> bool:
    try:
        free_port(host)
        return True
    except OSError:
        return False


def pyspark_only_python(root) -> str:
    """A venv (no pip, no packages) whose Python imports this session's PySpark and py4j, linked, and nothing else."""
    import py4j
    import pyspark

    venv = root / "pyspark-only"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    linked = root / "pyspark-only-packages"
    linked.mkdir()
    for module in (pyspark, py4j):
        os.symlink(os.path.dirname(module.__file__), linked / module.__name__)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    with open(os.path.join(purelib, "pyspark_only.pth"), "w") as f:
        f.write(str(linked) + "\n")
    probe = "import importlib.util as u; print([bool(u.find_spec(m)) for m in ('pyspark', 'numpy', 'lshbloom_udf')])"
    found = subprocess.run([python, "-c", probe], check=True, capture_output=True, text=True, cwd=root,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}).stdout.strip()
    assert found == "[True, False, False]", found
    return python


@contextlib.contextmanager
def standalone_cluster(root, worker_python: str):
    """A master and two workers from the installed PySpark on 127.0.0.1 (and 127.0.0.2 when it can be bound).

    Two loopback addresses are two "hosts" to Spark (speculative copies only
    run on another host than the original attempt). Yields
    ``dict(url, hosts, root)``; executors' work directories are under ``root``.
    """
    import pyspark

    spark_home = os.path.dirname(pyspark.__file__)
    spark_class = os.path.join(spark_home, "bin", "spark-class")
    hosts = ["127.0.0.1", "127.0.0.2"] if can_bind("127.0.0.2") else ["127.0.0.1", "127.0.0.1"]
    env = dict(
        os.environ, SPARK_HOME=spark_home, PYSPARK_PYTHON=worker_python, SPARK_LOCAL_IP="127.0.0.1",
        PATH=os.path.dirname(worker_python) + os.pathsep + os.environ.get("PATH", ""),
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false", SPARK_NO_DAEMONIZE="1",
    )
    for name in ("LSHBLOOM_TEST_FAULT", "PYTHONPATH", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV"):
        env.pop(name, None)
    port = free_port()
    procs = []

    def start(name, cmd, **extra):
        log = open(root / f"{name}.log", "w")
        procs.append(subprocess.Popen(cmd, env=dict(env, **extra), stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True, cwd=root))
        return root / f"{name}.log"

    try:
        master_log = start("master", [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                      "--port", str(port), "--webui-port", str(free_port())])
        url = f"spark://127.0.0.1:{port}"
        for i, host in enumerate(hosts):
            start(f"worker{i}", [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", host,
                                 "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                                 "--work-dir", str(root / f"work{i}")], SPARK_LOCAL_IP=host)
        deadline = time.monotonic() + 180
        while master_log.read_text().count("Registering worker") < 2:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                pytest.fail("standalone cluster did not start:\n" + master_log.read_text()[-3000:])
            time.sleep(0.5)
        yield dict(url=url, hosts=hosts, root=root)
    finally:
        for p in reversed(procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def executor_dirs(cluster) -> set:
    """The executors' working directories (``work<i>/<app-id>/<executor-id>``) the cluster has so far."""
    return {executor for work in cluster["root"].glob("work[0-9]*") if work.is_dir()
            for app in work.iterdir() for executor in app.iterdir()}
