"""The insert rules: keep-first (``insert="first"``) and any-earlier (``insert="all"``), in the driver pass.

Real index files, no mocks. The any-earlier reference is exact: one Python set
of band keys per band, every row's keys added after it is decided, so every
difference from the index is a Bloom false positive (counted, bounded by the
index's rate), never a miss.
"""

from __future__ import annotations

import numpy as np
import pytest

from lshbloom_udf.config import DedupConfig
from lshbloom_udf.errors import ConfigError, IndexFullError
from lshbloom_udf.index import BLOOMS, IndexParams, LSHBloomIndex

KEY_RANGE = (1 << 61) - 1
BANDS = (10, 5)


def params(capacity: int, p_effective: float = 1e-3, growth: str = "fixed") -> IndexParams:
    return IndexParams.for_threshold(capacity, num_perm=50, bands=BANDS, p_effective=p_effective, growth=growth)


def any_earlier_reference(keys: np.ndarray, active: np.ndarray) -> np.ndarray:
    """The rule itself: row k is flagged when some band i has keys[j, i] == keys[k, i] for an active j < k."""
    seen = [set() for _ in range(keys.shape[1])]
    flags = np.zeros(len(keys), dtype=bool)
    for j, (row, act) in enumerate(zip(keys.tolist(), active.tolist())):
        if not act:
            continue
        flags[j] = any(k in s for k, s in zip(row, seen))
        for k, s in zip(row, seen):
            s.add(k)
    return flags


def chain_keys() -> np.ndarray:
    """A ~ B (band 0), B ~ C (band 1), A !~ C: the chain of docs/algorithm.md."""
    a = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    b = [1, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    c = [111, 20, 333, 444, 555, 666, 777, 888, 999, 1000]
    return np.array([a, b, c], dtype=np.uint64)


@pytest.mark.parametrize("bloom", BLOOMS)
def test_chain_keep_first_keeps_c_any_earlier_flags_it(tmp_path, bloom):
    flags = {}
    for rule in ("first", "all"):
        with LSHBloomIndex.create(str(tmp_path / f"{bloom}-{rule}"), params(100, 1e-9), bloom=bloom) as index:
            flags[rule] = index.decide(chain_keys(), None, rule).tolist()
            inserted = index.inserted
        assert inserted == (2 if rule == "first" else 3)
    assert flags["first"] == [False, True, False]  # B's keys never entered: C has no kept near-duplicate
    assert flags["all"] == [False, True, True]  # C shares a key with B, seen earlier


def planted_keys(rng, n: int, b: int) -> np.ndarray:
    """``n`` rows, a third of which share one or two band keys with a random earlier row (chains included)."""
    keys = rng.integers(0, KEY_RANGE, (n, b), dtype=np.uint64)
    for k in range(1, n):
        if rng.random() < 1 / 3:
            j = int(rng.integers(0, k))
            bands = rng.choice(b, size=int(rng.integers(1, 3)), replace=False)
            keys[k, bands] = keys[j, bands]
    return keys


@pytest.mark.parametrize("bloom", BLOOMS)
@pytest.mark.parametrize("growth", ["fixed", "grow"])
def test_any_earlier_equals_exact_reference(tmp_path, bloom, growth):
    """Chunks of 500 rows (with inactive rows) into one index; a growing one adds generations mid-chunk."""
    rng = np.random.default_rng(5)
    n, b = 6000, BANDS[0]
    keys = planted_keys(rng, n, b)
    active = rng.random(n) > 0.05
    p_eff = 1e-3
    capacity = 2 * n if growth == "fixed" else 700
    with LSHBloomIndex.create(str(tmp_path / "idx"), params(capacity, p_eff, growth), bloom=bloom) as index:
        flags = np.concatenate([index.decide(keys[s : s + 500], active[s : s + 500], "all")
                                for s in range(0, n, 500)])
        generations = len(index.generations)
        inserted = index.inserted
    exact = any_earlier_reference(keys, active)
    assert not (exact & ~flags).any(), "a Bloom filter missed a key it holds"
    assert not (flags & ~active).any()
    false_positives = int((flags & ~exact).sum())
    # Each distinct row is tested against filters within p_effective (all generations together): 5 sigma above.
    tested = int((~exact & active).sum())
    assert false_positives <= tested * p_eff + 5 * np.sqrt(tested * p_eff) + 1
    assert inserted == int(active.sum())  # every active row went in, duplicates too
    assert exact.sum() > n // 4
    if growth == "grow":
        assert generations >= 3


def test_any_earlier_counts_earlier_rows_of_the_same_batch(tmp_path):
    keys = np.array([[7] * 10, [7] + [8] * 9, [9] * 10], dtype=np.uint64)
    with LSHBloomIndex.create(str(tmp_path / "idx"), params(10, 1e-9), bloom="blocked") as index:
        assert index.test_insert(keys).tolist() == [False, True, False]
        assert index.test_insert(keys[2:]).tolist() == [True]


def test_any_earlier_fixed_index_full_raises(tmp_path):
    keys = np.arange(40, dtype=np.uint64).reshape(4, 10)
    with LSHBloomIndex.create(str(tmp_path / "idx"), params(3), bloom="blocked") as index:
        with pytest.raises(IndexFullError):
            index.test_insert(keys)


def test_the_rule_settings():
    # With verification (the default) the pass inserts every document unless insert is given; without, keep-first.
    assert DedupConfig().insert_rule == "all"
    assert DedupConfig().replace(insert="first").insert_rule == "first"
    assert DedupConfig().replace(verify=False).insert_rule == "first"
    assert DedupConfig().replace(verify=False, insert="all").insert_rule == "all"
    # The sharded pass implies any-earlier, and refuses an explicit keep-first.
    assert DedupConfig().replace(pass_mode="sharded").insert_rule == "all"
    assert DedupConfig().replace(**{"pass": "sharded", "insert": "all"}).insert_rule == "all"
    with pytest.raises(ConfigError, match="any-earlier only"):
        DedupConfig().replace(pass_mode="sharded", insert="first")
    with pytest.raises(ConfigError, match="insert must be one of"):
        DedupConfig().replace(insert="some")
    # A Hadoop filesystem URI is for the sharded index only.
    with pytest.raises(ConfigError, match="local path on the driver"):
        DedupConfig().replace(index_dir="hdfs://nn/idx")
    assert DedupConfig().replace(index_dir="hdfs://nn/idx", pass_mode="sharded").index_dir == "hdfs://nn/idx"
