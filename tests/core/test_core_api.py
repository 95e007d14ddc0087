"""The package's public names resolve, and the index errors users catch are the ones raised."""

import pytest

import lshbloom_udf
from lshbloom_udf import IndexLockedError, IndexParams, LSHBloomIndex


def test_every_public_name_resolves():
    namespace: dict = {}
    exec("from lshbloom_udf import *", namespace)
    missing = [name for name in lshbloom_udf.__all__ if name not in namespace]
    assert missing == []


def test_the_exported_lock_error_is_raised_for_a_second_writer(tmp_path):
    params = IndexParams.for_threshold(capacity=100, threshold=0.5, num_perm=256)
    with LSHBloomIndex.create(str(tmp_path / "index"), params):
        with pytest.raises(IndexLockedError):
            LSHBloomIndex.open(str(tmp_path / "index"))
