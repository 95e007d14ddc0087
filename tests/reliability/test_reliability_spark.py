"""Spark faults and a real standalone cluster (issue 5, items 3, 6 and 7).

- Two jobs on one index: the second fails at start (the first holds the
  index's OS lock for its whole run), and the first completes untouched.
- Tasks that fail on their first attempt (test-only fault switch,
  ``local[2,4]``) give the same flags; so does speculative execution on the
  cluster, where a deliberately slow first attempt gets a speculative copy.
- A Spark standalone master and two workers started from the installed
  PySpark on loopback addresses run the job with the same output and the same
  index as ``local[2]``: executors in other JVMs import the native module and
  only the driver touches the index.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time

import pytest

import fault_injection
from cluster_support import app_id, executor_dirs
from lshbloom_udf import LSHBloomIndex, deduplicate, hooks
from lshbloom_udf.index import IndexLockedError, IndexTransaction
from reliability_support import REF_FLAGS, index_state, job_env, load_job, read_flags, run_job, submit, write_jsonl
from spark_support import datasketch_flags, sample_docs


@pytest.fixture(scope="module")
def job():
    return load_job()


@pytest.fixture(scope="module")
def data(tmp_path_factory, spark):
    """The sample as three JSON-lines files, and datasketch's flags in the order Spark reads them."""
    root = tmp_path_factory.mktemp("spark-faults")
    docs = list(sample_docs())
    inp = root / "in"
    inp.mkdir()
    for i, cut in enumerate(range(0, len(docs), 180)):
        write_jsonl(inp / f"part-{i}.jsonl", docs[cut : cut + 180])
    # Spark packs files into partitions largest first, so input order follows file sizes, not names.
    by_id = {d["id"]: d for d in docs}
    order = [by_id[r["id"]] for r in spark.read.json(str(inp)).select("id").collect()]
    expected = dict(zip([d["id"] for d in order], datasketch_flags([d["text"] for d in order])))
    return dict(root=root, docs=docs, input=str(inp), expected=expected)


def _args(data, out, *extra):
    return ["--input", data["input"], "--output", str(out), "--id-column", "id", "--quiet", *REF_FLAGS, *extra]


# --------------------------------------------------------------------------
# item 3: two jobs on one index


def _lock_is_held(index_dir) -> bool:
    fd = os.open(os.path.join(index_dir, ".lock"), os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


@pytest.mark.slow
def test_second_job_fails_at_start_and_first_job_survives_failing_tasks(data, job, capsys, spark, tmp_path):
    """Item 3 (two jobs, one index) and item 6 (task retries) with one real spark-submit, job A.

    A runs with master ``local[2,4]`` (4 attempts per task) and the fault switch
    that makes every keys and packing task fail on its first attempt, and is
    slowed down in its keys stage so that it is surely mid-run when job B starts.
    """
    index = tmp_path / "index"
    out_a, out_b = tmp_path / "a", tmp_path / "b"
    attempts = tmp_path / "attempts"
    proc = subprocess.Popen(
        _submit_cmd(_args(data, out_a, "--index-dir", str(index), "--expected-docs", "1000"), master="local[2,4]"),
        env=job_env(f"slow-task-first-attempt=4,fail-task-first-attempt,attempt-log={attempts}"), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (os.path.exists(index / ".lock") and _lock_is_held(index)):
            assert proc.poll() is None and time.monotonic() < deadline, "job A did not take the lock"
            time.sleep(0.1)
        holder = (index / ".lock").read_text()
        # Job B: refused at once, before Spark does any work, exit 2 and one clear line.
        code, _, err = run_job(job, _args(data, out_b, "--index-dir", str(index)), capsys)
        assert code == 2 and "in use by another process" in err and f"pid {holder}" in err and "Traceback" not in err
        assert not out_b.exists()
        # The API is refused the same way, and so is a plain writer.
        with pytest.raises(IndexLockedError):
            deduplicate(spark.createDataFrame([("x", "a b c")], "id string, text string"), index_dir=str(index))
        with pytest.raises(IndexLockedError):
            IndexTransaction(str(index))
        assert proc.poll() is None  # A is still running
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, stderr[-3000:]
    # Every keys task of A really failed once and ran again.
    logged = set(os.listdir(attempts))
    partitions = {name.split("-")[0] for name in logged}
    assert len(partitions) >= 2 and all({f"{p}-a0", f"{p}-a1"} <= logged for p in partitions), sorted(logged)
    assert "lshbloom test fault" in stderr
    # A's result is whole and right (the same flags as without faults); the index is committed and usable.
    assert read_flags(spark, out_a) == data["expected"]
    with LSHBloomIndex.open(str(index), read_only=True) as ix:
        assert len(ix.manifest.runs) == 1
        assert ix.inserted == len(data["docs"]) - sum(data["expected"].values()) - 3  # 3 empty docs
    assert not _lock_is_held(index)


def _problem_lines(stderr: str) -> str:
    lines = stderr.splitlines()
    keep = [i for i, line in enumerate(lines) if any(w in line for w in ("ERROR", "Exception", "Traceback", "error:", "WARN"))]
    return "\n".join(lines[i] for i in keep[:40]) + "\n...\n" + "\n".join(lines[-40:])


def _submit_cmd(job_args, master="local[2]", conf=()):
    from reliability_support import submit_cmd

    return submit_cmd(job_args, master, conf)


# --------------------------------------------------------------------------
# item 6: task failures and retries


def test_without_retries_a_failing_task_fails_the_run_and_keeps_the_index(data, spark, tmp_path, monkeypatch):
    """local[2] allows no retry: the run fails, the kept index is left exactly as it was, no staging copy remains."""
    index = str(tmp_path / "index")
    df = spark.read.json(data["input"])
    deduplicate(df.limit(50), index_dir=index, expected_docs=1000, progress=False)
    before = index_state(index)
    fault_injection.install({"fail-task-first-attempt": None})
    try:
        with pytest.raises(Exception, match="fails on its first attempt"):
            deduplicate(df, index_dir=index, progress=False)
    finally:
        hooks.uninstall()
    assert index_state(index) == before


# --------------------------------------------------------------------------
# item 7 (and speculation, item 6): a standalone cluster on loopback


CLUSTER_CONF = ("spark.executor.memory=512m", "spark.executor.cores=1", "spark.cores.max=2")
SPECULATION_CONF = (
    "spark.speculation=true", "spark.speculation.interval=100ms", "spark.speculation.multiplier=1.1",
    "spark.speculation.quantile=0.5", "spark.speculation.minTaskRuntime=0",
)


@pytest.mark.slow
def test_standalone_cluster_with_speculation_gives_the_same_output_and_index_as_local(cluster, data, job, capsys, spark, tmp_path):
    """Item 7, and speculative execution (item 6): partition 0's first keys attempt is slowed down.

    With two workers on two loopback addresses Spark launches a speculative
    copy of it on the other worker; the result must not change.
    """
    args = lambda out, index: _args(data, out, "--index-dir", str(index), "--expected-docs", "1000")
    attempts = tmp_path / "attempts"
    proc = submit(args(tmp_path / "cluster-out", tmp_path / "cluster-index"), master=cluster["url"],
                  conf=CLUSTER_CONF + SPECULATION_CONF, fault=f"slow-task-first-attempt=8,attempt-log={attempts}")
    assert proc.returncode == 0, _problem_lines(proc.stderr)
    # The keys were computed by executors in the workers' JVMs (they imported the native module).
    assert executor_dirs(cluster, app_id(proc.stderr)), "no executor ran on the workers"
    if cluster["hosts"][0] != cluster["hosts"][1]:
        assert "p0-a1" in os.listdir(attempts), sorted(os.listdir(attempts))  # a speculative copy ran
    code, _, err = run_job(job, args(tmp_path / "local-out", tmp_path / "local-index"), capsys)
    assert code == 0, err
    cluster_flags = read_flags(spark, tmp_path / "cluster-out")
    assert cluster_flags == read_flags(spark, tmp_path / "local-out") == data["expected"]
    assert index_state(tmp_path / "cluster-index") == index_state(tmp_path / "local-index")
