"""``deduplicate`` and the Transformer over Spark Connect (issue 13): a local server from ``remote("local[2]")``.

Spark Connect is how Databricks serverless and standard (shared) access mode
clusters run PySpark: no ``sparkContext``, the DataFrame API only. The checks
run in a fresh interpreter (tests/connect_checks.py), each against the same
settings in this session's classic ``local[2]``: same flags, with and without
``id_col``, with ``index_dir`` (a second run over the index reproduces the
first), verification across the runs of a kept index, the ``filter`` mode, ``verify`` with ``duplicate_of``, the sharded
pass, and the Transformer in a ``Pipeline``, fitted, saved and loaded. The job (``lshbloom dedup``) needs a classic session: over
Spark Connect it refuses to start, with exit status 2 and a message saying
what to do instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lshbloom_udf import deduplicate
from reliability_support import write_jsonl
from spark_support import TESTS, sample_docs


@pytest.fixture(scope="module")
def over_connect(tmp_path_factory):
    root = tmp_path_factory.mktemp("connect")
    inp = write_jsonl(root / "in.jsonl", sample_docs())
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    # The executors' Python is this one; SPARK_TESTING makes the local server take a free port (PySpark's
    # own Connect tests do the same) instead of 15002, which another process may hold.
    env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", SPARK_TESTING="1")
    done = subprocess.run([sys.executable, os.path.join(TESTS, "connect_checks.py"), inp, str(root / "work")],
                          env=env, cwd=root, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-5000:]
    return inp, json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def classic_flags(over_connect, spark):
    inp, _ = over_connect
    rows = deduplicate(spark.read.json(inp), id_col="id", progress=False).select("id", "is_duplicate").collect()
    flags = {r["id"]: r["is_duplicate"] for r in rows}
    assert any(flags.values()) and not all(flags.values())
    return flags


@pytest.mark.slow
def test_the_session_is_a_spark_connect_session(over_connect):
    assert over_connect[1]["session"] == "pyspark.sql.connect.session"


@pytest.mark.slow
@pytest.mark.parametrize("run", ["without_id", "with_id", "index_dir", "index_dir_again"])
def test_deduplicate_over_spark_connect_gives_the_classic_flags(over_connect, classic_flags, run):
    assert over_connect[1][run] == classic_flags


@pytest.mark.slow
def test_a_second_run_over_the_index_reproduces_the_first_and_filter_keeps_the_rest(over_connect, classic_flags):
    result = over_connect[1]
    assert result["index_reproduced"]
    assert result["filter_rows"] == len(classic_flags) - sum(classic_flags.values())


@pytest.mark.slow
@pytest.mark.parametrize("run", ["pipeline", "pipeline_reloaded"])
def test_the_transformer_in_a_pipeline_over_spark_connect_gives_the_classic_flags(over_connect, classic_flags, run):
    assert over_connect[1][run] == classic_flags


@pytest.mark.slow
def test_verify_and_the_sharded_pass_over_spark_connect_give_the_classic_results(over_connect, spark):
    inp, got = over_connect
    df = spark.read.json(inp)
    verified = deduplicate(df, id_col="id", verify=True, duplicate_of=True, progress=False)
    classic = {r["id"]: [r["is_duplicate"], r["duplicate_of"], r["similarity"]]
               for r in verified.select("id", "is_duplicate", "duplicate_of", "similarity").collect()}
    assert any(flag for flag, _, _ in classic.values())
    assert got["verified"] == classic
    # No JVM on this side: the driver's memory is read from its confs (lshbloom_udf.memory), the budgets from it.
    memory = got["verify_memory"]
    assert memory["heap_source"] == "conf" and memory["heap"] >= 1 << 30 and 0 < memory["collect_bytes"] < 1 << 30
    assert set(memory["similarities"]) == {"driver"}  # each round
    sharded = deduplicate(df, id_col="id", pass_mode="sharded", progress=False).select("id", "is_duplicate").collect()
    assert got["sharded"] == {r["id"]: r["is_duplicate"] for r in sharded}
    # A kept sharded index commits through the driver's Hadoop filesystem, which Connect does not expose.
    assert got["sharded_index"]["error"] == "DedupInputError"
    assert "Spark Connect" in got["sharded_index"]["message"] and "classic" in got["sharded_index"]["message"]


@pytest.mark.slow
def test_verification_across_runs_over_spark_connect_gives_the_classic_flags(over_connect, spark, tmp_path):
    """Batches into one kept index: a later batch's flags are judged against the earlier runs' records (their scan
    and the flags' sketches run as Spark jobs from the client), as in a classic session; the planted copies name
    their first-batch source."""
    from connect_checks import cross_run

    classic = cross_run(spark, str(tmp_path / "index"))
    assert over_connect[1]["cross_run"] == [{k: list(v) for k, v in b.items()} for b in classic]
    last = classic[-1]
    copies = {i: of for i, (flag, of) in last.items() if i.startswith("copy-of-")}
    assert copies and all(of == i.removeprefix("copy-of-") for i, of in copies.items())
    assert not any(flag for b in classic for i, (flag, _) in b.items() if not i.startswith("copy-of-"))


@pytest.mark.slow
def test_the_job_over_spark_connect_refuses_to_start_and_says_why(over_connect):
    job = over_connect[1]["job"]
    assert job != "ran" and job["error"] == "JobError" and job["exit_code"] == 2, job
    assert "needs a classic Spark session" in job["message"] and "deduplicate" in job["message"]


@pytest.mark.slow
def test_the_socket_transfer_over_spark_connect_is_a_clear_error(over_connect):
    got = over_connect[1]["socket_transfer"]
    assert got != "ran" and got["error"] == "DedupInputError", got
    assert "classic Spark session" in got["message"] and "key_transfer='auto'" in got["message"]
