"""Verification across runs of a kept index (issue 33, item 3): the earlier runs' records judge a later run's flags.

Batches of distinct documents (tests/crossrun_support.py: each shares 45 % of its words with one document of the
previous batch, exact Jaccard ≈ 0.29, so the defaults' permissive bands flag some of them against the previous
run's documents), the last batch with near-copies of the first's. Without records those flags stayed flagged,
unverified; with them no distinct document is flagged and every copy names its source in the first batch.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from crossrun_support import batches
from lshbloom_udf.errors import IndexCorruptError
from lshbloom_udf.index import IndexTransaction, lookup
from lshbloom_udf.spark import deduplicate
from reliability_support import index_state, records_rows, submit, write_jsonl
from verify_support import jaccard


def shingles(text: str) -> set:
    """The defaults' shingles of these documents (lowercase ASCII words: normalization changes nothing): the
    11-character windows of the text with its whitespace deleted (docs/algorithm.md, shingle unit "mixed")."""
    s = "".join(text.split())
    return {s[i:i + 11] for i in range(len(s) - 10)}


def _run(spark, batch, index, **kw):
    df = spark.createDataFrame([(i, t) for i, t, _ in batch], "id string, text string")
    out, summary = deduplicate(df, id_col="id", index_dir=str(index), duplicate_of=True, progress=False,
                               return_summary=True, **kw)
    return {r["id"]: r for r in out.collect()}, summary


def _check_batch(rows, batch, texts) -> list:
    """Every distinct document kept; every planted copy flagged, naming its source with the right similarity."""
    wrong = [i for i, _, kind in batch if kind == "distinct" and rows[i]["is_duplicate"]]
    assert not wrong, f"distinct documents flagged: {wrong}"
    copies = [(i, kind[5:]) for i, _, kind in batch if kind.startswith("copy:")]
    for i, source in copies:
        r = rows[i]
        assert r["is_duplicate"] and r["duplicate_of"] == source and r["similarity_measure"] == "jaccard", r
        exact = jaccard(shingles(texts[i]), shingles(texts[source]))
        assert abs(r["similarity"] - exact) < 0.12, (r, exact)  # the estimate: sd ~0.02 at J ~0.8, k = 252
    return copies


@pytest.mark.slow
@pytest.mark.parametrize("pass_mode", ["driver", "sharded"])
def test_batches_flag_no_distinct_document_and_copies_name_the_first_batch(spark, tmp_path, pass_mode):
    data = batches(3 if pass_mode == "sharded" else 4, 40, 8)
    texts = {i: t for batch in data for i, t, _ in batch}
    index = tmp_path / "index"
    looked_up = unflagged = 0
    for t, batch in enumerate(data):
        rows, summary = _run(spark, batch, index, pass_mode=pass_mode)
        copies = _check_batch(rows, batch, texts)
        cross = summary["verify"]["cross_run"]
        assert summary["verify"]["unverifiable"] == 0
        if t == 0:
            assert cross is None
            continue
        assert cross["records_runs"] == t and cross["records_read"] > 0 and cross["records_held"] >= cross["records_read"]
        if pass_mode != "sharded":  # the local store's lookup reads at most 4 records per flag and run, never all
            assert cross["records_read"] <= 4 * cross["looked_up"] * t
        assert cross["verified"] == len(copies) and cross["candidates"] >= cross["verified"]
        assert cross["records_written"] == sum(not r["is_duplicate"] for r in rows.values()) and cross["record_bytes"] > 0
        looked_up += cross["looked_up"]
        unflagged += cross["unflagged"]
    # The test proves something: the bands did flag distinct documents against earlier runs' documents.
    assert unflagged >= 5 and looked_up >= unflagged + 8
    if pass_mode == "sharded":  # the full check reads every run's records against their checksums
        from lshbloom_udf.spark.passes.sharded.store import ShardedTransaction

        assert ShardedTransaction(str(index), spark).verify()["records"] == len(data)


def test_records_are_committed_with_the_run_and_checksummed(spark, tmp_path):
    data = batches(2, 30, 0)
    index = tmp_path / "index"
    outputs = [_run(spark, batch, index)[0] for batch in data]
    runs = json.loads((index / "manifest.json").read_text())["runs"]
    for run, rows in zip(runs, outputs):
        entry = run["records"]
        assert entry["path"] == f"runs/{run['run_id']}.records" and entry["sketch_bits"] == 4
        # One record per document the run kept (the pass's flags that verification removed included).
        ids = {r[1] for r in records_rows(index / entry["path"])}
        assert entry["documents"] == len(ids) and ids == {i for i, r in rows.items() if not r["is_duplicate"]}
        assert entry["layout"] == "lookup"
        assert sorted(entry["checksums"]["files"]) == sorted(p.name for p in (index / entry["path"]).iterdir())
        assert sorted(entry["checksums"]["files"]) == sorted(lookup.FILES)
    with IndexTransaction(str(index)) as txn:
        assert txn.verify()["records"] == 2
    part = index / runs[0]["records"]["path"] / lookup.SKETCH_FILE
    damaged = bytearray(part.read_bytes())
    damaged[len(damaged) // 2] ^= 0x10
    part.write_bytes(bytes(damaged))
    with pytest.raises(IndexCorruptError, match=r"000001\.records/sketch.u4: corrupt records file"):
        _run(spark, batches(3, 30, 0)[2], index)
    with IndexTransaction(str(index)) as txn, pytest.raises(IndexCorruptError, match="corrupt records file"):
        txn.verify()
    part.unlink()
    with pytest.raises(IndexCorruptError, match=r"sketch.u4: missing: run 000001's records are incomplete"):
        _run(spark, batches(3, 30, 0)[2], index)


def test_a_run_record_that_lost_its_records_is_refused(spark, tmp_path):
    """Every run that inserts documents writes their records: a record without them is a damaged manifest, never
    read as "nothing to verify against" (that would unflag every copy of the earlier run's documents)."""
    data = batches(2, 40, 0)
    index = tmp_path / "index"
    _run(spark, data[0], index)
    manifest = json.loads((index / "manifest.json").read_text())
    del manifest["runs"][0]["records"]
    (index / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexCorruptError, match="run 000001 inserted .* documents but its record names no records"):
        _run(spark, data[1], index)


def test_a_reproduced_run_writes_no_second_records(spark, tmp_path):
    data = batches(2, 40, 0)
    index = tmp_path / "index"
    _run(spark, data[0], index)
    first_rows, first = _run(spark, data[1], index)
    state = index_state(index)
    rows, again = _run(spark, data[1], index)
    assert again["index"]["reproduced_from"] == "000002" and index_state(index) == state
    assert sorted(os.listdir(index / "runs")) == ["000001.dups.i64", "000001.records", "000002.dups.i64",
                                                  "000002.records"]
    # Judged against the runs before the one it reproduces, as that run was: the same decisions.
    assert again["verify"]["cross_run"]["records_runs"] == 1
    assert {i: r["is_duplicate"] for i, r in rows.items()} == {i: r["is_duplicate"] for i, r in first_rows.items()}


@pytest.mark.slow
def test_a_run_killed_after_writing_its_records_leaves_the_index_as_it_was(spark, tmp_path):
    data = batches(2, 40, 0)
    index, clean = tmp_path / "index", tmp_path / "clean"
    _run(spark, data[0], index)
    shutil.copytree(index, clean)
    before = index_state(index)
    log = tmp_path / "fault.log"
    batch = write_jsonl(tmp_path / "b1.jsonl", [{"id": i, "text": x} for i, x, _ in data[1]])
    # Only the killed run is a child process (spark-submit: SIGKILLed); the runs around it are this session's.
    killed = submit(["--input", batch, "--output", str(tmp_path / "o1"), "--id-column", "id", "--index-dir",
                     str(index), "--quiet"], fault=f"kill-after-records,fault-log={log}")
    assert killed.returncode != 0 and "kill-after-records" in log.read_text()
    staged = [n for n in os.listdir(index) if n.startswith(".staging-")]
    assert staged and os.path.isdir(index / staged[0] / "records"), "the kill came before the records: proves nothing"
    recovered, _ = _run(spark, data[1], index)  # recovers (drops the orphan records), then runs
    fresh, _ = _run(spark, data[1], clean)
    assert index_state(index) == index_state(clean) != before
    assert {i: r["is_duplicate"] for i, r in recovered.items()} == {i: r["is_duplicate"] for i, r in fresh.items()}


def test_the_records_scan_finds_every_record_sharing_a_band_most_shared_first():
    """The records scan's mapper (no Spark: one Arrow batch) against a brute-force reference: for each flagged
    sketch, the records sharing a band's ``r`` bytes with it, at most ``cap``, most shared bands first, then the
    earliest record."""
    import numpy as np
    import pyarrow as pa

    from lshbloom_udf.spark.verify.crossrun import MATCH_SCHEMA_RECORD, match_mapper
    from lshbloom_udf import _native

    rng = np.random.default_rng(5)
    k, b, r, cap = 16, 8, 2, 3
    records = rng.integers(0, 3, (400, k), dtype=np.uint8)  # three byte values: bands are often shared
    flags = rng.integers(0, 3, (30, k), dtype=np.uint8)
    columns = {"run": pa.array(["r1"] * 400), "row": pa.array(np.arange(400) * 10),
               "id": pa.array([f"d{i}" for i in range(400)]),
               "sketch": pa.array([bytes(x) for x in records], pa.binary()),
               "size": pa.array(np.ones(400, np.float32)), "text_hash": pa.array([None] * 400, pa.binary())}
    batch = pa.RecordBatch.from_arrays(list(columns.values()), names=list(columns))
    assert set(MATCH_SCHEMA_RECORD) == set(columns)
    found = pa.Table.from_batches(list(match_mapper(_native.sketch_band_keys(flags, b, r), b, r, k, cap)([batch])))
    got = sorted(zip(found.column("owner").to_pylist(), found.column("row").to_pylist(),
                     found.column("shared").to_pylist()))
    band = lambda s: [bytes(s[i * r:(i + 1) * r]) for i in range(b)]  # noqa: E731
    want = []
    for f, flag in enumerate(flags):
        shared = [(sum(x == y for x, y in zip(band(flag), band(rec))), j) for j, rec in enumerate(records)]
        best = sorted((-n, j) for n, j in shared if n)[:cap]
        want += [(f, j * 10, -n) for n, j in best]
    assert got == sorted(want) and len(want) > 30


def test_sketch_band_keys_refuses_what_is_not_a_sketch_matrix():
    import numpy as np

    from lshbloom_udf import _native

    with pytest.raises(TypeError, match="sketches must be a numpy array of dtype uint8"):
        _native.sketch_band_keys(np.zeros((2, 8), np.int64), 2, 4)
    with pytest.raises(ValueError, match=r"b · r = 3 · 4 is more than the sketch's 8 bytes"):
        _native.sketch_band_keys(np.zeros((2, 8), np.uint8), 3, 4)
    with pytest.raises(ValueError, match=r"\(m, k\) uint8 matrix"):
        _native.sketch_band_keys(np.zeros(8, np.uint8), 2, 4)
    assert _native.sketch_band_keys(np.zeros((0, 8), np.uint8), 2, 4).shape == (0, 2)
