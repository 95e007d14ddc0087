"""The manifests' types: each store's manifest read back equal to what its writer wrote, anything else refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lshbloom_udf import errors
from lshbloom_udf.index import BLOOMS, IndexParams, IndexTransaction, LSHBloomIndex, Manifest, RunRecord, read_manifest
from lshbloom_udf.index.manifest import MANIFEST_NAME


def params(capacity=100, **kw):
    return IndexParams.for_threshold(capacity=capacity, threshold=0.5, num_perm=256, **kw)


def keys(n, b, seed=0):
    return np.random.default_rng(seed).integers(0, 2**63, size=(n, b), dtype=np.uint64)


@pytest.mark.parametrize("growth", ["fixed", "grow"])
@pytest.mark.parametrize("bloom", BLOOMS)
def test_a_committed_manifest_reads_back_equal_to_what_was_written(tmp_path, bloom, growth):
    path = str(tmp_path / "ix")
    p = params(50, growth=growth)
    with IndexTransaction(path) as txn:
        index = txn.stage(p, bloom=bloom)
        index.insert(keys(120 if growth == "grow" else 40, p.b))
        txn.commit(RunRecord(documents=40, duplicates=0, inserted=40, params={}))
    written = json.loads((tmp_path / "ix" / MANIFEST_NAME).read_text())
    manifest = read_manifest(path)
    assert manifest.to_json() == written
    assert Manifest.from_json(written, "m") == manifest
    assert manifest.bloom == bloom and manifest.params.growth == growth and len(manifest.runs) == 1
    assert manifest.inserted == sum(g.inserted for g in manifest.generations) == written["inserted"]
    assert manifest.format_version == {"fixed": 1, "grow": 2}[growth]
    assert (len(manifest.generations) > 1) == (growth == "grow")
    assert set(manifest.checksums) == {name for name in written["checksums"]["files"]}


@pytest.mark.parametrize("damage", ["unknown field", "bloom_format", "params", "checksums"])
def test_a_manifest_unlike_what_the_writer_writes_is_refused(tmp_path, damage):
    path = str(tmp_path / "ix")
    LSHBloomIndex.create(path, params(10), bloom="cuckoo").close()
    data = json.loads((tmp_path / "ix" / MANIFEST_NAME).read_text())
    if damage == "unknown field":
        data["owner"] = "someone"
    elif damage == "bloom_format":
        data["bloom_format"] = "other"
    elif damage == "params":
        del data["params"]["num_perm"]
    else:
        data["checksums"]["algorithm"] = "md5"
    (tmp_path / "ix" / MANIFEST_NAME).write_text(json.dumps(data))
    with pytest.raises(errors.IndexCorruptError, match="corrupt manifest"):
        read_manifest(path)
    with pytest.raises(errors.IndexCorruptError, match="corrupt manifest"):
        LSHBloomIndex.open(path)


def test_the_sharded_manifest_reads_back_equal_and_refuses_a_foreign_directory():
    from lshbloom_udf.spark.passes.sharded.manifest import ShardedManifest

    run = RunRecord(documents=3, duplicates=1, inserted=2, params={}, run_id="000001", data="v-00000001-0123456789ab")
    manifest = ShardedManifest(1, "v-00000001-0123456789ab", "cuckoo", params(10), {"shards_per_band": 4}, 2,
                               {"keys": 2, "bytes": 10, "files": 3, "generations": 1}, (run,), "2026-12-02T00:00:00Z")
    written = manifest.to_json()
    assert ShardedManifest.from_json(written, "m", 1) == manifest and manifest.shards_per_band == 4
    with pytest.raises(errors.IndexCorruptError, match="not the manifest of version 2"):
        ShardedManifest.from_json(written, "m", 2)
    with pytest.raises(errors.IndexCorruptError, match="not a version directory"):
        ShardedManifest.from_json({**written, "data": "../elsewhere"}, "m", 1)
    with pytest.raises(errors.IndexCorruptError, match="unknown fields"):
        ShardedManifest.from_json({**written, "owner": "x"}, "m", 1)
    with pytest.raises(errors.IndexMismatchError, match="before the first release"):
        ShardedManifest.from_json({**written, "format_version": 1}, "m", 1)
