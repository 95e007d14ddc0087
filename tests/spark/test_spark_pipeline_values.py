"""DedupRun's stage values are produced once: a second assignment is refused, and runs on every path (a new index,
a kept one, a reproduced run, a forced new ingestion) assign each at most once."""

from __future__ import annotations

import pytest

from lshbloom_udf import deduplicate
from lshbloom_udf.config import DedupConfig
from lshbloom_udf.errors import InternalError
from lshbloom_udf.spark.pipeline import STAGE_VALUES, DedupRun
from spark_support import sample_docs


def test_a_stage_value_is_set_once(spark):
    df = spark.createDataFrame([("a", "x y z")], "id string, text string")
    run = DedupRun(df, DedupConfig(), DedupConfig().index_params(1), None, None, 0.0)
    run.measure_later = True  # the first assignment: the stage's
    with pytest.raises(InternalError, match="measure_later was already produced"):
        run.measure_later = False
    assert {"checked", "measured_before", "measured_after", "copies", "records"} <= STAGE_VALUES


@pytest.mark.slow
def test_every_run_path_assigns_each_stage_value_once(spark, tmp_path):
    docs = list(sample_docs(300))
    df = spark.createDataFrame([(d["id"], d["text"]) for d in docs], "id string, text string").localCheckpoint()
    index = str(tmp_path / "index")
    kw = dict(id_col="id", index_dir=index, progress=False, return_summary=True, duplicate_of=True)
    first = deduplicate(df.limit(200), **kw)
    again = deduplicate(df.limit(200), **kw)  # reproduced
    forced = deduplicate(df, force_new_ingest=True, **kw)  # the input check after the pass finds what it repeats
    assert again.summary["index"]["reproduced_from"] == first.summary["index"]["run_id"]
    assert first.summary["duplicates"] > 0 and forced.summary["documents"] == len(docs)
