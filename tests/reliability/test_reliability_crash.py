"""Crash consistency and idempotent reruns of the spark-submit job (issue 5, items 1 and 2).

A real ``spark-submit`` of the job is SIGKILLed (its whole process group: JVM,
driver, Python workers) at named moments through the test-only fault switch
``LSHBLOOM_TEST_FAULT`` (tests/fault_injection.py), and at random moments from
outside; the same command is then run again. The rerun must give exactly the
output flags and the index (band files byte for byte, manifest, stored
duplicates) of an uninterrupted run, and leave no staging copy, journal or
temporary output behind; a killed run's temporary directories (its key spool) are removed by the rerun.
"""

from __future__ import annotations

import json
import os
import random
import shutil

import pytest

from lshbloom_udf import LSHBloomIndex
from reliability_support import (REF_FLAGS, index_state, litter, litter_of, load_job, read_flags, run_job, run_quietly,
                                 submit, two_batches)
from spark_support import datasketch_flags, new_reference_index, sample_docs


@pytest.fixture(scope="module")
def job():
    return load_job()


@pytest.fixture(scope="module")
def world(tmp_path_factory, job, spark):
    """A kept index holding a first batch, a second batch in 3 files, and the uninterrupted second run."""
    import _pytest.capture  # noqa: F401  (capsys is function-scoped; this fixture runs the job quietly)

    root = tmp_path_factory.mktemp("crash")
    first, second, second_dir = two_batches(root, list(sample_docs()))
    base_index = root / "base-index"
    run_quietly(job, ["--input", str(root / "first.jsonl"), "--output", str(root / "out-first"), "--id-column", "id",
                 "--index-dir", str(base_index), "--expected-docs", "1000", "--quiet", *REF_FLAGS])
    clean_index = root / "clean-index"
    shutil.copytree(base_index, clean_index)
    clean_out = root / "clean-out"
    run_quietly(job, second_args(second_dir, clean_out, clean_index))
    return dict(root=root, first=first, second=second, second_dir=second_dir, base_index=base_index,
                clean_index=clean_index, clean_out=clean_out, clean_flags=read_flags(spark, clean_out))


def second_args(second_dir, out, index):
    return ["--input", str(second_dir), "--output", str(out), "--id-column", "id", "--index-dir", str(index), "--quiet",
            *REF_FLAGS]


def test_uninterrupted_incremental_run_equals_datasketch(world):
    """The reference run itself is right: keep-first across both batches, as datasketch decides."""
    lsh = new_reference_index(1000)
    datasketch_flags([d["text"] for d in world["first"]], lsh=lsh)
    # Three small files are read one partition per file, in name order.
    expected = datasketch_flags([d["text"] for d in world["second"]], lsh=lsh)
    assert [world["clean_flags"][d["id"]] for d in world["second"]] == expected
    assert sum(expected) > 20


def _case(world, name):
    case = world["root"] / name
    case.mkdir()
    index = case / "index"
    shutil.copytree(world["base_index"], index)
    return index, case / "out"


def _rerun_and_compare(world, job, capsys, spark, index, out):
    code, _, err = run_job(job, second_args(world["second_dir"], out, index), capsys)
    assert code == 0, err
    assert read_flags(spark, out) == world["clean_flags"]
    assert index_state(index) == index_state(world["clean_index"])
    assert not os.path.exists(str(out) + ".lshbloom-tmp")
    return err


KILL_POINTS = [
    # (fault switch, what the index must look like right after the kill). Also in
    # tests/fault_injection.py, not run here to keep the suite short: kill-after-pin and
    # kill-before-commit (the same "old index, no output" state as their neighbours).
    ("kill-in-keys", "old"),  # an executor task computing band keys kills the whole job
    ("kill-in-driver-pass=1", "old"),  # after the first partition, inserted into the staging copy (see below)
    ("kill-in-output-write", "old"),  # Spark is writing <output>.lshbloom-tmp
    ("kill-mid-commit", "journal"),  # journal written, output renamed into place, index files not yet switched
    ("kill-after-commit", "new"),  # committed, summary not yet written
]


@pytest.mark.slow
@pytest.mark.parametrize("fault, after_kill", KILL_POINTS, ids=[k for k, _ in KILL_POINTS])
def test_sigkill_at_a_named_moment_then_rerun_gives_the_uninterrupted_result(world, job, capsys, spark, fault, after_kill):
    index, out = _case(world, fault.split("=")[0])
    log = index.parent / "fault.log"
    # Small input splits (one per file) so that the driver pass is killed with partitions still to come;
    # the rerun reads with the default splits (one partition): the result must not depend on it.
    biggest = max(os.path.getsize(f) for f in world["second_dir"].iterdir())
    conf = (f"spark.sql.files.maxPartitionBytes={biggest}", f"spark.sql.files.openCostInBytes={biggest}") if (
        "driver-pass" in fault) else ()
    litter_before = litter()
    killed = submit(second_args(world["second_dir"], out, index), fault=f"{fault},fault-log={log}", conf=conf)
    assert killed.returncode == -9, killed.stderr[-3000:]
    left = litter_of(killed, litter_before)
    if fault.startswith(("kill-in-keys", "kill-in-driver-pass")):  # mid-pass: its key spool is left behind
        assert left, "the killed run left no temporary directory: the rerun's clean-up would prove nothing"
    assert log.read_text().startswith(fault.split("=")[0])  # killed there, by the switch
    if "driver-pass" in fault:
        assert "kill-in-driver-pass after 110 documents" in log.read_text()  # the first of three files
    before = index_state(index)
    if after_kill == "old":
        # Never a half-written index: the live files are the old ones, untouched.
        live = {k: v for k, v in before.items() if v != "unexpected leftover"}
        assert live == index_state(world["base_index"])
        assert not os.path.exists(out)
    elif after_kill == "journal":
        assert os.path.exists(os.path.join(index, ".commit.json")) and os.path.exists(out)
        with pytest.raises(Exception, match="crashed while committing"):
            LSHBloomIndex.open(str(index), read_only=True)
    else:
        assert {k: v for k, v in before.items()} == index_state(world["clean_index"])
    err = _rerun_and_compare(world, job, capsys, spark, index, out)
    assert not (left & litter()), "the rerun left the killed run's temporary directories"
    if after_kill == "journal":
        assert "finished the commit of run 000002" in err
    if after_kill in ("journal", "new"):
        assert "already ingested by run 000002" in err and "nothing to do" in err


@pytest.mark.slow
def test_sigkill_at_random_moments_then_rerun_is_byte_identical(world, job, capsys, spark):
    """SIGKILL from outside after a random delay: JVM start-up, keys, driver pass, write or commit, wherever it lands."""
    rng = random.Random(5)
    index, out = _case(world, "random")
    for attempt in range(1):
        delay = rng.uniform(4.0, 14.0)
        killed = submit(second_args(world["second_dir"], out, index), kill_after=delay)
        assert killed.returncode in (-9, 0), killed.stderr[-3000:]
        if killed.returncode == 0:
            break
    _rerun_and_compare(world, job, capsys, spark, index, out)


def test_rerun_of_a_completed_job_reproduces_it_without_reingesting(world, job, capsys, spark):
    """Item 2: same input, same index, same command: the same flags, the index unchanged; nothing is its own duplicate."""
    index, out = _case(world, "rerun")
    code, _, err = run_job(job, second_args(world["second_dir"], out, index), capsys)
    assert code == 0, err
    state = index_state(index)
    # Same command again: nothing to do, the output stays.
    code, _, err = run_job(job, second_args(world["second_dir"], out, index), capsys)
    assert code == 0 and "nothing to do" in err
    assert index_state(index) == state
    # Another output path: the committed run's flags are reproduced there, still without inserting.
    other = out.parent / "out-again"
    code, stdout, err = run_job(job, second_args(world["second_dir"], other, index), capsys)
    assert code == 0, err
    assert read_flags(spark, other) == world["clean_flags"]
    assert index_state(index) == state
    summary = json.load(open(str(other) + ".summary.json"))
    assert summary["index"]["reproduced_from"] == "000002"
    assert summary["duplicates"] == sum(world["clean_flags"].values())
    # The manifest records what each committed run ingested.
    manifest = json.load(open(index / "manifest.json"))
    assert [r["run_id"] for r in manifest["runs"]] == ["000001", "000002"]
    run = manifest["runs"][1]
    assert run["documents"] == len(world["second"]) and run["content_fingerprint"] and run["params"]["b"] == 42
    assert run["output"].endswith("/rerun/out") and run["input"] == str(world["second_dir"])


def test_same_documents_in_another_order_stop_with_a_clear_message_unless_forced(world, job, capsys, spark):
    index, out = _case(world, "reorder")
    code, _, err = run_job(job, second_args(world["second_dir"], out, index), capsys)
    assert code == 0, err
    state = index_state(index)
    # The same documents, processed in id order: that run's flags cannot be reproduced.
    args = second_args(world["second_dir"], out.parent / "o2", index) + ["--order-by", "id"]
    code, _, err = run_job(job, args, capsys)
    assert code == 2 and "already ingested by run 000002" in err and "--force-new-ingest" in err
    assert "Traceback" not in err and index_state(index) == state and not os.path.exists(out.parent / "o2")
    # Forced: a new ingestion, recorded as such; every non-empty document is now a duplicate of itself.
    code, _, err = run_job(job, args + ["--force-new-ingest"], capsys)
    assert code == 0, err
    flags = read_flags(spark, out.parent / "o2")
    non_empty = {d["id"] for d in world["second"] if d["text"] and d["text"].split()}
    assert {i for i, f in flags.items() if f} == non_empty
    manifest = json.load(open(index / "manifest.json"))
    assert manifest["runs"][-1]["forced_new_ingest"] is True and manifest["runs"][-1]["run_id"] == "000003"


@pytest.mark.slow
def test_blocked_index_commits_through_the_same_journal(world, job, capsys, spark):
    """A kept index of blocked filters is staged, journalled and recovered like the compatible one."""
    root = world["root"] / "blocked"
    root.mkdir()
    base, clean, killed = root / "base-index", root / "clean-index", root / "killed-index"
    run_quietly(job, ["--input", str(world["root"] / "first.jsonl"), "--output", str(root / "out-first"), "--id-column", "id",
                 "--index-dir", str(base), "--expected-docs", "1000", "--quiet", "--bloom", "blocked", *REF_FLAGS])
    assert sorted(n for n in os.listdir(base) if n.startswith("band-"))[:2] == ["band-0.bbf", "band-1.bbf"]
    shutil.copytree(base, clean)
    shutil.copytree(base, killed)
    run_quietly(job, second_args(world["second_dir"], root / "clean-out", clean) + ["--bloom", "blocked"])
    # Same decisions as the compatible index (no false positive of either at p_effective 1e-5 here).
    assert read_flags(spark, root / "clean-out") == world["clean_flags"]

    out = root / "killed-out"
    crashed = submit(second_args(world["second_dir"], out, killed) + ["--bloom", "blocked"], fault="kill-mid-commit")
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    assert os.path.exists(os.path.join(killed, ".commit.json"))
    code, _, err = run_job(job, second_args(world["second_dir"], out, killed) + ["--bloom", "blocked"], capsys)
    assert code == 0, err
    assert "finished the commit of run 000002" in err and "already ingested by run 000002" in err
    assert read_flags(spark, out) == world["clean_flags"]
    assert index_state(killed) == index_state(clean)

    # The backend is part of the index: asking for the other one is a clear error, before any Spark work.
    code, _, err = run_job(job, second_args(world["second_dir"], root / "other-out", killed) + ["--bloom", "pybloomfiltermmap3"],
                           capsys)
    assert code != 0 and "blocked Bloom filters, asked for pybloomfiltermmap3" in err and "--bloom blocked" in err
