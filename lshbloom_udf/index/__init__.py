"""The LSHBloom index: one Bloom filter per LSH band, on disk.

A directory holds ``band-{i}.bf`` for ``i < b`` — pybloomfiltermmap3 files, so
``datasketch.MinHashLSHBloom(save_dir=..., params=(b, r))`` and
``pybloomfilter.BloomFilter.open`` read them (or, with ``bloom="blocked"``,
``band-{i}.bbf`` blocked filters, see :mod:`lshbloom_udf.index.backends`) — and
``manifest.json``, which records every parameter that decides whether two
runs' band keys are comparable (scheme, seed, num_perm, b, r, ngram,
normalization, shingle unit, threshold, band key) and how the filters were sized (capacity,
p_effective, per-band p). Reopening with different parameters is an error,
never a silent mix.

Decisions ("keep first"): a document is a duplicate iff any of its ``b`` band
keys is in that band's filter; only non-duplicates are inserted, in order. The
filters are memory-mapped and driven in batches by the native module.

Capacity (``IndexParams.growth``): a ``"fixed"`` index holds ``capacity``
documents at ``p_effective`` and then refuses more (``IndexFullError``); a
``"grow"`` index adds generations of filters (:mod:`~.growth`: capacity x2,
rate x1/2 each, so the whole stays within ``p_effective``). datasketch reads
generation 0 only.

Modules: :mod:`~.params` (:class:`IndexParams`, what "minus sizing" means),
:mod:`~.growth` (the rules of a growing index), :mod:`~.generations` (the
open filters of every generation and the decisions over them),
:mod:`~.backends` (the two Bloom backends behind one interface),
:mod:`~.manifest` (:class:`Manifest`: read and validated, written), :mod:`~.compat` (compatibility checks),
:mod:`~.run_record` (:class:`RunRecord`: a committed run as the manifest keeps it),
:mod:`~.lock` (the directory's OS lock), :mod:`~.store`
(:class:`LSHBloomIndex`), :mod:`~.journal` (commit journal, recovery),
:mod:`~.transaction` (:class:`IndexTransaction`: staging copy and
all-or-nothing commit), :mod:`~.fs` (fsync, atomic JSON, space, the commit of a
local output). The errors are :mod:`lshbloom_udf.errors`'.
"""

from lshbloom_udf.errors import (
    AlreadyIngestedError,
    CapacityWarning,
    IndexCorruptError,
    IndexFilesMissingError,
    IndexFullError,
    IndexLockedError,
    IndexMismatchError,
    IndexRecoveryNeededError,
)
from lshbloom_udf.index.backends import BLOOMS, DEFAULT_BLOOM, BloomBackend, backend, validate_bloom
from lshbloom_udf.index.fs import commit_rename
from lshbloom_udf.index.growth import GROWTH_FACTOR, GROWTH_MODES, TIGHTENING
from lshbloom_udf.index.journal import JOURNAL_NAME, RUNS_DIR, STAGING_PREFIX, recover
from lshbloom_udf.index.lock import LOCK_NAME, IndexLock
from lshbloom_udf.index.manifest import MANIFEST_NAME, Manifest, read_manifest
from lshbloom_udf.index.params import SIZING_FIELDS, IndexParams, expected_params, run_params, without_sizing
from lshbloom_udf.index.run_record import RunRecord, StreamBatch
from lshbloom_udf.index.store import CAPACITY_WARNING_FRACTION, LSHBloomIndex
from lshbloom_udf.index.transaction import IndexTransaction

__all__ = [
    "AlreadyIngestedError",
    "BLOOMS",
    "DEFAULT_BLOOM",
    "BloomBackend",
    "CAPACITY_WARNING_FRACTION",
    "CapacityWarning",
    "GROWTH_FACTOR",
    "GROWTH_MODES",
    "IndexCorruptError",
    "IndexFilesMissingError",
    "IndexFullError",
    "IndexLock",
    "IndexLockedError",
    "IndexMismatchError",
    "IndexParams",
    "IndexRecoveryNeededError",
    "IndexTransaction",
    "JOURNAL_NAME",
    "LOCK_NAME",
    "LSHBloomIndex",
    "MANIFEST_NAME",
    "RUNS_DIR",
    "RunRecord",
    "SIZING_FIELDS",
    "STAGING_PREFIX",
    "StreamBatch",
    "TIGHTENING",
    "backend",
    "commit_rename",
    "expected_params",
    "Manifest",
    "read_manifest",
    "recover",
    "run_params",
    "validate_bloom",
    "without_sizing",
]
