"""deduplicate(): decisions equal datasketch's, every row exactly once, robust to partitioning and recomputation."""

from __future__ import annotations

import json
import os
import re
import time

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lshbloom_udf import DedupInputError, IndexMismatchError, LSHBloomIndex
from lshbloom_udf import deduplicate as _deduplicate
from lshbloom_udf.config import DEFAULTS
from spark_support import REFERENCE, datasketch_flags, new_reference_index, sample_docs


def deduplicate(df, **kwargs):
    """deduplicate() in the reference configuration (datasketch's shingling), explicit arguments winning."""
    return _deduplicate(df, **{**REFERENCE, **kwargs})

SCHEMA = T.StructType(
    [
        T.StructField("id", T.StringType()),
        T.StructField("text", T.StringType()),
        T.StructField("source", T.LongType()),
    ]
)


@pytest.fixture(scope="module")
def docs():
    return list(sample_docs())


@pytest.fixture(scope="module")
def by_id(docs):
    return {d["id"]: d for d in docs}


@pytest.fixture(scope="module")
def docs_df(spark, docs):
    return spark.createDataFrame([(d["id"], d["text"], d["source"]) for d in docs], SCHEMA)


@pytest.fixture(scope="module")
def many_files(tmp_path_factory, docs):
    """The documents as 9 JSON-lines files of uneven sizes (Spark packs them into partitions by size)."""
    root = tmp_path_factory.mktemp("many")
    cuts = [0, 13, 80, 91, 170, 260, 300, 390, 401, len(docs)]
    for i, (a, b) in enumerate(zip(cuts, cuts[1:])):
        with open(root / f"part-{i:02d}.jsonl", "w", encoding="utf-8") as f:
            for d in docs[a:b]:
                f.write(json.dumps(d) + "\n")
    return str(root)


def _rows(df, flag="is_duplicate"):
    return [(r["id"], r["text"], r[flag]) for r in df.collect()]


def _check_against_reference(rows):
    """Rows in processing order: their flags must equal datasketch's loop over the same order."""
    ours = [flag for _, _, flag in rows]
    theirs = datasketch_flags([text for _, text, _ in rows], config=REFERENCE)
    assert sum(theirs) > 50  # the sample has plenty of near-duplicates
    assert ours == theirs


@pytest.mark.slow
def test_flags_equal_datasketch_in_order_by_order(docs_df, docs):
    out = deduplicate(docs_df.repartition(7), order_by="id", progress=False)
    rows = _rows(out)
    assert [r[0] for r in rows] == sorted(d["id"] for d in docs)  # output keeps the processing order
    _check_against_reference(rows)


def test_flags_equal_datasketch_in_input_order_from_many_files(spark, many_files, docs):
    df = spark.read.schema(SCHEMA).json(many_files)
    assert df.rdd.getNumPartitions() >= 1
    out = deduplicate(df, progress=False)
    rows = _rows(out)
    assert sorted(r[0] for r in rows) == sorted(d["id"] for d in docs)
    _check_against_reference(rows)


def test_flag_mode_returns_every_row_once_with_all_columns(docs_df, docs, by_id):
    out = deduplicate(docs_df.repartition(5), progress=False)
    assert out.columns == ["id", "text", "source", "is_duplicate"]
    assert dict(out.dtypes)["is_duplicate"] == "boolean"
    rows = out.collect()
    assert len(rows) == len(docs)
    assert sorted(r["id"] for r in rows) == sorted(by_id)
    for r in rows:
        assert (r["text"], r["source"]) == (by_id[r["id"]]["text"], by_id[r["id"]]["source"])
        assert r["is_duplicate"] is not None
    flags = {r["id"]: r["is_duplicate"] for r in rows}
    assert flags["zz-null"] is False and flags["zz-empty"] is False and flags["zz-blank"] is False


def test_filter_and_duplicates_partition_the_input(docs_df, docs):
    df = docs_df.repartition(6)
    flagged = {r["id"]: r["is_duplicate"] for r in deduplicate(df, order_by="id", progress=False).collect()}
    kept = deduplicate(df, mode="filter", order_by="id", progress=False)
    removed = deduplicate(df, mode="duplicates", order_by="id", progress=False)
    assert kept.columns == removed.columns == ["id", "text", "source"]
    kept_ids = [r["id"] for r in kept.collect()]
    removed_ids = [r["id"] for r in removed.collect()]
    assert len(kept_ids) == len(set(kept_ids)) and len(removed_ids) == len(set(removed_ids))
    assert not set(kept_ids) & set(removed_ids)
    assert set(kept_ids) | set(removed_ids) == {d["id"] for d in docs}
    assert set(removed_ids) == {i for i, f in flagged.items() if f}
    assert {"zz-null", "zz-empty", "zz-blank"} <= set(kept_ids)


def test_flags_survive_recomputation(spark, many_files):
    """The input is re-read and re-shuffled on every action; decisions must not move between rows."""
    df = spark.read.schema(SCHEMA).json(many_files).repartition(4).cache()
    df.count()
    result = deduplicate(df, return_summary=True, progress=False)
    first = _rows(result.df)
    df.unpersist(blocking=True)  # the next actions recompute the input from the files
    second = _rows(result.df)
    third = _rows(result.df.select("id", "text", "is_duplicate"))
    assert first == second == third
    _check_against_reference(first)
    assert result.summary["duplicates"] == sum(f for *_, f in first)


def test_id_column_join_with_recomputed_input(spark, many_files, docs):
    # repartition(4) after a read of many files: the final join recomputes this input.
    df = spark.read.schema(SCHEMA).json(many_files).repartition(4)
    out = deduplicate(df, id_col="id", order_by="id", progress=False)
    got = {r["id"]: (r["text"], r["is_duplicate"]) for r in out.collect()}
    assert len(got) == len(docs) and out.count() == len(docs)
    ordered = sorted(docs, key=lambda d: d["id"])
    theirs = datasketch_flags([d["text"] for d in ordered], config=REFERENCE)
    assert [got[d["id"]][1] for d in ordered] == theirs
    assert all(got[d["id"]][0] == d["text"] for d in docs)


def test_large_duplicate_set_path_sorts_back_and_agrees(docs_df):
    """Above the broadcast limit the join shuffles: the result must be the same rows, flags and order."""
    df = docs_df.repartition(3)
    small = _rows(deduplicate(df, order_by="id", progress=False))
    big = _rows(deduplicate(df, order_by="id", progress=False, broadcast_limit=0, chunk_rows=37))
    assert big == small
    kept_big = deduplicate(df, mode="filter", order_by="id", progress=False, broadcast_limit=0)
    assert [r["id"] for r in kept_big.collect()] == [i for i, _, f in small if not f]


def test_second_run_against_kept_index(spark, docs, tmp_path):
    ordered = sorted(docs, key=lambda d: d["id"])
    first, second = ordered[:250], ordered[250:]
    to_df = lambda ds: spark.createDataFrame([(d["id"], d["text"], d["source"]) for d in ds], SCHEMA).repartition(3)
    index_dir = str(tmp_path / "index")
    r1 = deduplicate(to_df(first), order_by="id", index_dir=index_dir, expected_docs=len(docs), return_summary=True, progress=False)
    flags1 = [r["is_duplicate"] for r in r1.df.collect()]
    assert LSHBloomIndex.exists(index_dir)
    # Reopening without sizing arguments keeps the index's own capacity.
    r2 = deduplicate(to_df(second), order_by="id", index_dir=index_dir, return_summary=True, progress=False)
    flags2 = [r["is_duplicate"] for r in r2.df.collect()]
    lsh = new_reference_index(len(docs), config=REFERENCE)
    assert flags1 == datasketch_flags([d["text"] for d in first], lsh=lsh, config=REFERENCE)
    assert flags2 == datasketch_flags([d["text"] for d in second], lsh=lsh, config=REFERENCE)
    # Some second-batch documents are duplicates only of first-batch ones.
    alone = datasketch_flags([d["text"] for d in second], config=REFERENCE)
    assert sum(flags2) > sum(alone)
    assert r2.summary["index"]["inserted_before"] == len(first) - sum(flags1) - _empty(first)
    assert r2.summary["index"]["capacity"] == len(docs)
    with open(os.path.join(index_dir, "manifest.json")) as f:
        assert json.load(f)["inserted"] == r2.summary["index"]["inserted_total"]


def _empty(ds):
    return sum(1 for d in ds if not d["text"] or not d["text"].split())


def test_parameter_mismatch_with_kept_index_fails_clearly(docs_df, tmp_path):
    index_dir = str(tmp_path / "index")
    small = docs_df.limit(40)
    deduplicate(small, index_dir=index_dir, progress=False)
    with pytest.raises(IndexMismatchError, match="threshold"):
        deduplicate(small, index_dir=index_dir, threshold=0.8, progress=False)
    with pytest.raises(IndexMismatchError, match="ngram"):
        deduplicate(small, index_dir=index_dir, ngram=2, progress=False)
    with pytest.raises(IndexMismatchError, match="capacity"):
        deduplicate(small, index_dir=index_dir, expected_docs=12345, progress=False)


def test_mix_band_keys_decide_as_an_exact_keep_first_loop_over_them(docs_df, docs, tmp_path):
    """band_key="mix": the same pipeline over other keys; the reference is an exact set per band."""
    import numpy as np

    from lshbloom_udf import band_keys, signatures

    out, summary = deduplicate(docs_df, order_by="id", band_key="mix", index_dir=str(tmp_path / "ix"),
                               return_summary=True, progress=False)
    rows = sorted(out.collect(), key=lambda r: r["id"])
    texts = [r["text"] for r in rows]
    keys = band_keys(signatures(texts, num_perm=256), 42, 6, band_key="mix")
    seen = [set() for _ in range(42)]
    expected = []
    for text, row in zip(texts, keys):
        if not text or not text.split():
            expected.append(False)
            continue
        dup = any(int(k) in band for k, band in zip(row, seen))
        if not dup:
            for k, band in zip(row, seen):
                band.add(int(k))
        expected.append(dup)
    assert [r["is_duplicate"] for r in rows] == expected
    assert sum(expected) > 50 and summary["params"]["band_key"] == "mix"
    # The keys themselves differ from datasketch's, the near-duplicates found are the same here.
    assert not np.array_equal(keys, band_keys(signatures(texts, num_perm=256), 42, 6))
    assert expected == datasketch_flags(texts, config=REFERENCE)
    with pytest.raises(IndexMismatchError, match="band_key"):
        deduplicate(docs_df, index_dir=str(tmp_path / "ix"), progress=False)


def test_summary_contents(docs_df, docs):
    result = deduplicate(docs_df, return_summary=True, progress=False)
    df, summary = result
    assert summary["documents"] == len(docs)
    assert summary["empty_documents"] == 3
    assert summary["duplicates"] == df.where("is_duplicate").count()
    assert summary["kept"] == len(docs) - summary["duplicates"]
    assert summary["params"]["b"] == 42 and summary["params"]["r"] == 6
    assert summary["index"]["bytes_on_disk"] > 0 and summary["index"]["path"] is None
    assert set(summary["seconds"]) >= {"keys", "driver_pass", "total"}
    text = result.summary_text()
    assert "duplicates" in text and "docs/s" in text
    json.dumps(summary)


def test_progress_lines_through_the_logger(docs_df, monkeypatch):
    import logging

    from lshbloom_udf.spark.passes.driver import progress as S

    monkeypatch.setattr(S.Progress, "__init__", _fast_progress_init(S.Progress.__init__))
    monkeypatch.setattr(S.Progress, "close", _close_after_a_line(S.Progress.close))
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logger = logging.getLogger("lshbloom_udf")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        deduplicate(docs_df, chunk_rows=50, progress=True)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    progress = [l for l in lines if "docs/s" in l]
    assert progress and ("ETA" in progress[0] or "done" in progress[0])
    assert re.search(r"done in \d+\.\d s$", progress[-1])


def _fast_progress_init(orig):
    def init(self, total, enabled=True, interval=1.0):
        orig(self, total, enabled=enabled, interval=0.01)

    return init


def _close_after_a_line(orig):
    # The pass over 200 documents can end before the timer thread first runs (a loaded machine: CI once had none in
    # 0.09 s); the lines' path through the logger is what is tested, so close waits for the first (5 s at most).
    def close(self):
        deadline = time.monotonic() + 5
        while self._thread is not None and not self.lines and time.monotonic() < deadline:
            time.sleep(0.005)
        orig(self)

    return close


def test_empty_input_and_all_empty_texts(spark):
    empty = spark.createDataFrame([], SCHEMA)
    out, summary = deduplicate(empty, return_summary=True, progress=False)
    assert out.count() == 0 and summary["documents"] == 0
    blanks = spark.createDataFrame([("a", None, 1), ("b", "", 2), ("c", "   ", 3)], SCHEMA)
    assert [r["is_duplicate"] for r in deduplicate(blanks, order_by="id", progress=False).collect()] == [False] * 3


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(text_col="body"), "text column 'body' not found"),
        (dict(text_col="source"), "has type bigint, not string"),
        (dict(id_col="uid"), "id column 'uid' not found"),
        (dict(mode="drop"), "mode must be one of"),
        (dict(threshold=1.5), "threshold must be"),
        (dict(num_perm=0), "num_perm must be"),
        (dict(ngram=0), "ngram must be"),
        (dict(p_effective=2.0), "p_effective"),
        (dict(expected_docs=-5), "expected_docs"),
        (dict(scheme="sha256"), "scheme"),
        (dict(bands=(50, 6)), "exceeds num_perm"),
        (dict(order_by="nope"), "order-by expression 'nope' does not resolve"),
        (dict(flag_col="text"), "already has a column 'text'"),
        (dict(index_dir="s3://bucket/index"), "local path on the driver"),
    ],
)
def test_bad_input_and_parameters_fail_clearly(docs_df, kwargs, message):
    with pytest.raises(DedupInputError, match=message):
        deduplicate(docs_df, progress=False, **kwargs)


@pytest.mark.parametrize("how", [{}, {"key_transfer": "spark"}, {"pass_mode": "sharded"}])
def test_duplicate_and_null_ids_are_named(spark, how):
    """The ids checked from the keys stage's hashes (the socket stream), or aggregated (the others), after the
    pass: repeated ids across partitions named alike."""
    df = spark.createDataFrame(
        [("a", "x y z", 1), ("b", "p q r", 2), ("a", "u v w", 3), ("c", "k", 4), ("c", "l", 5), ("d", "m", 6)], SCHEMA
    ).repartition(3)
    with pytest.raises(DedupInputError, match=r"not unique: duplicated ids 'a' \(2 rows\), 'c' \(2 rows\)"):
        deduplicate(df, id_col="id", progress=False, **how)
    nulls = spark.createDataFrame([(None, "x y z", 1), ("b", "p q r", 2)], SCHEMA)
    with pytest.raises(DedupInputError, match="null"):
        deduplicate(nulls, id_col="id", progress=False, **how)


@pytest.mark.parametrize("forced", [False, True])
def test_repeated_ids_are_named_on_a_kept_index_with_committed_runs(spark, tmp_path, forced):
    """With committed runs the fingerprints are aggregated before the pass (or, forced, after it) and the ids come
    from the keys stage's hashes: a repeated id is still named, and the index keeps its one run."""
    index_dir = str(tmp_path / "index")
    first = spark.createDataFrame([("a", "one two three four", 1), ("b", "five six seven eight", 2)], SCHEMA)
    deduplicate(first, id_col="id", index_dir=index_dir, progress=False).collect()
    runs = json.load(open(os.path.join(index_dir, "manifest.json")))["runs"]
    assert len(runs) == 1  # committed: the next run has a run to compare with
    repeated = spark.createDataFrame(
        [("c", "x y z", 1), ("d", "p q r", 2), ("c", "u v w", 3)], SCHEMA).repartition(2)
    with pytest.raises(DedupInputError, match=r"not unique: duplicated ids 'c' \(2 rows\)"):
        deduplicate(repeated, id_col="id", index_dir=index_dir, force_new_ingest=forced, progress=False).collect()
    assert json.load(open(os.path.join(index_dir, "manifest.json")))["runs"] == runs


def test_an_id_hash_seen_twice_is_checked_on_its_rows(spark):
    """Two distinct ids of one 64-bit hash (planted: no collision is known for xxhash64) are suspects only: their
    rows are counted by id, and unique ids pass; a repeated id among the suspects is named."""
    import numpy as np
    from pyspark.sql import functions as F

    from lshbloom_udf.spark.ids import IdHashes, check_id_hashes

    df = spark.createDataFrame([("a", "x", 1), ("b", "y", 2), ("c", "z", 3)], SCHEMA)
    h = {r["id"]: r["h"] for r in df.select("id", F.xxhash64("id").alias("h")).collect()}
    collided = IdHashes()
    collided.add(np.array([h["a"], h["b"]], np.int64), 2)
    collided.add(np.array([h["a"], h["c"]], np.int64), 2)  # "a" again: as if "c" hashed like it
    assert collided.suspects().tolist() == [h["a"]] and collided.nulls == 0
    check_id_hashes(df, "id", collided)  # "a" is on one row: no error
    repeated = spark.createDataFrame([("a", "x", 1), ("b", "y", 2), ("a", "z", 3)], SCHEMA)
    with pytest.raises(DedupInputError, match=r"duplicated ids 'a' \(2 rows\)"):
        check_id_hashes(repeated, "id", collided)
    one_null = IdHashes()
    one_null.add(np.array([h["a"]], np.int64), 2)
    with pytest.raises(DedupInputError, match="null"):
        check_id_hashes(df, "id", one_null)


def test_defaults_come_from_config():
    from lshbloom_udf.config import DedupConfig
    from lshbloom_udf.minhash import normalization_name

    config = DedupConfig()  # what deduplicate() runs with when given no settings
    for key in ("threshold", "num_perm", "ngram", "seed", "scheme", "text_column", "mode"):
        assert getattr(config, key) == DEFAULTS[key]
    assert config.normalize == normalization_name(DEFAULTS["normalize"])


def test_other_column_types_pass_through(spark):
    df = spark.createDataFrame(
        [(1, "alpha beta gamma delta", [1, 2], {"k": 1.5}, None), (2, "alpha beta gamma delta", [3], {}, "x")],
        "n int, text string, arr array<int>, m map<string,double>, s string",
    ).withColumn("ts", F.current_timestamp())
    out = deduplicate(df, order_by="n", progress=False).collect()
    assert [r["is_duplicate"] for r in out] == [False, True]
    assert out[0]["arr"] == [1, 2] and out[0]["m"] == {"k": 1.5} and out[1]["s"] == "x"


def test_a_kept_index_grows_past_its_capacity(spark, docs, tmp_path):
    """growth "grow" (the default): runs past the first run's capacity add generations instead of failing,
    and every decision stays datasketch's keep-first over the whole stream."""
    ordered = sorted(docs, key=lambda d: d["id"])
    to_df = lambda ds: spark.createDataFrame([(d["id"], d["text"], d["source"]) for d in ds], SCHEMA).repartition(2)
    index_dir = str(tmp_path / "index")
    capacity = len(ordered) // 6
    flags = []
    for i, cut in enumerate(range(0, len(ordered), 2 * capacity)):
        sizing = {"expected_docs": capacity} if i == 0 else {}
        out = deduplicate(to_df(ordered[cut : cut + 2 * capacity]), order_by="id", index_dir=index_dir, progress=False,
                          **sizing)
        flags += [r["is_duplicate"] for r in out.orderBy("id").collect()]
    assert flags == datasketch_flags([d["text"] for d in ordered], config=REFERENCE)
    with LSHBloomIndex.open(index_dir, read_only=True) as index:
        assert index.params.growth == "grow" and index.params.capacity == capacity
        assert len(index.manifest.generations) >= 2
        assert index.inserted > capacity
