"""Crash consistency of a kept sharded index (pass_mode="sharded"): SIGKILL mid-pass or mid-commit, then rerun.

A real ``spark-submit`` of the job (tests/fault_job.py) is SIGKILLed at named
moments; the committed version must be the previous one (or the new one, once
its manifest is in place), and the rerun must give exactly the flags and the
index (every shard's filter bytes, the flagged rows, the manifest) of an
uninterrupted run; the killed run's temporary directories (its shard filters) are removed by the rerun.
"""

from __future__ import annotations

import json
import os
import shutil

import pyarrow.parquet as pq
import pytest

from cluster_support import app_id, executor_dirs
from reliability_support import (REF_FLAGS, ROOT, litter, litter_of, load_job, read_flags, records_rows, run_job,
                                 run_quietly, submit, two_batches)
from spark_support import sample_docs

SHARDED_FLAGS = ["--pass", "sharded", "--shard-memory", "64k", "--band-key", "mix", "--id-column", "id", "--quiet"]


def sharded_state(path) -> dict:
    """The committed version of a sharded index: manifest (without times and locations), filters, flagged rows."""
    names = sorted(os.listdir(path))
    manifests = [n for n in names if n.startswith("manifest-")]
    assert not [n for n in names if n.startswith("_tmp-")], "a half-published manifest was left"
    with open(os.path.join(path, manifests[-1])) as f:
        manifest = json.load(f)
    manifest.pop("committed_at")
    data = manifest.pop("data")  # v-<version>-<the run's own id>
    assert data.startswith(f"v-{manifest['version']:08d}-")
    for run in manifest["runs"]:
        for volatile in ("committed_at", "output", "input", "data"):
            run.pop(volatile, None)
        records = run.get("records")
        if isinstance(records, dict):  # in the run's version directory, part files named by Spark: by their rows
            run["records"] = records_rows(os.path.join(path, records["path"]))
    filters = pq.read_table(os.path.join(path, data, "kind=1")).to_pylist()
    hits_dir = os.path.join(path, data, "kind=0")
    hits = sorted(r["data"] for r in pq.read_table(hits_dir).to_pylist()) if os.path.isdir(hits_dir) else []
    return {"manifests": manifests, "manifest": manifest, "hits": hits,
            "filters": {(r["shard"], r["generation"]): (r["count"], r["data"]) for r in filters}}


@pytest.fixture(scope="module")
def job():
    return load_job()


@pytest.fixture(scope="module")
def world(tmp_path_factory, job, spark):
    root = tmp_path_factory.mktemp("sharded-crash")
    first, second, second_dir = two_batches(root, list(sample_docs()))
    base = root / "base-index"
    run_quietly(job, ["--input", str(root / "first.jsonl"), "--output", str(root / "out-first"), "--index-dir", str(base),
                 "--expected-docs", "100000", *REF_FLAGS, *SHARDED_FLAGS])
    clean = root / "clean-index"
    shutil.copytree(base, clean)
    run_quietly(job, second_args(second_dir, root / "clean-out", clean))
    return dict(root=root, second=second, second_dir=second_dir, base=base, clean=clean,
                clean_flags=read_flags(spark, root / "clean-out"))


def second_args(second_dir, out, index):
    return ["--input", str(second_dir), "--output", str(out), "--index-dir", str(index), *REF_FLAGS, *SHARDED_FLAGS]


@pytest.mark.slow
def test_uninterrupted_incremental_run_flags_earlier_documents(world):
    state = sharded_state(world["clean"])
    assert state["manifests"] == ["manifest-00000001.json", "manifest-00000002.json"]
    assert state["manifest"]["shard_plan"]["shards_per_band"] > 1
    assert sum(world["clean_flags"].values()) > 20
    assert len(world["clean_flags"]) == len(world["second"])


KILL_POINTS = [
    ("kill-in-shards", "old"),  # an executor task deciding its shards kills the whole job
    ("kill-in-output-write", "old"),  # the new version is written, not committed; the output is being written
    ("kill-before-commit", "old"),  # the output is written, the manifest not yet published
    ("kill-mid-commit", "new"),  # the manifest is published, the output not yet renamed into place
    ("kill-after-commit", "new"),
]


@pytest.mark.slow
@pytest.mark.parametrize("fault, after_kill", KILL_POINTS, ids=[k for k, _ in KILL_POINTS])
def test_sigkill_then_rerun_gives_the_uninterrupted_result(world, job, capsys, spark, fault, after_kill):
    case = world["root"] / fault
    case.mkdir()
    index, out, log = case / "index", case / "out", case / "fault.log"
    shutil.copytree(world["base"], index)
    litter_before = litter()
    killed = submit(second_args(world["second_dir"], out, index), fault=f"{fault},fault-log={log}")
    assert killed.returncode == -9, killed.stderr[-3000:]
    left = litter_of(killed, litter_before)
    if fault == "kill-in-shards":  # mid-pass: the executors' shard filters are left behind
        assert left, "the killed run left no temporary directory: the rerun's clean-up would prove nothing"
    assert log.read_text().startswith(fault)
    committed = sharded_state(index)
    assert committed == sharded_state(world["base"] if after_kill == "old" else world["clean"])
    code, _, err = run_job(job, second_args(world["second_dir"], out, index), capsys)
    assert code == 0, err
    assert read_flags(spark, out) == world["clean_flags"]
    assert not (left & litter()), "the rerun left the killed run's temporary directories"
    assert sharded_state(index) == sharded_state(world["clean"])
    assert not os.path.exists(str(out) + ".lshbloom-tmp")
    # what a killed run wrote is gone: one directory per committed version remains
    assert sorted(n[:10] for n in os.listdir(index) if n.startswith("v-")) == ["v-00000001", "v-00000002"]


# Two 1-core workers; their executors import this checkout (the workers' own Python has only PySpark).
CLUSTER_CONF = ("spark.executor.memory=512m", "spark.executor.cores=1", "spark.cores.max=2",
                f"spark.executorEnv.PYTHONPATH={ROOT}")


@pytest.mark.slow
def test_standalone_cluster_gives_the_flags_and_index_of_local(world, cluster, spark, tmp_path):
    """The same incremental run on the two-worker standalone cluster: the flags and the index of local[2]."""
    index, out = tmp_path / "cluster-index", tmp_path / "cluster-out"
    shutil.copytree(world["base"], index)
    proc = submit(second_args(world["second_dir"], out, index), master=cluster["url"], conf=CLUSTER_CONF)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert executor_dirs(cluster, app_id(proc.stderr)), "no executor ran on the workers"
    assert read_flags(spark, out) == world["clean_flags"]
    assert sharded_state(index) == sharded_state(world["clean"])
