"""What ``lshbloom plan`` advises: which pass to run, and how long either pass should take.

The times come from per-key costs measured on one machine, kept as data in
``lshbloom_udf/measured/<machine>.json`` (:func:`measured_costs`): the keys
stage per document and core, the sharded pass's decision per band key and
core, and the driver pass's decision per band key (one process, so no core
count). The driver pass overlaps the keys stage (executors compute keys while
the driver decides), so it takes the longer of the two; the sharded pass
computes the keys, then decides on every core.

The pass: the driver pass while the index fits the driver's memory with a
quarter to spare (its filters are memory-mapped and touched at random: an
index on disk only makes every key a disk read), the sharded pass otherwise.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache

MEASURED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "measured")
MEASURED_ON = "epyc-2vcpu-local2"
# The index plus a quarter must fit the driver's memory for the driver pass to be advised.
DRIVER_HEADROOM = 1.25


@lru_cache(maxsize=None)
def measured_costs(machine: str = MEASURED_ON) -> dict:
    """The per-key costs measured on ``machine`` (``lshbloom_udf/measured/<machine>.json``), with its name."""
    with open(os.path.join(MEASURED_DIR, machine + ".json"), encoding="utf-8") as f:
        costs = json.load(f)
    return {**costs, "file": f"lshbloom_udf/measured/{machine}.json"}


def driver_seconds(docs: int, b: int, bloom: str, cores: int, costs: dict) -> float:
    """The driver pass: the longer of the keys stage on ``cores`` executor cores and the driver's decisions."""
    keys = docs * costs["keys_ns_per_doc_core"] / cores
    decide = docs * b * costs["driver_ns_per_key"][bloom]
    return max(keys, decide) / 1e9


def sharded_seconds(docs: int, b: int, cores: int, costs: dict) -> float:
    """The sharded pass: keys, then decisions, both on every core."""
    return docs * (costs["keys_ns_per_doc_core"] + b * costs["decide_ns_per_key_core"]) / cores / 1e9


def advise(sized, driver_memory: int, executors: int, executor_cores: int, costs: dict | None = None) -> dict:
    """The recommended pass for ``sized`` (a :class:`~lshbloom_udf.sizing.Plan`), why, and both passes' times."""
    costs = costs or measured_costs()
    cores = executors * executor_cores
    fits = sized.index_bytes * DRIVER_HEADROOM <= driver_memory
    times = {"driver": driver_seconds(sized.docs, sized.b, sized.bloom, cores, costs),
             "sharded": sharded_seconds(sized.docs, sized.b, cores, costs)}
    if fits:
        why = "the index fits the driver's memory: one ordered pass, keep-first, nothing shuffled"
        if times["sharded"] < times["driver"]:
            why += "; the sharded pass would be faster on these cores, but decides any-earlier (--pass sharded)"
    else:
        why = ("the index does not fit the driver's memory with a quarter to spare: shard it over the executors "
               "(any-earlier; size them with --pass sharded)")
    return {
        "recommended_pass": "driver" if fits else "sharded",
        "why": why,
        "driver_memory": driver_memory,
        "expected_seconds": times,
        "cores": cores,
        "costs": costs,
    }


def advice_text(a: dict) -> str:
    from lshbloom_udf.index.fs import human_bytes

    t, c = a["expected_seconds"], a["costs"]
    return "\n".join([
        f"recommended pass         {a['recommended_pass']}",
        f"  = {a['why']} (driver memory {human_bytes(a['driver_memory'])}, --driver-memory)",
        f"expected time, driver    {_duration(t['driver'])}",
        f"  = keys on {a['cores']} executor cores overlapped with the driver's decisions "
        f"({', '.join(f'{ns:.0f} ns/key {bloom}' for bloom, ns in c['driver_ns_per_key'].items())}); "
        "an index on disk, not in memory, is far slower",
        f"expected time, sharded   {_duration(t['sharded'])}",
        f"  = keys, then decisions, on {a['cores']} cores ({c['keys_ns_per_doc_core'] / 1e3:,.0f} us/doc, "
        f"{c['decide_ns_per_key_core']:,.0f} ns/key per core)",
        f"  times from costs measured on {c['machine']} ({c['file']}): lower bounds elsewhere "
        "(a network shuffle, a colder cache); --executors/--executor-cores set the cores",
    ])


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:,.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:,.0f} min"
    return f"{seconds / 3600:,.1f} h"
