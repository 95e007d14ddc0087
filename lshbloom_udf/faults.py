"""Test-only fault injection (never set these in production).

The reliability tests (``tests/test_reliability_*.py``) prove crash consistency
and tolerance of Spark task failures by injecting real faults into real runs.
They switch them on with the environment variable ``LSHBLOOM_TEST_FAULT``, a
comma-separated list of ``name`` or ``name=value`` items:

``kill-in-keys``
    SIGKILL the job's process group from inside the keys stage (the executor
    task of partition 1, while it computes band keys).
``kill-after-keys``
    SIGKILL it once the keys stage is checkpointed.
``kill-in-driver-pass=N``
    SIGKILL it in the driver pass, once at least ``N`` documents were decided
    (and inserted into the staging copy of the index).
``kill-in-output-write``
    SIGKILL it while Spark writes the output (as soon as the temporary output
    directory appears).
``kill-before-commit``
    SIGKILL it after the output is fully written to its temporary path, before
    the commit journal.
``kill-mid-commit``
    SIGKILL it after the commit journal is written and the first rename (the
    output) is done, before the index files are switched.
``kill-after-commit``
    SIGKILL it after the commit, before the summary is written.
``fail-task-first-attempt``
    Every Spark task of the keys and packing stages raises on its first attempt
    (run with ``spark.task.maxFailures`` > 1, e.g. master ``local[2,4]``).
``slow-task-first-attempt=SECONDS``
    The first attempt of partition 0's keys task sleeps ``SECONDS`` first (to
    make speculative execution launch a copy).
``fault-log=FILE``
    Before a SIGKILL, append its reason to ``FILE`` (the driver's stderr goes
    through the JVM, which dies with it before it forwards the last lines).
``attempt-log=DIR``
    Each keys task touches ``DIR/p<partition>-a<attempt>`` (so a test can see
    retries and speculative copies happened).

SIGKILL goes to the whole session's process group and the caller's own group
(``os.killpg``): run the job in its own session (``start_new_session=True``)
so that only it dies, JVM, driver and Python workers together, as when a
machine loses power.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Optional

ENV = "LSHBLOOM_TEST_FAULT"


def active(environ=None) -> dict:
    """The fault switches set in the environment: ``{name: value or None}``."""
    text = (environ if environ is not None else os.environ).get(ENV, "")
    out: dict = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, value = item.partition("=")
        out[name.strip()] = value.strip() if value else None
    return out


def value(name: str) -> Optional[str]:
    return active().get(name)


def enabled(name: str) -> bool:
    return name in active()


def kill_now(reason: str, log: Optional[str] = None) -> None:
    print(f"lshbloom: test fault: SIGKILL ({reason})", file=sys.stderr, flush=True)
    log = log or value("fault-log")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(reason + "\n")
            f.flush()
            os.fsync(f.fileno())
    # The session's group (spark-submit and its JVM, started as a session leader), then
    # our own group (PySpark's daemon puts its Python workers in a group of their own).
    for group in (os.getsid(0), os.getpgrp()):
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
    os.kill(os.getpid(), signal.SIGKILL)


def kill_point(name: str) -> None:
    """SIGKILL the process group here if the switch ``name`` is on."""
    if name in active():
        kill_now(name)


class TaskFaults:
    """Executor-side switches, read on the driver and shipped inside the task closure."""

    def __init__(self, switches: Optional[dict] = None):
        switches = active() if switches is None else switches
        self.fail_first = "fail-task-first-attempt" in switches
        slow = switches.get("slow-task-first-attempt")
        self.slow_first = float(slow) if slow else 0.0
        self.attempt_log = switches.get("attempt-log")
        self.kill_in_keys = "kill-in-keys" in switches
        self.fault_log = switches.get("fault-log")

    def __bool__(self) -> bool:
        return bool(self.fail_first or self.slow_first or self.attempt_log or self.kill_in_keys)

    def on_task_start(self, stage: str) -> None:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            return
        attempt, partition = ctx.attemptNumber(), ctx.partitionId()
        if self.attempt_log and stage == "keys":
            os.makedirs(self.attempt_log, exist_ok=True)
            with open(os.path.join(self.attempt_log, f"p{partition}-a{attempt}"), "w"):
                pass
        if self.kill_in_keys and stage == "keys" and partition == 1:
            kill_now(f"kill-in-keys (task of partition {partition})", self.fault_log)
        if self.slow_first and stage == "keys" and attempt == 0 and partition == 0:
            import time

            time.sleep(self.slow_first)
        if self.fail_first and attempt == 0:
            raise RuntimeError(f"lshbloom test fault: {stage} task of partition {partition} fails on its first attempt")
