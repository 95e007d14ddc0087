"""``lshbloom check-index`` asks each pass's store whether a directory is its index (no Spark needed to decide)."""

from __future__ import annotations

import pytest

from lshbloom_udf.errors import IndexMismatchError
from lshbloom_udf.spark.passes.check import check_index
from lshbloom_udf.spark.passes import PASSES


def _owners(path) -> list[str]:
    return [name for name, p in PASSES.items() if p.holds_index(str(path))]


def test_each_store_claims_its_own_directory(tmp_path):
    driver, sharded, empty = tmp_path / "d", tmp_path / "s", tmp_path / "e"
    for d in (driver, sharded, empty):
        d.mkdir()
    (driver / "manifest.json").write_text("{}")
    (sharded / "manifest-000001.json").write_text("{}")
    assert _owners(driver) == ["driver"]
    assert _owners(sharded) == ["sharded"]
    assert _owners(empty) == []
    assert _owners("hdfs://namenode/indexes/a") == ["sharded"]


def test_a_directory_no_store_claims_is_the_default_pass_s_to_report(tmp_path):
    assert check_index(str(tmp_path)) == f"{tmp_path}: no index here yet (nothing to check)"
    with pytest.raises(FileNotFoundError, match="no such index directory"):
        check_index(str(tmp_path / "missing"))


def test_a_directory_two_stores_claim_is_refused_not_guessed(tmp_path):
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / "manifest-000001.json").write_text("{}")
    with pytest.raises(IndexMismatchError, match=r"more than one kind of index \(driver, sharded pass\)"):
        check_index(str(tmp_path))
