"""How a sharded index is cut (lshbloom_udf/index/shards.py), and ``plan --pass sharded``."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from lshbloom_udf.index import IndexParams, backend
from lshbloom_udf.index.shards import plan_shards, shard_keys
from lshbloom_udf.sizing import parse_bytes, sharded_plan
from lshbloom_udf.spark.passes.sharded.shuffle import shard_of


def test_shard_hash_spreads_structured_keys_evenly():
    keys = np.arange(1, 200_001, dtype=np.uint64) * np.uint64(1 << 20)  # sum-like keys: low bits all zero
    counts = np.bincount(shard_of(keys, 16), minlength=16)
    assert counts.min() > 0.95 * len(keys) / 16 and counts.max() < 1.05 * len(keys) / 16


@pytest.mark.parametrize("growth", ["fixed", "grow"])
def test_plan_is_the_least_shard_count_that_fits(growth):
    params = IndexParams.for_threshold(10**7, num_perm=50, bands=(10, 5), p_effective=1e-5, growth=growth)
    plan = plan_shards(params, 1 << 20)
    smaller = plan_shards(params, 1 << 20, plan.shards_per_band - 1)
    assert plan.shard_bytes() <= 1 << 20 < smaller.shard_bytes()
    assert plan.shards == 10 * plan.shards_per_band
    assert plan_shards(params, 1 << 40).shards_per_band == 1
    # the index is the driver pass's size, up to the per-shard slack (4 sigma) and rounding
    driver = backend("blocked").index_bytes(params.capacity, params.p_band, params.b)
    assert driver <= plan.index_bytes() < 1.05 * driver
    assert shard_keys(10**7, plan.shards_per_band) > 10**7 / plan.shards_per_band


def test_parse_bytes():
    assert parse_bytes("8g") == 8 << 30 and parse_bytes("512m") == 512 << 20 and parse_bytes(65536) == 65536
    assert parse_bytes("1.5t") == int(1.5 * (1 << 40)) and parse_bytes("64KB") == 64 << 10
    with pytest.raises(ValueError, match="not a memory size"):
        parse_bytes("lots")


def test_sharded_plan_scales_with_the_cluster():
    params = IndexParams.for_threshold(10**9, 0.45, 512, p_effective=1e-5)
    one = sharded_plan(params, 128 << 20, 1, 4, 8 << 30)
    many = sharded_plan(params, 128 << 20, 16, 4, 8 << 30)
    assert one["shards"] == many["shards"] == params.b * one["shards_per_band"]
    assert one["shard_bytes"] <= 128 << 20
    assert one["expected_seconds"] == pytest.approx(16 * many["expected_seconds"])
    assert one["python_bytes_per_executor"] == 4 * one["python_bytes_per_task"]


def test_plan_command_sharded():
    out = subprocess.run([sys.executable, "-m", "lshbloom_udf", "plan", "--docs", "1e9", "--pass", "sharded",
                          "--executors", "16", "--executor-memory", "32g", "--shard-memory", "256m", "--json"],
                         capture_output=True, text=True, check=True).stdout
    sharded = json.loads(out)["sharded"]
    assert sharded["shard_bytes"] <= 256 << 20 and sharded["tasks_in_flight"] == 64
    text = subprocess.run([sys.executable, "-m", "lshbloom_udf", "plan", "--docs", "1e9", "--pass", "sharded"],
                          capture_output=True, text=True, check=True).stdout
    assert "shards" in text and "expected time" in text and "python memory per task" in text
