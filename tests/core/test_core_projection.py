"""``lshbloom plan``'s cluster projection (lshbloom_udf/projection.py): the whole job's hours, disk and memory on N
executors, from the job measured end to end (lshbloom_udf/measured/)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lshbloom_udf.advice import measured_costs
from lshbloom_udf.projection import ORDER, executors_for, project

COSTS = measured_costs()
JOB = COSTS["job"]


def _project(docs=10**9, executors=32, cores=8, text_bytes=2400.0, flagged=0.05, b=64):
    return project(docs, b, index_bytes=10**12, records_bytes=10**11, executors=executors, executor_cores=cores,
                   text_bytes=text_bytes, flagged_share=flagged, task_python_bytes=300 << 20, costs=COSTS)


def test_the_measured_job_is_projected_back_onto_its_own_machine():
    """On the measured job's documents, texts, flags and cores, the projection gives its stages' seconds."""
    p = _project(docs=JOB["documents"], executors=1, cores=JOB["cores"], text_bytes=JOB["text_bytes"],
                 flagged=JOB["flagged_share"], b=JOB["b"])
    measured = JOB["stage_seconds"]
    assert p.seconds == pytest.approx(sum(measured.values()))
    for stage in ("pin", "exact_copies", "verify", "records", "write"):
        assert p.stage_seconds[stage] == pytest.approx(measured[stage])
    assert p.stage_seconds["keys"] + p.stage_seconds["decisions"] == pytest.approx(measured["sharded_pass"])
    assert list(p.stage_seconds) == [s for s in ORDER if s in p.stage_seconds]


def test_the_projection_is_linear_in_documents_and_inverse_in_cores():
    one, twice, wider = _project(), _project(docs=2 * 10**9), _project(executors=64)
    for stage, seconds in one.stage_seconds.items():
        assert twice.stage_seconds[stage] == pytest.approx(2 * seconds)
        assert wider.stage_seconds[stage] == pytest.approx(seconds / 2)
    assert twice.executor_disk_bytes == pytest.approx(2 * one.executor_disk_bytes, rel=1e-9)
    assert wider.executor_disk_bytes == pytest.approx(one.executor_disk_bytes / 2, rel=1e-9)
    assert one.cores == 256 and one.index_dir_bytes == 10**12 + 10**11


def test_text_stages_follow_the_texts_decisions_the_bands_and_verification_the_flags():
    short, long_ = _project(text_bytes=600.0), _project(text_bytes=2400.0)
    for stage in ("pin", "keys", "write", "records"):
        assert long_.stage_seconds[stage] == pytest.approx(4 * short.stage_seconds[stage])
    assert long_.stage_seconds["decisions"] == pytest.approx(short.stage_seconds["decisions"])
    assert _project(b=128).stage_seconds["decisions"] == pytest.approx(2 * long_.stage_seconds["decisions"])
    assert _project(flagged=0.1).stage_seconds["verify"] == pytest.approx(2 * long_.stage_seconds["verify"])
    assert _project(flagged=0.1).driver_python_bytes > long_.driver_python_bytes  # the flagged row ids and arrays
    assert _project(flagged=0.1).verify_broadcast_bytes == pytest.approx(2 * long_.verify_broadcast_bytes, rel=1e-6)


@pytest.mark.parametrize("hours", [0.25, 1.0, 4.0])
def test_executors_for_is_the_fewest_that_finish_in_time(hours):
    def on(n):
        return _project(executors=n)

    n = executors_for(hours, on, 8)
    assert on(n).seconds <= hours * 3600
    assert n == 1 or on(n - 1).seconds > hours * 3600
    with pytest.raises(ValueError, match="--hours"):
        executors_for(0, on, 8)


def _plan(*flags) -> str:
    return subprocess.run([sys.executable, "-m", "lshbloom_udf", "plan", *flags], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.parametrize("docs", ["1e9", "1e10"])
def test_plan_gives_a_cluster_for_a_billion_and_ten_billion_documents(docs):
    out = json.loads(_plan("--docs", docs, "--json"))
    cluster = out["cluster"]
    assert cluster["seconds"] <= 4 * 3600 and cluster["executors"] > 1  # the default --hours
    assert cluster["executor_disk_bytes"] > 0 and cluster["driver_python_bytes"] > 0
    assert cluster["index_dir_bytes"] >= out["index_bytes"]
    text = _plan("--docs", docs)
    assert "cluster" in text and "whole job" in text and "executor disk" in text and "driver Python" in text
    # what does not fit is named: the shards' Python on 4 cores (2 shard filters and the interpreter each) in 1 GiB,
    # the flagged documents' arrays in a 1 GiB driver
    small = _plan("--docs", docs, "--executor-memory", "1g", "--driver-memory", "1g")
    assert "MORE than --executor-memory" in small and "MORE than --driver-memory" in small
    fixed = json.loads(_plan("--docs", docs, "--executors", "63", "--executor-cores", "32", "--json"))["cluster"]
    assert (fixed["executors"], fixed["cores"]) == (63, 63 * 32)
    assert fixed["seconds"] == pytest.approx(cluster["seconds"] * cluster["cores"] / fixed["cores"])
