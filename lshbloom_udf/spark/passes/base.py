"""The pass interface: what a pass is given (:class:`PassInput`) and what it returns (:class:`Decided`: its
decisions, :class:`PassResult` with a :class:`PassOutcome`, and what the keys scan took, a
:class:`~lshbloom_udf.spark.passes.scan.ScanResult`).

A pass decides which of the pinned rows are duplicates. It is one object with
one method, :meth:`Pass.decide`; the run (:class:`~lshbloom_udf.spark.pipeline.DedupRun`)
calls it without knowing which pass it is. docs/architecture.md shows how to
add one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping, NamedTuple, Optional, Protocol, TypeVar

import numpy as np

from lshbloom_udf.errors import DedupInputError
from lshbloom_udf.index import LSHBloomIndex
from lshbloom_udf.index.kept import KeptIndex
from lshbloom_udf.index.run_record import RunRecord
from lshbloom_udf.spark.passes.scan import ScanRequest, ScanResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lshbloom_udf.config import DedupConfig
    from lshbloom_udf.index.params import IndexParams

Store = TypeVar("Store", bound=KeptIndex)


@dataclass
class PassOutcome:
    """What a pass decided: the duplicates' row ids and the counts."""

    duplicate_rows: list = field(default_factory=list)
    duplicates: int = 0
    empty: int = 0
    documents: int = 0
    # Seconds from the pass's start to its first keys: Spark's start-up and the first chunk's keys (0: not measured).
    first_keys_seconds: float = 0.0
    # The duplicates' band keys, aligned with duplicate_rows, when the pass was asked for them (verification's).
    duplicate_keys: list = field(default_factory=list)

    def rows(self) -> np.ndarray:
        return np.concatenate(self.duplicate_rows) if self.duplicate_rows else np.zeros(0, dtype=np.int64)

    def keys(self, b: int) -> np.ndarray:
        """The duplicates' band keys, ``(len(rows()), b)`` uint64 (the pass kept them: ``keep_keys``)."""
        return np.concatenate(self.duplicate_keys) if self.duplicate_keys else np.zeros((0, b), dtype=np.uint64)


@dataclass(frozen=True)
class IndexReport:
    """The summary's ``index`` part: which index the run used and what it holds (docs/summary.md).

    ``path`` and ``kept`` are always reported; every other field only when
    the pass set it (None: absent from :meth:`to_dict`).
    """

    path: Optional[str]
    kept: bool
    content_fingerprint: Optional[str] = None
    sequence_fingerprint: Optional[str] = None
    inserted_before: Optional[int] = None
    inserted_total: Optional[int] = None
    reused: Optional[bool] = None
    backend: Optional[str] = None
    bytes_on_disk: Optional[int] = None
    capacity: Optional[int] = None
    p_effective: Optional[float] = None
    p_band: Optional[float] = None
    expected_false_positive: Optional[float] = None
    generations: Optional[tuple] = None  # each generation's capacity, inserted and false_positive (the driver pass)
    location: Optional[str] = None
    shard_plan: Optional[Mapping] = None
    reproduced: Optional[bool] = None
    reproduced_from: Optional[str] = None
    run_id: Optional[str] = None

    def to_dict(self) -> dict:
        """A new JSON-ready dict: the summary's ``index``."""
        out: dict[str, object] = {"path": self.path, "kept": self.kept}
        for f in dataclasses.fields(self)[2:]:
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = (dict(value) if isinstance(value, Mapping)
                               else [dict(v) for v in value] if isinstance(value, tuple) else value)
        return out

    def replace(self, **changes) -> "IndexReport":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class PassInput:
    """What a pass is given: the pinned rows, their number, the run's settings and its index transaction."""

    config: DedupConfig
    params: IndexParams  # sized for this run (capacity set)
    documents: int
    pinned: DataFrame  # the pinned rows, with their row id
    keyed: Callable  # DedupRun.keyed_frame: the pinned rows' band keys, computed on the executors
    txn: Optional[KeptIndex] = None  # the kept index's transaction, or None (a temporary index)
    prior: Optional[RunRecord] = None  # the committed run that ingested these documents, if any
    fingerprints: Optional[tuple] = None  # (content, sequence) fingerprints of a kept index's input
    scan: ScanRequest = ScanRequest()  # how the keys scan keys the rows, and what else it takes for the run

    @property
    def index_dir(self) -> Optional[str]:
        return self.txn.path if self.txn is not None else None

    @property
    def temporary(self) -> bool:
        return self.txn is None

    def kept_store(self, store: type[Store]) -> Optional[Store]:
        """The kept index's transaction as the ``store`` a pass keeps its index in (its ``open_index``'s), or None
        (a temporary index); :class:`DedupInputError` for another store's (a ``run(transaction=...)`` of another)."""
        if self.txn is not None and not isinstance(self.txn, store):
            raise DedupInputError(f"pass_mode {self.config.pass_mode!r} keeps its index in a {store.__name__}, not "
                                  f"the {type(self.txn).__name__} given")
        return self.txn

    @property
    def reproduce(self) -> bool:
        """Whether the run reproduces a committed run's flags instead of deciding."""
        return self.prior is not None and not self.config.force_new_ingest

    def report(self) -> IndexReport:
        """The index report every pass starts from: the index's path and the input's fingerprints."""
        content, sequence = self.fingerprints or (None, None)
        return IndexReport(self.index_dir, not self.temporary, content, sequence)

    def nothing_to_decide(self) -> bool:
        """No documents and no index to create: no pass runs, no index is written."""
        index_dir = self.index_dir  # None: a temporary index
        return (self.documents == 0 and not self.config.sizing_given
                and (index_dir is None or not LSHBloomIndex.exists(index_dir)))


@dataclass(frozen=True)
class PassResult:
    """What a pass decided: the flags and counts (``outcome``), the summary's index part, the index's stats.

    ``stats`` is None when no kept index changes (then the run records
    nothing); ``params`` are the index parameters the pass used; ``seconds``
    the timings it measured beside its own (e.g. the keys stage's). What the
    keys scan took for the run comes apart, as a :class:`ScanResult`.
    """

    outcome: PassOutcome
    index: IndexReport
    params: IndexParams
    stats: Optional[Mapping] = None
    seconds: Mapping = field(default_factory=dict)

    @property
    def duplicates(self) -> int:
        return self.outcome.duplicates

    @property
    def empty(self) -> int:
        return self.outcome.empty

    def rows(self) -> np.ndarray:
        """The flagged rows' ids, sorted within each chunk, as int64."""
        return self.outcome.rows()


class Decided(NamedTuple):
    """A pass's return: its decisions, and what the keys scan took for the run."""

    result: PassResult
    scanned: ScanResult


class Decider(Protocol):
    """What the run calls to decide: keyed rows in, a :class:`PassResult` out (a :class:`Pass`, or the
    :class:`~lshbloom_udf.spark.passes.reproduced.ReproducedPass`, which keeps no store of its own).

    ``name`` is the summary's ``pass`` (and ``--pass``), ``title`` the step's
    description in logs and the Spark UI, ``timer`` its entry in the
    summary's ``seconds``.
    """

    name: str
    title: str
    timer: str

    def decide(self, given: PassInput) -> Decided:
        ...


class Pass(Decider, Protocol):
    """A pass: a :class:`Decider` with the store it keeps an index in."""

    def open_index(self, index_dir: str, config, spark=None) -> KeptIndex:
        """The run's transaction on the kept index at ``index_dir``, in the store this pass keeps its index in."""
        ...

    def holds_index(self, index_dir: str) -> bool:
        """Whether ``index_dir`` holds an index of this pass's store (``lshbloom check-index`` asks each pass)."""
        ...

    def check_index(self, index_dir: str) -> str:
        """Every file of the index at ``index_dir`` checked: a one-line report, or the error naming the damaged
        file."""
        ...


class KeyedPass:
    """Base of the passes that decide band keys: a run with nothing to decide writes no index."""

    name = title = timer = ""

    def decide(self, given: PassInput) -> Decided:
        if given.nothing_to_decide():
            report = given.report().replace(bytes_on_disk=0, inserted_total=0, inserted_before=0, reused=False)
            return Decided(PassResult(PassOutcome(), report, given.params), ScanResult())
        return self.decide_keys(given)

    def decide_keys(self, given: PassInput) -> Decided:
        raise NotImplementedError
