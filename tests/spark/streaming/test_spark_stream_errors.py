"""A stream user's bad input: one ``error:`` line, exit 2, no Java or Python trace, the file named; and the job's
per-batch lines (real spark-submit runs of ``--stream`` over a landing directory)."""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from reliability_support import submit

pytestmark = pytest.mark.slow

GOOD = [{"id": "a", "text": "one two three four five six seven"}, {"id": "b", "text": "eight nine ten eleven"}]


def _land(directory, name: str, lines: list[str], age: int = 0) -> None:
    """A landing file, ``age`` seconds old: the stream takes the oldest files first."""
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    if age:
        when = time.time() - age
        os.utime(path, (when, when))


def _stream(tmp_path, *extra, fault=None, input_path=None):
    return submit(["--stream", "--input", input_path or str(tmp_path / "in"), "--output", str(tmp_path / "out"),
                   "--index-dir", str(tmp_path / "index"), "--checkpoint-location", str(tmp_path / "ck"),
                   "--max-files-per-trigger", "1", *extra], fault=fault)


def _one_error_line(done) -> str:
    """The one ``error:`` line of a job that printed no trace (spark-submit sends Python's stderr to its stdout)."""
    err = done.stdout + done.stderr
    assert "Traceback" not in err and not re.search(r"^\s+at [a-z]+\.", err, re.M), err[-3000:]
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err[-3000:]
    return errors[0]


@pytest.mark.parametrize("schema, glob", [(None, True), ("id string, text string", False)])
def test_a_malformed_landing_file_is_named_in_one_line(tmp_path, schema, glob):
    """At start (the schema inferred, here from a glob --input) and in a running query (the schema given)."""
    _land(tmp_path / "in", "f1.json", [json.dumps(d) for d in GOOD])
    _land(tmp_path / "in", "f2.json", ['{"id": "c", "text": "cut short'])
    done = _stream(tmp_path, *(["--stream-schema", schema] if schema else []),
                   input_path=str(tmp_path / "in" / "*.json") if glob else None)
    assert done.returncode == 2, done.stderr[-3000:]
    line = _one_error_line(done)
    assert "f2.json" in line and "mode=DROPMALFORMED" in line
    assert "the file " in line or not glob
    # Started with its schema, the query ran the good file's batch first: the bad one stopped it, nothing of it is
    # committed (the next start with the file fixed decides it).
    batches = sorted(p.name for p in (tmp_path / "out").glob("batch=*")) if schema else []
    assert batches == (["batch=0"] if schema else [])


def _three_files(tmp_path) -> dict:
    """f1, f2, f3 landed oldest first (one a batch): f2 distinct from the others, f3 a copy of f1."""
    texts = {"f1": GOOD[0]["text"], "f2": "twelve thirteen fourteen fifteen sixteen", "f3": GOOD[0]["text"]}
    for age, (name, text) in zip((30, 20, 10), texts.items()):
        _land(tmp_path / "in", f"{name}.json", [json.dumps({"id": name, "text": text})], age=age)
    return {name: tmp_path / "in" / f"{name}.json" for name in texts}


def _summary(tmp_path, batch: int) -> dict:
    return json.loads((tmp_path / "out.summaries" / f"batch-{batch}.json").read_text())


def test_a_file_removed_before_its_batch_read_it_is_named_in_a_warning(tmp_path):
    """Spark plans batch 1 over its file that exists no more and reads an empty batch; the job says which file.
    Each batch has its line in the job's output."""
    files = _three_files(tmp_path)
    done = _stream(tmp_path, fault=f"remove-in-stream-batch=0:{files['f2']}")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "Traceback" not in out and not re.search(r"^\s+at [a-z]+\.", out, re.M), out[-3000:]
    warnings = [line for line in out.splitlines() if "warning:" in line]
    assert len(warnings) == 1 and "stream batch 1:" in warnings[0] and "f2.json" in warnings[0], out[-3000:]
    assert [_summary(tmp_path, b)["documents"] for b in (0, 1, 2)] == [1, 0, 1]
    assert [len(_summary(tmp_path, b)["removed_files"]) for b in (0, 1, 2)] == [0, 1, 0]
    assert _summary(tmp_path, 1)["removed_files"][0].endswith("/in/f2.json")
    lines = [line for line in out.splitlines() if "stream batch" in line and "warning:" not in line]
    assert len(lines) == 3 and "0: 1 documents, 0 duplicates" in lines[0] and "2: 1 documents, 1 duplicates" in lines[2]


def test_a_file_removed_while_its_batch_reads_it_is_one_error_line_and_a_restart_goes_on(tmp_path):
    """Removed after Spark planned its batch: the batch fails, nothing of it is committed, one line says what to
    do; the restart that line asks for redoes the batch without the file (a warning) and goes on."""
    files = _three_files(tmp_path)
    done = _stream(tmp_path, fault=f"remove-in-stream-batch=1:{files['f2']}")
    assert done.returncode == 2, (done.stdout + done.stderr)[-3000:]
    line = _one_error_line(done)
    assert "f2.json was removed from --input while the stream read it" in line and "--checkpoint-location" in line
    assert sorted(p.name for p in (tmp_path / "out").glob("batch=*")) == ["batch=0"]
    again = _stream(tmp_path)
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-3000:]
    assert [w for w in out.splitlines() if "warning:" in w and "stream batch 1:" in w and "f2.json" in w]
    assert [_summary(tmp_path, b)["documents"] for b in (1, 2)] == [0, 1]


def test_the_removed_files_check_reads_a_compacted_source_log(spark, tmp_path):
    """Spark's file source compacts its log every 10 batches (``9.compact`` holds batches 0 to 9): the job's check
    finds a batch's own files in either kind of entry, and names the one removed."""
    from lshbloom_udf.job.stream import RemovedFiles

    for i in range(11):
        _land(tmp_path / "in", f"f{i:02d}.json", [json.dumps({"id": str(i), "text": "x"})], age=100 - i)
    checkpoint = str(tmp_path / "ck")
    reader = spark.readStream.schema("id string, text string").option("maxFilesPerTrigger", 1)
    query = (reader.json(str(tmp_path / "in")).writeStream.foreachBatch(lambda df, batch: None)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    assert (tmp_path / "ck" / "sources" / "0" / "9.compact").exists()
    check = RemovedFiles(spark, checkpoint)
    assert [p.rsplit("/", 1)[-1] for b in (0, 9, 10) for p in check.listed(b)] == ["f00.json", "f09.json", "f10.json"]
    os.remove(tmp_path / "in" / "f09.json")
    assert check(9) == {"removed_files": check.listed(9)} and check(10) == {"removed_files": []}
