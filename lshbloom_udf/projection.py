"""What a whole run of ``N`` documents needs on a cluster: cores, memory, disk and hours (``lshbloom plan``).

The hours come from one job measured end to end (``lshbloom_udf/measured/<machine>.json``, its ``job``
entry: the default job with ``--pass sharded`` on ``d0`` documents of ``t0`` UTF-8 bytes on ``c0`` cores,
each stage's wall seconds). A stage's cost per document and core, ``w = seconds · c0 / d0``, is scaled to
the planned run by what the stage's work grows with:

- the text (pin, exact copies, keys, records, write): ``w · t / t0`` per document;
- the band keys (the sharded decisions, ``decide_ns_per_key_core`` per key): ``b`` per document;
- the flagged documents (verification): ``w · (f / f0) · (t / t0)`` per document, ``f`` the share the
  pass flags (candidates per flagged document are bounded: docs/algorithm.md §8).

A stage then takes ``docs · w' / cores`` seconds. Spark's fixed cost per stage (seconds, whatever the
documents) and a real network's shuffle are not in it: the figures are a lower bound, as the measured
machine's loopback shuffle is (rerun ``benchmarks/sharded.py`` on the target's executors before a
production run).

Disk: each executor's local disk holds its share of the pinned rows (``t + 32`` bytes a document when they
spill), of the shuffle (``16 b`` bytes a document: a row id and a key per band) and of the keys the pass
persists for verification (``8 b + 9``); the index and, for a kept index, the records go to the
``--index-dir`` filesystem. Memory: a task's Python holds one shard filter twice (:func:`sizing.sharded_plan`);
the driver's Python the flagged documents' row ids and verification's arrays
(:data:`~lshbloom_udf.memory.BYTES_PER_FLAGGED`). Verification's Bloom filter of the flagged documents' pairs
(``1.5 b`` bytes each) and their row ids (8) are broadcast while one collect of the driver holds them; past it
the row ids are joined as a frame and every kept pair goes through the join (a shuffle like the pass's:
:mod:`lshbloom_udf.spark.verify.spark_source`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from lshbloom_udf.index.fs import human_bytes
from lshbloom_udf.memory import BYTES_PER_FLAGGED, PAIR_FILTER_BITS, PYTHON_FLOOR

# What a kept pinned row costs on disk besides its text (row id, Spark's row header).
PINNED_ROW_OVERHEAD = 32
# Stages whose work is each document's text; every stage, in the order a run makes them.
TEXT_STAGES = ("pin", "exact_copies", "keys", "records", "write")
ORDER = ("pin", "exact_copies", "keys", "decisions", "verify", "records", "write")


@dataclass(frozen=True)
class ClusterProjection:
    """A run of ``docs`` documents on ``executors`` x ``executor_cores`` cores: seconds per stage, bytes."""

    docs: int
    executors: int
    executor_cores: int
    stage_seconds: dict
    executor_disk_bytes: int
    index_dir_bytes: int
    driver_python_bytes: int
    task_python_bytes: int
    verify_broadcast_bytes: int
    measured: str

    @property
    def cores(self) -> int:
        return self.executors * self.executor_cores

    @property
    def seconds(self) -> float:
        return sum(self.stage_seconds.values())

    def to_dict(self) -> dict:
        return {**asdict(self), "cores": self.cores, "seconds": self.seconds}


def stage_core_ns(job: dict, text_bytes: float, b: int, flagged_share: float, decide_ns_per_key: float) -> dict:
    """Each stage's nanoseconds of one core per document of the planned run, from the measured ``job``.

    The measured sharded pass computes the keys inside its decision stage: its keys are that stage less its
    ``b`` decisions at ``decide_ns_per_key`` (the per-key cost measured on the same machine)."""
    per_doc = {stage: s * job["cores"] / job["documents"] * 1e9 for stage, s in job["stage_seconds"].items()}
    per_doc["keys"] = max(0.0, per_doc.pop("sharded_pass") - job["b"] * decide_ns_per_key)
    text = text_bytes / job["text_bytes"]
    out = {stage: per_doc[stage] * text for stage in TEXT_STAGES if stage in per_doc}
    out["decisions"] = b * decide_ns_per_key
    out["verify"] = per_doc.get("verify", 0.0) * text * flagged_share / job["flagged_share"]
    return out


def project(docs: int, b: int, index_bytes: int, records_bytes: int, executors: int, executor_cores: int,
            text_bytes: float, flagged_share: float, task_python_bytes: int, costs: dict) -> ClusterProjection:
    """The run's stages, disk and memory on ``executors`` x ``executor_cores`` cores (see the module's docs)."""
    if min(executors, executor_cores) < 1:
        raise ValueError("executors and executor cores must be >= 1")
    cores = executors * executor_cores
    ns = stage_core_ns(costs["job"], text_bytes, b, flagged_share, costs["decide_ns_per_key_core"])
    local = docs * ((text_bytes + PINNED_ROW_OVERHEAD) + 16 * b + (8 * b + 9))
    flagged = docs * flagged_share
    return ClusterProjection(
        docs=docs, executors=executors, executor_cores=executor_cores,
        stage_seconds={stage: docs * ns[stage] / cores / 1e9 for stage in ORDER if stage in ns},
        executor_disk_bytes=math.ceil(local / executors), index_dir_bytes=index_bytes + records_bytes,
        driver_python_bytes=int(PYTHON_FLOOR + flagged * (8 + BYTES_PER_FLAGGED)),
        task_python_bytes=task_python_bytes, verify_broadcast_bytes=int(flagged * (8 + PAIR_FILTER_BITS / 8 * b)),
        measured=costs["file"])


def executors_for(hours: float, fits, executor_cores: int, limit: int = 1 << 16) -> int:
    """The fewest executors (of ``executor_cores``) whose projection ``fits(executors)`` finishes in ``hours``."""
    if hours <= 0:
        raise ValueError(f"--hours must be > 0, got {hours}")
    n = 1
    while n < limit and fits(n).seconds > hours * 3600:
        n *= 2
    lo, hi = n // 2 + 1 if n > 1 else 1, n
    while lo < hi:  # the fewest between the last power of two too slow and the first fast enough
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid).seconds <= hours * 3600 else (mid + 1, hi)
    return lo


def projection_text(p: ClusterProjection, chosen_for: float | None, executor_memory: int, driver_memory: int) -> str:
    how = (f"the fewest to finish within {chosen_for:g} h (--hours; --executors sets them)" if chosen_for
           else "--executors x --executor-cores")
    stages = ", ".join(f"{stage} {seconds / 3600:,.2f}" for stage, seconds in p.stage_seconds.items())
    python = p.task_python_bytes * p.executor_cores
    return "\n".join([
        f"cluster                  {p.executors:,} executors x {p.executor_cores} cores = {p.cores:,} cores: {how}",
        f"  whole job              {p.seconds / 3600:,.2f} h ({stages} h), Spark's per-stage start-up and the "
        "network not counted: a lower bound",
        f"  executor disk          {human_bytes(p.executor_disk_bytes)} each (local: its share of the pinned rows, "
        "the shuffle, the persisted keys)",
        f"  executor memory        Python {human_bytes(python)} each for the shards{_over(python, executor_memory)}",
        f"  verification's filter  {human_bytes(p.verify_broadcast_bytes)} (the flagged row ids and their pairs' "
        "filter): broadcast while one collect of the driver holds it, else a shuffle join of every kept pair",
        f"  driver Python          {human_bytes(p.driver_python_bytes)} with the sharded pass (the flagged "
        "documents' row ids and verification's arrays)"
        + _over(p.driver_python_bytes, driver_memory, "--driver-memory"),
        f"  --index-dir            {human_bytes(p.index_dir_bytes)} (the index, and a kept index's records)",
        f"  costs                  {p.measured} (job)",
    ])


def _over(need: int, have: int, flag: str = "--executor-memory") -> str:
    return f" (MORE than {flag} {human_bytes(have)})" if need > have else ""
