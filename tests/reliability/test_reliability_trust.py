"""Nothing a user owns is destroyed (issue 21): planted records, output over input, manifest-less and foreign
index directories.

Each case runs the real job (in this process, Spark local[2]) on real files
and checks the exit status, the single ``error:`` line, and that every file
the user owns is byte for byte what it was.
"""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from reliability_support import REF_FLAGS, index_state, load_job, run_job, write_jsonl
from spark_support import sample_docs


@pytest.fixture(scope="module")
def job():
    return load_job()


def tree(path) -> dict:
    """Every file under ``path`` by content (symlinks by target): what must survive a refused run."""
    state = {}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(root, name)
            if os.path.islink(full):
                state[os.path.relpath(full, path)] = ("link", os.readlink(full))
            elif os.path.isfile(full):
                with open(full, "rb") as f:
                    state[os.path.relpath(full, path)] = f.read()
    return state


def refused(code, err, pattern) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("error:") and "Traceback" not in err, err
    assert re.search(pattern, lines[-1]), lines[-1]


@pytest.fixture
def victim(tmp_path):
    """A directory of the user's, outside the index."""
    path = tmp_path / "victim"
    (path / "important").mkdir(parents=True)
    (path / "important" / "thesis.txt").write_text("weeks of work\n")
    (path / "kind=1").mkdir()
    (path / "kind=1" / "part-0.parquet").write_bytes(b"not really parquet")
    return path


@pytest.fixture
def kept(job, capsys, tmp_path):
    """A kept driver-pass index after one run, and a second batch to run into it."""
    docs = list(sample_docs())[:160]
    first = write_jsonl(tmp_path / "first.jsonl", docs[:100])
    second = write_jsonl(tmp_path / "second.jsonl", docs[100:])
    index = tmp_path / "index"
    code, _, err = run_job(job, ["--input", first, "--output", str(tmp_path / "out1"), "--index-dir", str(index),
                                 "--expected-docs", "400", "--quiet", *REF_FLAGS], capsys)
    assert code == 0, err
    return index, second


def second_run(job, capsys, tmp_path, index, second, *extra):
    return run_job(job, ["--input", second, "--output", str(tmp_path / "out2"), "--index-dir", str(index),
                         "--quiet", *REF_FLAGS, *extra], capsys)


# --------------------------------------------------------------------------
# 1. records planted in the index directory name nothing the job deletes


def _plant(index, victim, how: str) -> str:
    """Plant a record (or a symlink) in the index directory; the name of the file the error must name."""
    staging = index / ".staging-evil"
    if how == "staging-symlink":
        os.symlink(victim, staging)
        return ""
    if how.startswith("pending"):
        staging.mkdir()
        target = {"pending-absolute": str(victim), "pending-relative": "../victim",
                  "pending-dotdot-tmp": f"{victim}/../victim.lshbloom-tmp"}[how]
        (staging / "pending.json").write_text(json.dumps({"pid": 1, "outputs": [target]}))
        return "pending.json"
    ops = {
        "journal-absolute": [[str(victim), str(victim) + "-moved"]],
        "journal-output-elsewhere": [[str(victim) + ".lshbloom-tmp", str(victim.parent / "elsewhere")]],
        # a stream's hidden temporary (.<name>.lshbloom-tmp) renames onto <name> only
        "journal-hidden-elsewhere": [[str(victim.parent / f".{victim.name}.lshbloom-tmp"),
                                      str(victim.parent / "elsewhere")]],
        "journal-dotdot": [[".staging-evil/band-0.bf", "../victim"]],
        "journal-runs-dir": [[".staging-evil/band-0.bf", "runs"]],
        # the paragraph filter's directory renames onto paragraphs/ only, its removed pairs into runs/ only
        "journal-paragraphs-elsewhere": [[".staging-evil/paragraphs", "runs"]],
        "journal-pairs-elsewhere": [[".staging-evil/000009.paragraphs.i64", "000009.paragraphs.i64"]],
        "journal-staging-symlink": [[".staging-evil/important", "band-0.bf"]],
    }[how]
    if how == "journal-staging-symlink":
        os.symlink(victim, staging)
    if how == "journal-output-elsewhere":
        shutil.copytree(victim, str(victim) + ".lshbloom-tmp")
    if how == "journal-hidden-elsewhere":
        shutil.copytree(victim, str(victim.parent / f".{victim.name}.lshbloom-tmp"))
    (index / ".commit.json").write_text(json.dumps({"run_id": "000009", "ops": ops}))
    return ".commit.json"


@pytest.mark.parametrize("how", [
    "pending-absolute", "pending-relative", "pending-dotdot-tmp", "journal-absolute", "journal-output-elsewhere",
    "journal-hidden-elsewhere", "journal-dotdot", "journal-runs-dir", "journal-paragraphs-elsewhere",
    "journal-pairs-elsewhere", "journal-staging-symlink",
])
def test_a_planted_record_deletes_nothing_and_names_itself(job, capsys, tmp_path, kept, victim, how):
    index, second = kept
    record = _plant(index, victim, how)
    before_victim, before_index = tree(victim), index_state(index)
    code, _, err = second_run(job, capsys, tmp_path, index, second)
    refused(code, err, rf"{re.escape(record)}: names .*not a file this job writes")
    assert tree(victim) == before_victim
    assert index_state(index) == before_index
    assert not os.path.exists(tmp_path / "out2")


def test_a_staging_symlink_is_removed_not_followed(job, capsys, tmp_path, kept, victim):
    index, second = kept
    _plant(index, victim, "staging-symlink")
    before = tree(victim)
    code, _, err = second_run(job, capsys, tmp_path, index, second)
    assert code == 0, err
    assert tree(victim) == before
    assert not os.path.lexists(index / ".staging-evil")


@pytest.fixture
def sharded_kept(job, capsys, tmp_path):
    docs = [dict(d, id=i) for i, d in enumerate(sample_docs()[:160])]
    first = write_jsonl(tmp_path / "first.jsonl", docs[:100])
    second = write_jsonl(tmp_path / "second.jsonl", docs[100:])
    index = tmp_path / "sharded"
    code, _, err = run_job(job, ["--input", first, "--output", str(tmp_path / "out1"), "--index-dir", str(index),
                                 *SHARDED], capsys)
    assert code == 0, err
    return index, second


SHARDED = ["--pass", "sharded", "--shard-memory", "64k", "--band-key", "mix", "--id-column", "id", "--quiet"]


@pytest.mark.slow
@pytest.mark.parametrize("data", ["../victim", "/abs/victim", "v-00000001-aaaaaaaaaaaa/../../victim"])
def test_a_planted_sharded_manifest_is_refused_and_deletes_nothing(job, capsys, tmp_path, sharded_kept, victim, data):
    index, second = sharded_kept
    manifest = json.loads((index / "manifest-00000001.json").read_text())
    manifest.update(version=2, data=data.replace("/abs/victim", str(victim)))
    (index / "manifest-00000002.json").write_text(json.dumps(manifest))
    before_victim, before_index = tree(victim), tree(index)
    code, _, err = run_job(job, ["--input", second, "--output", str(tmp_path / "out2"), "--index-dir", str(index),
                                 *SHARDED], capsys)
    refused(code, err, r"manifest-00000002\.json: names .*not a version directory")
    assert tree(victim) == before_victim and tree(index) == before_index


@pytest.mark.slow
def test_a_symlinked_sharded_version_is_not_deleted_through(job, capsys, tmp_path, sharded_kept, victim):
    index, second = sharded_kept
    os.symlink(victim, index / "v-00000001-aaaaaaaaaaaa")  # an older version's name: its kind=1 would be dropped
    before = tree(victim)
    code, _, err = run_job(job, ["--input", second, "--output", str(tmp_path / "out2"), "--index-dir", str(index),
                                 *SHARDED], capsys)
    assert code == 0, err
    assert tree(victim) == before


# --------------------------------------------------------------------------
# 2. an output is never an input


@pytest.fixture
def input_dir(tmp_path):
    docs = list(sample_docs())[:60]
    path = tmp_path / "in"
    path.mkdir()
    write_jsonl(path / "a.jsonl", docs[:30])
    write_jsonl(path / "b.jsonl", docs[30:])
    return path


@pytest.mark.parametrize("case", ["same-path", "glob", "inside-input", "input-inside-output", "symlink", "file-uri",
                                  "temporary"])
def test_an_output_over_its_input_is_refused_even_with_overwrite(job, capsys, tmp_path, input_dir, case):
    given, output = str(input_dir), str(input_dir)
    if case == "glob":
        given = f"{input_dir}/*.jsonl"
    elif case == "inside-input":
        output = str(input_dir / "deduplicated")
    elif case == "input-inside-output":
        given, output = str(input_dir / "a.jsonl"), str(input_dir)
    elif case == "symlink":
        os.symlink(input_dir, tmp_path / "link")
        output = str(tmp_path / "link")
    elif case == "file-uri":
        given = f"file://{input_dir}"
    elif case == "temporary":  # the input is what the output's temporary would be
        os.rename(input_dir / "a.jsonl", input_dir / "a.jsonl.lshbloom-tmp")
        given = str(input_dir / "a.jsonl.lshbloom-tmp")
        output = str(input_dir / "a.jsonl")
    before = tree(input_dir)
    code, _, err = run_job(job, ["--input", given, "--output", output, "--overwrite", "--mode", "filter", "--quiet",
                                 *REF_FLAGS], capsys)
    refused(code, err, r"would overwrite the input .*must not be, contain or lie inside an input path")
    assert tree(input_dir) == before


def test_an_output_beside_its_input_is_written(job, capsys, tmp_path, input_dir):
    code, _, err = run_job(job, ["--input", f"{input_dir}/*.jsonl", "--output", str(tmp_path / "in-dedup"),
                                 "--mode", "filter", "--quiet", *REF_FLAGS], capsys)
    assert code == 0, err


# --------------------------------------------------------------------------
# 3 and 9. a kept index is whole or refused; a directory that is not an index is refused


@pytest.mark.parametrize("left", ["band-files", "runs-only"])
def test_an_index_without_its_manifest_is_refused_not_replaced(job, capsys, tmp_path, kept, left):
    index, second = kept
    os.remove(index / "manifest.json")
    if left == "runs-only":
        for name in os.listdir(index):
            if name.endswith(".bf"):
                os.remove(index / name)
    before = tree(index)
    code, _, err = second_run(job, capsys, tmp_path, index, second)
    refused(code, err, r"holds index files .* but no manifest\.json; a kept index is never replaced")
    assert {k: v for k, v in tree(index).items() if k != ".lock"} == {k: v for k, v in before.items() if k != ".lock"}


@pytest.mark.parametrize("sharded", [False, True], ids=["driver", "sharded"])
def test_an_unrelated_directory_is_not_adopted_as_an_index(job, capsys, tmp_path, input_dir, sharded):
    other = tmp_path / "photos"
    other.mkdir()
    (other / "holiday.jpg").write_bytes(b"\xff\xd8 jpeg")
    before = tree(other)
    flags = SHARDED if sharded else ["--quiet", *REF_FLAGS]
    if sharded:
        docs = [dict(d, id=i) for i, d in enumerate(sample_docs()[:40])]
        given = write_jsonl(tmp_path / "with-ids.jsonl", docs)
    else:
        given = str(input_dir)
    code, _, err = run_job(job, ["--input", given, "--output", str(tmp_path / "out"), "--index-dir", str(other),
                                 *flags], capsys)
    refused(code, err, r"not an LSHBloom index directory \(it holds holiday\.jpg")
    assert {k: v for k, v in tree(other).items() if k != ".lock"} == before
