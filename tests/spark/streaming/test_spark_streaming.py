"""Streams (issue 36): each micro-batch one run of a kept index, exactly once across kills, replays in any order.

The documents (tests/crossrun_support.py): batches of distinct documents whose permissive bands meet the previous
batch's (verification across runs must unflag them), near-copies of the first batch's documents in the last one,
plus exact copies of an earlier batch's documents and of a document in the same batch.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time

import pytest

from crossrun_support import batches
from lshbloom_udf.errors import ConfigError, DedupInputError, IndexLockedError
from lshbloom_udf.index import IndexTransaction
from lshbloom_udf.index.lock import IndexLock
from lshbloom_udf.spark import deduplicate
from lshbloom_udf.spark.streaming import StreamDedup, deduplicate_stream
from reliability_support import load_job, run_job, submit
from spark_support import ROOT

SCHEMA = "id string, seq long, text string"


def stream_docs(n_batches: int = 4, per_batch: int = 24) -> list[list[dict]]:
    """Batches of {id, seq, text, kind}: seq numbers every document in arrival order."""
    data = batches(n_batches, per_batch, 5, seed=9)
    rng = random.Random(3)
    for t in range(1, n_batches):  # an exact copy of the previous batch's first document, and one of its own
        data[t].insert(rng.randint(0, len(data[t])), (f"exact-{t}", data[t - 1][0][1], f"exact:{data[t - 1][0][0]}"))
        data[t].append((f"self-{t}", data[t][2][1], f"exact:{data[t][2][0]}"))
    seq = iter(range(10**6))
    return [[{"id": i, "seq": next(seq), "text": text, "kind": kind} for i, text, kind in batch] for batch in data]


def land(directory, number: int, batch: list[dict]) -> None:
    """A file arriving in the landing directory (written aside, then renamed in: never seen half written)."""
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".f{number:03d}.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for d in batch:
            f.write(json.dumps({k: d[k] for k in ("id", "seq", "text")}) + "\n")
    final = os.path.join(directory, f"f{number:03d}.json")
    os.rename(tmp, final)
    os.utime(final, (1e9 + number, 1e9 + number))  # the file source takes files oldest first: in arrival order


def batch_flags(spark, data, index, batch_of: dict) -> dict:
    """The flags of one batch run over the same documents in the same order (the stream's batches, each in its
    arrival order), into a new index."""
    rows = [(d["id"], d["seq"], d["text"], batch_of[d["id"]]) for batch in data for d in batch]
    df = spark.createDataFrame(rows, SCHEMA + ", batch int")
    out = deduplicate(df, id_col="id", order_by=["batch", "seq"], index_dir=str(index), progress=False)
    return {r["id"]: r["is_duplicate"] for r in out.collect()}


def streamed(spark, output) -> list:
    return spark.read.parquet(str(output)).select("id", "is_duplicate", "batch").collect()


def check_exactly_once(spark, data, output, reference_index) -> dict:
    """Every input document exactly once in the union of the batches' outputs, flagged as one batch run flags it;
    no distinct document flagged, every copy flagged. The flags by id."""
    rows = streamed(spark, output)
    ids = [r["id"] for r in rows]
    expected = [d["id"] for batch in data for d in batch]
    assert sorted(ids) == sorted(expected), "each input document exactly once in the output"
    flags = {r["id"]: r["is_duplicate"] for r in rows}
    assert flags == batch_flags(spark, data, reference_index, {r["id"]: r["batch"] for r in rows})
    kinds = {d["id"]: d["kind"] for batch in data for d in batch}
    assert not [i for i, k in kinds.items() if k == "distinct" and flags[i]], "a distinct document was flagged"
    assert all(flags[i] for i, k in kinds.items() if k != "distinct"), "a copy was kept"
    return flags


@pytest.mark.slow
def test_a_stream_of_arriving_files_flags_what_one_batch_run_flags(spark, tmp_path):
    data = stream_docs()
    landing, out, index, ck = (tmp_path / n for n in ("in", "out", "index", "ck"))
    writer = StreamDedup(str(index), str(out), id_col="id", progress=False)
    for round_ in (data[:2], data[2:]):  # files arrive, the query drains them; more arrive, it resumes
        for batch in round_:
            land(landing, batch[0]["seq"], batch)
        stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(landing))
        writer.start(stream, str(ck), trigger={"availableNow": True}).awaitTermination()
    check_exactly_once(spark, data, out, tmp_path / "reference")
    entries = list(writer.progress)
    assert [e["batch"] for e in entries] == [0, 1, 2, 3] and not any(e["replayed"] for e in entries)
    assert [e["documents"] for e in entries] == [len(b) for b in data]
    with IndexTransaction(str(index)) as txn:
        runs = txn.runs()
    assert [e["index"]["inserted_total"] for e in entries] == [r.inserted_total for r in runs]
    assert entries[-1]["index"]["inserted_total"] == sum(r.inserted for r in runs) > 0
    assert [r.stream.batch for r in runs] == [0, 1, 2, 3] and len({r.stream.query for r in runs}) == 1


def _sink(captured: list, by: str = "id"):
    """A sink keeping (batch id, the flags by id, or the flags' multiset by text without an id column, rows)."""
    def sink(df, batch_id):
        rows = df.collect()
        if by == "id":
            flags = {r["id"]: r["is_duplicate"] for r in rows}
        else:  # copies of a text are interchangeable: which of them is flagged may change, not how many
            flags = sorted((r["text"], r["is_duplicate"]) for r in rows)
        captured.append((batch_id, flags, len(rows)))
    return sink


@pytest.mark.parametrize("by", ["id", "text"])
def test_a_replayed_batch_in_another_order_gets_its_flags_and_inserts_nothing(spark, tmp_path, by):
    data = stream_docs(2, 20)
    index = str(tmp_path / "index")
    captured: list = []
    writer = StreamDedup(index, sink=_sink(captured, by), query_id="q", progress=False,
                         **({"id_col": "id"} if by == "id" else {}))
    rows = [(d["id"], d["seq"], d["text"]) for d in data[0]]
    writer(spark.createDataFrame(rows, SCHEMA), 0)
    rows = [(d["id"], d["seq"], d["text"]) for d in data[1]]
    writer(spark.createDataFrame(rows, SCHEMA).repartition(1), 1)
    with IndexTransaction(index) as txn:
        before = txn.manifest()
    assert captured[1][2] == len(rows) and any(flag for _, flag in (captured[1][1].items() if by == "id"
                                                                    else captured[1][1]))
    replay = list(reversed(rows))  # the same rows, in another order and partitioning
    writer(spark.createDataFrame(replay, SCHEMA).repartition(3), 1)
    assert captured[2][1] == captured[1][1] and captured[2][2] == len(rows), "the flags the batch committed"
    with IndexTransaction(index) as txn:
        after = txn.manifest()
    assert after.inserted == before.inserted and len(after.runs) == len(before.runs) == 2
    assert list(writer.progress)[-1]["replayed"] and list(writer.progress)[-1]["run_id"] == "000002"


def test_copies_of_one_text_replay_as_many_flags_without_an_id(spark, tmp_path):
    texts = ["the same words " * 20, "other words entirely here " * 20]
    rows = [(f"r{i}", i, texts[0] if i % 2 else texts[1]) for i in range(9)]  # 4 of one text, 5 of the other
    captured: list = []
    writer = StreamDedup(str(tmp_path / "index"), sink=lambda df, b: captured.append(df.collect()),
                         query_id="q", progress=False)
    writer(spark.createDataFrame(rows, SCHEMA), 0)
    writer(spark.createDataFrame(rows[::-1], SCHEMA), 0)  # the same rows, reversed
    first, replay = ({(r["text"], r["is_duplicate"]) for r in got} for got in captured)
    count = [sum(r["is_duplicate"] for r in got if r["text"] == t) for got in captured for t in texts]
    assert first == replay and count == [3, 4, 3, 4], "n - 1 of each text's n copies, whatever their order"
    assert [r["id"] for r in captured[1] if not r["is_duplicate"]] == ["r8", "r7"], "the first of each, in its order"


def test_the_stream_waits_for_the_index_lock_then_fails_clearly(spark, tmp_path):
    index = str(tmp_path / "index")
    os.makedirs(index)
    captured: list = []
    df = spark.createDataFrame([("a", 0, "one text of words " * 10)], SCHEMA)
    lock = IndexLock(index)  # another process's writer (check-index, a backup)
    waiting = StreamDedup(index, sink=_sink(captured), query_id="q", progress=False, lock_wait_seconds=60)
    done = threading.Thread(target=waiting, args=(df, 0))
    done.start()
    time.sleep(1.5)
    assert not captured, "the batch waits while the lock is held"
    lock.release()
    done.join(60)
    assert captured and captured[0][0] == 0
    with IndexLock(index):
        impatient = StreamDedup(index, sink=_sink(captured), query_id="q", progress=False, lock_wait_seconds=0)
        with pytest.raises(IndexLockedError):
            impatient(df, 1)
    # check-index on the live index: refused while a batch holds the lock, or with --wait done once it is released.
    check = [sys.executable, "-m", "lshbloom_udf", "check-index", index]
    with IndexLock(index):
        refused = subprocess.run(check, capture_output=True, text=True, timeout=120, cwd=ROOT)
        patient = subprocess.Popen([*check, "--wait", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   cwd=ROOT)
        time.sleep(1.5)
    out, err = patient.communicate(timeout=120)
    assert refused.returncode == 2 and "in use by another process" in refused.stderr
    assert patient.returncode == 0 and "ok" in out.lower(), err


def test_stream_settings_it_cannot_run_are_refused(spark, tmp_path):
    index = str(tmp_path / "index")
    with pytest.raises(ConfigError, match="needs index_dir"):
        StreamDedup(None, str(tmp_path / "out"))
    with pytest.raises(ConfigError, match="driver pass"):
        StreamDedup(index, str(tmp_path / "out"), pass_mode="sharded")
    with pytest.raises(ConfigError, match="duplicate_of needs id_col"):
        StreamDedup(index, str(tmp_path / "out"), duplicate_of=True)
    with pytest.raises(ConfigError, match="paragraphs needs id_col"):
        StreamDedup(index, str(tmp_path / "out"), paragraphs="remove")
    with pytest.raises(DedupInputError, match="exactly one of output"):
        StreamDedup(index, str(tmp_path / "out"), sink=print)
    batch_df = spark.createDataFrame([("a", 0, "x")], SCHEMA)
    with pytest.raises(DedupInputError, match="streaming DataFrame"):
        deduplicate_stream(batch_df, index, str(tmp_path / "out"), checkpoint_location=str(tmp_path / "ck"))
    with pytest.raises(DedupInputError, match="outside a streaming query"):
        StreamDedup(index, str(tmp_path / "out"), progress=False)(batch_df, 0)
    with pytest.raises(DedupInputError, match="letters, digits"):  # it would name a folder outside the index
        StreamDedup(index, str(tmp_path / "out"), query_id="../../elsewhere", progress=False)(batch_df, 0)


@pytest.mark.slow
def test_the_stream_job_killed_in_its_commits_resumes_exactly_once(spark, tmp_path, capsys):
    """spark-submit --stream, SIGKILLed in batch 1 once its commit journal is written (the commit is finished by
    the restart and Spark's replay of batch 1 finds it done), then in batch 2 before its commit (decided again);
    files arrive while it is down; the third start, the job in this process, drains them."""
    data = stream_docs(5, 20)
    landing, out, index, ck = (tmp_path / n for n in ("in", "out", "index", "ck"))
    args = ["--stream", "--input", str(landing), "--output", str(out), "--index-dir", str(index),
            "--checkpoint-location", str(ck), "--max-files-per-trigger", "1", "--id-column", "id",
            "--stream-schema", SCHEMA, "--quiet"]
    for batch in data[:3]:
        land(landing, batch[0]["seq"], batch)
    for fault in ("kill-in-stream-batch=1:mid-commit", "kill-in-stream-batch=2:before-commit"):
        killed = submit(args, fault=f"{fault},fault-log={tmp_path / 'faults.log'}")
        assert killed.returncode == -9, killed.stderr[-3000:]
    # A reader of the output meanwhile sees committed batches only (batch 2's temporary is hidden), batch an int.
    assert os.path.isdir(out / ".batch=2.lshbloom-tmp")
    seen = spark.read.parquet(str(out))
    assert dict(seen.dtypes)["batch"] == "int" and {r["batch"] for r in seen.select("batch").distinct().collect()} <= {0, 1}
    land(landing, data[3][0]["seq"], data[3])
    land(landing, data[4][0]["seq"], data[4])
    code, _, err = run_job(load_job(), args, capsys)
    assert code == 0, err[-3000:]
    assert (tmp_path / "faults.log").read_text().count("kill-in-stream-batch") == 2
    check_exactly_once(spark, data, out, tmp_path / "reference")
    with IndexTransaction(str(index)) as txn:
        runs = txn.runs()
    assert [r.stream.batch for r in runs] == [0, 1, 2, 3, 4], "each batch committed once"
    assert sorted(os.listdir(out)) == [f"batch={n}" for n in range(5)]
    assert json.loads((tmp_path / "out.summaries" / "batch-4.json").read_text())["documents"] == len(data[4])


def test_an_empty_batch_writes_an_empty_output(spark, tmp_path):
    writer = StreamDedup(str(tmp_path / "index"), str(tmp_path / "out"), query_id="q", progress=False)
    writer(spark.createDataFrame([], SCHEMA), 0)
    assert spark.read.parquet(str(tmp_path / "out" / "batch=0")).count() == 0
    assert list(writer.progress)[-1]["documents"] == 0


def test_a_replayed_batch_whose_output_was_removed_writes_it_again(spark, tmp_path):
    data = stream_docs(1, 20)[0] + [dict(d, id=f"again-{d['id']}", seq=100 + d["seq"]) for d in stream_docs(1, 20)[0][:3]]
    out = tmp_path / "out"
    writer = StreamDedup(str(tmp_path / "index"), str(out), id_col="id", query_id="q", progress=False)
    df = spark.createDataFrame([(d["id"], d["seq"], d["text"]) for d in data], SCHEMA)
    writer(df, 0)
    first = {r["id"]: r["is_duplicate"] for r in spark.read.parquet(str(out / "batch=0")).collect()}
    assert sum(first.values()) == 5 + 3  # the planted near-copies and the exact ones
    shutil.rmtree(out / "batch=0")
    writer(df.repartition(2), 0)
    assert {r["id"]: r["is_duplicate"] for r in spark.read.parquet(str(out / "batch=0")).collect()} == first
    assert list(writer.progress)[-1]["replayed"]


@pytest.mark.slow
def test_the_running_stream_job_stops_cleanly_on_sigterm(tmp_path):
    """``lshbloom dedup --stream --trigger '1 second'`` runs until stopped: SIGTERM to its (Python) driver stops it
    between two batches, exit 0, the batch committed. (Under spark-submit the JVM is the parent process: a SIGTERM
    to it stops the query where it is, and a batch cut short is redone on restart.)"""
    import signal

    from reliability_support import job_env
    from spark_support import JVM_OPTIONS

    data = stream_docs(1, 20)
    landing, out, index, ck = (tmp_path / n for n in ("in", "out", "index", "ck"))
    land(landing, 0, data[0])
    args = ["--stream", "--input", str(landing), "--output", str(out), "--index-dir", str(index),
            "--checkpoint-location", str(ck), "--id-column", "id", "--stream-schema", SCHEMA, "--quiet",
            "--trigger", "1 second"]
    # Files, not pipes: Spark's log would fill a pipe nobody reads while the job runs, and block it.
    stdout_file, stderr_file = open(tmp_path / "stdout", "w+"), open(tmp_path / "stderr", "w+")
    conf = ["--master", "local[2]", "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
            "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", f"spark.driver.extraJavaOptions={JVM_OPTIONS}"]
    env = job_env(PYSPARK_SUBMIT_ARGS=" ".join(f"'{c}'" if " " in c else c for c in conf) + " pyspark-shell")
    job = subprocess.Popen([sys.executable, "-m", "lshbloom_udf", "dedup", *args], cwd=ROOT, env=env, text=True,
                           stdout=stdout_file, stderr=stderr_file, start_new_session=True)
    try:
        summary = tmp_path / "out.summaries" / "batch-0.json"
        deadline = time.monotonic() + 240
        while not summary.exists() and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert summary.exists(), "the first batch was committed"
        job.send_signal(signal.SIGTERM)
        job.wait(timeout=120)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        stdout_file.close()
        stderr_file.close()
    stdout, stderr = (tmp_path / "stdout").read_text(), (tmp_path / "stderr").read_text()
    assert job.returncode == 0, stderr[-3000:]
    assert "1 batch(es) this run" in stdout
    assert sorted(os.listdir(out)) == ["batch=0"]
    with IndexTransaction(str(index)) as txn:
        assert [r.stream.batch for r in txn.runs()] == [0]
