"""An index that grows (``growth="grow"``): generations of filters, a bounded false-positive rate, exact decisions.

Real files, real transactions, no mocks. The reference is exact: one Python
set of band keys per band, deciding keep-first in lockstep with the index —
it sees the same inserts, so every difference is a Bloom false positive, and
is counted; a Bloom filter never misses a key it holds.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from datasketch import MinHashLSHBloom

from lshbloom_udf import _native, text_band_keys
from lshbloom_udf.config import DedupConfig
from lshbloom_udf.errors import IndexFullError, IndexMismatchError
from lshbloom_udf.index import BLOOMS, IndexParams, IndexTransaction, LSHBloomIndex, RunRecord, backend
from lshbloom_udf.index.params import effective_p
from lshbloom_udf.sample import build_sample
from lshbloom_udf.sizing import plan
from reliability_support import index_state
from test_core_index import datasketch_minhashes

KEY_RANGE = (1 << 61) - 1
CAPACITY = 2000
P_EFF = 0.01
RUNS = 5
# (b, r): few bands keep the 10^6-probe measurement quick; the rate is what it is for any b.
BANDS = (10, 5)


def grow_params(**kw):
    kw = {"capacity": CAPACITY, "p_effective": P_EFF, "growth": "grow", **kw}
    return IndexParams.for_threshold(num_perm=256, bands=BANDS, **kw)


class ExactReference:
    """Per-band sets of the keys the index holds, deciding each row as keep-first would without Bloom errors."""

    def __init__(self, b: int):
        self.sets = [set() for _ in range(b)]
        self.false_positives = 0
        self.inserted = 0

    def follow(self, keys: np.ndarray, flags: np.ndarray) -> None:
        for row, flagged in zip(keys.tolist(), flags.tolist()):
            exact = any(k in s for k, s in zip(row, self.sets))
            assert flagged or not exact, "a Bloom filter missed a key it holds"
            self.false_positives += flagged and not exact
            if not flagged:
                for k, s in zip(row, self.sets):
                    s.add(k)
                self.inserted += 1


def run_keys(rng, new: int, earlier: list, b: int) -> np.ndarray:
    """``new`` fresh rows plus one planted duplicate per four: a row sharing one band key with an earlier row."""
    rows = rng.integers(0, KEY_RANGE, (new + new // 4, b), dtype=np.uint64)
    pool = np.concatenate(earlier + [rows[:new]])
    for j in range(new, len(rows)):
        source = pool[rng.integers(0, len(pool))]
        band = rng.integers(0, b)
        rows[j, band] = source[band]
    order = rng.permutation(len(rows))
    # Planted rows may come before their source in this run: then they are new, and the source their duplicate.
    return rows[order]


def ingest(path, keys, params, bloom, run_no):
    with IndexTransaction(path) as txn:
        index = txn.stage(params, sizing_given=False, bloom=bloom)
        flags = index.query_insert(keys)
        record = RunRecord(content_fingerprint=f"run-{run_no}", params={}, documents=len(keys),
                           duplicates=int(flags.sum()), inserted=int((~flags).sum()))
        txn.commit(record, np.flatnonzero(flags))
    return flags


@pytest.mark.slow
@pytest.mark.parametrize("bloom", BLOOMS)
def test_five_runs_of_twice_the_capacity_stay_exact_and_within_p_effective(tmp_path, bloom):
    path = str(tmp_path / "index")
    params = grow_params()
    rng = np.random.default_rng(11)
    reference = ExactReference(params.b)
    earlier: list = []
    documents = 0
    for run_no in range(RUNS):
        keys = run_keys(rng, 2 * CAPACITY, earlier, params.b)
        flags = ingest(path, keys, params, bloom, run_no)
        reference.follow(keys, flags)
        earlier.append(keys)
        documents += len(keys)
        assert 0.15 < flags.mean() < 0.25  # the planted duplicates are found

    with LSHBloomIndex.open(path, read_only=True, bloom=bloom) as index:
        assert index.inserted == reference.inserted
        gens = index.generations
        assert [g["capacity"] for g in gens] == [CAPACITY * 2**g for g in range(len(gens))]
        assert all(g["inserted"] == g["capacity"] for g in gens[:-1]) and gens[-1]["inserted"] <= gens[-1]["capacity"]
        assert sum(g["inserted"] for g in gens) == reference.inserted
        assert len(gens) == 4  # 2,000 + 4,000 + 8,000 hold 14,000; the ~20,000 inserted need a fourth
        # Every document inserted is found again, whatever its generation.
        assert index.query(np.concatenate(earlier)).all()
        # 10^6 fresh random keys: the measured rate is within p_effective, as the stats expect.
        rng_probe = np.random.default_rng(12)
        hits = sum(int(index.query(rng_probe.integers(0, KEY_RANGE, (100_000, params.b), dtype=np.uint64)).sum())
                   for _ in range(10))
        measured = hits / 1_000_000
        expected = index.stats()["expected_false_positive"]
    assert measured <= P_EFF, measured
    assert expected <= P_EFF and 0.8 * expected <= measured <= 1.2 * expected, (measured, expected)
    # The decisions' own Bloom false positives, counted against the exact reference, are within the promise too.
    assert reference.false_positives <= P_EFF * documents, reference.false_positives
    manifest = json.loads((tmp_path / "index" / "manifest.json").read_text())
    assert manifest["format_version"] == 2 and manifest["params"]["growth"] == "grow"
    assert [r["run_id"] for r in manifest["runs"]] == [f"{i:06d}" for i in range(1, RUNS + 1)]
    assert manifest["inserted"] == reference.inserted == manifest["runs"][-1]["inserted_total"]
    kind = backend(bloom)
    assert os.path.isfile(tmp_path / "index" / kind.file_name(0, 3))


@pytest.mark.parametrize("rule", ["query_insert", "test_insert"])
def test_the_defaults_new_index_grows_across_runs_under_both_rules(tmp_path, rule):
    """The index a run with the defaults creates (its backend and sizing: cuckoo filters have a hard capacity),
    overfilled over runs of three times its capacity: it adds generations, never fails, finds all it holds."""
    config = DedupConfig()
    params = config.index_params(capacity=300)
    path = str(tmp_path / "index")
    rng = np.random.default_rng(3)
    earlier: list = []
    for run_no in range(4):
        keys = run_keys(rng, 3 * params.capacity, earlier, params.b)
        with IndexTransaction(path) as txn:
            index = txn.stage(params, sizing_given=False, bloom=config.new_index_bloom)
            flags = getattr(index, rule)(keys)
            txn.commit(RunRecord(content_fingerprint=f"run-{run_no}", params={}, documents=len(keys),
                                 duplicates=int(flags.sum()), inserted=int((~flags).sum())), np.flatnonzero(flags))
        earlier.append(keys)
    with LSHBloomIndex.open(path, read_only=True, bloom=config.new_index_bloom) as index:
        assert index.bloom == config.new_index_bloom
        gens = index.generations
        assert len(gens) >= 4 and all(g["inserted"] <= g["capacity"] for g in gens)
        assert index.query(np.concatenate(earlier)).all()


@pytest.mark.parametrize("bloom", ["blocked", "cuckoo"])  # the backends whose manifest records a geometry
def test_a_generations_recorded_geometry_is_kept_when_the_sizing_rule_changes(tmp_path, bloom):
    """The manifest keeps the geometry a generation's files were made with: an index made under an earlier sizing
    rule (cuckoo's changed: 32-bit lanes, 90 % load) does not take today's figures for its old generations."""
    path, params = str(tmp_path / "index"), grow_params()
    rng = np.random.default_rng(5)
    ingest(path, run_keys(rng, CAPACITY // 2, [], params.b), params, bloom, 0)
    manifest_path = tmp_path / "index" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    today = dict(manifest["generations"][0])
    made_earlier = {k: (v + 1 if isinstance(v, int) else v) for k, v in today.items()
                    if k not in ("capacity", "p_band", "inserted")}  # what an earlier rule recorded
    manifest["generations"][0].update(made_earlier)
    manifest_path.write_text(json.dumps(manifest))
    ingest(path, run_keys(rng, 2 * CAPACITY, [], params.b), params, bloom, 1)  # fills gen 0, adds gen 1
    gens = json.loads(manifest_path.read_text())["generations"]
    assert len(gens) >= 2 and gens[0]["inserted"] == CAPACITY
    assert {k: gens[0][k] for k in made_earlier} == made_earlier  # kept, not recomputed
    fresh = backend(bloom).manifest_fields(gens[1]["capacity"], gens[1]["p_band"])
    assert {k: gens[1][k] for k in fresh} == fresh  # a new generation is sized by today's rule
    # The expected false-positive figure reads each generation's recorded geometry, not today's sizing of it.
    def fp(gen, recorded):
        rate = backend(bloom).band_false_positive(gen["inserted"], gen["capacity"], gen["p_band"], recorded)
        return effective_p(rate, params.b)
    as_recorded = 1 - (1 - fp(gens[0], made_earlier)) * (1 - fp(gens[1], fresh))
    as_sized_today = 1 - (1 - fp(gens[0], None)) * (1 - fp(gens[1], None))
    assert as_recorded != as_sized_today
    with LSHBloomIndex.open(path, read_only=True, bloom=bloom) as index:
        assert index.stats()["expected_false_positive"] == pytest.approx(as_recorded, rel=1e-12)


@pytest.mark.filterwarnings("ignore::lshbloom_udf.errors.CapacityWarning")
@pytest.mark.parametrize("bloom", BLOOMS)
def test_fixed_growth_still_fails_at_capacity_and_keeps_the_index(tmp_path, bloom):
    path = str(tmp_path / "index")
    params = grow_params(growth="fixed")
    rng = np.random.default_rng(5)
    ingest(path, rng.integers(0, KEY_RANGE, (CAPACITY - 10, params.b), dtype=np.uint64), params, bloom, 0)
    before = index_state(path)
    with pytest.raises(IndexFullError, match=f"exceed the capacity of {CAPACITY:,}"):
        ingest(path, rng.integers(0, KEY_RANGE, (100, params.b), dtype=np.uint64), params, bloom, 1)
    assert index_state(path) == before
    manifest = json.loads((tmp_path / "index" / "manifest.json").read_text())
    assert manifest["format_version"] == 1 and "growth" not in manifest["params"] and "generations" not in manifest


def test_growth_is_recorded_and_checked_like_the_other_sizing_fields(tmp_path):
    path = str(tmp_path / "index")
    LSHBloomIndex.create(path, grow_params()).close()
    with pytest.raises(IndexMismatchError, match="growth: index has 'grow', asked for 'fixed'"):
        LSHBloomIndex.open_or_create(path, grow_params(growth="fixed"))
    with pytest.raises(IndexMismatchError, match="growth"):
        LSHBloomIndex.open_or_create(path, grow_params(growth="fixed", capacity=5), sizing_given={"growth"})
    with LSHBloomIndex.open_or_create(path, grow_params(growth="fixed", capacity=5), sizing_given=False) as index:
        assert index.params.growth == "grow" and index.params.capacity == CAPACITY
    with pytest.raises(ValueError, match="growth must be one of"):
        grow_params(growth="sometimes")


def test_datasketch_reads_generation_0_of_a_grown_sum_keyed_index(tmp_path):
    docs = [d["text"] for d in build_sample(num_docs=700, duplicate_fraction=0.3, seed=8)]
    params = IndexParams.for_threshold(capacity=200, threshold=0.5, num_perm=256, growth="grow")
    keys, has = text_band_keys(docs, **params.signature_kwargs())
    path = str(tmp_path / "index")
    with LSHBloomIndex.create(path, params) as index:
        flags = index.query_insert(keys, active=has)
        assert len(index.generations) >= 2
    kind = backend("pybloomfiltermmap3")
    with _native.BandFilters([os.path.join(path, kind.file_name(i)) for i in range(params.b)]) as gen0:
        ours = gen0.query(keys)
    lsh = MinHashLSHBloom(threshold=0.5, num_perm=256, n=200, fp=params.p_band, save_dir=path, params=(params.b, params.r))
    theirs = [lsh.query(m) for m in datasketch_minhashes(docs)]
    assert ours[has].tolist() == [t for t, h in zip(theirs, has) if h]
    # The first 200 new documents are in generation 0 and datasketch finds them; later ones it may not.
    first = np.flatnonzero(has & ~flags)[:200]
    assert ours[first].all()
    assert not ours[np.flatnonzero(has & ~flags)[200:]].all()


@pytest.mark.parametrize("bloom", BLOOMS)
def test_plan_gives_the_bytes_of_a_grown_index(tmp_path, bloom):
    params = grow_params(capacity=1000)
    sized = plan(1000, threshold=0.5, num_perm=256, p_effective=P_EFF, bands=BANDS, bloom=bloom, growth="grow", generations=3)
    with LSHBloomIndex.create(str(tmp_path / "ix"), params, bloom=bloom) as index:
        assert index.stats()["bytes_on_disk"] == sized.index_bytes == sized.growth_table[0]["bytes"]
        index.insert(np.random.default_rng(3).integers(0, KEY_RANGE, (5000, params.b), dtype=np.uint64))
        stats = index.stats()
    assert stats["generations"] == 3 and stats["capacity_now"] == sized.growth_table[2]["total_capacity"] == 7000
    assert stats["bytes_on_disk"] == sized.growth_table[2]["total_bytes"]
    rates = [row["p_effective"] for row in sized.growth_table]
    assert rates == pytest.approx([P_EFF / 2, P_EFF / 4, P_EFF / 8]) and sum(rates) < P_EFF
    # The up-front price: generation 0 is sized for p_effective / 2.
    fixed = plan(1000, threshold=0.5, num_perm=256, p_effective=P_EFF, bands=BANDS, bloom=bloom)
    assert sized.index_bytes > fixed.index_bytes == sized.growth_table[0]["fixed_bytes"]
    assert "growth                   grow" in sized.to_text() and "fixed" in fixed.to_text()
