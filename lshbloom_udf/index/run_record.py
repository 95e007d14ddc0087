"""A committed run as a kept index's manifest records it: :class:`RunRecord`, its one reader and one writer.

Both stores keep their runs in their manifest's ``runs`` list (the local
store's ``manifest.json``, the sharded store's ``manifest-<N>.json``), one JSON
object per run, in commit order. A record is written once, by the commit that
makes the run live, and never changed. Its JSON names its format
(``record_format``); a record without one was written before the first
release and is refused (:func:`read_run`), as is one of a later format.

What a record holds (docs/summary.md explains the same fields in the summary):

- what the run ingested: ``documents``, ``content_fingerprint`` and ``sequence_fingerprint``
  (:mod:`lshbloom_udf.spark.ingest`: the same input is recognised and reproduced, not ingested twice),
  ``params`` (the index parameters it ran with);
- what it decided: ``duplicates``, ``empty_documents``, ``inserted`` (keys' documents added to the index),
  the settings that shaped the decisions (``mode``, ``insert``, ``pass``, ``id_column``, ``order_by``) and
  ``forced_new_ingest``;
- where its decisions and records are: ``duplicates_file`` and ``duplicates_sha256`` (local store), ``data``
  (the sharded store's version directory), ``records`` (:mod:`lshbloom_udf.index.records`), ``paragraphs``
  (the paragraph stage's settings, counts and removed pairs: :mod:`lshbloom_udf.index.paragraph_filter`);
- who ran it: ``input``, ``output``, ``output_format`` (the job), ``stream`` (a micro-batch: :class:`StreamBatch`);
- set by the commit: ``run_id`` (``000001``, ...), ``inserted_total``, ``committed_at``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from lshbloom_udf.errors import IndexCorruptError, IndexMismatchError

# The format of a run record; a record names it as "record_format".
RECORD_FORMAT = 1
PRE_RELEASE_ADVICE = ("rebuild the index from its runs' inputs into a new --index-dir with this version "
                      "(docs/reliability.md, 'What an operator does')")


@dataclass(frozen=True)
class StreamBatch:
    """The micro-batch a run was: its query's id and batch id, and where its stored flags and output are."""

    query: str
    batch: int
    flags: Optional[str] = None  # the stored flags, relative to the index directory
    flags_sha256: Optional[str] = None
    output: Optional[str] = None


@dataclass(frozen=True)
class RunRecord:
    """One committed run of a kept index (see the module docs): written by :meth:`to_json`, read by :func:`read_run`."""

    documents: int
    duplicates: int
    inserted: int
    params: Mapping[str, Any]
    content_fingerprint: Optional[str] = None
    sequence_fingerprint: Optional[str] = None
    empty_documents: int = 0
    mode: str = "flag"
    insert: str = "first"
    pass_mode: str = "driver"
    id_column: Optional[str] = None
    order_by: Optional[tuple] = None
    forced_new_ingest: bool = False
    records: Optional[Mapping[str, Any]] = None
    paragraphs: Optional[Mapping[str, Any]] = None
    input: Optional[str] = None
    output: Optional[str] = None
    output_format: Optional[str] = None
    stream: Optional[StreamBatch] = None
    # set by the commit
    run_id: Optional[str] = None
    inserted_total: Optional[int] = None
    committed_at: Optional[str] = None
    duplicates_file: Optional[str] = None
    duplicates_sha256: Optional[str] = None
    data: Optional[str] = None

    def replace(self, **changes: Any) -> "RunRecord":
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict:
        """The record as its manifest stores it (the writer: :func:`read_run` reads it back equal)."""
        out: dict = {"record_format": RECORD_FORMAT}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, StreamBatch):
                value = dataclasses.asdict(value)
            elif isinstance(value, tuple):
                value = list(value)
            out["pass" if f.name == "pass_mode" else f.name] = value
        return json.loads(json.dumps(out, default=str))


_FIELDS = {f.name for f in dataclasses.fields(RunRecord)}


def read_run(data: Any, where: str) -> RunRecord:
    """The run record ``data`` (a manifest's JSON object) of the manifest at ``where``, checked."""
    if not isinstance(data, dict):
        raise IndexCorruptError(f"{where}: corrupt manifest (a run record is {type(data).__name__}, not an object)")
    version = data.get("record_format")
    if version != RECORD_FORMAT:
        made = "before the first release" if version is None else f"in run record format {version!r}"
        raise IndexMismatchError(f"{where}: run {data.get('run_id', '?')} was recorded {made}; this version reads "
                                 f"format {RECORD_FORMAT}: {PRE_RELEASE_ADVICE}")
    fields = {("pass_mode" if k == "pass" else k): v for k, v in data.items() if k != "record_format"}
    unknown = sorted(set(fields) - _FIELDS)
    if unknown:
        raise IndexCorruptError(f"{where}: corrupt manifest (run {data.get('run_id', '?')} has unknown fields "
                                f"{', '.join(unknown)})")
    try:
        stream = fields.get("stream")
        if stream is not None:
            fields["stream"] = StreamBatch(**stream)
        if fields.get("order_by") is not None:
            fields["order_by"] = tuple(fields["order_by"])
        return RunRecord(**fields)
    except TypeError as e:
        raise IndexCorruptError(f"{where}: corrupt manifest (run {data.get('run_id', '?')}: {e})") from None


def read_runs(manifest: Mapping, where: str) -> tuple[RunRecord, ...]:
    """The runs the manifest JSON ``manifest`` (either store's) records, in commit order."""
    runs = manifest["runs"] if "runs" in manifest else []
    if not isinstance(runs, list):
        raise IndexCorruptError(f"{where}: corrupt manifest (runs is {type(runs).__name__}, not a list)")
    return tuple(read_run(r, where) for r in runs)


def run_id(position: int) -> str:
    """The id of a store's ``position``-th committed run (1: ``000001``)."""
    return f"{position:06d}"
