"""Named points of a run where a caller can hook in; nothing happens unless one is installed.

The reliability tests use them to inject real faults (SIGKILL, failing or slow
tasks) at exact moments of real runs (``tests/fault_injection.py``); the
product never reads a fault switch itself. A point that has no hook costs one
dictionary lookup.

Points on the driver, fired with keyword arguments:

``after-pin``
    the input is pinned with its row ids, before any key reaches an index.
``driver-pass``
    the driver pass decided a chunk (``done=`` documents so far).
``paragraph-pass``
    the paragraph stage decided a batch of documents' paragraphs (``done=`` documents so far), into the
    run's copy of the paragraph filter.
``output-write``
    the job starts writing its output (``path=`` the local temporary output,
    or None on another file system); ``output-written`` when it is done.
``after-records``
    a kept index's run wrote its records (:mod:`lshbloom_udf.index.records`) beside the staged index,
    before the commit.
``before-commit``
    the output is written and the index staged, before the commit journal
    (a sharded index: before its manifest is published).
``mid-commit``
    the journal is written and its first rename done (a sharded index: the
    manifest is published, the outputs not yet renamed).
``after-commit``
    the commit is done, before the summary is written.
``sharded-pass``
    the sharded pass decided every shard (``duplicates=`` rows flagged); a
    kept index's next version is written, not committed.
``stream-batch``
    a stream's micro-batch starts (``query=`` the query's id, ``batch=`` the
    batch id), once it opened the index, before it reads its rows.
``generation-added``
    a growing index added a generation of filters (``generation=`` its number,
    ``path=`` the directory it was created in: a run's staging copy).

On the executors, ``task-start`` runs at the start of each task computing band
keys (``stage="keys"``, ``partition=``, ``attempt=``), again after each chunk of
keys such a task sent to the driver (``stage="keys-sent"``), and at the start of
each task of the sharded pass (``stage="shard"``). Executors are other processes:
the hook installed on the driver when the stage is planned is shipped with the
task (so it must be picklable by cloudpickle).
"""

from __future__ import annotations

from typing import Callable, Optional

Hook = Callable[..., None]

POINTS = ("after-pin", "driver-pass", "paragraph-pass", "after-records", "output-write", "output-written",
          "before-commit", "mid-commit", "after-commit", "generation-added", "sharded-pass", "task-start",
          "stream-batch")

_installed: dict[str, Hook] = {}


def install(point: str, hook: Hook) -> None:
    """Run ``hook(**context)`` whenever ``point`` is reached (replacing any hook there)."""
    if point not in POINTS:
        raise ValueError(f"unknown hook point {point!r}; known: {', '.join(POINTS)}")
    _installed[point] = hook


def uninstall(point: Optional[str] = None) -> None:
    """Remove the hook at ``point`` (every hook when ``None``)."""
    if point is None:
        _installed.clear()
    else:
        _installed.pop(point, None)


def fire(point: str, **context) -> None:
    """Run the hook installed at ``point``, if any."""
    hook = _installed.get(point)
    if hook is not None:
        hook(**context)


def task_hook() -> Optional[Hook]:
    """The ``task-start`` hook to ship with an executor task (``None`` when there is none)."""
    return _installed.get("task-start")
