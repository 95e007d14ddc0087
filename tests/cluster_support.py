"""A Spark standalone cluster on loopback addresses for the tests (tests/conftest.py's ``cluster`` fixture).

A master and two 2-core workers started from the installed PySpark, one for the whole test run: the pytest
processes share it (each application has executors of its own, :func:`executor_dirs`). The
workers' own Python is a bare venv that can import PySpark and nothing else
(not numpy, not this package): an executor only gets what the job ships or
names (``PYSPARK_PYTHON`` of the driver, ``--archives`` of a packed
environment).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


# The test run's id (``<pid of the pytest process that owns the run>-<random>``): tests/conftest.py sets it in the
# controller before pytest-xdist starts its workers, which inherit it, so that they share the run's one cluster.
RUN_ENV = "LSHBLOOM_TEST_RUN"


def run_dir() -> Path:
    """The directory of this test run's cluster (under the temp directory), shared by its pytest processes."""
    return Path(tempfile.gettempdir()) / f"lshbloom-test-cluster-{os.environ[RUN_ENV]}"


def shared_cluster() -> dict:
    """The run's standalone cluster: started by the first pytest process that asks for it (under a file lock),
    found by the others in ``cluster.json``; stopped by :func:`stop_shared_cluster` at the run's end, or by its
    watcher once the run's owner process is gone (a run killed midway)."""
    root = run_dir()
    root.mkdir(exist_ok=True)
    with open(root / "cluster.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        info = root / "cluster.json"
        if not info.exists():
            running = start_cluster(root, pyspark_only_python(root))
            owner = int(os.environ[RUN_ENV].split("-")[0])
            subprocess.Popen([sys.executable, "-c", WATCHER, str(owner), str(root), *map(str, running["groups"])],
                             start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            info.write_text(json.dumps(running))
        running = json.loads(info.read_text())
    return dict(running, root=root)


def stop_shared_cluster() -> None:
    """Stop the run's cluster if one was started (SIGTERM, then SIGKILL after 20 s) and remove its directory."""
    if RUN_ENV not in os.environ:
        return
    root = run_dir()
    info = root / "cluster.json"
    if info.exists():
        stop_groups(json.loads(info.read_text())["groups"])
    shutil.rmtree(root, ignore_errors=True)


# The watcher: once the run's owner process is gone and the cluster's directory is still there (the run did not stop
# it), the cluster's process groups are killed and the directory removed. It leaves as soon as the directory is gone:
# the groups' ids may name other processes after stop_shared_cluster.
WATCHER = """
import os, shutil, signal, sys, time
owner, root, groups = int(sys.argv[1]), sys.argv[2], [int(g) for g in sys.argv[3:]]
while os.path.exists(f"/proc/{owner}") and os.path.isdir(root):
    time.sleep(1)
if os.path.isdir(root):
    for g in groups:
        try:
            os.killpg(g, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(root, ignore_errors=True)
"""


def start_cluster(root, worker_python: str) -> dict:
    """A master and two workers from the installed PySpark on 127.0.0.1 (and 127.0.0.2 when it can be bound).

    Two loopback addresses are two "hosts" to Spark (speculative copies only
    run on another host than the original attempt). Each worker has two cores,
    so that two applications of one core per worker run at once (pytest-xdist's
    processes share the cluster). Returns ``dict(url, hosts, groups)``, the
    daemons' process groups; executors' work directories are under ``root``.
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
        with open(root / f"{name}.log", "w") as log:
            procs.append(subprocess.Popen(cmd, env=dict(env, **extra), stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True, cwd=root))
        return root / f"{name}.log"

    try:
        master_log = start("master", [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                      "--port", str(port), "--webui-port", str(free_port())])
        url = f"spark://127.0.0.1:{port}"
        for i, host in enumerate(hosts):
            start(f"worker{i}", [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", host,
                                 "--cores", "2", "--memory", "1g", "--webui-port", str(free_port()),
                                 "--work-dir", str(root / f"work{i}")], SPARK_LOCAL_IP=host)
        deadline = time.monotonic() + 180
        while master_log.read_text().count("Registering worker") < 2:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                pytest.fail("standalone cluster did not start:\n" + master_log.read_text()[-3000:])
            time.sleep(0.5)
    except BaseException:
        stop_groups([p.pid for p in procs])
        raise
    return dict(url=url, hosts=hosts, groups=[p.pid for p in procs])


def stop_groups(groups, seconds: float = 20.0) -> None:
    """SIGTERM the process groups (each daemon's, with the executors it started), SIGKILL what is left after
    ``seconds``, and wait until none of their processes is alive."""
    for sig, wait in ((signal.SIGTERM, seconds), (signal.SIGKILL, 30.0)):
        for g in groups:
            try:
                os.killpg(g, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while any(_group_alive(g) for g in groups) and time.monotonic() < deadline:
            time.sleep(0.1)


def _group_alive(group: int) -> bool:
    """Whether process group ``group`` has a process that is alive (not a zombie)."""
    from reliability_support import live_ids

    return any((ids := live_ids(int(name))) is not None and ids[0] == group
               for name in filter(str.isdigit, os.listdir("/proc")))


def app_id(driver_log: str) -> str:
    """The application id a driver's log names as it connects to the cluster."""
    found = re.search(r"Connected to Spark cluster with app ID (app-[0-9-]+)", driver_log)
    assert found, "the driver's log names no application of the cluster:\n" + driver_log[-3000:]
    return found.group(1)


def executor_dirs(cluster, app: str) -> set:
    """The working directories (``work<i>/<app>/<executor-id>``) of application ``app``'s executors."""
    return {executor for work in cluster["root"].glob("work[0-9]*") if (work / app).is_dir()
            for executor in (work / app).iterdir()}
