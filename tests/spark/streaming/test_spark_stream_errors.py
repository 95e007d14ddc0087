"""A stream user's bad input: one ``error:`` line, exit 2, no Java or Python trace, the file named; and the job's
per-batch lines (real spark-submit runs of ``--stream`` over a landing directory)."""

from __future__ import annotations

import json
import re

import pytest

from reliability_support import submit

pytestmark = pytest.mark.slow

GOOD = [{"id": "a", "text": "one two three four five six seven"}, {"id": "b", "text": "eight nine ten eleven"}]


def _land(directory, name: str, lines: list[str]) -> None:
    directory.mkdir(exist_ok=True)
    (directory / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _stream(tmp_path, *extra):
    return submit(["--stream", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"),
                   "--index-dir", str(tmp_path / "index"), "--checkpoint-location", str(tmp_path / "ck"),
                   "--max-files-per-trigger", "1", *extra])


def _one_error_line(done) -> str:
    """The one ``error:`` line of a job that printed no trace (spark-submit sends Python's stderr to its stdout)."""
    err = done.stdout + done.stderr
    assert "Traceback" not in err and not re.search(r"^\s+at [a-z]+\.", err, re.M), err[-3000:]
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err[-3000:]
    return errors[0]


@pytest.mark.parametrize("schema", [None, "id string, text string"])
def test_a_malformed_landing_file_is_named_in_one_line(tmp_path, schema):
    _land(tmp_path / "in", "f1.json", [json.dumps(d) for d in GOOD])
    _land(tmp_path / "in", "f2.json", ['{"id": "c", "text": "cut short'])
    done = _stream(tmp_path, *(["--stream-schema", schema] if schema else []))
    assert done.returncode == 2, done.stderr[-3000:]
    line = _one_error_line(done)
    assert "f2.json" in line and "mode=DROPMALFORMED" in line
    # Started with its schema, the query ran the good file's batch first: the bad one stopped it, nothing of it is
    # committed (the next start with the file fixed decides it).
    batches = sorted(p.name for p in (tmp_path / "out").glob("batch=*")) if schema else []
    assert batches == (["batch=0"] if schema else [])


def test_each_batch_has_a_line_in_the_jobs_output(tmp_path):
    _land(tmp_path / "in", "f1.json", [json.dumps(d) for d in GOOD])
    _land(tmp_path / "in", "f2.json", [json.dumps({"id": "c", "text": GOOD[0]["text"]})])
    done = _stream(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in (done.stdout + done.stderr).splitlines() if "stream batch" in line]
    assert len(lines) == 2 and "0: 2 documents, 0 duplicates" in lines[0] and "1: 1 documents, 1 duplicates" in lines[1]
