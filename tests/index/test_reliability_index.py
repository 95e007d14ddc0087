"""The index's commit protocol on its own, with real SIGKILLs of small Python processes (no Spark, fast).

A process stages an index, inserts band keys and commits through
:class:`~lshbloom_udf.index.IndexTransaction`; the test-only fault switch kills
it before the journal, or after the journal's first rename, and then kills the
next process again *during its recovery*; or, for a growing index, just after
its run added a generation of filters. Whatever the sequence, the directory
ends up equal to the one an uninterrupted process made.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from lshbloom_udf import LSHBloomIndex
from lshbloom_udf.index import IndexRecoveryNeededError, IndexTransaction
from reliability_support import index_state
from spark_support import TESTS

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    sys.path.insert(0, sys.argv[3])
    import fault_injection
    fault_injection.install_from_env()
    from lshbloom_udf.index import IndexParams, IndexTransaction, RunRecord
    path, seed, growth, bloom, deltas = sys.argv[1], int(sys.argv[2]), sys.argv[4], sys.argv[5], sys.argv[6]
    # A growing index fills its first generation (250) during the second run. With deltas: a base of 4,000
    # documents, then a run of 200 that writes a delta (its count given), then one that folds it (no count).
    params = IndexParams.for_threshold(capacity=1000 if growth == "fixed" else 250, growth=growth)
    rows, documents = 200, None
    if deltas == "deltas":
        params = IndexParams.for_threshold(capacity=10000)
        rows, documents = (4000, None) if seed == 1 else (200, 200 if seed == 2 else None)
    with IndexTransaction(path) as txn:
        if seed < 0:
            sys.exit(0)  # only open (and recover)
        index = txn.stage(params, bloom=bloom, documents=documents)
        assert (txn.delta is not None) == (documents is not None and seed > 1)
        keys = np.random.default_rng(seed).integers(0, (1 << 61) - 1, (rows, params.b), dtype=np.uint64)
        keys[100:110] = keys[:10]  # ten duplicates
        dup = index.query_insert(keys)
        record = RunRecord(content_fingerprint=f"fp-{seed}", params={}, documents=rows,
                           duplicates=int(dup.sum()), inserted=int((~dup).sum()))
        txn.commit(record, np.flatnonzero(dup))
    """
)


def _run(path, seed, fault=None, log=None, growth="fixed", bloom="pybloomfiltermmap3", deltas="copies"):
    env = dict(os.environ)
    env.pop("LSHBLOOM_TEST_FAULT", None)
    if fault:
        env["LSHBLOOM_TEST_FAULT"] = f"{fault},fault-log={log}"
    return subprocess.run([sys.executable, "-c", SCRIPT, str(path), str(seed), TESTS, growth, bloom, deltas], env=env,
                          capture_output=True, text=True, start_new_session=True, timeout=120)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """Two uninterrupted runs (seeds 1 then 2) into one index."""
    path = tmp_path_factory.mktemp("clean") / "index"
    for seed in (1, 2):
        assert _run(path, seed).returncode == 0
    return index_state(path)


def _after_first_run(tmp_path):
    path = tmp_path / "index"
    assert _run(path, 1).returncode == 0
    return path, index_state(path)


def test_killed_before_the_journal_leaves_the_old_index_and_rerun_completes(tmp_path, clean):
    path, first = _after_first_run(tmp_path)
    log = tmp_path / "fault.log"
    killed = _run(path, 2, "kill-before-commit", log)
    assert killed.returncode == -9 and log.read_text().startswith("kill-before-commit")
    assert [n for n in os.listdir(path) if n.startswith(".staging-")]  # the dead run's staging copy
    assert {k: v for k, v in index_state(path).items() if v != "unexpected leftover"} == first
    with LSHBloomIndex.open(str(path), read_only=True) as ix:  # the live index is whole: readable as it was
        assert len(ix.manifest.runs) == 1
    assert _run(path, 2).returncode == 0
    assert index_state(path) == clean


def test_killed_mid_commit_then_again_during_recovery_ends_as_one_clean_commit(tmp_path, clean):
    path, _ = _after_first_run(tmp_path)
    log = tmp_path / "fault.log"
    assert _run(path, 2, "kill-mid-commit", log).returncode == -9
    assert os.path.exists(path / ".commit.json")
    with pytest.raises(IndexRecoveryNeededError, match="crashed while committing"):
        LSHBloomIndex.open(str(path), read_only=True)
    # The next opener rolls the journal forward, and is killed in the middle of that too.
    assert _run(path, -1, "kill-mid-commit", log).returncode == -9
    assert log.read_text().splitlines() == ["kill-mid-commit", "kill-mid-commit"]
    assert os.path.exists(path / ".commit.json")
    # A third one finishes it: exactly the index of the uninterrupted runs.
    with IndexTransaction(str(path)) as txn:
        assert txn.recovered["rolled_forward"] == "000002"
        assert [r.run_id for r in txn.runs()] == ["000001", "000002"]
        assert len(txn.load_duplicates(txn.runs()[1])) == 10
    assert index_state(path) == clean


@pytest.fixture(scope="module")
def clean_grown(tmp_path_factory):
    """Two uninterrupted runs into a growing index of each backend: the second adds a generation."""
    states = {}
    for bloom in ("pybloomfiltermmap3", "blocked"):
        path = tmp_path_factory.mktemp("grown") / "index"
        for seed in (1, 2):
            assert _run(path, seed, growth="grow", bloom=bloom).returncode == 0
        states[bloom] = index_state(path)
    return states


def _names(directory) -> list:
    """The names in ``directory`` (none once another test process removed it)."""
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []


@pytest.mark.parametrize("bloom", ["pybloomfiltermmap3", "blocked"])
def test_killed_during_a_generation_switch_then_rerun_gives_the_uninterrupted_index(tmp_path, clean_grown, bloom):
    path = tmp_path / "index"
    assert _run(path, 1, growth="grow", bloom=bloom).returncode == 0
    first = index_state(path)
    assert len(first["manifest.json"]["generations"]) == 1
    log = tmp_path / "fault.log"
    killed = _run(path, 2, "kill-generation-added", log, growth="grow", bloom=bloom)
    assert killed.returncode == -9 and log.read_text() == "kill-generation-added\n"
    # The new generation was being added to the dead run's working copy (its staging copy, or in memory while the
    # run writes it: index/workspace.py working_place); the live index is the first run's.
    staging = [n for n in os.listdir(path) if n.startswith(".staging-")]
    shm = "/dev/shm"
    working = [path / staging[0]] + [os.path.join(shm, n) for n in (os.listdir(shm) if os.path.isdir(shm) else [])
                                     if n.startswith("lshbloom-index-")]
    assert staging
    staged = _names(working[0])
    if any(n.startswith("band-") for n in staged):  # the run wrote its staging copy itself
        assert any(n.startswith("gen1-band-") for n in staged)
    else:  # in memory: unless another test process's litter sweep (litter.py) removed the dead run's copy first
        in_memory = [_names(w) for w in working[1:] if _names(w)]
        assert not in_memory or any(n.startswith("gen1-band-") for names in in_memory for n in names)
    assert {k: v for k, v in index_state(path).items() if v != "unexpected leftover"} == first
    assert _run(path, 2, growth="grow", bloom=bloom).returncode == 0
    assert index_state(path) == clean_grown[bloom]
    generations = clean_grown[bloom]["manifest.json"]["generations"]
    assert [g["capacity"] for g in generations] == [250, 500] and generations[0]["inserted"] == 250


def test_killed_mid_commit_of_a_new_generation_is_finished_by_the_next_writer(tmp_path, clean_grown):
    path = tmp_path / "index"
    assert _run(path, 1, growth="grow").returncode == 0
    log = tmp_path / "fault.log"
    assert _run(path, 2, "kill-mid-commit", log, growth="grow").returncode == -9
    assert os.path.exists(path / ".commit.json")
    assert _run(path, -1, growth="grow").returncode == 0  # the next opener rolls the journal forward
    assert index_state(path) == clean_grown["pybloomfiltermmap3"]


@pytest.fixture(scope="module")
def clean_deltas(tmp_path_factory):
    """A base, a run that writes a delta, a run that folds it: each state, uninterrupted."""
    path = tmp_path_factory.mktemp("deltas") / "index"
    states = []
    for seed in (1, 2, 3):
        done = _run(path, seed, bloom="cuckoo", deltas="deltas")
        assert done.returncode == 0, done.stderr
        states.append(index_state(path))
    return states


@pytest.mark.parametrize("seed", [2, 3], ids=["writing a delta", "folding it"])
def test_killed_mid_commit_of_a_delta_or_its_fold_then_in_recovery_ends_as_the_clean_runs(tmp_path, clean_deltas,
                                                                                           seed):
    path, log = tmp_path / "index", tmp_path / "fault.log"
    for before in range(1, seed):
        assert _run(path, before, bloom="cuckoo", deltas="deltas").returncode == 0
    live_base = {n: (path / n).read_bytes() for n in os.listdir(path) if n.startswith("band-")}
    assert _run(path, seed, "kill-mid-commit", log, bloom="cuckoo", deltas="deltas").returncode == -9
    if seed == 2:  # a delta run never writes the live base's files
        assert {n: (path / n).read_bytes() for n in live_base} == live_base
    assert _run(path, -1, "kill-mid-commit", log, bloom="cuckoo", deltas="deltas").returncode == -9
    assert _run(path, -1, bloom="cuckoo", deltas="deltas").returncode == 0  # finishes the commit, sweeps
    state = index_state(path)
    assert state == clean_deltas[seed - 1]
    assert any(n.endswith(".keys.u64") for n in state) == (seed == 2)  # the fold left no delta behind
