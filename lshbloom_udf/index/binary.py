"""Fixed-width binary values as Arrow arrays and back: the records' sketches and text hashes."""

from __future__ import annotations

import numpy as np

from lshbloom_udf.errors import IndexCorruptError


def fixed_binary(matrix: np.ndarray):
    """An Arrow binary array of the rows of a 2-D uint8 matrix (zero copy)."""
    import pyarrow as pa

    n, width = matrix.shape
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(width)
    return pa.Array.from_buffers(pa.binary(), n,
                                 [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(matrix))])


def binary_matrix(array, width: int) -> np.ndarray:
    """The ``(n, width)`` uint8 matrix of an Arrow binary array of values of ``width`` bytes."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    n = len(array)
    if n == 0:
        return np.zeros((0, width), np.uint8)
    off_type = np.int64 if pa.types.is_large_binary(array.type) else np.int32
    bufs = array.buffers()
    offsets = np.frombuffer(bufs[1], dtype=off_type, count=n + 1, offset=array.offset * np.dtype(off_type).itemsize)
    if array.null_count or not np.all(np.diff(offsets) == width):
        raise IndexCorruptError(f"records: a sketch is not {width} bytes (records of other parameters, or damaged)")
    return np.frombuffer(bufs[2], np.uint8, count=n * width, offset=int(offsets[0])).reshape(n, width)
