"""The driver pass's temporary index (a run without ``index_dir``): its directory, in /dev/shm when it fits there."""

from __future__ import annotations

from lshbloom_udf.litter import fast_temp_base, make_temp_dir


def temporary_index_dir(params, bloom: str) -> str:
    """A fresh directory for a temporary index: in /dev/shm when the index fits there with room to spare."""
    from lshbloom_udf.index import backend

    index_bytes = backend(bloom).index_bytes(params.capacity, params.p_band, params.b)
    return make_temp_dir("index", fast_temp_base(int(index_bytes * 1.25)))
