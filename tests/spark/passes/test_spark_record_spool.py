"""The records a kept index writes from its keys stage (lshbloom_udf/spark/passes/driver/record_spool.py): the same
rows and values as the records job's, which computes every kept document's MinHash again."""

from __future__ import annotations

import pytest

from lshbloom_udf.index import IndexTransaction, lookup
from lshbloom_udf.spark import deduplicate


def _documents() -> list:
    words = [f"w{i}x{i * 7 % 13}" for i in range(400)]
    docs = [" ".join(words[i:i + 30 + i % 20]) for i in range(0, 360, 3)]  # overlapping windows: near copies
    docs += [docs[5], docs[5], None, "", "  \t ", "short", docs[40] + " tail words added here"]  # exact, empty
    docs += ["\u4e2d\u6587\u7684\u6587\u672c\u548c\u66f4\u591a\u7684\u5b57" * 3,
             "caf\u00e9 na\u00efve r\u00e9sum\u00e9 " * 8]
    return docs


def _records(spark, tmp_path, name: str, with_id: bool, **settings):
    rows = [(f"id-{i}" if i % 9 else None, t) if with_id else (t,) for i, t in enumerate(_documents())]
    schema = "id string, text string" if with_id else "text string"
    # Ids may not be null: the null ids above are replaced by distinct ones.
    if with_id:
        rows = [(i if i is not None else f"nul-{n}", t) for n, (i, t) in enumerate(rows)]
    df = spark.createDataFrame(rows, schema).repartition(3)
    index = tmp_path / name
    out, summary = deduplicate(df, index_dir=str(index), progress=False, return_summary=True,
                               **({"id_col": "id"} if with_id else {}), **settings)
    flags = sorted(r["text"] or "" for r in out.where("is_duplicate").collect())
    with IndexTransaction(str(index)) as txn:
        run = txn.runs()[-1]
    table = lookup.read_records(str(index / run.records["path"]))
    records = sorted(zip(*(table.column(c).to_pylist() for c in ("row", "id", "sketch", "size", "text_hash"))))
    return records, flags, run.records


@pytest.mark.slow
@pytest.mark.parametrize("with_id", [True, False])
def test_the_keys_stage_records_equal_the_records_job(spark, tmp_path, with_id):
    spooled, flags, entry = _records(spark, tmp_path, "socket", with_id, key_transfer="socket")
    computed, flags_job, entry_job = _records(spark, tmp_path, "spark", with_id, key_transfer="spark")
    assert entry["computed_by"] == "keys stage" and entry_job["computed_by"] == "records job"
    assert flags == flags_job and len(flags) >= 3  # the exact and near copies are flagged, the same either way
    assert spooled == computed and entry["documents"] == entry_job["documents"] == len(spooled)
    assert all(len(sketch) == 256 and len(h) == 16 for _, _, sketch, _, h in spooled)
    assert any(i is None for _, i, *_ in spooled) != with_id  # the ids, or none without an id column
