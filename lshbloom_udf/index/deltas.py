"""The index's write buffer: a small run inserts into filters of its own (a delta), folded into the base in bulk.

Why: a run's inserts land at random in every page of the base filters (``b`` keys a document, one 64-byte line
each): 10^4 documents into 10^7 touch most of the base's pages, so a copy-on-write commit of the base costs
O(index) whatever the run's size (docs/benchmarks.md, "A run into a large kept index"). A run small beside the
base (at most :data:`RUN_SHARE` of it) instead decides against the live base files, read-only, and inserts into a
**delta**: ``b`` band files sized for its own documents, at the base's per-band rate divided by
:data:`MAX_DELTAS` (so all the deltas together add at most about one base rate), and the **log** of the keys it
inserted (``b`` u64 a document: ``<name>.keys.u64``, its SHA-256 in the manifest). The commit adds the delta's
files; the base is neither copied nor written.

*Merges.* A new delta takes in the newest deltas while the newest is no larger than what it holds so far (a binary
counter): their logs are inserted into it and the merged ones are dropped at the commit. So the deltas number
about ``log2(pending / smallest run)`` and a key is rewritten that many times (O(log) a document, never O(index)).

*Fold.* When the deltas would hold more than :data:`FOLD_SHARE` of the base's documents, or be more than
:data:`MAX_DELTAS`, the run takes the copy-on-write path and first inserts every delta's log into its copy of
the base: O(base) once every ``FOLD_SHARE × base`` documents, a constant per document.

What a delta costs on disk while it is pending: its filters (the base's bytes a document, a little more for the
lower rate) and its log (8·b bytes a document), at most :data:`FOLD_SHARE` of the documents. A backend datasketch
reads (``pybloomfiltermmap3``) gets no deltas: datasketch continues those files and would not see them.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from lshbloom_udf.index.fs import read_checked
from lshbloom_udf.index.generations import Generation

# A run uses a delta when its documents are at most this share of the base's (bigger runs rewrite most of the base's
# pages anyway: they copy it).
RUN_SHARE = 1 / 16
# The deltas are folded into the base when they would hold more than this share of its documents.
FOLD_SHARE = 1 / 8
# At most this many deltas (each a filter every key of a run probes); their rate is the base's divided by it.
MAX_DELTAS = 12
PREFIX = "delta"
KEYS_SUFFIX = ".keys.u64"
NAME = re.compile(r"delta[0-9]{6}")
_DELTA_FILE = re.compile(r"delta[0-9]{6}(-band-[0-9]+\.[a-z]+|\.keys\.u64)")


def keys_file_name(name: str) -> str:
    return name + KEYS_SUFFIX


def is_delta_file(file_name: str) -> bool:
    """A name the job gives a delta's band file or log (what :func:`sweep` may delete)."""
    return bool(_DELTA_FILE.fullmatch(file_name))


@dataclass(frozen=True)
class DeltaPlan:
    """How a run into a kept index writes its inserts: into a new delta (``name``, taking in ``merged``), or,
    ``name`` None, into a copy of the base that first folds in every delta."""

    name: Optional[str]
    merged: tuple[Generation, ...] = ()
    kept: tuple[Generation, ...] = ()

    @property
    def capacity_taken_in(self) -> int:
        return sum(d.inserted for d in self.merged)


def plan(manifest, documents: Optional[int], taken: Sequence[str] = ()) -> DeltaPlan:
    """The delta a run of ``documents`` into the index of ``manifest`` makes (:class:`DeltaPlan`): a new one while
    the run is small beside the base and the deltas stay within :data:`FOLD_SHARE` and :data:`MAX_DELTAS` (and, in
    a fixed index, within the base's room, where they are folded), else a fold (copy-on-write).

    ``taken``: the file names the index directory holds (a new delta never reuses a live name)."""
    deltas, base = manifest.deltas, manifest.base_inserted
    name = f"{PREFIX}{manifest.next_run_id()}"
    pending = sum(d.inserted for d in deltas)
    room = manifest.generations[-1].room if manifest.params.growth == "fixed" else None
    if (manifest.backend.datasketch_compatible or documents is None or documents > RUN_SHARE * base
            or pending + documents > FOLD_SHARE * base or (room is not None and pending + documents > room)
            or keys_file_name(name) in taken):
        return DeltaPlan(None)
    kept, merged = list(deltas), list[Generation]()
    while kept and kept[-1].capacity <= documents + sum(d.inserted for d in merged):
        merged.insert(0, kept.pop())
    if len(kept) + 1 > MAX_DELTAS:
        return DeltaPlan(None)
    return DeltaPlan(name, tuple(merged), tuple(kept))


class KeyLog:
    """The keys a delta's filters received, appended as they are inserted (rows of ``b`` u64), with their SHA-256."""

    def __init__(self, path: str, b: int):
        self.path, self.b = path, b
        self.rows = 0
        self._sha = hashlib.sha256()
        self._file = open(path, "wb")

    def append(self, keys: np.ndarray) -> None:
        if not len(keys):
            return
        data = np.ascontiguousarray(keys, dtype="<u8").tobytes()
        self._file.write(data)
        self._sha.update(data)
        self.rows += len(keys)

    def digest(self) -> str:
        """The SHA-256 of what was appended so far (written through to the file)."""
        if not self._file.closed:
            self._file.flush()
        return self._sha.hexdigest()

    def close(self) -> str:
        """Flush it to its disk; its SHA-256."""
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
        return self._sha.hexdigest()


def read_keys(directory: str, delta: Generation, b: int) -> np.ndarray:
    """A committed delta's logged keys (``(rows, b)`` u64), checked against the SHA-256 the manifest holds."""
    path = os.path.join(directory, keys_file_name(str(delta.name)))
    data = read_checked(path, delta.keys_sha256, 8 * b, f"the log of delta {delta.name} is missing; restore the index "
                        "from a backup, or rebuild it from its runs' inputs into a new --index-dir",
                        f"delta {delta.name}")
    return np.frombuffer(data, dtype="<u8").reshape(-1, b)


def sweep(directory: str, referenced: Sequence[str]) -> list[str]:
    """Delete the delta files the manifest no longer names (merged or folded ones a crash left); what was deleted."""
    keep = set(referenced)
    gone = [n for n in sorted(os.listdir(directory)) if is_delta_file(n) and n not in keep]
    for name in gone:
        os.remove(os.path.join(directory, name))
    return gone

