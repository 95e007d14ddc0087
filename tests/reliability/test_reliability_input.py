"""Bad input, bad parameters, damaged or unusable index directories, capacity (issue 5, items 4 and 5).

What tests elsewhere already prove is not repeated here (docs/reliability.md
lists them): null/empty/blank text kept and flagged false
(test_spark_dedup.py::test_empty_input_and_all_empty_texts), missing text and
id columns, non-string text, duplicate and null ids, b*r > num_perm
(test_spark_dedup.py, test_spark_job.py), index lock, full disk, read-only
file system, foreign and corrupt band files at the index level
(test_core_index_safety.py, test_core_index.py, test_core_bloom.py).
Here: the remaining parameter edges, binary and invalid-UTF-8 text, a 100 MB
document, and every index-directory fault through the spark-submit job: exit
status 2, one ``error:`` line naming the problem, and the index left as it was.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess

import numpy as np
import pytest
from pyspark.sql import functions as F

from lshbloom_udf import DedupInputError, LSHBloomIndex, deduplicate
from lshbloom_udf.index import IndexParams
from reliability_support import REF_FLAGS, REF_KW, index_state, load_job, run_job, write_jsonl
from spark_support import sample_docs


@pytest.fixture(scope="module")
def job():
    return load_job()


@pytest.fixture(scope="module")
def small_input(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad-input")
    docs = list(sample_docs())[:120]
    return write_jsonl(root / "docs.jsonl", docs), docs


# --------------------------------------------------------------------------
# parameters


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(threshold=0.0), r"threshold must be a number in \(0, 1\]"),
        (dict(threshold=-0.2), r"threshold must be a number in \(0, 1\]"),
        (dict(threshold=1.0001), r"threshold must be a number in \(0, 1\]"),
        (dict(threshold="0.5"), "threshold must be a number"),
        (dict(num_perm=1), "num_perm must be an integer >= 2"),
        (dict(num_perm=256, bands=(9, 29)), r"b \* r = 9 \* 29 = 261 exceeds num_perm = 256"),
        (dict(p_effective=0.0), "p_effective"),
        (dict(p_effective=1.0), "p_effective"),
        (dict(expected_docs=0), "expected_docs must be an integer >= 1"),
    ],
)
def test_invalid_parameters_are_named(spark, kwargs, message):
    df = spark.createDataFrame([("a", "one two three")], "id string, text string")
    with pytest.raises(DedupInputError, match=message):
        deduplicate(df, progress=False, **kwargs)


@pytest.mark.slow
def test_threshold_one_is_valid(spark):
    df = spark.createDataFrame([("a", "one two three"), ("b", "one two three"), ("c", "one two four")], "id string, text string")
    out = deduplicate(df, threshold=1.0, num_perm=32, ngram=1, normalize="none", order_by="id", progress=False)
    assert [r["is_duplicate"] for r in out.collect()] == [False, True, False]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--threshold", "0"], "threshold must be"),
        (["--num-perm", "1"], "num_perm must be an integer >= 2"),
        (["--num-perm", "256", "--bands", "30", "9"], "exceeds num_perm = 256"),
        (["--p-effective", "1"], "p_effective"),
        (["--expected-docs", "-3"], "expected_docs"),
    ],
)
def test_invalid_parameters_exit_2_from_the_job(job, small_input, capsys, tmp_path, flags, message):
    code, _, err = run_job(job, ["--input", small_input[0], "--output", str(tmp_path / "o"), "--quiet", *flags], capsys)
    assert code == 2 and message in err and "Traceback" not in err
    assert not os.path.exists(tmp_path / "o")


# --------------------------------------------------------------------------
# text that is not plain UTF-8 strings


def test_binary_text_column_is_a_clear_error_and_casting_it_keeps_every_row(spark):
    rows = [("a", b"alpha beta gamma delta"), ("b", b"alpha beta gamma \xff\xfe delta"), ("c", b"\xc3\x28 bad"), ("d", None)]
    df = spark.createDataFrame(rows, "id string, body binary")
    with pytest.raises(DedupInputError, match="text column 'body' has type binary, not string; cast it"):
        deduplicate(df, text_col="body", progress=False)
    # Cast to string, invalid UTF-8 bytes included: no row lost, decisions made on the bytes as given.
    cast = df.withColumn("text", F.col("body").cast("string"))
    out = deduplicate(cast, order_by="id", progress=False, **REF_KW).collect()
    assert [r["id"] for r in out] == ["a", "b", "c", "d"]
    assert [r["is_duplicate"] for r in out] == [False, True, False, False]


def test_invalid_utf8_in_an_input_file_loses_no_row(job, spark, capsys, tmp_path):
    raw = tmp_path / "raw.txt"
    lines = [b"the quick brown fox jumps over the lazy dog", b"the quick brown fox \xff\xfe jumps over the lazy dog",
             b"\x80\x81\x82", b"", b"completely different words here \xed\xa0\x80"]
    raw.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out"
    code, _, err = run_job(job, ["--input", str(raw), "--input-format", "text", "--text-column", "value",
                                 "--output", str(out), "--quiet", *REF_FLAGS], capsys)
    assert code == 0, err
    got = spark.read.parquet(str(out)).collect()
    assert len(got) == len(lines)
    assert sum(r["is_duplicate"] for r in got) == 1  # the second line, a near-duplicate of the first


@pytest.mark.slow
def test_a_single_100_mb_document(spark, tmp_path):
    """One 100 MB document between two small ones goes through the keys stage, the driver pass and the join."""
    words = np.array([f"w{i}" for i in range(50_000)])
    rng = np.random.default_rng(3)
    big = " ".join(words[rng.integers(0, len(words), 17_000_000)])[: 100 * 1024 * 1024]
    path = tmp_path / "big.txt"
    with open(path, "w") as f:
        f.write("w1 w2 w3 w4\n" + big + "\nw1 w2 w3 w4\n")
    del big
    # The session's earlier runs leave their local checkpoints cached until the JVM collects them (their
    # DataFrames are gone on this side): let it collect before a row of 100 MB needs the room.
    gc.collect()
    spark.sparkContext._jvm.System.gc()
    df = spark.read.text(str(path))  # one column, value; one row per line
    out, summary = deduplicate(df, text_col="value", return_summary=True, progress=False, **REF_KW)
    # Lengths, not the text: pulling a 100 MB row back into Python is not what is tested here.
    got = [(r["n"], r["is_duplicate"]) for r in out.select(F.length("value").alias("n"), "is_duplicate").collect()]
    assert got == [(11, False), (100 * 1024 * 1024, False), (11, True)]
    assert summary["documents"] == 3 and summary["duplicates"] == 1


def test_malformed_json_records_are_refused_not_turned_into_empty_documents(job, capsys, tmp_path, spark):
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "a", "text": "one two three"}\n{"id": "b", "text": "one two thr\n{"id": "c", "text": "x"}\n')
    code, _, err = run_job(job, ["--input", str(path), "--output", str(tmp_path / "o"), "--quiet"], capsys)
    assert code == 2 and "1 record(s) cannot be parsed as json" in err and "mode=DROPMALFORMED" in err
    assert not os.path.exists(tmp_path / "o")
    # Dropped knowingly: the job runs on the two good records.
    code, _, err = run_job(job, ["--input", str(path), "--output", str(tmp_path / "o"), "--quiet",
                                 "--input-option", "mode=DROPMALFORMED"], capsys)
    assert code == 0, err
    assert sorted(r["id"] for r in spark.read.parquet(str(tmp_path / "o")).collect()) == ["a", "c"]


# --------------------------------------------------------------------------
# index directories that cannot be used


@pytest.fixture
def kept_index(job, small_input, capsys, tmp_path):
    index = tmp_path / "index"
    code, _, err = run_job(job, ["--input", small_input[0], "--output", str(tmp_path / "first"), "--index-dir", str(index),
                                 "--expected-docs", "400", "--quiet", *REF_FLAGS], capsys)
    assert code == 0, err
    return index


def _second_run(job, capsys, tmp_path, index, *extra):
    second = write_jsonl(tmp_path / "second.jsonl", list(sample_docs())[120:200])
    return run_job(job, ["--input", second, "--output", str(tmp_path / "second-out"), "--index-dir", str(index),
                         "--quiet", *REF_FLAGS, *extra], capsys)


@pytest.mark.parametrize("damage, message", [
    ("truncate", r"band-5\.bf.*truncated"),
    ("magic", r"band-5\.bf"),
    ("delete", r"band files missing: band-5\.bf"),
    ("manifest", "corrupt manifest"),
    ("other-params", "index was built with other parameters"),
])
def test_damaged_index_is_named_and_left_as_it_was(job, capsys, tmp_path, kept_index, damage, message):
    band = kept_index / "band-5.bf"
    if damage == "truncate":
        band.write_bytes(band.read_bytes()[:-100])
    elif damage == "magic":
        band.write_bytes(b"XXXXXXXXX" + band.read_bytes()[9:])
    elif damage == "delete":
        band.unlink()
    elif damage == "manifest":
        (kept_index / "manifest.json").write_text('{"format": "lshbloom-index", "params": {')
    before = index_state(kept_index)
    extra = ("--threshold", "0.8") if damage == "other-params" else ()
    code, _, err = _second_run(job, capsys, tmp_path, kept_index, *extra)
    assert code == 2, err
    assert err.strip().splitlines()[-1].startswith("error:") and "Traceback" not in err
    assert __import__("re").search(message, err), err
    assert index_state(kept_index) == before
    assert not os.path.exists(tmp_path / "second-out")


def test_capacity_limit_fails_clearly_and_keeps_the_index(job, capsys, tmp_path, small_input):
    """At the limit the run fails (it does not grow the index); nothing of the failed run is kept."""
    index = tmp_path / "index"
    code, _, err = run_job(job, ["--input", small_input[0], "--output", str(tmp_path / "first"), "--index-dir", str(index),
                                 "--expected-docs", "130", "--growth", "fixed", "--quiet", *REF_FLAGS], capsys)
    assert code == 0, err
    before = index_state(index)
    code, _, err = _second_run(job, capsys, tmp_path, index)
    assert code == 2 and "exceed the capacity of 130" in err and str(index) in err and ".staging" not in err
    assert index_state(index) == before and not os.path.exists(tmp_path / "second-out")


@pytest.fixture
def small_tmpfs(tmp_path):
    """A real 3 MB file system, to run out of space and to turn read-only."""
    mount_point = tmp_path / "fs"
    mount_point.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount_point)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True)


def test_index_on_a_read_only_file_system(job, capsys, tmp_path, small_tmpfs, small_input):
    index = small_tmpfs / "index"
    LSHBloomIndex.create(str(index), IndexParams.for_threshold(capacity=1000)).close()
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    code, _, err = run_job(job, ["--input", small_input[0], "--output", str(tmp_path / "o"), "--index-dir", str(index),
                                 "--quiet", *REF_FLAGS], capsys)
    assert code == 2 and "not writable" in err and str(index) in err and "Traceback" not in err


def test_no_room_for_the_staging_copy_is_a_clear_error(job, capsys, tmp_path, small_tmpfs, small_input):
    index = small_tmpfs / "index"
    # About 1.9 MB of band files on a 3 MB file system: they fit once, not twice.
    LSHBloomIndex.create(str(index), IndexParams.for_threshold(capacity=9000)).close()
    before = index_state(index)
    code, _, err = run_job(job, ["--input", small_input[0], "--output", str(tmp_path / "o"), "--index-dir", str(index),
                                 "--quiet", *REF_FLAGS], capsys)
    assert code == 2 and "not enough space for the staging copy" in err and "Traceback" not in err
    assert index_state(index) == before


def test_stored_data_is_json_bloom_files_and_raw_integers_never_pickle(kept_index, tmp_path):
    import glob
    import lshbloom_udf

    package = os.path.dirname(lshbloom_udf.__file__)
    sources = [p for area in ("index", "spark", "job") for p in glob.glob(os.path.join(package, area, "*.py"))]
    assert len(sources) > 10
    for source in sources:
        assert "pickle" not in open(source).read(), source
    with open(kept_index / "manifest.json") as f:
        manifest = json.load(f)
    for name in os.listdir(kept_index):
        full = kept_index / name
        if name.endswith(".bf"):
            assert not full.read_bytes().startswith(b"\x80")  # a pickle (protocol 2+) starts so
    run = manifest["runs"][0]
    data = (kept_index / run["duplicates_file"]).read_bytes()
    assert len(data) == 8 * run["duplicates"]  # raw little-endian int64 row ids
    assert set(os.listdir(kept_index)) == {".lock", "manifest.json", "runs"} | {f"band-{i}.bf" for i in range(42)}


# --------------------------------------------------------------------------
# an internal error is not a usage error


@pytest.mark.slow
def test_an_internal_value_error_exits_1_with_its_traceback(small_input, tmp_path):
    """A builtin ValueError inside the run (a bug) is exit 1 with its traceback, not exit 2 with one error line."""
    from reliability_support import submit

    out = tmp_path / "o"
    done = submit(["--input", small_input[0], "--output", str(out), "--quiet"], fault="internal-error-after-pin=value")
    # spark-submit forwards the Python driver's stderr to its stdout: look at both.
    code, err = done.returncode, done.stdout + done.stderr
    assert code == 1, err[-3000:]
    assert "Traceback" in err and "ValueError: lshbloom test fault: an internal error after the pin" in err, err[-3000:]
    assert not any(line.startswith("error:") for line in err.splitlines()), err[-3000:]
    assert not os.path.exists(out)


def test_an_internal_os_error_propagates_out_of_the_job(job, spark, small_input, tmp_path, capsys):
    """An OSError that is not the storage refusing a write (ENOSPC, EACCES, EROFS, ...) is not turned into exit 2."""
    from lshbloom_udf import hooks

    def internal_error(**_):
        raise OSError("lshbloom test fault: an internal error after the pin")

    hooks.install("after-pin", internal_error)
    try:
        with pytest.raises(OSError, match="an internal error after the pin"):
            job.main(["--input", small_input[0], "--output", str(tmp_path / "o"), "--quiet"])
    finally:
        hooks.uninstall("after-pin")
    assert "error:" not in capsys.readouterr().err
