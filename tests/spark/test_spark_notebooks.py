"""Both notebooks run end to end in local mode."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest

from spark_support import ROOT
NOTEBOOKS = os.path.join(ROOT, "notebooks")


def databricks_cells(path):
    with open(path, encoding="utf-8") as f:
        source = f.read()
    first, _, rest = source.partition("\n")
    assert first == "# Databricks notebook source"
    cells = [c.strip("\n") for c in rest.split("# COMMAND ----------")]
    code, markdown = [], 0
    for cell in cells:
        lines = cell.splitlines()
        if lines and all(l.startswith("# MAGIC") for l in lines if l.strip()):
            markdown += 1
            continue
        code.append("\n".join(l for l in lines if not l.startswith("# MAGIC")))
    return code, markdown


@pytest.mark.slow
def test_databricks_notebook_runs(spark, capsys):
    code, markdown = databricks_cells(os.path.join(NOTEBOOKS, "dedup_databricks.py"))
    assert markdown >= 4 and len(code) >= 6
    shown = []

    def display(df, *args, **kwargs):  # Databricks' display(), enough for a DataFrame
        shown.append(df.toPandas() if hasattr(df, "toPandas") else df)

    pages = []
    namespace = {"spark": spark, "display": display, "displayHTML": pages.append, "__name__": "__main__"}
    for i, cell in enumerate(code):
        exec(compile(cell, f"dedup_databricks.py cell {i}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "refused:" in out and "threshold" in out
    assert namespace["result"].summary["duplicates"] > 0
    assert namespace["across"].count() > 0
    # The product names the kept document (no hand-made matching), and order_by keeps the longest / newest.
    assert {"duplicate_of", "similarity"} <= set(namespace["flagged"].columns)
    named = namespace["flagged"].where("duplicate_of is not null").count()
    assert named == namespace["flagged"].where("is_duplicate").count() > 0
    assert namespace["keeps_longest"] is True and namespace["longest_pairs"].count() > 0
    assert "keep-newest: every kept document at least as new: True" in out
    assert "best_kept_match" not in open(os.path.join(NOTEBOOKS, "dedup_databricks.py")).read()
    assert len(shown) >= 4 and all(len(s) for s in shown)
    # The run report, as displayHTML shows it: the run's counts and its charts, inlined.
    assert len(pages) == 1 and "lshbloom-spark run report" in pages[0] and "<script src" not in pages[0]
    assert f"data-field='documents'>{namespace['result'].summary['documents']:,}<" in pages[0]
    # The stream: every document once in the batches' outputs, flagged as the batch run over all of them flags.
    streamed = {r["id"]: r["is_duplicate"] for r in namespace["streamed"].collect()}
    assert len(streamed) == len(namespace["docs"]) and [b["batch"] for b in namespace["stream_writer"].progress] == [0, 1]
    assert "batch 1: 300 documents" in out and sum(streamed.values()) > 0


@pytest.mark.slow
def test_jupyter_notebook_runs(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(os.path.join(NOTEBOOKS, "dedup_walkthrough.ipynb"), as_version=4)
    # The kernel is this interpreter (the venv's ipykernel); Spark in it uses local[2].
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = "\n".join(
        o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
    )
    assert "DUPLICATE" in outputs and "KEPT" in outputs
    assert "batch-2 documents flagged as near-duplicates of batch-1 documents" in outputs
    assert "refused:" in outputs
    assert "Jaccard" in outputs and "with KEPT" in outputs  # duplicate_of's pairs, from the product
    assert "every kept document at least as long: True" in outputs
    assert re.search(r"run report: \d+\.\d MB, [2-9] charts", outputs)
    assert "keep-newest: every kept document at least as new: True" in outputs
    assert "best_kept_match" not in json.dumps(nb)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
