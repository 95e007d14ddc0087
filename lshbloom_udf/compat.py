"""The defaults of the low-level API, declared once: :data:`COMPAT_DEFAULTS`.

The low-level API (:class:`~lshbloom_udf.index.IndexParams` and
``IndexParams.for_threshold``, the functions of :mod:`lshbloom_udf.minhash`,
:func:`lshbloom_udf.sizing.plan`) defaults to the LSHBloom paper's parameters
in datasketch's formats: datasketch >= 2's permutations (``affine32``),
datasketch's band key (``sum``) and, for the filters,
:data:`~lshbloom_udf.index.DEFAULT_BLOOM` (pybloomfiltermmap3 files), so that
an index built with these defaults is the one ``datasketch.MinHashLSHBloom(
params=(b, r))`` reads. (datasketch's own constructor defaults, threshold 0.9
and 128 permutations, are not the paper's.)

They differ from the job's defaults (:data:`lshbloom_udf.config.DEFAULTS`:
mixed 11-grams, T 0.3, the mix band key, cuckoo filters, growth,
verification) on purpose: those were chosen for quality and speed at scale
and are not datasketch's; code that builds an index by hand and tests that
compare with datasketch rely on these. The paper's preset
(``PRESETS["paper"]``) is these with the paper code's permutations.

This module imports nothing of the package, so every layer can read it.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

COMPAT_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "threshold": 0.5,
        "num_perm": 256,
        "scheme": "affine32",
        "seed": 1,
        "ngram": 1,
        "shingle": "words",
        "normalize": "none",
        "band_key": "sum",
        "p_effective": 1e-5,
        "growth": "fixed",
    }
)
