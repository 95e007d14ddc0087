"""Real faults at named moments of real runs, for the reliability tests (never part of the product).

The product only offers no-op hook points (:mod:`lshbloom_udf.hooks`); this
module installs the hooks that SIGKILL, fail or slow a run there. A process
started by a test (``spark-submit tests/fault_job.py``, or a small Python
script) calls :func:`install_from_env`, which reads the comma-separated
switches of ``LSHBLOOM_TEST_FAULT`` (``name`` or ``name=value``):

``kill-in-keys``
    SIGKILL the job's process group from inside the keys stage (the executor
    task of partition 1, while it computes band keys).
``kill-in-shards``
    SIGKILL it from inside the sharded pass (the executor task of partition 1
    of the shard stage, as it starts deciding its shards).
``kill-after-pin``
    SIGKILL it once the input is pinned (before any key reaches the index).
``kill-in-driver-pass=N``
    SIGKILL it in the driver pass, once at least ``N`` documents were decided.
``kill-in-paragraph-pass``
    SIGKILL it in the paragraph stage, once it decided its first documents' paragraphs.
``kill-in-output-write``
    SIGKILL it while Spark writes the output (as soon as the temporary output
    directory appears).
``kill-after-records``
    SIGKILL it once a kept index's run wrote its records, before the commit.
``kill-before-commit`` / ``kill-mid-commit`` / ``kill-after-commit``
    SIGKILL it at the commit's moments (:mod:`lshbloom_udf.hooks`).
``kill-in-stream-batch=N:POINT``
    SIGKILL a stream's job at the commit point ``POINT`` (``before-commit``
    or ``mid-commit``) of its micro-batch ``N`` only.
``remove-in-stream-batch=N:PATH``
    Remove the file ``PATH`` when a stream's micro-batch ``N`` starts (after
    Spark planned it, before it reads its rows): a landing file removed from
    under the stream.
``kill-generation-added``
    SIGKILL it as soon as a growing index added a generation of filters.
``fail-task-first-attempt``
    Every Spark task computing band keys raises on its first attempt (run with
    ``spark.task.maxFailures`` > 1, e.g. master ``local[2,4]``).
``fail-task-after-send``
    Every such task raises on its first attempt after it sent its first chunk
    of keys to the driver (the retry sends the partition again).
``slow-task-first-attempt=SECONDS``
    The first attempt of partition 0's keys task sleeps ``SECONDS`` first (to
    make speculative execution launch a copy).
``internal-error-after-pin=KIND``
    Raise a builtin ``ValueError`` (``KIND`` = ``value``) or ``OSError``
    (``os``) once the input is pinned: an internal bug, not a usage error.
``fault-log=FILE``
    Before a SIGKILL, append its reason to ``FILE`` (the driver's stderr goes
    through the JVM, which dies with it before it forwards the last lines).
``attempt-log=DIR``
    Each keys task touches ``DIR/p<partition>-a<attempt>`` (so a test can see
    retries and speculative copies happened).
``keys-log=FILE``
    Each keys task appends ``<partition> <attempt>`` to ``FILE`` (so a test
    can count how often the run keyed its documents).

SIGKILL goes to the whole session's process group and the caller's own group
(``os.killpg``): run the job in its own session (``start_new_session=True``)
so that only it dies, JVM, driver and Python workers together, as when a
machine loses power.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Optional

from lshbloom_udf import hooks

ENV = "LSHBLOOM_TEST_FAULT"

# switch -> the hook point whose every firing kills the run
KILL_POINTS = {
    "kill-after-pin": "after-pin",
    "kill-after-records": "after-records",
    "kill-before-commit": "before-commit",
    "kill-mid-commit": "mid-commit",
    "kill-after-commit": "after-commit",
    "kill-generation-added": "generation-added",
}


def switches(environ=None) -> dict:
    """The fault switches set in the environment: ``{name: value or None}``."""
    text = (environ if environ is not None else os.environ).get(ENV, "")
    out: dict = {}
    for item in text.split(","):
        item = item.strip()
        if item:
            name, _, value = item.partition("=")
            out[name.strip()] = value.strip() if value else None
    return out


def kill_now(reason: str, log: Optional[str] = None) -> None:
    print(f"lshbloom: test fault: SIGKILL ({reason})", file=sys.stderr, flush=True)
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


class TaskFaults:
    """The ``task-start`` hook: shipped to the executors with the task (plain data, picklable)."""

    def __init__(self, on: dict):
        self.fail_first = "fail-task-first-attempt" in on
        self.fail_after_send = "fail-task-after-send" in on
        self.slow_first = float(on.get("slow-task-first-attempt") or 0.0)
        self.attempt_log = on.get("attempt-log")
        self.kill_in_keys = "kill-in-keys" in on
        self.kill_in_shards = "kill-in-shards" in on
        self.fault_log = on.get("fault-log")
        self.keys_log = on.get("keys-log")

    def __bool__(self) -> bool:
        return bool(self.fail_first or self.fail_after_send or self.slow_first or self.attempt_log or self.kill_in_keys
                    or self.kill_in_shards or self.keys_log)

    def __call__(self, stage: str, partition: int, attempt: int) -> None:
        if stage == "keys-sent":
            if self.fail_after_send and attempt == 0:
                raise RuntimeError(f"lshbloom test fault: keys task of partition {partition} fails after a chunk")
            return
        if self.keys_log and stage == "keys":  # a line per keys task, appended: a partition keyed again counts twice
            with open(self.keys_log, "a") as f:
                f.write(f"{partition} {attempt}\n")
        if self.attempt_log and stage == "keys":
            os.makedirs(self.attempt_log, exist_ok=True)
            with open(os.path.join(self.attempt_log, f"p{partition}-a{attempt}"), "w"):
                pass
        if self.kill_in_keys and stage == "keys" and partition == 1:
            kill_now(f"kill-in-keys (task of partition {partition})", self.fault_log)
        if self.kill_in_shards and stage == "shard" and partition == 1:
            kill_now(f"kill-in-shards (task of partition {partition})", self.fault_log)
        if self.slow_first and stage == "keys" and attempt == 0 and partition == 0:
            import time

            time.sleep(self.slow_first)
        if self.fail_first and attempt == 0:
            raise RuntimeError(f"lshbloom test fault: {stage} task of partition {partition} fails on its first attempt")


def _watch_for(path: str, reason: str, log: Optional[str]) -> threading.Event:
    """SIGKILL the run as soon as ``path`` exists (until the returned event is set)."""
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            if os.path.exists(path):
                kill_now(f"{reason} ({path} exists)", log)
            stop.wait(0.002)

    threading.Thread(target=watch, daemon=True).start()
    return stop


def install(on: dict) -> None:
    """Install the hooks the switches ``on`` ask for (see the module docs)."""
    log = on.get("fault-log")
    for switch, point in KILL_POINTS.items():
        if switch in on:
            hooks.install(point, lambda _switch=switch, **_: kill_now(_switch, log))
    if on.get("kill-in-driver-pass") is not None:
        limit = int(on["kill-in-driver-pass"])

        def driver_pass(done: int, **_):
            if done >= limit:
                kill_now(f"kill-in-driver-pass after {done} documents", log)

        hooks.install("driver-pass", driver_pass)
    if "kill-in-paragraph-pass" in on:
        hooks.install("paragraph-pass", lambda done, **_: kill_now(f"kill-in-paragraph-pass after {done} documents",
                                                                   log))
    if on.get("kill-in-stream-batch") is not None:
        _install_stream_kill(on["kill-in-stream-batch"], log)
    if on.get("remove-in-stream-batch") is not None:
        _install_stream_remove(on["remove-in-stream-batch"])
    if "kill-in-output-write" in on:
        watcher: dict = {}

        def output_write(path: Optional[str], **_):
            if path:
                watcher["stop"] = _watch_for(os.path.join(path, "_temporary"), "kill-in-output-write", log)

        hooks.install("output-write", output_write)
        hooks.install("output-written", lambda **_: watcher.pop("stop", threading.Event()).set())
    if on.get("internal-error-after-pin") is not None:
        kind = {"value": ValueError, "os": OSError}[on["internal-error-after-pin"]]

        def internal_error(**_):
            raise kind("lshbloom test fault: an internal error after the pin")

        hooks.install("after-pin", internal_error)
    task = TaskFaults(on)
    if task:
        _ship_by_value()
        hooks.install("task-start", task)


def _install_stream_kill(value: str, log: Optional[str]) -> None:
    """SIGKILL at ``POINT`` of micro-batch ``N`` (``value`` = ``N:POINT``), not of the batches before."""
    batch, point = value.split(":")
    armed = threading.Event()

    def stream_batch(batch: int, _target=int(batch), **_):
        if batch == _target:
            armed.set()

    def at_point(**_):
        if armed.is_set():
            kill_now(f"kill-in-stream-batch={value}", log)

    hooks.install("stream-batch", stream_batch)
    hooks.install(point, at_point)


def _install_stream_remove(value: str) -> None:
    """Remove ``PATH`` as micro-batch ``N`` starts (``value`` = ``N:PATH``)."""
    batch, path = value.split(":", 1)

    def stream_batch(batch: int, _target=int(batch), **_):
        if batch == _target:
            os.remove(path)

    hooks.install("stream-batch", stream_batch)


def install_from_env(environ=None) -> dict:
    """Install the hooks ``LSHBLOOM_TEST_FAULT`` asks for; returns the switches."""
    on = switches(environ)
    install(on)
    return on


def _ship_by_value() -> None:
    """Executors cannot import this tests module: pickle its classes by value into the tasks."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
