"""Transitional: the blocked Bloom backend now lives in :mod:`lshbloom_udf.index.backends` (``backend("blocked")``).

Kept only for ``lshbloom_udf/spark.py``'s import of :func:`blocked_index_bytes`;
remove once it asks ``backend(bloom).index_bytes(capacity, p_band, b)``.
"""

from __future__ import annotations

from lshbloom_udf.index.backends import backend


def blocked_index_bytes(capacity: int, p_band: float, b: int) -> int:  # transitional
    """Bytes on disk of a blocked index (``b`` band files; manifest excluded)."""
    return backend("blocked").index_bytes(capacity, p_band, b)
