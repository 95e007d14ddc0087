"""spark_jobs/dedup.py: one real spark-submit, then the job in-process (the test session) for errors and options."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from spark_support import JVM_OPTIONS, REFERENCE, REFERENCE_FLAGS, ROOT, datasketch_flags, new_reference_index, sample_docs

JOB = os.path.join(ROOT, "spark_jobs", "dedup.py")


def _load_job():
    spec = importlib.util.spec_from_file_location("lshbloom_dedup_job", JOB)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def job():
    return _load_job()


@pytest.fixture(scope="module")
def batches(tmp_path_factory):
    """Two JSON-lines batches of the sample: the first 300 documents, then the rest."""
    root = tmp_path_factory.mktemp("job")
    docs = list(sample_docs())
    paths = []
    for name, part in (("first.jsonl", docs[:300]), ("second.jsonl", docs[300:])):
        path = root / name
        with open(path, "w", encoding="utf-8") as f:
            for d in part:
                f.write(json.dumps(d) + "\n")
        paths.append(str(path))
    return root, paths, docs[:300], docs[300:]


def run_job(job, argv, capsys):
    with pytest.raises(SystemExit) as exc:
        job.main(argv)
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


@pytest.fixture(scope="module")
def submitted(batches):
    """One real spark-submit of the job on the first batch, keeping the index."""
    root, (first, _), first_docs, _ = batches
    spark_submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    out = str(root / "out1")
    cmd = [
        spark_submit, "--master", "local[2]", "--conf", "spark.ui.enabled=false",
        "--conf", "spark.driver.host=127.0.0.1", "--conf", f"spark.driver.extraJavaOptions={JVM_OPTIONS}",
        JOB, "--input", first, "--output", out, "--output-format", "json",
        "--id-column", "id", "--index-dir", str(root / "index"), "--expected-docs", "1000", *REFERENCE_FLAGS,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    return proc, out


@pytest.mark.slow
def test_spark_submit_end_to_end(submitted, batches, spark):
    proc, out = submitted
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, _, first_docs, _ = batches
    assert "duplicates" in proc.stdout and "docs/s" in proc.stdout
    with open(out + ".summary.json") as f:
        summary = json.load(f)
    assert summary["documents"] == len(first_docs)
    assert summary["index"]["path"].endswith("index") and summary["index"]["bytes_on_disk"] > 0
    assert {"keys", "driver_pass", "write", "job_total"} <= set(summary["seconds"])
    rows = spark.read.json(out).collect()
    assert len(rows) == len(first_docs)
    flags = {r["id"]: r["is_duplicate"] for r in rows}
    # One small file is read in order: input order is file order.
    assert [flags[d["id"]] for d in first_docs] == datasketch_flags([d["text"] for d in first_docs], config=REFERENCE)
    assert summary["duplicates"] == sum(flags.values())


@pytest.mark.slow
def test_second_batch_against_the_submitted_index(job, submitted, batches, capsys, spark):
    proc, _ = submitted
    assert proc.returncode == 0, proc.stderr[-3000:]
    root, (_, second), first_docs, second_docs = batches
    out = str(root / "out2")
    code, stdout, err = run_job(
        job, ["--input", second, "--output", out, "--index-dir", str(root / "index"), "--id-column", "id", "--quiet", *REFERENCE_FLAGS], capsys
    )
    assert code == 0, err
    flags = {r["id"]: r["is_duplicate"] for r in spark.read.parquet(out).collect()}
    lsh = new_reference_index(1000, config=REFERENCE)
    datasketch_flags([d["text"] for d in first_docs], lsh=lsh, config=REFERENCE)
    assert [flags[d["id"]] for d in second_docs] == datasketch_flags([d["text"] for d in second_docs], lsh=lsh, config=REFERENCE)
    summary = json.load(open(out + ".summary.json"))
    assert summary["index"]["inserted_before"] > 0 and summary["index"]["capacity"] == 1000

    # The same index with other parameters: a clear error, exit 2, no traceback.
    code, _, err = run_job(
        job, ["--input", second, "--output", str(root / "out3"), "--index-dir", str(root / "index"), "--threshold", "0.8"], capsys
    )
    assert code == 2
    assert err.strip().splitlines()[-1].startswith("error:") and "threshold" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--text-column", "body"], "text column 'body' not found"),
        (["--text-column", "source"], "not string"),
        (["--id-column", "uid"], "id column 'uid' not found"),
        (["--threshold", "1.5"], "threshold must be"),
        (["--num-perm", "0"], "num_perm must be"),
        (["--p-effective", "0"], "p_effective"),
        (["--expected-docs", "0"], "expected_docs"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(job, batches, capsys, tmp_path, extra, message):
    _, (first, _), _, _ = batches
    code, _, err = run_job(job, ["--input", first, "--output", str(tmp_path / "o"), "--quiet", *extra], capsys)
    assert code == 2
    assert message in err and "Traceback" not in err
    assert not os.path.exists(tmp_path / "o")


def test_missing_input_and_duplicate_ids(job, capsys, tmp_path):
    code, _, err = run_job(job, ["--input", str(tmp_path / "nope.jsonl"), "--output", str(tmp_path / "o")], capsys)
    assert code == 2 and "cannot read --input" in err and "Traceback" not in err
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"id": "a", "text": "one two"}\n{"id": "a", "text": "three four"}\n{"id": "b", "text": "x"}\n')
    code, _, err = run_job(job, ["--input", str(dup), "--output", str(tmp_path / "o"), "--id-column", "id"], capsys)
    assert code == 2 and "not unique" in err and "'a' (2 rows)" in err


def test_config_file_then_flags_csv_in_json_out(job, capsys, tmp_path, spark):
    csv = tmp_path / "in.csv"
    csv.write_text(
        "key,body\n1,the quick brown fox jumps over the lazy dog\n2,the quick brown fox jumps over the lazy dog today\n"
        "3,completely different words are here\n4,\n"
    )
    conf = tmp_path / "my.toml"
    conf.write_text(
        '[dedup]\ntext_column = "body"\nmode = "filter"\noutput_format = "json"\norder_by = "key"\n'
        'input_format = "csv"\ninput_options = { header = "true" }\n'
    )
    out = str(tmp_path / "out")
    code, stdout, err = run_job(job, ["--config", str(conf), "--input", str(csv), "--output", out, "--quiet"], capsys)
    assert code == 0, err
    assert sorted(r["key"] for r in spark.read.json(out).collect()) == ["1", "3", "4"]
    # A flag overrides the file; an existing output needs --overwrite.
    code, _, err = run_job(job, ["--config", str(conf), "--input", str(csv), "--output", out, "--mode", "duplicates"], capsys)
    assert code == 2 and "cannot write --output" in err
    summary_path = str(tmp_path / "s.json")
    code, _, err = run_job(
        job,
        ["--config", str(conf), "--input", str(csv), "--output", out, "--mode", "duplicates", "--overwrite", "--summary-path", summary_path],
        capsys,
    )
    assert code == 0, err
    assert [r["key"] for r in spark.read.json(out).collect()] == ["2"]
    assert json.load(open(summary_path))["mode"] == "duplicates"
    bad = tmp_path / "bad.toml"
    bad.write_text("[dedup]\ntreshold = 0.3\n")
    code, _, err = run_job(job, ["--config", str(bad), "--input", str(csv), "--output", out], capsys)
    assert code == 2 and "treshold" in err


def test_settings_precedence(job, tmp_path):
    from lshbloom_udf.config import DEFAULTS, DedupConfig
    from lshbloom_udf.job import config_from
    from lshbloom_udf.minhash import normalization_name

    conf = tmp_path / "c.toml"
    conf.write_text('[dedup]\nthreshold = 0.7\nngram = 3\n')
    parser = job.build_parser()
    s = config_from(parser.parse_args(["--input", "i", "--output", "o"])).to_dict()
    assert s == {**DedupConfig.from_settings(DEFAULTS).to_dict(), "order_by": None}
    s = config_from(parser.parse_args(["--input", "i", "--output", "o", "--config", str(conf), "--ngram", "2", "--normalize"]))
    assert (s.threshold, s.ngram, s.normalize) == (0.7, 2, normalization_name("all"))
