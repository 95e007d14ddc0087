"""Damage the job detects or cleans up (issue 21): corrupt band files and filter parts (checksums), old indexes
without checksums, a SIGKILLed run's temporary files, unreadable input files, long and malformed JSON records.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lshbloom_udf.errors import IndexCorruptError
from lshbloom_udf.index import IndexParams, LSHBloomIndex
from reliability_support import REF_FLAGS, ROOT, load_job, run_job, submit, write_jsonl
from spark_support import sample_docs


@pytest.fixture(scope="module")
def job():
    return load_job()


def refused(code, err, pattern) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("error:") and "Traceback" not in err, err
    assert re.search(pattern, lines[-1]), lines[-1]


# --------------------------------------------------------------------------
# checksums of the band files


def _small_index(path, bloom: str) -> None:
    rng = np.random.default_rng(5)
    with LSHBloomIndex.create(str(path), IndexParams(b=4, r=2, capacity=500), bloom=bloom) as index:
        index.query_insert(rng.integers(0, 2**63, size=(300, 4), dtype=np.uint64))


@pytest.mark.parametrize("bloom", ["pybloomfiltermmap3", "blocked"])
def test_a_flipped_byte_anywhere_in_a_band_file_is_detected_on_open(tmp_path, bloom):
    index = tmp_path / "index"
    _small_index(index, bloom)
    band = index / ("band-2.bf" if bloom == "pybloomfiltermmap3" else "band-2.bbf")
    good = band.read_bytes()
    rng = np.random.default_rng(1)
    committed = band.stat()
    for offset in [len(good) - 1, len(good) // 2, *rng.integers(len(good) // 4, len(good), 6)]:
        damaged = bytearray(good)
        damaged[int(offset)] ^= 0x01
        band.write_bytes(bytes(damaged))
        # Damage on disk leaves the modification time as it was (a writer such as datasketch would change it).
        os.utime(band, ns=(committed.st_atime_ns, committed.st_mtime_ns))
        for read_only in (True, False):
            with pytest.raises(IndexCorruptError, match=rf"band-2\.b?bf: corrupt band file \(its xxh3-64 checksum"):
                LSHBloomIndex.open(str(index), read_only=read_only)
    band.write_bytes(good)
    LSHBloomIndex.open(str(index), read_only=True).close()


def test_a_band_file_datasketch_wrote_after_the_commit_is_a_warning_a_blocked_one_an_error(tmp_path, caplog):
    for bloom, name in (("pybloomfiltermmap3", "band-1.bf"), ("blocked", "band-1.bbf")):
        index = tmp_path / bloom
        _small_index(index, bloom)
        band = index / name
        data = bytearray(band.read_bytes())
        data[-1] ^= 0x02
        band.write_bytes(bytes(data))  # a writer: the modification time moves on
        if bloom == "blocked":
            with pytest.raises(IndexCorruptError, match=r"band-1\.bbf: corrupt band file"):
                LSHBloomIndex.open(str(index), read_only=True)
        else:
            with caplog.at_level(logging.WARNING):
                LSHBloomIndex.open(str(index), read_only=True).close()
            assert any("band-1.bf: written since the index's last commit" in r.getMessage() for r in caplog.records)


def test_the_checksums_leave_the_band_files_readable_by_datasketch(tmp_path):
    import pybloomfilter  # what datasketch reads the band files with

    index = tmp_path / "index"
    _small_index(index, "pybloomfiltermmap3")
    manifest = json.loads((index / "manifest.json").read_text())
    assert set(manifest["checksums"]["files"]) == {f"band-{i}.bf" for i in range(4)}
    bf = pybloomfilter.BloomFilter.open(str(index / "band-0.bf"))
    assert bf.capacity == 500 and len(bf) > 0


def _check_index(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lshbloom_udf", "check-index", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_check_index_and_verify_index_name_the_damaged_file(job, capsys, tmp_path):
    docs = list(sample_docs())[:120]
    first, second = write_jsonl(tmp_path / "a.jsonl", docs[:80]), write_jsonl(tmp_path / "b.jsonl", docs[80:])
    index = tmp_path / "index"
    flags = ["--index-dir", str(index), "--bloom", "blocked", "--quiet", *REF_FLAGS]
    code, _, err = run_job(job, ["--input", first, "--output", str(tmp_path / "o1"), "--expected-docs", "400", *flags],
                           capsys)
    assert code == 0, err
    ok = _check_index(index)
    assert ok.returncode == 0 and re.search(r"ok: \d+ band files \(checksums match\), 1 run record", ok.stdout), ok
    dups = index / "runs" / "000001.dups.i64"
    dups.write_bytes(dups.read_bytes() + b"\0" * 8)
    bad = _check_index(index)
    assert bad.returncode == 2 and re.search(r"000001\.dups\.i64: corrupt", bad.stderr), bad
    code, _, err = run_job(job, ["--input", second, "--output", str(tmp_path / "o2"), "--verify-index", *flags], capsys)
    refused(code, err, r"000001\.dups\.i64: corrupt")
    dups.write_bytes(dups.read_bytes()[:-8])
    body = index / "band-7.bbf"
    data = bytearray(body.read_bytes())
    data[len(data) * 2 // 3] ^= 0x80
    body.write_bytes(bytes(data))
    code, _, err = run_job(job, ["--input", second, "--output", str(tmp_path / "o2"), *flags], capsys)
    refused(code, err, r"band-7\.bbf: corrupt band file")
    assert _check_index(index).returncode == 2


def _one_error_line(done: subprocess.CompletedProcess, pattern: str) -> None:
    """A spark-submit refused with exit 2 and one ``error:`` line, and nothing else failing: no Python traceback
    from the driver, the key stream or the executors (spark-submit forwards the driver's stderr to its stdout)."""
    out = done.stdout + done.stderr
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert done.returncode == 2, out[-3000:]
    assert len(errors) == 1 and re.search(pattern, errors[0]), out[-3000:]
    assert "Traceback" not in out and "ConnectionRefused" not in out and " ERROR " not in out, out[-5000:]


@pytest.mark.slow
def test_a_corrupt_band_file_and_duplicate_ids_are_one_error_line_in_a_real_job(job, capsys, tmp_path):
    """issue 33, item 5: the corrupt band file is found as the index opens, while the keys stage (the socket stream,
    over many partitions) is starting: the job stops it before closing the stream, and says one line."""
    docs = list(sample_docs())[:200]
    first, second = write_jsonl(tmp_path / "a.jsonl", docs[:60]), write_jsonl(tmp_path / "b.jsonl", docs[60:])
    index = tmp_path / "index"
    code, _, err = run_job(job, ["--input", first, "--output", str(tmp_path / "o1"), "--index-dir", str(index),
                                 "--quiet"], capsys)
    assert code == 0, err
    band = index / "band-7.cbf"
    data = bytearray(band.read_bytes())
    data[len(data) * 2 // 3] ^= 0x80
    band.write_bytes(bytes(data))
    many = ["spark.sql.files.maxPartitionBytes=4096", "spark.sql.files.openCostInBytes=0"]
    done = submit(["--input", second, "--output", str(tmp_path / "o2"), "--index-dir", str(index), "--quiet"],
                  conf=many)
    _one_error_line(done, r"band-7\.cbf: corrupt band file")
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"id": "a", "text": "one two"}\n{"id": "a", "text": "three four"}\n{"id": "b", "text": "x"}\n')
    done = submit(["--input", str(dup), "--output", str(tmp_path / "o3"), "--id-column", "id", "--quiet"])
    _one_error_line(done, r"not unique.*'a' \(2 rows\)")


@pytest.mark.slow
def test_a_corrupt_sharded_filter_part_is_named_by_verify_index(job, capsys, tmp_path):
    docs = list(sample_docs())[:120]
    first, second = write_jsonl(tmp_path / "a.jsonl", docs[:80]), write_jsonl(tmp_path / "b.jsonl", docs[80:])
    index = tmp_path / "sharded"
    flags = ["--index-dir", str(index), "--pass", "sharded", "--shard-memory", "64k", "--band-key", "mix",
             "--id-column", "id", "--quiet"]
    code, _, err = run_job(job, ["--input", first, "--output", str(tmp_path / "o1"), *flags], capsys)
    assert code == 0, err
    version = json.loads((index / "manifest-00000001.json").read_text())["data"]
    parts = sorted((index / version / "kind=1").glob("*.parquet"))
    table = pq.read_table(parts[0])
    data = table.column("data").to_pylist()
    data[0] = bytes([data[0][0] ^ 0x04]) + data[0][1:]
    pq.write_table(table.set_column(table.schema.get_field_index("data"), "data", pa.array(data, pa.binary())),
                   parts[0])
    for crc in (index / version / "kind=1").glob(".*.crc"):
        crc.unlink()
    code, _, err = run_job(job, ["--input", second, "--output", str(tmp_path / "o2"), "--verify-index", *flags],
                           capsys)
    refused(code, err, r"kind=1: corrupt filter part \(band \d+, shard \d+, generation 0, part 0\)")


# --------------------------------------------------------------------------
# temporary files of a SIGKILLed run: the next run removes them (the kill tests of
# test_reliability_crash.py and test_reliability_sharded.py assert it end to end)


def test_lshbloom_clean_removes_dead_owners_only(tmp_path):
    import socket

    host = socket.gethostname()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    mine = tmp_path / f"lshbloom-keys-{os.getpid()}@{host}-abcdefgh"
    gone = tmp_path / f"lshbloom-index-{dead_pid}@{host}-abcdefgh"
    elsewhere = tmp_path / f"lshbloom-index-{dead_pid}@another-host-abcdefgh"
    for path in (mine, gone, elsewhere):
        path.mkdir()
        (path / "band-0.bf").write_bytes(b"x")
    from lshbloom_udf.litter import remove_dead_owners

    assert remove_dead_owners([str(tmp_path)]) == [str(gone)]
    assert mine.exists() and elsewhere.exists() and not gone.exists()
    out = subprocess.run([sys.executable, "-m", "lshbloom_udf", "clean"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("removed "), out


# --------------------------------------------------------------------------
# input files that cannot be read, long and malformed JSON records


@pytest.mark.parametrize("damage", ["corrupt", "mixed-schema"])
def test_an_unreadable_parquet_file_is_one_error_line_naming_it(job, capsys, tmp_path, damage):
    src = tmp_path / "in"
    src.mkdir()
    pq.write_table(pa.table({"id": ["a", "b"], "text": ["one two three", "four five six"]}), src / "a.parquet")
    if damage == "corrupt":
        pq.write_table(pa.table({"id": ["c"], "text": ["seven eight"]}), src / "b.parquet")
        raw = bytearray((src / "b.parquet").read_bytes())
        for i in range(4, len(raw) - 8):
            raw[i] ^= 0x5A
        (src / "b.parquet").write_bytes(bytes(raw))
    else:
        pq.write_table(pa.table({"id": ["c"], "text": [7]}), src / "b.parquet")
    code, _, err = run_job(job, ["--input", str(src), "--input-format", "parquet", "--output", str(tmp_path / "o"),
                                 "--quiet", *REF_FLAGS], capsys)
    refused(code, err, r"an input file cannot be read: .*b\.parquet")


@pytest.mark.slow
def test_a_50_mb_json_document_is_processed_and_a_long_malformed_one_refused(job, capsys, tmp_path, spark):
    words = np.array([f"w{i}" for i in range(50_000)])
    big = " ".join(words[np.random.default_rng(3).integers(0, len(words), 9_000_000)])[: 50 * 1024 * 1024]
    path = tmp_path / "docs.jsonl"
    with open(path, "w") as f:
        f.write(json.dumps({"id": "a", "text": "w1 w2 w3 w4"}) + "\n")
        f.write(json.dumps({"id": "big", "text": big}) + "\n")
        f.write(json.dumps({"id": "b", "text": "w1 w2 w3 w4"}) + "\n")
    code, _, err = run_job(job, ["--input", str(path), "--output", str(tmp_path / "o"), "--id-column", "id",
                                 "--order-by", "id", "--quiet", *REF_FLAGS], capsys)
    assert code == 0, err
    out = spark.read.parquet(str(tmp_path / "o"))
    assert sorted(out.columns) == ["id", "is_duplicate", "text"]
    got = sorted((r["id"], r["n"], r["is_duplicate"]) for r in out.selectExpr("id", "length(text) AS n",
                                                                              "is_duplicate").collect())
    assert got == [("a", 11, False), ("b", 11, True), ("big", 50 * 1024 * 1024, False)]
    broken = tmp_path / "broken.jsonl"
    with open(broken, "w") as f:
        f.write(json.dumps({"id": "a", "text": "w1 w2 w3 w4"}) + "\n")
        f.write(json.dumps({"id": "big", "text": big})[:-2] + "\n")  # the closing quote and brace are lost
    del big
    code, _, err = run_job(job, ["--input", str(broken), "--output", str(tmp_path / "o2"), "--id-column", "id",
                                 "--quiet", *REF_FLAGS], capsys)
    refused(code, err, r"1 record\(s\) cannot be parsed as json")


def test_csv_fragments_from_newlines_in_fields_are_named_with_their_cause(job, capsys, tmp_path, caplog, spark):
    import csv

    docs = list(sample_docs())[:20]
    path = tmp_path / "docs.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "text"])
        for i, d in enumerate(docs):
            text = d["text"] or "x"
            writer.writerow([f"doc-{i}", text.replace(" ", "\n", 1) if i % 4 == 0 else text.replace("\n", " ")])
    base = ["--input", str(path), "--input-format", "csv", "--input-option", "header=true", "--id-column", "id",
            "--quiet", *REF_FLAGS]
    with caplog.at_level(logging.WARNING):
        run_job(job, [*base, "--output", str(tmp_path / "cut")], capsys)
    warned = [r.getMessage() for r in caplog.records if "multiLine=true" in r.getMessage()]
    assert len(warned) == 1 and "looks like a piece of text" in warned[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        code, _, err = run_job(job, [*base, "--input-option", "multiLine=true", "--output", str(tmp_path / "whole")],
                               capsys)
    assert code == 0, err
    assert not [r for r in caplog.records if "multiLine=true" in r.getMessage()]
    assert sorted(r["id"] for r in spark.read.parquet(str(tmp_path / "whole")).collect()) == sorted(
        f"doc-{i}" for i in range(20))
