"""An index names its format: manifests and run records written before the first release are refused with one
clear error (and one `error:` line from the command line), never read by a guess of what they meant."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from lshbloom_udf.errors import IndexMismatchError
from lshbloom_udf.index import IndexParams, IndexTransaction, LSHBloomIndex, RunRecord, StreamBatch
from lshbloom_udf.index.run_record import read_run
from spark_support import ROOT

PARAMS = IndexParams(b=4, r=2, capacity=500)


def _committed(path) -> RunRecord:
    """An index with one committed run (a stream's micro-batch, with records named), its record as committed."""
    with IndexTransaction(str(path)) as txn:
        staged = txn.stage(PARAMS)
        flags = staged.query_insert(np.arange(80, dtype=np.uint64).reshape(20, 4) % 48)
        run = RunRecord(documents=20, duplicates=int(flags.sum()), inserted=int((~flags).sum()), params={},
                        content_fingerprint="c", sequence_fingerprint="s", order_by=("score DESC",),
                        stream=StreamBatch("q", 3, "streams/q/3", "ab", "out/batch=3"))
        return txn.commit(run, np.flatnonzero(flags))


def _edit_manifest(path, edit) -> None:
    manifest = json.loads((path / "manifest.json").read_text())
    edit(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))


def test_a_run_record_reads_back_as_it_was_committed(tmp_path):
    committed = _committed(tmp_path / "ix")
    with IndexTransaction(str(tmp_path / "ix")) as txn:
        (run,) = txn.runs()
    assert run == committed and run.run_id == "000001" and run.stream == StreamBatch("q", 3, "streams/q/3", "ab",
                                                                                          "out/batch=3")
    assert run.inserted_total == run.inserted and run.order_by == ("score DESC",)
    assert read_run(run.to_json(), "here") == run
    with IndexTransaction(str(tmp_path / "ix")) as txn:
        assert len(txn.load_duplicates(run)) == run.duplicates


@pytest.mark.parametrize("edit, missing", [
    (lambda m: m.pop("checksums"), "checksums"),
    (lambda m: m["params"].pop("band_key"), "params.band_key"),
    (lambda m: m["params"].pop("shingle"), "params.shingle"),
])
def test_a_manifest_written_before_the_first_release_is_refused(tmp_path, edit, missing):
    path = tmp_path / "ix"
    _committed(path)
    _edit_manifest(path, edit)
    with pytest.raises(IndexMismatchError, match=rf"before the first release \(its manifest has no {missing}\).*"
                                                 "rebuild the index"):
        LSHBloomIndex.open(str(path))


@pytest.mark.parametrize("version, said", [(None, "before the first release"), (2, "in run record format 2")])
def test_a_run_record_of_another_format_is_refused(tmp_path, version, said):
    path = tmp_path / "ix"
    _committed(path)

    def edit(manifest):
        if version is None:
            del manifest["runs"][0]["record_format"]
        else:
            manifest["runs"][0]["record_format"] = version

    _edit_manifest(path, edit)
    with IndexTransaction(str(path)) as txn, pytest.raises(IndexMismatchError, match=f"run 000001 was recorded {said}"):
        txn.runs()


def test_check_index_says_so_in_one_error_line(tmp_path):
    path = tmp_path / "ix"
    _committed(path)
    _edit_manifest(path, lambda m: m["runs"][0].pop("record_format"))
    proc = subprocess.run([sys.executable, "-m", "lshbloom_udf", "check-index", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and "before the first release" in lines[0]
