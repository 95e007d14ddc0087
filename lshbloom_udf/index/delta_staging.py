"""A run's staged index when it writes a delta (:mod:`~lshbloom_udf.index.deltas`): the live files linked, read-only."""

from __future__ import annotations

import hashlib
import os
from typing import Sequence

from lshbloom_udf.index import manifest as mf
from lshbloom_udf.index.deltas import MAX_DELTAS, DeltaPlan, KeyLog, keys_file_name, read_keys
from lshbloom_udf.index.generations import Generation, create_generation, generation_paths
from lshbloom_udf.index.store import LSHBloomIndex


def live_files(manifest: mf.Manifest, kept: Sequence[Generation]) -> list[str]:
    """The band files of the base's generations and of the ``kept`` deltas (what a delta run links, read-only)."""
    b, backend = manifest.params.b, manifest.backend
    names = [os.path.basename(p) for g in range(len(manifest.generations))
             for p in generation_paths("", backend, b, g)]
    return names + [os.path.basename(p) for d in kept for p in generation_paths("", backend, b, 0, d.name)]


def stage_delta(live: str, work: str, manifest: mf.Manifest, plan: DeltaPlan, documents: int, expected):
    """The run's staged index in ``work``: the live base and kept deltas linked read-only, the run's new delta
    (taking in the merged deltas' logs) writable and logging its keys. Returns the open index."""
    for name in live_files(manifest, plan.kept):
        os.symlink(os.path.join(live, name), os.path.join(work, name))
    b, backend = manifest.params.b, manifest.backend
    capacity = documents + plan.capacity_taken_in
    p_band = manifest.generations[-1].p_band / MAX_DELTAS
    delta = Generation(max(capacity, 1), p_band, geometry=backend.manifest_fields(max(capacity, 1), p_band),
                       name=plan.name, keys_sha256=hashlib.sha256(b"").hexdigest())
    create_generation(work, backend, b, 0, delta)
    mf.write_manifest(work, manifest.replace(deltas=(*plan.kept, delta)))
    index = LSHBloomIndex.open(work, expected=expected, lock=False, verify=False, writes_delta=True)
    try:
        index.log_inserts(KeyLog(os.path.join(work, keys_file_name(str(plan.name))), b))
        for merged in plan.merged:
            index.insert(read_keys(live, merged, b))
    except BaseException:
        index.discard()
        raise
    return index
