"""A sharded index's manifest (``manifest-<N>.json``): :class:`ShardedManifest`, its one reader and one writer.

One manifest per committed version: the version's number and directory
(``data``), the shards' backend (``bloom``), the index parameters, the shard
plan, the documents inserted, the version's fill (keys, bytes, files,
generations), the committed runs and when the version was committed. The
format is versioned (``format_version``); an older one is refused.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from lshbloom_udf.errors import IndexCorruptError, IndexMismatchError
from lshbloom_udf.index.params import DOCUMENTS, IndexParams, as_recorded
from lshbloom_udf.index.run_record import RunRecord, read_runs, run_id

FORMAT = "lshbloom-sharded"
FORMAT_VERSION = 2  # filters stored in parts, each with its checksum (1: a pre-release format, refused)
# The version directories a run writes (version_dir + "-" + 12 hex digits), the only ones a manifest may name.
VERSION_DIR = re.compile(r"v-[0-9]{8}-[0-9a-f]{12}")
_FIELDS = {"version", "data", "format", "format_version", "pass", "bloom", "params", "shard_plan", "inserted", "fill",
           "runs", "committed_at"}


@dataclass(frozen=True)
class ShardedManifest:
    """The commit of one version of a sharded index (see the module docs)."""

    version: int
    data: str  # the version's directory, relative to the index directory
    bloom: str
    params: IndexParams
    shard_plan: Mapping[str, Any]
    inserted: int
    fill: Mapping[str, int]
    runs: tuple[RunRecord, ...] = ()
    committed_at: Optional[str] = None

    def replace(self, **changes: Any) -> "ShardedManifest":
        return dataclasses.replace(self, **changes)

    def next_run_id(self) -> str:
        return run_id(len(self.runs) + 1)

    @property
    def shards_per_band(self) -> int:
        return int(self.shard_plan["shards_per_band"])

    def to_json(self) -> dict:
        """The manifest as ``manifest-<N>.json`` stores it (the writer: :meth:`from_json` reads it back equal)."""
        out = {"version": self.version, "data": self.data, "format": FORMAT, "format_version": FORMAT_VERSION,
               "pass": "sharded", "bloom": self.bloom, "params": as_recorded(self.params),
               "shard_plan": dict(self.shard_plan), "inserted": self.inserted, "fill": dict(self.fill),
               "runs": [r.to_json() for r in self.runs]}
        if self.committed_at is not None:
            out["committed_at"] = self.committed_at
        return json.loads(json.dumps(out))

    @classmethod
    def from_json(cls, data: Any, where: str, version: int) -> "ShardedManifest":
        """The manifest ``data`` of version ``version`` in the file ``where``, validated."""
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != version:
            raise IndexCorruptError(f"{where}: not the manifest of version {version} of a sharded index")
        if data.get("format_version") != FORMAT_VERSION:
            raise IndexMismatchError(f"{where}: sharded index format version {data.get('format_version')!r}, "
                                     f"written before the first release; this version reads {FORMAT_VERSION}: "
                                     "rebuild the index from its runs' inputs into a new --index-dir "
                                     "(docs/reliability.md, 'What an operator does')")
        runs = read_runs(data, where)
        named = [data.get("data")] + [r.data for r in runs]
        bad = [d for d in named if not (isinstance(d, str) and VERSION_DIR.fullmatch(d))]
        if bad:  # only this index's own version directories are ever read (or deleted)
            raise IndexCorruptError(f"{where}: names {bad[0]!r}, not a version directory of this index; "
                                    "the index directory was changed by something other than lshbloom "
                                    "(docs/reliability.md, 'threat model')")
        unknown = sorted(set(data) - _FIELDS)
        try:
            if unknown:
                raise ValueError(f"unknown fields {', '.join(unknown)}")
            stored = {"unit": DOCUMENTS, **data["params"]}  # written before the unit existed: a document index
            params = IndexParams(**{f.name: stored[f.name] for f in dataclasses.fields(IndexParams)})
            return cls(version, data["data"], str(data["bloom"]), params, dict(data["shard_plan"]),
                       int(data["inserted"]), dict(data["fill"]), runs, data.get("committed_at"))
        except (KeyError, TypeError, ValueError) as e:
            raise IndexCorruptError(f"{where}: corrupt manifest ({e!r})") from None
