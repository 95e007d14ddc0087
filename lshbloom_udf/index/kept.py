"""The kept-index protocol: what a run does with an index it keeps between runs, whichever store holds it.

Two stores implement it: the local one (:class:`~lshbloom_udf.index.IndexTransaction`
over :class:`~lshbloom_udf.index.LSHBloomIndex`: band files, a journal, an
OS lock) and the sharded one on a Hadoop filesystem
(:class:`lshbloom_udf.spark.passes.sharded.store.ShardedTransaction`: versioned
Parquet parts, one manifest per version). Both keep their filter generations
with one seal-and-grow (:class:`~lshbloom_udf.index.generations.SealAndGrow`).

- **open**: the store's constructor takes the directory; it finishes or
  discards what a crashed run left (**recover**: :attr:`KeptIndex.recovered`).
- **stage**: the pass writes the run's version of the index beside the live
  one (the local store's ``stage(...)`` copy; the sharded store's
  ``write_version`` + ``stage_manifest``): nothing live changes.
- **commit**: :meth:`KeptIndex.commit` makes the staged version, the run
  record and the outputs live together; :meth:`KeptIndex.abort` drops them.
- **report**: :meth:`KeptIndex.manifest` and :meth:`KeptIndex.runs` say what
  is committed; :meth:`KeptIndex.verify` checks it.
"""

from __future__ import annotations

from typing import Mapping, Optional, Protocol, Sequence, runtime_checkable

import numpy as np

from lshbloom_udf.index.params import IndexParams
from lshbloom_udf.index.run_record import RunRecord


class KeptManifest(Protocol):
    """What either store's manifest says of the committed index (:class:`~lshbloom_udf.index.manifest.Manifest`,
    :class:`~lshbloom_udf.spark.passes.sharded.manifest.ShardedManifest`)."""

    @property
    def params(self) -> IndexParams: ...

    @property
    def bloom(self) -> str: ...

    @property
    def inserted(self) -> int: ...

    @property
    def runs(self) -> tuple[RunRecord, ...]: ...


@runtime_checkable
class KeptIndex(Protocol):
    """One run's transaction on a kept index (see the module docs)."""

    path: str

    @property
    def recovered(self) -> Mapping:
        """open/recover: ``{"rolled_forward": run id or None, "discarded": [staging paths]}``."""
        ...

    # -- report ------------------------------------------------------------------
    def manifest(self) -> Optional[KeptManifest]:
        ...

    def runs(self) -> list[RunRecord]:
        ...

    def check_compatible(self, params, sizing_given=True, bloom: Optional[str] = None):
        ...

    def find_run(self, content_fingerprint: str, params) -> Optional[RunRecord]:
        ...

    def load_duplicates(self, run: RunRecord) -> np.ndarray:
        ...

    def verify(self) -> dict:
        ...

    # -- commit --------------------------------------------------------------------
    def add_output(self, tmp_path: str) -> None:
        ...

    def commit(self, run: Optional[RunRecord] = None, duplicates=None, outputs: Sequence = (),
               paragraph_pairs=None) -> Optional[RunRecord]:
        """``paragraph_pairs``: the paragraphs the run removed (only a store that keeps a paragraph filter)."""
        ...

    def abort(self) -> None:
        ...

    def close(self) -> None:
        ...
