"""Helpers of the reliability tests (tests/reliability/ and others): real spark-submit runs, faults, comparisons."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from spark_support import JVM_OPTIONS, ROOT, TESTS

JOB = os.path.join(ROOT, "spark_jobs", "dedup.py")
# What spark-submit runs: the job, with the fault hooks LSHBLOOM_TEST_FAULT asks for installed first.
FAULT_JOB = os.path.join(TESTS, "fault_job.py")
SPARK_SUBMIT = os.path.join(os.path.dirname(sys.executable), "spark-submit")
# The datasketch reference's settings (tests/spark_support.py), spelled out so that
# the tests do not depend on the product's defaults (chosen by the evaluation study).
REF_FLAGS = ["--threshold", "0.5", "--num-perm", "256", "--ngram", "1", "--normalize", "none", "--band-key", "sum",
             "--scheme", "affine32", "--shingle", "words", "--no-verify"]
REF_KW = dict(threshold=0.5, num_perm=256, ngram=1, normalize="none", band_key="sum", scheme="affine32", shingle="words",
              verify=False)


def load_job():
    spec = importlib.util.spec_from_file_location("lshbloom_dedup_job_rel", JOB)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_job(job, argv, capsys):
    """The job in-process (the test session): exit code, stdout, stderr."""
    with pytest.raises(SystemExit) as exc:
        job.main(argv)
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


def job_env(fault: str | None = None, **extra) -> dict:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("LSHBLOOM_TEST_FAULT", None)
    if fault:
        env["LSHBLOOM_TEST_FAULT"] = fault
    env.update(extra)
    return env


def submit_cmd(job_args, master="local[2]", conf=()):
    cmd = [
        SPARK_SUBMIT, "--master", master,
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.driver.host=127.0.0.1",
        "--conf", "spark.driver.bindAddress=127.0.0.1",
        "--conf", f"spark.driver.extraJavaOptions={JVM_OPTIONS}",
        "--conf", f"spark.executor.extraJavaOptions={JVM_OPTIONS}",  # a standalone cluster's executors
    ]
    for item in conf:
        cmd += ["--conf", item]
    return cmd + [FAULT_JOB, *job_args]


def submit(job_args, fault=None, master="local[2]", conf=(), kill_after=None, timeout=300):
    """spark-submit the job in its own session (process group); optionally SIGKILL the group after ``kill_after`` s.

    Returns the CompletedProcess-like (returncode, stdout, stderr).
    """
    proc = subprocess.Popen(
        submit_cmd(job_args, master, conf), cwd=ROOT, env=job_env(fault), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=kill_after if kill_after is not None else timeout)
    except subprocess.TimeoutExpired:
        if kill_after is None:
            raise
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        end_session(proc.pid)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    done.pid = proc.pid  # type: ignore[attr-defined]  # the job's process group id (its own session)
    return done


def live_ids(pid: int):
    """``(process group, session)`` of process ``pid``, or None when it is gone or a zombie (it holds no files
    then)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state, _, group, session = f.read().rsplit(")", 1)[1].split()[:4]
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None if state == "Z" else (int(group), int(session))


def session_of(pid: int):
    """The session id of process ``pid``, or None when it is gone or a zombie."""
    ids = live_ids(pid)
    return None if ids is None else ids[1]


def session_processes(sid: int) -> list[int]:
    """The live (not zombie) processes of session ``sid``."""
    return [int(name) for name in os.listdir("/proc") if name.isdigit() and session_of(int(name)) == sid]


def end_session(sid: int, seconds: float = 30.0) -> None:
    """SIGKILL whatever is left of the job started in session ``sid``, and wait until none of it is alive.

    By session, not process group: PySpark's daemon puts its Python workers in a group of their own. And waited
    for: a process SIGKILLed is gone a moment later, not at once; until then it still holds its files (the
    index's lock), which the test would take for the job's doing.
    """
    deadline = time.monotonic() + seconds
    while (left := session_processes(sid)) and time.monotonic() < deadline:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    assert not left, f"processes {left} of the killed job outlived SIGKILL for {seconds} s"


# A run's temporary directories (lshbloom_udf.litter): named for their owner's pid, removed by the next run.
OWNED = re.compile(r"lshbloom-(index|keys|shards|records)-(?P<pid>[0-9]+)@")


def litter() -> set:
    """Every run's temporary directories, wherever runs make them."""
    found = set()
    for place in {"/dev/shm", tempfile.gettempdir()}:
        if os.path.isdir(place):
            found |= {os.path.join(place, n) for n in os.listdir(place) if OWNED.match(n)}
    return found


def litter_of(killed, before: set) -> set:
    """The temporary directories the killed job (:func:`submit`'s result) left: those made since ``before`` whose
    owner is dead, not those of another test's live run (pytest-xdist runs other files meanwhile)."""
    left = set()
    for path in litter() - before:
        session = session_of(int(OWNED.match(os.path.basename(path))["pid"]))
        assert session != killed.pid, f"{path}: its owner outlived the killed job"
        if session is None:
            left.add(path)
    return left


def write_jsonl(path, docs) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d) + "\n")
    return str(path)


def run_quietly(job, argv) -> None:
    """The job in this process; it must exit 0."""
    with pytest.raises(SystemExit) as exc:
        job.main(argv)
    assert exc.value.code == 0


def two_batches(root, docs, first_docs: int = 200, file_docs: int = 110):
    """``root/first.jsonl`` (the first ``first_docs`` documents) and ``root/second/part-*.jsonl`` (the rest, in files
    of ``file_docs``): (first batch, second batch, the second's directory)."""
    first, second = docs[:first_docs], docs[first_docs:]
    write_jsonl(root / "first.jsonl", first)
    second_dir = root / "second"
    second_dir.mkdir()
    for i, cut in enumerate(range(0, len(second), file_docs)):
        write_jsonl(second_dir / f"part-{i}.jsonl", second[cut : cut + file_docs])
    return first, second, second_dir


def read_flags(spark, out, fmt="parquet") -> dict:
    rows = spark.read.format(fmt).load(str(out)).select("id", "is_duplicate").collect()
    flags = {r["id"]: r["is_duplicate"] for r in rows}
    assert len(flags) == len(rows), "an input row appears twice in the output"
    return flags


def records_rows(path) -> list:
    """A run's records (lshbloom_udf.index.records) as their sorted rows: the local store's layout
    (lshbloom_udf.index.lookup) or the sharded store's Parquet."""
    import pyarrow.parquet as pq

    from lshbloom_udf.index import lookup

    table = (lookup.read_records(str(path)).select(["row", "id", "sketch", "size"]) if lookup.is_layout(str(path))
             else pq.read_table(str(path), columns=["row", "id", "sketch", "size"]))
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names)))


def index_state(path) -> dict:
    """Everything an index directory holds that must be the same after a crash and rerun as after one clean run.

    Band files and the runs' duplicate files by content; the manifest without
    the fields that name the run's time or output location; and no leftovers
    (staging copies, journal).
    """
    state = {}
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if name.endswith((".bf", ".bbf", ".cbf", ".keys.u64")):  # band files, a delta's key log
            with open(full, "rb") as f:
                state[name] = f.read()
        elif name == "runs":
            for dname in sorted(os.listdir(full)):
                if dname.endswith(".records"):  # a run's records (files named by Spark, or laid out for lookups): rows
                    state[f"runs/{dname}"] = records_rows(os.path.join(full, dname))
                    continue
                with open(os.path.join(full, dname), "rb") as f:
                    state[f"runs/{dname}"] = f.read()
        elif name == "paragraphs":  # the paragraph filter (lshbloom_udf.index.paragraph_filter): files by content
            for pname in sorted(os.listdir(full)):
                with open(os.path.join(full, pname), "rb") as f:
                    state[f"paragraphs/{pname}"] = f.read()
        elif name == "manifest.json":
            with open(full) as f:
                text = f.read()
            try:
                manifest = json.loads(text)
            except ValueError:
                state[name] = text
                continue
            for run in manifest.get("runs", []):
                for volatile in ("committed_at", "output", "input"):
                    run.pop(volatile, None)
                if isinstance(run.get("records"), dict):  # its part files' names are Spark's (random); sizes too
                    run["records"].pop("checksums", None)
                    run["records"].pop("bytes", None)
                    run["records"].pop("computed_by", None)  # how, not what: the same rows either way
            state[name] = manifest
        elif name != ".lock":
            state[name] = "unexpected leftover"
    return state
