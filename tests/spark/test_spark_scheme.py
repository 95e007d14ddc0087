"""deduplicate(scheme="poisson") end to end: flags equal an exact keep-first loop over the same band keys."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql import types as T

from lshbloom_udf import IndexMismatchError, deduplicate, text_band_keys
from spark_support import sample_docs

SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("text", T.StringType())])
# The product's shingling and banding (DEFAULTS) with the poisson scheme.
SETTINGS = {"scheme": "poisson", "threshold": 0.45, "num_perm": 512, "ngram": 4, "normalize": "all", "seed": 1,
            "band_key": "mix", "shingle": "words", "verify": False}


def _keep_first(texts: list, b: int, r: int) -> list:
    """Flags of an exact keep-first loop: a document is a duplicate iff one of its band keys is in that band's
    set of kept documents' keys; documents without shingles are never duplicates."""
    keys, has = text_band_keys(texts, b, r, num_perm=512, ngram=4, seed=1, scheme="poisson", normalize="all",
                               band_key="mix")
    seen = [set() for _ in range(b)]
    flags = []
    for row, has_shingles in zip(keys.tolist(), has.tolist()):
        dup = has_shingles and any(k in band for k, band in zip(row, seen))
        if has_shingles and not dup:
            for k, band in zip(row, seen):
                band.add(k)
        flags.append(bool(dup))
    return flags


def test_poisson_scheme_job_equals_keep_first_over_its_band_keys(spark, tmp_path):
    docs = sample_docs()
    df = spark.createDataFrame([(d["id"], d["text"]) for d in docs], SCHEMA).repartition(3)
    index_dir = str(tmp_path / "index")
    out, summary = deduplicate(df, order_by="id", index_dir=index_dir, return_summary=True, progress=False,
                               **SETTINGS)
    rows = sorted(out.collect(), key=lambda r: r["id"])
    params = summary["params"]
    assert params["scheme"] == "poisson" and (params["b"], params["r"]) == (85, 6)
    expected = _keep_first([r["text"] for r in rows], params["b"], params["r"])
    assert [r["is_duplicate"] for r in rows] == expected
    assert sum(expected) > 50  # the sample has plenty of near-duplicates
    # Its keys are not affine32's, so an index keeps its scheme.
    texts = [r["text"] for r in rows]
    affine = text_band_keys(texts, 85, 6, num_perm=512, ngram=4, normalize="all", band_key="mix")[0]
    poisson = text_band_keys(texts, 85, 6, num_perm=512, ngram=4, normalize="all", band_key="mix",
                             scheme="poisson")[0]
    assert not np.array_equal(affine, poisson)
    with pytest.raises(IndexMismatchError, match="scheme"):
        deduplicate(df, index_dir=index_dir, progress=False, **{**SETTINGS, "scheme": "affine32"})
