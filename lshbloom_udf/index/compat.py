"""Whether a kept index serves a run: its backend and its parameters against what the caller asks for.

Both stores' manifests (:class:`~lshbloom_udf.index.manifest.Manifest`, the
sharded store's) name their backend (``bloom``) and parameters (``params``);
a difference is :class:`IndexMismatchError` saying what to use instead.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any, Mapping, Optional

from lshbloom_udf.errors import IndexMismatchError
from lshbloom_udf.index.backends import backend
from lshbloom_udf.index.params import IndexParams
from lshbloom_udf.minhash import normalization_name


def check_bloom(path: str, have: str, bloom: Optional[str]) -> None:
    """Refuse an index whose backend ``have`` is not ``bloom`` (``None``: any)."""
    if bloom is None:
        return
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


def check_compatible(path: str, bloom_have: str, params: IndexParams,
                     expected: Optional[Mapping[str, Any]] = None, bloom: Optional[str] = None) -> IndexParams:
    """``params``, after refusing a backend other than ``bloom`` or parameters other than ``expected``."""
    check_bloom(path, bloom_have, bloom)
    if expected is not None:
        check_expected(path, params, expected)
    return params
