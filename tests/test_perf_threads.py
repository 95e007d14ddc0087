"""Native threads per call (Spark passes the task's cores): results never depend on the thread count."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lshbloom_udf import _native, arrow_band_keys, signatures, text_band_keys
from lshbloom_udf.sample import build_sample


@pytest.fixture(scope="module")
def texts():
    docs = [d["text"] for d in build_sample(num_docs=700, duplicate_fraction=0.2, seed=4)]
    docs[5:5] = [None, "", " \t "]
    return docs


@pytest.mark.parametrize("threads", [2, 3, 16])
def test_thread_count_does_not_change_results(texts, threads):
    np.testing.assert_array_equal(signatures(texts, threads=threads), signatures(texts))
    k1, h1 = text_band_keys(texts, 42, 6)
    k2, h2 = text_band_keys(texts, 42, 6, threads=threads)
    np.testing.assert_array_equal(k1, k2)
    np.testing.assert_array_equal(h1, h2)
    for typ in (pa.string(), pa.large_string()):
        k3, h3 = arrow_band_keys(pa.array(texts, typ), 42, 6, threads=threads)
        np.testing.assert_array_equal(k1[h1], k3[h3])
        np.testing.assert_array_equal(h1, h3)


def test_bad_thread_count_is_refused(texts):
    with pytest.raises(ValueError, match="threads"):
        text_band_keys(texts, 42, 6, threads=0)


def test_empty_input_with_threads():
    keys, has = text_band_keys([], 42, 6, threads=4)
    assert keys.shape == (0, 42) and has.shape == (0,)
    assert _native.simd_backend() in ("avx512", "avx2", "generic")
