"""The scan of the pinned input that computes its band keys: what the run asks of it, and what it yields.

A pass consumes the band keys of every pinned row once (the driver pass streams them, the sharded pass shuffles
them). The same scan reads every text and row id anyway, so the run asks it for more (:class:`ScanRequest`): the
input's sums (the ingest check's fingerprints, :class:`~lshbloom_udf.spark.ingest.InputSums`), the ids' hashes (the
id check, :mod:`lshbloom_udf.spark.ids`), the record fields of a kept index's records
(:mod:`lshbloom_udf.spark.passes.driver.record_spool`) and, from the decisions over the keys, the template
sample's candidates (:mod:`lshbloom_udf.spark.verify.templates`). What it took comes back as a
:class:`ScanResult`, apart from the pass's decisions (:class:`~lshbloom_udf.spark.passes.base.PassResult`): the
input check and verification consume it. A scan that could not take a part leaves it None and the run computes
it itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from lshbloom_udf.spark.keys import TaskThreads

if TYPE_CHECKING:
    import numpy as np

    from lshbloom_udf.spark.ids import IdHashes
    from lshbloom_udf.spark.ingest import InputSums
    from lshbloom_udf.spark.keys import Shipped
    from lshbloom_udf.spark.passes.driver.record_spool import RecordSpool
    from lshbloom_udf.spark.passes.driver.sender import RecordFields
    from lshbloom_udf.spark.verify.sources import CandidateSource


@dataclass(frozen=True)
class ScanRequest:
    """How the pinned rows are keyed, and what else the run asks of the scan that keys them."""

    # The run's exact copies (spark/exact.py: ship()'s sorted row ids, or None): decided before the pass, so the
    # scan leaves them unkeyed and inactive.
    skip: Optional[Shipped] = None
    # Native threads per task of the stages over the pinned partitions (spark.keys.TaskThreads).
    threads: TaskThreads = TaskThreads()
    # The input's sums (ingest.InputSums), for the ingest check after the pass.
    measure_input: bool = False
    # The id column whose ids' hashes the run checks after the pass (spark.ids); None: no id check after it.
    hash_ids: Optional[str] = None
    # The template sample's bound (spark.verify.templates.sample_below): its candidates noted as the keys are
    # decided; None: not wanted.
    template_sample_below: Optional[int] = None
    # The record fields of a kept index's records (sender.RecordFields); None: the run writes no records.
    records: Optional[RecordFields] = None


@dataclass(frozen=True)
class ScanResult:
    """What the scan took besides the keys: each part None when not asked for, or not taken (then the run computes
    it). ``candidates`` and ``records`` hold files the run owns from here (:meth:`close`)."""

    input_sums: Optional[InputSums] = None
    id_hashes: Optional[IdHashes] = None
    template_sample: Optional[np.ndarray] = None  # int64 row ids
    records: Optional[RecordSpool] = None  # the rows' record fields, spooled on the driver
    candidates: Optional[CandidateSource] = None  # verification's candidate source (the keys kept)

    def close(self) -> None:
        """Release what the run did not take over (the record spool; the candidate source)."""
        for owned in (self.candidates, self.records):
            if owned is not None:
                owned.close()
