"""The sharded pass (pass_mode="sharded"): the any-earlier decisions of the driver pass, made on the executors.

Real Spark (the session's local[2]), real index files on the local filesystem
through Hadoop's API. The reference is exact: a Python set of band keys per
band over the same keys in the same order (``any_earlier_reference``); Bloom
false positives are the only allowed difference, counted and bounded.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from pyspark.sql import types as T

from lshbloom_udf import band_keys, deduplicate, signatures
from lshbloom_udf.config import DedupConfig
from lshbloom_udf.errors import IndexMismatchError
from lshbloom_udf.index import IndexParams
from lshbloom_udf.spark.keys import ACTIVE_COL, KEYS_COL, ROW_COL
from lshbloom_udf.index.shards import plan_shards
from lshbloom_udf.spark.passes import PassInput
from lshbloom_udf.spark.passes.sharded import PASS as SHARDED_PASS
from lshbloom_udf.spark.passes.sharded import shuffle
from spark_support import REFERENCE, sample_docs
from test_core_insert_rule import any_earlier_reference, planted_keys

SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("text", T.StringType()),
                       T.StructField("source", T.LongType())])
# Sized for 200,000 documents in 64 KiB shards: 42 bands x 15 shards for 503 documents, 4 partitions of shards.
SHARDED = {"pass_mode": "sharded", "expected_docs": 200_000, "shard_memory": 1 << 16}
MIX = {**REFERENCE, "band_key": "mix", "order_by": "id", "id_column": "id", "progress": False}


def bound(tested: int, p: float) -> float:
    """Bloom false positives allowed among ``tested`` new documents at rate ``p``: 5 sigma above the mean."""
    return tested * p + 5 * np.sqrt(tested * p) + 1


def keyed_frame(spark, keys: np.ndarray, active: np.ndarray, partitions: int):
    """A DataFrame of the pipeline's keyed columns: row ids in order, split into ``partitions`` partitions."""
    rows = [(int(i), keys[i].astype("<u8").tobytes(), bool(a)) for i, a in enumerate(active)]
    schema = f"{ROW_COL} long, {KEYS_COL} binary, {ACTIVE_COL} boolean"
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, partitions), schema)


def test_the_sharded_pass_equals_exact_any_earlier(spark, monkeypatch):
    """The pass (a temporary index) over constructed keys in 9 partitions, 10 bands x many shards, many blobs per
    shard: exact up to Bloom FPs."""
    rng = np.random.default_rng(3)
    n, b = 20_000, 10
    keys = planted_keys(rng, n, b)
    active = rng.random(n) > 0.03
    params = IndexParams.for_threshold(n, num_perm=50, bands=(b, 5), p_effective=1e-4, growth="fixed")
    plan = plan_shards(params, 4096)
    assert plan.shards_per_band > 1
    flagged = np.zeros(n, dtype=bool)
    # blobs of at most ~3000 keys: each partition's shards arrive in several blobs, merged in row order
    monkeypatch.setattr(shuffle, "BLOB_KEYS", 3000)
    config = DedupConfig.from_settings({"pass_mode": "sharded", "shard_memory": 4096, "progress": False})
    keyed = keyed_frame(spark, keys, active, 9)
    flagged[SHARDED_PASS.decide(PassInput(config, params, n, None, lambda: keyed)).result.rows()] = True
    exact = any_earlier_reference(keys, active)
    assert not (exact & ~flagged).any(), "a Bloom filter missed a key it holds"
    assert not (flagged & ~active).any()
    assert (flagged & ~exact).sum() <= bound(int((~exact & active).sum()), 1e-4)
    assert exact.sum() > n // 4


def test_filters_in_many_parts_carry_a_shard_into_the_next_run(spark):
    """Two runs through ``decided_frame``: the first's filters, emitted in 1 KiB parts and handed to the second in
    shuffled order, give the decisions of one any-earlier stream (up to Bloom FPs)."""
    from pyspark.sql import functions as F

    from lshbloom_udf.common import unique_rows
    from lshbloom_udf.spark.passes.sharded.filters import FILTER, HITS
    from lshbloom_udf.spark.passes.sharded.shuffle import decided_frame

    rng = np.random.default_rng(5)
    n, b = 6_000, 4
    keys, active = planted_keys(rng, n, b), rng.random(n) > 0.03
    params = IndexParams.for_threshold(n, num_perm=20, bands=(b, 5), p_effective=1e-4, growth="fixed")
    plan = plan_shards(params, 1 << 14)
    assert plan.shard_bytes() > 4 * 1024  # every filter travels in several parts
    half = n // 2
    first = decided_frame(keyed_frame(spark, keys[:half], active[:half], 3), plan, keep_filters=True, part_bytes=1024)
    first = first.persist()
    stored = first.where(F.col("kind") == FILTER).drop("kind", "band").orderBy(F.rand(seed=1)).repartition(3)
    assert stored.where(F.col("part") > 2).count() > 0
    rest = keyed_frame(spark, keys[half:], active[half:], 3).withColumn(ROW_COL, F.col(ROW_COL) + half)
    second = decided_frame(rest, plan, stored=stored, keep_filters=True, part_bytes=1024)
    flagged = np.zeros(n, dtype=bool)
    for frame in (first, second):
        flagged[unique_rows(r[0] for r in frame.where(F.col("kind") == HITS).select("data").collect())] = True
    first.unpersist()
    exact = any_earlier_reference(keys, active)
    assert not (exact & ~flagged).any(), "a filter put together from its parts missed a key it holds"
    assert (flagged & ~exact).sum() <= bound(int((~exact & active).sum()), 1e-4)
    assert exact[half:].sum() > 500


@pytest.fixture(scope="module")
def docs():
    return list(sample_docs())


@pytest.fixture(scope="module")
def docs_df(spark, docs):
    # many partitions, in no useful order: order_by="id" decides the processing order
    return spark.createDataFrame([(d["id"], d["text"], d["source"]) for d in docs], SCHEMA).repartition(7)


def exact_flags(texts) -> list:
    """Any-earlier over the mix band keys of ``texts`` in this order (null, empty and blank texts inactive)."""
    keys = band_keys(signatures([t or "" for t in texts], num_perm=256), 42, 6, band_key="mix")
    active = np.array([bool(t and t.split()) for t in texts])
    return any_earlier_reference(keys, active).tolist()


def flags_by_id(df) -> dict:
    return {r["id"]: r["is_duplicate"] for r in df.collect()}


@pytest.mark.slow
def test_sharded_pass_flags_what_the_driver_pass_flags_with_insert_all(docs_df, docs):
    sharded, summary = deduplicate(docs_df, **MIX, **SHARDED, return_summary=True)
    driver = deduplicate(docs_df, **MIX, insert="all")
    keep_first = deduplicate(docs_df, **MIX)
    ordered = sorted(docs, key=lambda d: d["id"])
    exact = dict(zip([d["id"] for d in ordered], exact_flags([d["text"] for d in ordered])))
    got_sharded, got_driver = flags_by_id(sharded), flags_by_id(driver)
    for got in (got_sharded, got_driver):
        assert not [i for i in exact if exact[i] and not got[i]], "a Bloom filter missed a key it holds"
        assert sum(got[i] and not exact[i] for i in exact) <= bound(len(exact), 1e-5)
    assert got_sharded == got_driver == exact
    # any-earlier flags a superset of keep-first: a removed document's keys still count
    got_first = flags_by_id(keep_first)
    assert all(got_sharded[i] for i in got_first if got_first[i])
    assert sum(exact.values()) > 50
    assert summary["index"]["shard_plan"]["shards"] == 42 * summary["index"]["shard_plan"]["shards_per_band"] > 42
    assert summary["index"]["backend"] == "blocked"


@pytest.mark.slow
def test_sharded_verification_reads_the_keys_the_pass_computed(docs_df, tmp_path):
    """Verification after the sharded pass takes its candidates from the pass's own keys: every pinned partition is
    keyed once in the whole run (keyed again, verification costs the keys stage twice), and the verified decisions
    are those of the driver pass under the same rule (its key spool's candidates)."""
    import fault_injection
    from lshbloom_udf import hooks

    log = tmp_path / "keys.log"
    verified = {**MIX, "verify": True, "duplicate_of": True}
    fault_injection.install({"keys-log": str(log)})
    try:
        sharded, summary = deduplicate(docs_df, **verified, **SHARDED, return_summary=True)
        got = sharded.select("id", "is_duplicate", "duplicate_of", "similarity").collect()
    finally:
        hooks.uninstall("task-start")
    tasks = [line.split() for line in log.read_text().splitlines()]
    assert sorted(p for p, _ in tasks) == sorted({p for p, _ in tasks}), "a partition was keyed twice"
    assert summary["verify"]["pass_flagged"] > summary["verify"]["kept_flagged"] > 20
    driver = deduplicate(docs_df, **verified, insert="all").select("id", "is_duplicate", "duplicate_of", "similarity")
    assert sorted(map(tuple, got)) == sorted(map(tuple, driver.collect()))


def manifests(index_dir) -> list:
    return sorted(n for n in os.listdir(index_dir) if n.startswith("manifest-") and n.endswith(".json"))


@pytest.mark.slow
def test_kept_sharded_index_incremental_runs(spark, docs, tmp_path):
    """Two runs into one sharded index decide as one any-earlier stream; each run commits a version."""
    index_dir = str(tmp_path / "sharded")
    ordered = sorted(docs, key=lambda d: d["id"])
    first, second = ordered[:250], ordered[250:]
    frame = lambda part: spark.createDataFrame([(d["id"], d["text"], d["source"]) for d in part], SCHEMA).repartition(5)
    out1 = deduplicate(frame(first), **MIX, **SHARDED, index_dir=index_dir)
    got = flags_by_id(out1)
    assert manifests(index_dir) == ["manifest-00000001.json"]
    out2, summary = deduplicate(frame(second), **MIX, pass_mode="sharded", index_dir=index_dir, return_summary=True)
    got.update(flags_by_id(out2))
    exact = exact_flags([d["text"] for d in ordered])
    assert [got[d["id"]] for d in ordered] == exact
    assert sum(exact[250:]) > 20
    assert manifests(index_dir) == ["manifest-00000001.json", "manifest-00000002.json"]
    with open(os.path.join(index_dir, "manifest-00000002.json")) as f:
        manifest = json.load(f)
    assert manifest["pass"] == "sharded" and [r["insert"] for r in manifest["runs"]] == ["all", "all"]
    assert manifest["inserted"] == summary["index"]["inserted_total"] == sum(bool(d["text"] and d["text"].split())
                                                                             for d in docs)
    assert manifest["params"]["capacity"] == 200_000  # the index keeps its sizing
    # only the committed version keeps its filters; every version keeps its flagged rows
    v1, v2 = manifest["runs"][0]["data"], manifest["data"]
    assert sorted(n for n in os.listdir(index_dir) if n.startswith("v-")) == [v1, v2]
    assert not os.path.exists(os.path.join(index_dir, v1, "kind=1")) and os.path.isdir(os.path.join(index_dir, v1, "kind=0"))
    assert os.path.isdir(os.path.join(index_dir, v2, "kind=1"))
    # the same input again reproduces the run that ingested it
    again = deduplicate(frame(second), **MIX, pass_mode="sharded", index_dir=index_dir)
    assert flags_by_id(again) == flags_by_id(out2)
    assert len(manifests(index_dir)) == 2


def test_a_sharded_index_of_format_1_is_refused(spark, docs, tmp_path):
    """Format 1 (one row per filter, no checksums) was never released: refused with what to do, not read."""
    index_dir = str(tmp_path / "sharded")
    frame = spark.createDataFrame([(d["id"], d["text"], d["source"]) for d in docs[:100]], SCHEMA)
    deduplicate(frame, **MIX, **SHARDED, index_dir=index_dir).count()
    path = os.path.join(index_dir, "manifest-00000001.json")
    with open(path) as f:
        manifest = json.load(f)
    manifest["format_version"] = 1
    with open(path, "w") as f:
        json.dump(manifest, f)
    os.remove(os.path.join(index_dir, ".manifest-00000001.json.crc"))  # Hadoop's checksum of the file as written
    with pytest.raises(IndexMismatchError, match="format version 1, written before the first release.*rebuild"):
        deduplicate(frame, **MIX, **SHARDED, index_dir=index_dir)


def test_a_reproduced_run_of_a_cuckoo_sharded_index_reports_cuckoo(spark, docs, tmp_path):
    """The same input again on a sharded index of cuckoo shards reproduces its run and names the index's backend."""
    index_dir = str(tmp_path / "cuckoo")
    df = spark.createDataFrame([(d["id"], d["text"], d["source"]) for d in docs[:120]], SCHEMA).repartition(3)
    cuckoo = {**MIX, **SHARDED, "bloom": "cuckoo", "index_dir": index_dir, "return_summary": True}
    first_df, first = deduplicate(df, **cuckoo)
    again_df, again = deduplicate(df, **{**cuckoo, "bloom": None})  # the index keeps its backend: none given
    assert again["pass"] == "reproduced" and again["index"]["reproduced_from"] == first["index"]["run_id"]
    assert first["index"]["backend"] == again["index"]["backend"] == "cuckoo"
    assert flags_by_id(again_df) == flags_by_id(first_df) and again["duplicates"] == first["duplicates"] > 0


def test_reopening_with_the_other_pass_is_a_clear_error(spark, docs, tmp_path):
    df = spark.createDataFrame([(d["id"], d["text"], d["source"]) for d in docs[:40]], SCHEMA)
    sharded_dir, driver_dir = str(tmp_path / "sharded"), str(tmp_path / "driver")
    deduplicate(df, **MIX, **SHARDED, index_dir=sharded_dir).count()
    deduplicate(df, **MIX, index_dir=driver_dir).count()
    with pytest.raises(IndexMismatchError, match="written by the sharded pass"):
        deduplicate(df, **MIX, index_dir=sharded_dir)
    with pytest.raises(IndexMismatchError, match="written by the driver pass"):
        deduplicate(df, **MIX, pass_mode="sharded", index_dir=driver_dir)
    with pytest.raises(IndexMismatchError, match="threshold"):
        deduplicate(df, **{**MIX, "threshold": 0.8}, pass_mode="sharded", index_dir=sharded_dir)


@pytest.mark.slow
def test_a_kept_sharded_index_grows_per_shard(spark, docs, tmp_path):
    """Sized for 60 documents, growing: each shard adds generations as its keys pass its capacity; still exact."""
    index_dir = str(tmp_path / "grow")
    ordered = sorted(docs, key=lambda d: d["id"])
    frame = lambda part: spark.createDataFrame([(d["id"], d["text"], d["source"]) for d in part], SCHEMA).repartition(3)
    got = {}
    for part in (ordered[:250], ordered[250:]):
        got.update(flags_by_id(deduplicate(frame(part), **MIX, pass_mode="sharded", index_dir=index_dir,
                                           expected_docs=60, growth="grow", shard_memory=1 << 12)))
    assert [got[d["id"]] for d in ordered] == exact_flags([d["text"] for d in ordered])
    with open(os.path.join(index_dir, "manifest-00000002.json")) as f:
        manifest = json.load(f)
    assert manifest["fill"]["generations"] >= 3 and manifest["params"]["growth"] == "grow"


@pytest.mark.slow
def test_a_second_commit_of_the_same_version_is_refused(spark, docs, tmp_path):
    """Two runs started from the same committed version: the one that commits second fails, the first stands."""
    from lshbloom_udf.config import DedupConfig
    from lshbloom_udf.errors import IndexLockedError
    from lshbloom_udf.spark.api import run

    index_dir = str(tmp_path / "race")
    df = spark.createDataFrame([(d["id"], d["text"], d["source"]) for d in docs[:60]], SCHEMA)
    config = DedupConfig().replace(**MIX, **SHARDED, index_dir=index_dir)
    first, second = run(df, config, defer_commit=True), run(df, config, defer_commit=True)
    first.commit()
    with pytest.raises(IndexLockedError, match="another run committed this version"):
        second.commit()
    assert manifests(index_dir) == ["manifest-00000001.json"]
    assert not [n for n in os.listdir(index_dir) if n.startswith("_tmp-")]
    # the loser's version is gone, the winner's is whole: a third run reads it
    with open(os.path.join(index_dir, "manifest-00000001.json")) as f:
        data = json.load(f)["data"]
    assert [n for n in os.listdir(index_dir) if n.startswith("v-")] == [data]
    again = deduplicate(df, **MIX, pass_mode="sharded", index_dir=index_dir, force_new_ingest=True)
    assert flags_by_id(again) == {d["id"]: bool(d["text"] and d["text"].split()) for d in docs[:60]}


@pytest.mark.slow
def test_a_sharded_index_on_a_hadoop_filesystem_other_than_file(spark, docs, tmp_path):
    """``viewfs://``, Hadoop's mount-table filesystem, over a local directory: the index goes only through Hadoop's API."""
    real = tmp_path / "under-viewfs"
    real.mkdir()
    spark.sparkContext._jsc.hadoopConfiguration().set("fs.viewfs.mounttable.lshbtest.link./idx", real.as_uri())
    index_dir = "viewfs://lshbtest/idx/sharded"
    ordered = sorted(docs, key=lambda d: d["id"])
    frame = lambda part: spark.createDataFrame([(d["id"], d["text"], d["source"]) for d in part], SCHEMA).repartition(4)
    got = {}
    for part in (ordered[:250], ordered[250:]):
        got.update(flags_by_id(deduplicate(frame(part), **MIX, **SHARDED, index_dir=index_dir)))
    assert [got[d["id"]] for d in ordered] == exact_flags([d["text"] for d in ordered])
    assert manifests(real / "sharded") == ["manifest-00000001.json", "manifest-00000002.json"]
    again = deduplicate(frame(ordered[250:]), **MIX, **SHARDED, index_dir=index_dir)
    assert flags_by_id(again) == {d["id"]: got[d["id"]] for d in ordered[250:]}


def test_both_kept_index_stores_are_one_protocol(tmp_path):
    """The local and the sharded store are both a KeptIndex; a sharded transaction's recovery is its own."""
    from lshbloom_udf.index import IndexTransaction
    from lshbloom_udf.index.kept import KeptIndex
    from lshbloom_udf.spark.passes.sharded.store import ShardedTransaction

    local = IndexTransaction(str(tmp_path / "local"))
    try:
        assert isinstance(local, KeptIndex)
    finally:
        local.close()
    one, two = ShardedTransaction(str(tmp_path / "a")), ShardedTransaction(str(tmp_path / "b"))
    assert isinstance(one, KeptIndex) and isinstance(two, KeptIndex)
    one.recovered["discarded"].append("x")
    assert two.recovered == {"rolled_forward": None, "discarded": []}
