"""The wheel where Spark users run it (issue 13).

- ``make wheel`` gives an abi3 wheel tagged manylinux2014 (glibc 2.17), which
  ``auditwheel`` confirms.
- ``pip install`` of the wheel into a fresh ``python3 -m venv`` brings only what
  a job needs (no pybloomfiltermmap3, no datasketch), and the installed
  ``lshbloom dedup`` runs the bundled sample in local mode.
- The Databricks wheel-task entry point is in the wheel's metadata, and runs
  the job in the session that exists, leaving it running.
- A standalone master and two workers on loopback whose Python has PySpark but
  not this package run the job with the environment packed from the wheel
  (``--archives env.tar.gz#environment``), with the same flags and index as
  ``local[2]``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from cluster_support import app_id, executor_dirs
from deploy_support import (
    RUNTIME_DISTRIBUTIONS, TEST_ONLY_DISTRIBUTIONS, built_wheel, clean_env, fresh_venv, installed_distributions,
    pack_environment, run,
)
from reliability_support import index_state, load_job, read_flags, run_job, write_jsonl
from spark_support import sample_docs


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh venv with the wheel installed by pip, as a user makes it."""
    root = tmp_path_factory.mktemp("installed")
    wheel = built_wheel()
    bindir = fresh_venv(root / "venv", wheel)
    return dict(root=root, wheel=wheel, venv=root / "venv", bin=bindir, python=os.path.join(bindir, "python"))


@pytest.mark.slow
def test_wheel_is_abi3_manylinux2014_and_auditwheel_agrees(installed):
    name = os.path.basename(installed["wheel"])
    assert re.fullmatch(r"lshbloom_spark-[^-]+-cp39-abi3-manylinux2014_x86_64\.manylinux_2_17_x86_64\.whl", name), name
    auditwheel = os.path.join(os.path.dirname(sys.executable), "auditwheel")
    shown = " ".join(run([auditwheel, "show", installed["wheel"]]).stdout.split())
    assert 'is consistent with the following platform tag: "manylinux_2_17_x86_64"' in shown, shown


@pytest.mark.slow
def test_pip_install_of_the_wheel_brings_only_what_a_job_needs(installed):
    names = installed_distributions(installed["bin"])
    assert not names & TEST_ONLY_DISTRIBUTIONS
    assert {"lshbloom-spark", "pyspark", "numpy", "pyarrow", "pandas", "scipy"} <= names <= RUNTIME_DISTRIBUTIONS, names
    # The package imported there is the wheel's, not this repository's.
    where = run([installed["python"], "-c", "import lshbloom_udf; print(lshbloom_udf.__file__)"],
                env=clean_env(), cwd=installed["root"]).stdout.strip()
    assert where.startswith(str(installed["venv"])), where


@pytest.mark.slow
def test_installed_lshbloom_dedup_runs_the_sample_in_local_mode(installed, spark):
    root, lshbloom = installed["root"], os.path.join(installed["bin"], "lshbloom")
    run([lshbloom, "sample", "--output", root / "sample.jsonl"], env=clean_env(), cwd=root)
    done = run([lshbloom, "dedup", "--input", root / "sample.jsonl", "--output", root / "out"],
               env=clean_env(), cwd=root)
    assert "summary" in done.stdout
    summary = json.loads((root / "out.summary.json").read_text())
    lines = (root / "sample.jsonl").read_text().splitlines()
    out = spark.read.parquet(str(root / "out"))
    assert out.count() == summary["documents"] == len(lines)
    assert 0 < out.where("is_duplicate").count() == summary["duplicates"] < len(lines)


@pytest.mark.parametrize("given", [None, "PYSPARK_PYTHON", "PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT"])
def test_local_workers_run_the_jobs_python_unless_something_else_decides(monkeypatch, given):
    """``env/bin/lshbloom dedup`` without an activated venv: PySpark's default ``python3`` would lack the package."""
    from lshbloom_udf.__main__ import default_worker_python

    for name in ("PYSPARK_PYTHON", "PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT"):
        monkeypatch.delenv(name, raising=False)
    if given:
        monkeypatch.setenv(given, "given")
    default_worker_python()
    expected = {None: sys.executable, "PYSPARK_PYTHON": "given"}.get(given)
    assert os.environ.get("PYSPARK_PYTHON") == expected


@pytest.mark.slow
def test_the_installed_wheel_declares_the_wheel_task_entry_point(installed):
    """Databricks looks the task's ``entry_point`` up in the wheel's entry points (here: a console script)."""
    probe = ("import json; from importlib.metadata import distribution; "
             "eps = [e for e in distribution('lshbloom-spark').entry_points if e.name == 'lshbloom-dedup']; "
             "print(json.dumps([(e.group, e.value, callable(e.load())) for e in eps]))")
    found = json.loads(run([installed["python"], "-c", probe], env=clean_env(), cwd=installed["root"]).stdout)
    assert found == [["console_scripts", "lshbloom_udf.tasks:dedup_task", True]]


def test_wheel_task_runs_the_job_with_its_parameters_and_leaves_the_session_running(spark, tmp_path, monkeypatch):
    """As a Databricks wheel task calls it: no arguments, the parameters in sys.argv, a session already there."""
    from lshbloom_udf.tasks import dedup_task

    docs = list(sample_docs())[:200]
    inp = write_jsonl(tmp_path / "in.jsonl", docs)
    # parameters (a list) and named_parameters (--name=value) both reach the job's flags
    monkeypatch.setattr(sys, "argv", ["python", "--input", inp, f"--output={tmp_path / 'out'}", "--id-column=id",
                                      "--quiet"])
    assert dedup_task() is None
    flags = read_flags(spark, tmp_path / "out")
    assert len(flags) == len(docs) and any(flags.values())
    assert spark.range(3).count() == 3  # the session the platform owns is still running
    with pytest.raises(SystemExit) as failed:
        dedup_task(["--input", inp, "--output", str(tmp_path / "out")])  # exists: the job refuses it
    assert failed.value.code == 2
    assert spark.range(3).count() == 3


# --------------------------------------------------------------------------
# a cluster whose Python does not have the package: the packed environment


CLUSTER_CONF = ("spark.executor.memory=512m", "spark.executor.cores=1", "spark.cores.max=2")
# What a user writes to spark-submit the installed job (spark-submit needs a file; see docs/deployment.md).
JOB_FILE = "from lshbloom_udf.job import main\n\nmain(prog='dedup_job.py')\n"


@pytest.fixture(scope="module")
def packed(installed):
    return pack_environment(installed["venv"], installed["root"] / "env.tar.gz")


@pytest.mark.slow
def test_cluster_without_the_package_runs_the_job_with_the_packed_environment(installed, packed, cluster, spark,
                                                                               capsys, tmp_path):
    docs = list(sample_docs())
    inp = tmp_path / "in"
    inp.mkdir()
    for i, cut in enumerate(range(0, len(docs), 180)):
        write_jsonl(inp / f"part-{i}.jsonl", docs[cut: cut + 180])
    args = lambda out, index: ["--input", str(inp), "--output", str(out), "--id-column", "id", "--quiet",
                               "--index-dir", str(index), "--expected-docs", "1000"]
    job_file = tmp_path / "dedup_job.py"
    job_file.write_text(JOB_FILE)
    cmd = [os.path.join(installed["bin"], "spark-submit"), "--master", cluster["url"],
           "--archives", f"{packed}#environment",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
           "--conf", "spark.driver.bindAddress=127.0.0.1"]
    for item in CLUSTER_CONF:
        cmd += ["--conf", item]
    cmd += [str(job_file), *args(tmp_path / "cluster-out", tmp_path / "cluster-index")]
    # PySpark's packaging guide: the driver's Python is the user's (with the package), the executors'
    # the unpacked archive's.
    env = clean_env(PYSPARK_DRIVER_PYTHON=installed["python"], PYSPARK_PYTHON="./environment/bin/python")
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-5000:]
    # The executors ran in the workers' JVMs, each with the archive unpacked in its working directory.
    new = executor_dirs(cluster, app_id(done.stderr))
    assert new and all(os.path.exists(d / "environment" / "bin" / "python") for d in new), new
    # local[2], same flags: same output flags, same index.
    code, _, err = run_job(load_job(), args(tmp_path / "local-out", tmp_path / "local-index"), capsys)
    assert code == 0, err
    local_flags = read_flags(spark, tmp_path / "local-out")
    assert read_flags(spark, tmp_path / "cluster-out") == local_flags and any(local_flags.values())
    assert index_state(tmp_path / "cluster-index") == index_state(tmp_path / "local-index")
