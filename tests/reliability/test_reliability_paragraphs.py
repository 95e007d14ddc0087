"""The kept paragraph filter under SIGKILL (issue 51): a killed run's rerun gives the uninterrupted run's output.

A real ``spark-submit`` of the job with ``--paragraphs annotate --index-dir`` is
SIGKILLed while it decides paragraphs into its copy of the filter, and after
its commit journal is written; the same command is then run again. The rerun
must give exactly the output (flags and removed spans) and the index (band
files and the paragraph filter byte for byte, the runs' removed pairs) of an
uninterrupted run, and a second rerun reproduces it without deciding again.
"""

from __future__ import annotations

import os
import shutil

import pytest

from paragraph_reference import corpus
from reliability_support import index_state, load_job, run_job, run_quietly, submit, two_batches


@pytest.fixture(scope="module")
def job():
    return load_job()


def _args(input_path, out, index):
    return ["--input", str(input_path), "--output", str(out), "--id-column", "id", "--index-dir", str(index),
            "--paragraphs", "annotate", "--quiet"]


def _output(spark, out) -> dict:
    rows = spark.read.parquet(str(out)).select("id", "is_duplicate", "removed_paragraphs").collect()
    return {r.id: (r.is_duplicate, [list(s) for s in r.removed_paragraphs]) for r in rows}


@pytest.fixture(scope="module")
def world(tmp_path_factory, job, spark):
    root = tmp_path_factory.mktemp("paragraph-crash")
    docs = [{"id": f"d{i:04d}", "text": t} for i, t in enumerate(corpus(360))]
    _, _, second_dir = two_batches(root, docs, first_docs=180, file_docs=60)
    base = root / "base-index"
    run_quietly(job, _args(root / "first.jsonl", root / "out-first", base))
    clean_index, clean_out = root / "clean-index", root / "clean-out"
    shutil.copytree(base, clean_index)
    run_quietly(job, _args(second_dir, clean_out, clean_index))
    clean = _output(spark, clean_out)
    assert sum(len(spans) for _, spans in clean.values()) >= 5  # the second run removes paragraphs
    return dict(root=root, second_dir=second_dir, base=base, clean_index=clean_index, clean=clean)


@pytest.mark.slow
@pytest.mark.parametrize("fault, after_kill", [("kill-in-paragraph-pass", "old"), ("kill-mid-commit", "journal")])
def test_sigkill_in_the_paragraph_stage_or_commit_then_rerun_gives_the_uninterrupted_result(
        world, job, capsys, spark, fault, after_kill):
    case = world["root"] / fault
    index, out, log = case / "index", case / "out", case / "fault.log"
    shutil.copytree(world["base"], index)
    killed = submit(_args(world["second_dir"], out, index), fault=f"{fault},fault-log={log}")
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert log.read_text().startswith(fault)
    if after_kill == "old":  # the live filter and bands untouched, no output
        assert index_state(index) == {**index_state(world["base"]), **{
            k: v for k, v in index_state(index).items() if v == "unexpected leftover"}}
        assert not os.path.exists(out)
    else:
        assert os.path.exists(os.path.join(index, ".commit.json"))
    code, _, err = run_job(job, _args(world["second_dir"], out, index), capsys)
    assert code == 0, err
    assert _output(spark, out) == world["clean"]
    assert index_state(index) == index_state(world["clean_index"])
    assert any(k.startswith("paragraphs/band-") for k in index_state(index))
    other = case / "out-again"  # the committed run reproduced elsewhere: the same spans, nothing decided
    code, _, err = run_job(job, _args(world["second_dir"], other, index), capsys)
    assert code == 0, err
    assert _output(spark, other) == world["clean"]
    assert index_state(index) == index_state(world["clean_index"])
