"""The index manifest (``manifest.json``): :class:`Manifest`, its one reader and one writer.

The manifest records every parameter that decides whether two runs' band keys
are comparable (scheme, seed, num_perm, b, r, ngram, normalization, threshold,
band key, shingle unit) and how the filters were sized (capacity, p_effective, per-band p,
growth), the backend (its ``format`` name and ``bloom_format``), the format
version, the band files' checksums, the documents inserted, and the committed
runs. It is plain JSON; :meth:`Manifest.to_json` writes it and
:meth:`Manifest.from_json` reads it back equal, refusing anything else.

Format version 1 is an index of one generation of filters: a
``growth="fixed"`` index (its ``params`` have no ``growth`` entry).
Version 2 is a growing index (:mod:`~lshbloom_udf.index.growth`): ``params``
has ``growth: "grow"`` and ``generations`` lists each generation's capacity,
per-band rate and documents inserted (``p_band`` and ``inserted`` at the top
stay generation 0's rate and the total). A reader that knows only version 1
refuses it instead of reading generation 0 alone.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from lshbloom_udf.errors import IndexCorruptError, IndexFilesMissingError, IndexMismatchError
from lshbloom_udf.index.backends import MANIFEST_FORMATS, BloomBackend, backend_for_format
from lshbloom_udf.index.checksums import ALGORITHM, CHECKSUMS
from lshbloom_udf.index.deltas import KEYS_SUFFIX as DELTA_KEYS_SUFFIX
from lshbloom_udf.index.deltas import NAME as DELTA_NAME
from lshbloom_udf.index.fs import write_json_atomically
from lshbloom_udf.index.generations import Generation, generation_paths
from lshbloom_udf.index.growth import GROWTH_MODES
from lshbloom_udf.index.params import DOCUMENTS, IndexParams, as_recorded
from lshbloom_udf.index.run_record import RunRecord, read_runs, run_id

MANIFEST_NAME = "manifest.json"
# growth -> the manifest format version that records it
FORMAT_VERSIONS = {"fixed": 1, "grow": 2}
# What a version-1 manifest implies: a fixed index (its params have no growth entry).
IMPLIED_PARAMS = {"growth": "fixed", "unit": DOCUMENTS}


def exists(path: str) -> bool:
    return os.path.isfile(os.path.join(path, MANIFEST_NAME))


# What an index directory without a manifest may hold: the lock, a journal, staging copies, a manifest's temporary,
# the paragraph index's directory (made at the commit, before the manifest).
_NO_MANIFEST_YET = re.compile(
    r"\.lock|\.commit\.json(\.tmp-[0-9]+)?|\.staging-.*|manifest\.json\.tmp-[0-9]+|paragraphs")
_INDEX_FILES = re.compile(r"((gen[0-9]+-|delta[0-9]{6}-)?band-[0-9]+\.[bc]?bf)|delta[0-9]{6}\.keys\.u64|runs")


def check_directory(path: str) -> None:
    """Refuse a directory without a manifest that holds anything but what a new index's directory holds.

    Band files or run records without ``manifest.json`` are a kept index
    that lost its manifest (:class:`IndexCorruptError`: a new empty index
    must not replace it); anything else is not an index directory at all
    (:class:`IndexMismatchError`: it is not lshbloom's to fill).
    """
    if exists(path) or not os.path.isdir(path):
        return
    names = sorted(os.listdir(path))
    kept = [n for n in names if _INDEX_FILES.fullmatch(n)]
    if kept:
        shown = ", ".join(kept[:4]) + (" ..." if len(kept) > 4 else "")
        raise IndexCorruptError(
            f"{path}: holds index files ({shown}) but no {MANIFEST_NAME}; a kept index is never replaced by an "
            f"empty one. Restore {MANIFEST_NAME} from a backup, or rebuild the index from its runs' inputs into a new "
            "--index-dir (docs/reliability.md, 'What an operator does'); band files datasketch wrote are taken "
            "over with LSHBloomIndex.adopt"
        )
    foreign = [n for n in names if not _NO_MANIFEST_YET.fullmatch(n)]
    if foreign:
        shown = ", ".join(foreign[:4]) + (" ..." if len(foreign) > 4 else "")
        raise IndexMismatchError(
            f"{path}: not an LSHBloom index directory (it holds {shown} and no {MANIFEST_NAME}); give --index-dir "
            "a new or empty directory, or the directory of an existing index"
        )


@dataclass(frozen=True)
class Manifest:
    """A local index's manifest (see the module docs): written by :meth:`to_json`, read by :meth:`from_json`."""

    backend: BloomBackend
    params: IndexParams
    # Each generation's sizing and fill, generation 0 first (one for a fixed index). A filter stack fills copies
    # (:meth:`stack_generations`): a manifest never changes.
    generations: tuple[Generation, ...]
    # The backend's fields of generation 0's filters as recorded when the index was made (its geometry).
    geometry: Mapping[str, Any]
    # Band file name -> its xxh3-64 checksum at the last commit (:mod:`~.checksums`).
    checksums: Mapping[str, str] = field(default_factory=dict)
    runs: tuple[RunRecord, ...] = ()
    adopted: bool = False  # band files datasketch wrote, taken over (LSHBloomIndex.adopt)
    # The pending deltas (lshbloom_udf.index.deltas), oldest first: generations with a name and a key log.
    deltas: tuple[Generation, ...] = ()

    @property
    def format_version(self) -> int:
        return FORMAT_VERSIONS[self.params.growth]

    @property
    def bloom(self) -> str:
        """The name of the index's Bloom backend."""
        return self.backend.name

    @property
    def inserted(self) -> int:
        """Documents in the index: its generations' and its deltas'."""
        return self.base_inserted + sum(d.inserted for d in self.deltas)

    @property
    def base_inserted(self) -> int:
        return sum(g.inserted for g in self.generations)

    @property
    def p_band(self) -> float:
        """Generation 0's per-band rate."""
        return self.generations[0].p_band

    def replace(self, **changes: Any) -> "Manifest":
        return dataclasses.replace(self, **changes)

    def stack_generations(self, delta_last: bool = False) -> list[Generation]:
        """What a filter stack decides over, as new values, the one it writes last: the deltas, then the generations
        (``delta_last``: the generations, then the deltas; the newest delta is written)."""
        order = (*self.generations, *self.deltas) if delta_last else (*self.deltas, *self.generations)
        return [dataclasses.replace(g) for g in order]

    def delta_files(self) -> list[str]:
        """The names of every file of the pending deltas (their band files and logs)."""
        return [n for d in self.deltas
                for n in (*(os.path.basename(p) for p in generation_paths("", self.backend, self.params.b, 0, d.name)),
                          f"{d.name}{DELTA_KEYS_SUFFIX}")]

    def next_run_id(self) -> str:
        """The id the next committed run gets."""
        return run_id(len(self.runs) + 1)

    def to_json(self) -> dict:
        """The manifest as ``manifest.json`` stores it (the writer: :meth:`from_json` reads it back equal)."""
        params = as_recorded(self.params)
        if self.params.growth == "fixed":
            del params["growth"]  # version 1, as before growth existed
        out: dict = {
            "format": self.backend.manifest_format,
            "format_version": self.format_version,
            "bloom_format": self.backend.bloom_format,
            "params": params,
            "p_band": self.p_band,
            "inserted": self.base_inserted,
            **self.geometry,
        }
        if self.params.growth != "fixed":
            out["generations"] = [g.record(self.backend) for g in self.generations]
        out[CHECKSUMS] = {"algorithm": ALGORITHM, "files": dict(self.checksums)}
        if self.runs:
            out["runs"] = [r.to_json() for r in self.runs]
        if self.adopted:
            out["adopted"] = True
        if self.deltas:
            out["deltas"] = [d.record(self.backend) for d in self.deltas]
        return json.loads(json.dumps(out))

    @classmethod
    def from_json(cls, data: Any, where: str) -> "Manifest":
        """The manifest ``data`` (``manifest.json``'s JSON) of the file ``where``, validated."""
        bloom_backend = backend_for_format(data.get("format")) if isinstance(data, dict) else None
        if bloom_backend is None:
            raise IndexCorruptError(
                f"{where}: not an LSHBloom index manifest (format {' or '.join(MANIFEST_FORMATS)})")
        version = data.get("format_version")
        if version not in FORMAT_VERSIONS.values():
            raise IndexMismatchError(
                f"{where}: {data['format']} format version {version!r}, "
                f"this version reads {' and '.join(map(str, FORMAT_VERSIONS.values()))}"
            )
        _check_released(where, data)
        _check_generations(where, data)
        geometry_names = set(bloom_backend.manifest_fields(1000, 0.01))
        unknown = sorted(set(data) - _MANIFEST_FIELDS - geometry_names)
        if unknown or data.get("bloom_format") != bloom_backend.bloom_format:
            raise IndexCorruptError(f"{where}: corrupt manifest (unknown fields {', '.join(unknown) or 'none'}, "
                                    f"bloom_format {data.get('bloom_format')!r})")
        try:
            stored = {**IMPLIED_PARAMS, **data["params"]}
            params = IndexParams(**{f.name: stored[f.name] for f in dataclasses.fields(IndexParams)})
            generations = _generations(data, params)
            deltas = _deltas(where, data.get("deltas", []))
        except (KeyError, TypeError, ValueError) as e:
            raise IndexCorruptError(f"{where}: corrupt manifest ({e!r})") from None
        return cls(bloom_backend, params, generations, {k: data[k] for k in geometry_names if k in data},
                   _checksums(where, data[CHECKSUMS]), read_runs(data, where), data.get("adopted") is True, deltas)


# The top-level fields of a manifest besides its backend's geometry.
_MANIFEST_FIELDS = {"format", "format_version", "bloom_format", "params", "p_band", "inserted", "generations",
                    CHECKSUMS, "runs", "adopted", "deltas"}
# A manifest generation's own fields; the others are its backend's (Generation.geometry).
GENERATION_FILL = ("capacity", "p_band", "inserted")
DELTA_FIELDS = ("name", "keys_sha256")


def _generations(data: Mapping, params: IndexParams) -> tuple[Generation, ...]:
    if "generations" not in data:
        return (Generation(params.capacity, float(data["p_band"]), int(data["inserted"])),)
    return tuple(Generation(g["capacity"], g["p_band"], g["inserted"],
                            {k: v for k, v in g.items() if k not in GENERATION_FILL})
                 for g in data["generations"])


def _deltas(where: str, recorded: Any) -> tuple[Generation, ...]:
    """The pending deltas a manifest lists, each named as the job names them (their files are deleted by name)."""
    if not isinstance(recorded, list) or not all(
            isinstance(d, dict) and isinstance(d.get("name"), str) and DELTA_NAME.fullmatch(d["name"])
            and isinstance(d.get("keys_sha256"), str) for d in recorded):
        raise IndexCorruptError(f"{where}: corrupt manifest (its deltas are not named as the job names them)")
    return tuple(Generation(d["capacity"], d["p_band"], d["inserted"],
                            {k: v for k, v in d.items() if k not in GENERATION_FILL + DELTA_FIELDS},
                            name=d["name"], keys_sha256=d["keys_sha256"])
                 for d in recorded)


def _checksums(where: str, recorded: Any) -> dict[str, str]:
    files = recorded.get("files") if isinstance(recorded, dict) else None
    if not isinstance(files, dict) or recorded.get("algorithm") != ALGORITHM:
        raise IndexCorruptError(
            f"{where}: corrupt manifest (its {CHECKSUMS} entry is not {ALGORITHM} of each band file)")
    return {str(k): str(v) for k, v in files.items()}


def read_manifest(path: str) -> Manifest:
    """The manifest of the index at ``path``, validated."""
    manifest_path = os.path.join(path, MANIFEST_NAME)
    try:
        with open(manifest_path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise IndexFilesMissingError(f"{manifest_path}: no LSHBloom index manifest here") from None
    except json.JSONDecodeError as e:
        raise IndexCorruptError(f"{manifest_path}: corrupt manifest ({e})") from None
    return Manifest.from_json(data, manifest_path)


def write_manifest(path: str, manifest: Manifest) -> None:
    write_json_atomically(os.path.join(path, MANIFEST_NAME), manifest.to_json())


# What every manifest of a released version records; one without them was written before the first release.
RELEASED_FIELDS = (CHECKSUMS, "params")
RELEASED_PARAMS = ("band_key", "shingle")


def _check_released(manifest_path: str, manifest: Mapping) -> None:
    """Refuse a manifest written before the first release (no band-file checksums, no band key or shingle unit)."""
    params = manifest["params"] if "params" in manifest else None
    missing = [f for f in RELEASED_FIELDS if f not in manifest]
    missing += [f"params.{p}" for p in RELEASED_PARAMS if isinstance(params, dict) and p not in params]
    if missing:
        raise IndexMismatchError(
            f"{manifest_path}: an index written before the first release (its manifest has no {', '.join(missing)}); "
            "this version does not read it: rebuild the index from its runs' inputs into a new --index-dir "
            "(docs/reliability.md, 'What an operator does')")


def _check_generations(manifest_path: str, manifest: Mapping) -> None:
    """A version-2 manifest lists its generations, a version-1 one has none; both agree with ``params.growth``."""
    params = manifest.get("params")
    growth = {**IMPLIED_PARAMS, **params}["growth"] if isinstance(params, dict) else None
    generations = manifest.get("generations")
    ok = growth in GROWTH_MODES and FORMAT_VERSIONS[growth] == manifest["format_version"]
    if ok and growth == "fixed":
        ok = generations is None
    elif ok:
        ok = isinstance(generations, list) and bool(generations) and all(
            isinstance(g, dict) and isinstance(g.get("capacity"), int) and isinstance(g.get("inserted"), int)
            and isinstance(g.get("p_band"), float) for g in generations
        )
    if not ok:
        raise IndexCorruptError(
            f"{manifest_path}: corrupt manifest (format version {manifest['format_version']} with growth {growth!r} "
            "and generations that do not match)"
        )


def new_manifest(backend: BloomBackend, params: IndexParams, p_band: Optional[float] = None) -> Manifest:
    """The manifest of a new, empty index of ``backend`` filters (one generation; ``p_band``: params' unless
    given)."""
    first = Generation(params.capacity, params.p_band if p_band is None else p_band)
    if params.growth != "fixed":
        first = dataclasses.replace(first, geometry=backend.manifest_fields(first.capacity, first.p_band))
    return Manifest(backend, params, (first,), backend.manifest_fields(first.capacity, params.p_band))
