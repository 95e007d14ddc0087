"""The index manifest (``manifest.json``): read and validated, written, and checked against what a caller asks for.

The manifest records every parameter that decides whether two runs' band keys
are comparable (scheme, seed, num_perm, b, r, ngram, normalization, threshold,
band key, shingle unit) and how the filters were sized (capacity, p_effective, per-band p,
growth), the backend (its ``format`` name and ``bloom_format``), the format
version, the documents inserted, and the committed runs. It is plain JSON.

Format version 1 is an index of one generation of filters: a
``growth="fixed"`` index (its ``params`` have no ``growth`` entry).
Version 2 is a growing index (:mod:`~lshbloom_udf.index.growth`): ``params``
has ``growth: "grow"`` and ``generations`` lists each generation's capacity,
per-band rate and documents inserted (``p_band`` and ``inserted`` at the top
stay generation 0's rate and the total). A reader that knows only version 1
refuses it instead of reading generation 0 alone.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, fields
from typing import Any, Mapping, Optional

from lshbloom_udf.errors import IndexCorruptError, IndexFilesMissingError, IndexMismatchError
from lshbloom_udf.index.backends import MANIFEST_FORMATS, BloomBackend, backend, backend_for_format
from lshbloom_udf.index.fs import write_json_atomically
from lshbloom_udf.index.generations import Generation
from lshbloom_udf.index.growth import GROWTH_MODES
from lshbloom_udf.index.params import IndexParams
from lshbloom_udf.minhash import normalization_name

MANIFEST_NAME = "manifest.json"
# growth -> the manifest format version that records it
FORMAT_VERSIONS = {"fixed": 1, "grow": 2}
# What a version-1 manifest implies: a fixed index (its params have no growth entry).
IMPLIED_PARAMS = {"growth": "fixed"}


def exists(path: str) -> bool:
    return os.path.isfile(os.path.join(path, MANIFEST_NAME))


# What an index directory without a manifest may hold: the lock, a journal, staging copies, a manifest's temporary.
_NO_MANIFEST_YET = re.compile(r"\.lock|\.commit\.json(\.tmp-[0-9]+)?|\.staging-.*|manifest\.json\.tmp-[0-9]+")
_INDEX_FILES = re.compile(r"(gen[0-9]+-)?band-[0-9]+\.b?bf|runs")


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


def read_manifest(path: str) -> dict:
    """The manifest of the index at ``path``, validated."""
    manifest_path = os.path.join(path, MANIFEST_NAME)
    try:
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        raise IndexFilesMissingError(f"{manifest_path}: no LSHBloom index manifest here") from None
    except json.JSONDecodeError as e:
        raise IndexCorruptError(f"{manifest_path}: corrupt manifest ({e})") from None
    backend = backend_for_format(manifest.get("format")) if isinstance(manifest, dict) else None
    if backend is None:
        raise IndexCorruptError(
            f"{manifest_path}: not an LSHBloom index manifest (format {' or '.join(MANIFEST_FORMATS)})")
    version = manifest.get("format_version")
    if version not in FORMAT_VERSIONS.values():
        raise IndexMismatchError(
            f"{manifest_path}: {manifest['format']} format version {version!r}, "
            f"this version reads {' and '.join(map(str, FORMAT_VERSIONS.values()))}"
        )
    _check_released(manifest_path, manifest)
    _check_generations(manifest_path, manifest)
    return manifest


# What every manifest of a released version records; one without them was written before the first release.
RELEASED_FIELDS = ("checksums", "params")
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


def write_manifest(path: str, manifest: Mapping) -> None:
    write_json_atomically(os.path.join(path, MANIFEST_NAME), manifest)


def new_manifest(backend: BloomBackend, params: IndexParams) -> dict:
    """The manifest of a new, empty index of ``backend`` filters (one generation)."""
    first = Generation(params.capacity, params.p_band)
    manifest = {
        "format": backend.manifest_format,
        "format_version": FORMAT_VERSIONS[params.growth],
        "bloom_format": backend.bloom_format,
        "params": asdict(params),
        "p_band": first.p_band,
        "inserted": 0,
        **backend.manifest_fields(first.capacity, first.p_band),
    }
    if params.growth == "fixed":
        del manifest["params"]["growth"]  # version 1, as before growth existed
    else:
        manifest["generations"] = [first.record(backend)]
    return manifest


# A manifest generation's own fields; the others are its backend's (Generation.geometry).
GENERATION_FILL = ("capacity", "p_band", "inserted")


def generations_from_manifest(manifest: Mapping, params: IndexParams) -> list[Generation]:
    """The generations a (validated) manifest records."""
    if "generations" not in manifest:
        return [Generation(params.capacity, manifest["p_band"], manifest["inserted"])]
    return [Generation(g["capacity"], g["p_band"], g["inserted"],
                       {k: v for k, v in g.items() if k not in GENERATION_FILL})
            for g in manifest["generations"]]


def record_generations(manifest: dict, generations: list[Generation], backend: BloomBackend) -> None:
    """Write the generations' fill (and a growing index's list of them) into ``manifest``."""
    manifest["inserted"] = sum(g.inserted for g in generations)
    if "generations" in manifest:
        manifest["generations"] = [g.record(backend) for g in generations]


def manifest_backend(manifest: Mapping) -> BloomBackend:
    """The Bloom backend of a (validated) manifest."""
    found = backend_for_format(manifest["format"])
    if found is None:  # read_manifest refuses such a manifest: one built in memory without a known format
        raise ValueError(f"not an LSHBloom index manifest format: {manifest['format']!r} "
                         f"(format {' or '.join(MANIFEST_FORMATS)})")
    return found


def manifest_bloom(manifest: Mapping) -> str:
    """The name of the Bloom backend of a (validated) manifest."""
    return manifest_backend(manifest).name


def params_from_manifest(manifest: Mapping) -> IndexParams:
    stored = {**IMPLIED_PARAMS, **manifest["params"]}
    return IndexParams(**{f.name: stored[f.name] for f in fields(IndexParams)})


def check_bloom(path: str, manifest: Mapping, bloom: Optional[str]) -> None:
    """Refuse an index whose backend is not ``bloom`` (``None``: any)."""
    if bloom is None:
        return
    have = manifest_bloom(manifest)
    if have != backend(bloom).name:
        raise IndexMismatchError(
            f"{path}: index has {have} Bloom filters, asked for {bloom}. "
            f"Use --bloom {have} (bloom={have!r}) with this index, or a new --index-dir."
        )


def check_expected(path: str, params: IndexParams, expected: Mapping[str, Any]) -> None:
    """Refuse an index whose ``params`` differ from ``expected`` (names to values; ``None`` values are not checked)."""
    if isinstance(expected, IndexParams):
        expected = asdict(expected)
    expected = dict(expected)
    if expected.get("normalize") is not None:
        expected["normalize"] = normalization_name(expected["normalize"])
    have = asdict(params)
    diffs = []
    for name, want in expected.items():
        if name not in have:
            raise ValueError(f"unknown index parameter {name!r}")
        if want is None:
            continue
        got = have[name]
        floats = isinstance(got, float) and isinstance(want, float)
        same = math.isclose(got, want, rel_tol=1e-12) if floats else got == want
        if not same:
            diffs.append(f"{name}: index has {got!r}, asked for {want!r}")
    if diffs:
        raise IndexMismatchError(
            f"{path}: index was built with other parameters ({'; '.join(diffs)}). "
            "Use the index's parameters, or a new --index-dir."
        )


def check_compatible(
    path: str, manifest: Mapping, expected: Optional[Mapping[str, Any]] = None, bloom: Optional[str] = None
) -> IndexParams:
    """The index's parameters, after refusing a backend other than ``bloom`` or parameters other than ``expected``."""
    check_bloom(path, manifest, bloom)
    params = params_from_manifest(manifest)
    if expected is not None:
        check_expected(path, params, expected)
    return params
