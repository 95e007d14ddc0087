"""The keys' way to the driver pass (issue 11, item 4): the socket stream and its fallback decide alike.

- The socket stream (executors send keys while they compute them) and the
  ``toLocalIterator`` transfer give datasketch's flags, over many partitions
  (some empty) and chunks smaller than a partition.
- A keys task that fails after it sent keys is retried; the pass skips the rows
  it already decided: the index, the flags and verification over the spools
  are unchanged (a real spark-submit with ``local[2,4]``).
- The driver's spool of keys is gone after a run, also a failed one.
"""

from __future__ import annotations

import os
import tempfile

import pytest

from lshbloom_udf import deduplicate
from lshbloom_udf.errors import CapacityWarning, IndexFullError
from lshbloom_udf.spark.keys import ROW_COL
from reliability_support import REF_KW, index_state, load_job, run_quietly, submit, write_jsonl
from spark_support import datasketch_flags, sample_docs


SOURCE_COLS = ("is_duplicate", "duplicate_of", "similarity", "similarity_measure")


@pytest.fixture(scope="module")
def docs():
    return list(sample_docs(300, seed=5))


def _frame(spark, docs, partitions: int):
    """The documents in id order over ``partitions`` partitions (a few of them empty)."""
    df = spark.createDataFrame([(d["id"], d["text"]) for d in docs], "id string, text string")
    return df.repartitionByRange(partitions, "id").sortWithinPartitions("id").union(df.limit(0))


def _flags(out) -> dict:
    return {r["id"]: r["is_duplicate"] for r in out.collect()}


@pytest.mark.parametrize("transfer", ["socket", "spark"])
def test_both_transfers_give_datasketchs_flags_over_many_partitions_and_chunks(spark, docs, transfer):
    ordered = sorted(docs, key=lambda d: d["id"])
    expected = dict(zip([d["id"] for d in ordered], datasketch_flags([d["text"] for d in ordered])))
    df = _frame(spark, docs, 9)
    out = deduplicate(df, id_col="id", key_transfer=transfer, chunk_rows=7, progress=False, **REF_KW)
    assert _flags(out) == expected
    assert sum(expected.values()) > 10  # the sample has duplicates to find


def test_the_spool_is_removed_after_a_run_and_after_a_failed_one(spark, docs, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    df = _frame(spark, docs, 3)
    deduplicate(df, id_col="id", key_transfer="socket", progress=False, **REF_KW).count()
    assert [p for p in os.listdir(tmp_path) if p.startswith("lshbloom-keys-")] == []
    # A fixed index too small for the input fails in the middle of the pass: the stream is closed and cleaned.
    with pytest.warns(CapacityWarning), pytest.raises(IndexFullError):
        deduplicate(df, id_col="id", key_transfer="socket", index_dir=str(tmp_path / "ix"), expected_docs=10,
                    growth="fixed", progress=False, **REF_KW)
    assert [p for p in os.listdir(tmp_path) if p.startswith("lshbloom-keys-")] == []


@pytest.mark.slow
def test_a_keys_task_that_fails_after_sending_keys_is_retried_with_the_same_decisions(spark, docs, tmp_path):
    """Retried keys tasks (some partitions then have two spools): the pass inserts and flags what the run over
    Spark's own shuffle (``--key-transfer spark``, no stream, no spool) does, the kept index byte for byte with its
    flagged rows, and verification over the spools gives that run's output, sources and similarities too."""
    inp = tmp_path / "in"
    inp.mkdir()
    for i, cut in enumerate(range(0, len(docs), 100)):
        write_jsonl(inp / f"part-{i}.jsonl", docs[cut : cut + 100])
    conf = tmp_path / "small-chunks.toml"
    conf.write_text("[dedup]\nchunk_rows = 16\n")
    args = ["--input", str(inp), "--id-column", "id", "--quiet", "--config", str(conf), "--duplicate-of"]
    # The reference: the same job and flags in this session's local[2] (a spark-submit of its own would only
    # add a JVM start-up).
    run_quietly(load_job(), [*args, "--output", str(tmp_path / "keyed"), "--index-dir", str(tmp_path / "keyed-index"),
                             "--key-transfer", "spark"])
    failed = submit([*args, "--output", str(tmp_path / "retried"), "--index-dir", str(tmp_path / "retried-index")],
                    fault="fail-task-after-send", master="local[2,4]")
    assert failed.returncode == 0, failed.stderr[-3000:]
    assert "fails after a chunk" in failed.stderr  # the fault really fired

    def read(path):
        return {r["id"]: tuple(r[c] for c in SOURCE_COLS) for r in spark.read.parquet(str(path)).collect()}

    retried = read(tmp_path / "retried")
    assert retried == read(tmp_path / "keyed") and sum(r[0] for r in retried.values()) > 10
    assert index_state(tmp_path / "retried-index") == index_state(tmp_path / "keyed-index")


def test_a_stream_closed_while_its_keys_job_starts_cancels_the_job_before_closing_the_server(spark, docs):
    """The driver failing just after the keys stage started (a corrupt index is found as it opens): the stream stops
    the job first, so no task connects to a closed server (``ConnectionRefusedError``, whose Python traceback the
    executors would log after the run's one-line error; issue 33, item 5)."""
    from lshbloom_udf.config import DedupConfig
    from lshbloom_udf.spark.keys import row_id
    from lshbloom_udf.spark.passes.driver.sender import SENT_SCHEMA, stream_mapper
    from lshbloom_udf.spark.passes.driver.stream import KeyStream

    spec = DedupConfig().replace(**REF_KW).index_params().key_spec
    df = _frame(spark, docs, 6)
    pinned = df.select("text", row_id()).localCheckpoint()
    for _ in range(2):
        stream = KeyStream(spark, spec.b)
        mapper = stream_mapper("text", spec, 7, stream.address, stream.token)
        stream.start(pinned.select(ROW_COL, "text").mapInArrow(mapper, SENT_SCHEMA))
        stream.close()  # at once: before the job is even submitted, as the failing pass does
        assert not stream._job.is_alive()
        assert stream.job_error is None or "ConnectionRefused" not in str(stream.job_error), stream.job_error
