"""The commit journal of an index directory, and recovery after a crash.

A run commits by writing ``<index>/.commit.json`` — the list of renames that
make its staged files (``<index>/.staging-*/``) and outputs live — and then
doing them (:func:`roll_forward`). A crash after the journal is written is
finished by the next writer (:func:`recover`); a crash before it leaves a
staging copy that the next writer deletes.
"""

from __future__ import annotations

import json
import os
from typing import Mapping

from lshbloom_udf.errors import IndexRecoveryNeededError
from lshbloom_udf.index.fs import apply_renames, fsync_path, rmtree, write_json_atomically
from lshbloom_udf.index.paths import checked_outputs, checked_renames

JOURNAL_NAME = ".commit.json"
STAGING_PREFIX = ".staging-"
PENDING_NAME = "pending.json"
RUNS_DIR = "runs"


def has_journal(path: str) -> bool:
    return os.path.exists(os.path.join(path, JOURNAL_NAME))


def roll_forward(path: str, journal: Mapping) -> None:
    """Apply a commit journal's renames; each is done at most once, so this can be repeated after a crash.

    Relative paths are inside the index directory ``path``; each rename is
    checked first (:func:`~lshbloom_udf.index.paths.checked_renames`): a
    journal naming any other path is :class:`IndexCorruptError` and nothing
    is renamed.
    """
    journal_path = os.path.join(path, JOURNAL_NAME)
    ops = checked_renames(path, journal.get("ops") if isinstance(journal, Mapping) else None, journal_path)

    def missing(src: str, dst: str) -> IndexRecoveryNeededError:
        return IndexRecoveryNeededError(
            f"{journal_path}: cannot finish the commit of run {journal.get('run_id')}: "
            f"neither {src} nor {dst} exists (was the index or the output moved?)"
        )

    apply_renames(path, [list(op) for op in ops], missing)


def commit(path: str, journal: Mapping) -> None:
    """Write the journal (atomically), do its renames, delete it."""
    journal_path = os.path.join(path, JOURNAL_NAME)
    checked_renames(path, journal["ops"], journal_path)  # what recovery would refuse is never written
    write_json_atomically(journal_path, journal)
    roll_forward(path, journal)
    os.remove(journal_path)
    fsync_path(path)


def write_pending(staging: str, outputs: list[str]) -> None:
    """Record in a staging copy the temporary outputs its run registered (removed with it after a crash)."""
    write_json_atomically(os.path.join(staging, PENDING_NAME), {"pid": os.getpid(), "outputs": outputs})


def _staging_outputs(staging: str) -> list[str]:
    """The temporary outputs a staging copy registered, each checked to be one (:mod:`~.paths`)."""
    record = os.path.join(staging, PENDING_NAME)
    try:
        with open(record, encoding="utf-8") as f:
            pending = json.load(f)
    except (OSError, ValueError):  # written atomically: absent (not yet written) or damaged; it names nothing
        return []
    return list(checked_outputs(pending.get("outputs", []) if isinstance(pending, dict) else None, record))


def recover(path: str) -> dict:
    """Bring an index directory back to a committed state after a crash. The caller holds its exclusive lock.

    A commit journal (``.commit.json``) means the crashed run had decided to
    commit: its renames are finished (roll forward). Staging copies
    (``.staging-*``) of runs that never reached their journal are removed,
    with the temporary outputs they had registered. Every record is checked
    before anything is renamed or deleted: one naming a path the job does
    not write raises :class:`IndexCorruptError` and nothing changes.
    Returns what was done.
    """
    report: dict = {"rolled_forward": None, "discarded": []}
    journal_path = os.path.join(path, JOURNAL_NAME)
    journal = None
    if os.path.exists(journal_path):
        try:
            with open(journal_path, encoding="utf-8") as f:
                journal = json.load(f)
        except json.JSONDecodeError as e:  # written atomically: cannot happen short of disk damage
            raise IndexRecoveryNeededError(f"{journal_path}: corrupt commit journal ({e})") from None
        checked_renames(path, journal.get("ops") if isinstance(journal, dict) else None, journal_path)
    stale = {name: _staging_outputs(os.path.join(path, name))
             for name in sorted(os.listdir(path)) if name.startswith(STAGING_PREFIX)}
    if journal is not None:
        roll_forward(path, journal)
        os.remove(journal_path)
        fsync_path(path)
        report["rolled_forward"] = journal.get("run_id")
    for name, outputs in stale.items():
        for tmp in outputs:
            rmtree(tmp)
        rmtree(os.path.join(path, name))
        report["discarded"].append(name)
    if report["discarded"] or report["rolled_forward"]:
        fsync_path(path)
    return report
