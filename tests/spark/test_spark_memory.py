"""Verification within the driver's memory (lshbloom_udf.memory): the live session's figures, texts streamed in
partitions the one-collect budget holds, similarities on the executors past the texts' budget, and a real
spark-submit on Spark's default-sized 1 GiB driver."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from spark_support import JVM_OPTIONS, ROOT

from lshbloom_udf import memory as M
from lshbloom_udf.sizing import parse_bytes

JOB = os.path.join(ROOT, "spark_jobs", "dedup.py")
MIB = 1 << 20


def test_of_session_reads_the_live_driver(spark):
    before = M.machine_available()
    d = M.DriverMemory.of_session(spark)
    after = M.machine_available()
    runtime = spark.sparkContext._jvm.java.lang.Runtime.getRuntime()
    assert d.heap_source == "jvm" and d.heap == runtime.maxMemory()
    assert d.max_result == parse_bytes(spark.conf.get("spark.driver.maxResultSize", "1g"))
    # The machine's available memory moves while other processes run (CI failed once on 150 KB freed between two
    # reads): d.python, read in between, is within both readings' range (plus what moves in the meantime).
    assert before is not None and after is not None
    assert 0 < d.python <= max(before, after) + (64 << 20)
    assert 0 < d.collect <= d.max_result // 2 and d.partition == d.collect // 2


def _words(rng: random.Random, n: int) -> str:
    return " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
                    for _ in range(n))


def _pinned(spark, texts, partitions: int = 1):
    from pyspark.sql import types as T

    from lshbloom_udf.spark.keys import ROW_COL

    schema = T.StructType([T.StructField(ROW_COL, T.LongType()), T.StructField("text", T.StringType())])
    return spark.createDataFrame(list(enumerate(texts)), schema).coalesce(partitions).cache()


def test_a_stream_past_the_collect_budget_comes_in_partitions_it_holds(spark):
    """4 MB of texts in one partition, a driver whose one collect may bring 1 MB: they stream in partitions of at
    most half of it (two are in flight), every row once."""
    from lshbloom_udf.spark.verify.texts import _arrow_batches

    rng = random.Random(3)
    texts = [_words(rng, 400) for _ in range(1500)]  # ~2.7 kB each
    frame = _pinned(spark, texts)
    small = M.DriverMemory(heap=1 << 30, max_result=2 * MIB, python=1 << 30)
    total = sum(len(t) for t in texts)
    assert total > 4 * small.collect
    got, largest = {}, 0
    for batch in _arrow_batches(frame, total, small):
        largest = max(largest, sum(len(t) for t in batch.column(1).to_pylist()))
        got.update(zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()))
    assert got == dict(enumerate(texts))
    assert largest <= small.partition


def test_texts_past_the_budget_are_verified_on_the_executors(spark):
    """The same candidate pairs, with a driver that may hold their texts and one that may not: the same verified
    pairs, which are the exact Jaccard reference's; the places say where."""
    from lshbloom_udf.minhash import normalization_mask
    from lshbloom_udf.spark.verify.rule import Shingling, VerifyRule, shingle_set
    from lshbloom_udf.spark.verify.similarity import similarities
    from lshbloom_udf.spark.verify.texts import TextsSource

    rng = random.Random(5)
    base = [_words(rng, 300) for _ in range(40)]
    texts = base + [t.replace(t.split()[7], "edited", 1) for t in base[:20]] + [_words(rng, 300) for _ in range(20)]
    frame = _pinned(spark, texts, partitions=2)
    f_rows = np.arange(40, 80, dtype=np.int64).repeat(2)
    k_rows = np.where(np.arange(80) % 2 == 0, f_rows - 40, (f_rows - 40 + 1) % 40)
    shingling = Shingling(11, normalization_mask("dehyphen,nfkc,lower,punct"), "mixed")
    rule = VerifyRule(0.4, 0.7)
    longest, total = max(len(t) for t in texts), sum(len(t) for t in texts)
    results = {}
    # the third: the executors' results past the one-collect budget too (80 pairs x 25 B > 512 B): streamed back
    for name, python, max_result in (("driver", 1 << 30, 1 << 30), ("executors", 64 << 10, 1 << 30),
                                     ("executors", 64 << 10, 1 << 10)):
        source = TextsSource(frame, "text", longest, total, len(texts),
                             memory=M.DriverMemory(heap=1 << 30, max_result=max_result, python=python),
                             broadcast_limit=1000, driver_text_bytes=None)
        got = similarities((f_rows, k_rows), texts_of=source, shingling=shingling, rule=rule)
        assert source.places == [name]
        results[name, max_result] = set(zip(got.f_rows.tolist(), got.k_rows.tolist()))
    sets = [shingle_set(t, shingling) for t in texts]
    expected = {(f, k) for f, k in zip(f_rows.tolist(), k_rows.tolist())
                if len(sets[f] & sets[k]) >= 0.4 * len(sets[f] | sets[k])}
    assert expected == {(40 + i, i) for i in range(20)}
    assert all(got == expected for got in results.values()) and len(results) == 3


def _six_copies(path, distinct: int, words: int, seed: int = 7) -> list[str]:
    """``distinct`` documents of ``words`` random words, each written six times (copy c of document i at row
    c * distinct + i): every row from ``distinct`` on is an exact copy of an earlier one."""
    rng = random.Random(seed)
    docs = [_words(rng, words) for _ in range(distinct)]
    rows = docs * 6
    with open(path, "w", encoding="utf-8") as f:
        for i, text in enumerate(rows):
            f.write(json.dumps({"id": f"r{i}", "text": text}) + "\n")
    return rows


@pytest.mark.slow
def test_a_default_1g_driver_verifies_texts_past_its_collect_budget(tmp_path):
    """spark-submit --driver-memory 1g on 1,500 documents of ~56 kB (84 MB of texts, six copies of 250): the
    old bound (half of maxResultSize, 512 MB) took them in one collect; the derived one (a quarter of the heap
    outside Spark's unified memory, ~72 MB) streams them in partitions of half that. The run completes with
    exactly the copies flagged, and its summary says what the driver had and where the similarities ran."""
    inp, out = str(tmp_path / "in.jsonl"), str(tmp_path / "out")
    rows = _six_copies(inp, 250, 8000)
    # --no-exact-copies: the copies are verified on their texts, which is what this test is about.
    proc = _submit(["--driver-memory", "1g", JOB, "--input", inp, "--output", out, "--output-format", "json",
                    "--id-column", "id", "--quiet", "--no-exact-copies"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    flags = {}
    for name in os.listdir(out):
        if name.endswith(".json"):
            with open(os.path.join(out, name), encoding="utf-8") as f:
                flags.update((r["id"], r["is_duplicate"]) for r in map(json.loads, f))
    assert flags == {f"r{i}": i >= 250 for i in range(len(rows))}
    with open(out + ".summary.json") as f:
        memory = json.load(f)["verify"]["memory"]
    assert memory["heap_source"] == "jvm" and 900 * MIB <= memory["heap"] <= 1 << 30
    texts = sum(len(t) for t in rows)
    assert memory["collect_bytes"] < texts < parse_bytes("1g") // 2  # streamed now, one collect before
    assert memory["similarities"] == ["driver"]  # a 1g driver's Python holds them: streamed, not shuffled


def _submit(args: list, timeout: float = 600):
    spark_submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    cmd = [spark_submit, "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.driver.host=127.0.0.1", "--conf", f"spark.driver.extraJavaOptions={JVM_OPTIONS}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


@pytest.mark.slow
def test_a_run_that_cannot_fit_says_so_at_the_start(tmp_path):
    """A driver whose one collect would be under MIN_COLLECT (maxResultSize 4m): exit 2 before the pass, one
    error: line naming the setting to change, no JVM stack trace."""
    inp = str(tmp_path / "in.jsonl")
    _six_copies(inp, 5, 50)
    proc = _submit(["--conf", "spark.driver.maxResultSize=4m", JOB, "--input", inp, "--output",
                    str(tmp_path / "out"), "--quiet"])
    output = proc.stdout + proc.stderr  # spark-submit's Python runner sends the driver's stderr to stdout
    assert proc.returncode == 2, output[-3000:]
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "raise spark.driver.maxResultSize" in errors[0], output[-3000:]
    assert "Traceback" not in output and "OutOfMemoryError" not in output
    assert not os.path.exists(tmp_path / "out")
