"""What a user sees: step descriptions on Spark's jobs, log lines, the summary's account of the run, plan's advice,
the sample command and the checks of settings that disagree (real Spark, local[2])."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time

import pytest

from lshbloom_udf import deduplicate
from lshbloom_udf.errors import DedupInputError
from spark_support import JVM_OPTIONS, ROOT, jobs, sample_docs


class Records(logging.Handler):
    """The ``lshbloom_udf`` logger's records, whatever another test configured (a handler on the logger itself)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)

    def messages(self, level=logging.DEBUG) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno >= level]


@pytest.fixture
def records():
    logger = logging.getLogger("lshbloom_udf")
    handler, level = Records(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def frame(spark, n=300, seed=11):
    docs = [d for d in sample_docs(n, seed) if d["text"] is not None]
    return spark.createDataFrame([(d["id"], d["text"], d["source"]) for d in docs], "id string, text string, source long")


@pytest.mark.parametrize("settings, steps", [
    # a kept index: the driver pass's keys stage takes the input's sums, its ids' hashes and the records' fields:
    # no job of "check input" (spark/ids.py) nor of "records" (the driver writes them: record_spool.py)
    ({"verify": True, "duplicate_of": True},
     {"pin", "exact copies", "keys + driver pass", "verify"}),
    ({"pass_mode": "sharded", "verify": False}, {"pin", "check input", "exact copies", "keys + sharded pass", "records"}),
])
@pytest.mark.slow
def test_every_job_of_a_run_carries_its_step(spark, tmp_path, settings, steps):
    df = frame(spark)
    df.count()
    before = set(jobs(spark))
    sc = spark.sparkContext
    sc.setJobDescription("the caller's")
    try:
        result = deduplicate(df, id_col="id", index_dir=str(tmp_path / "index"), progress=False,
                             return_summary=True, **settings)
        assert sc.getLocalProperty("spark.job.description") == "the caller's"  # restored
    finally:
        sc.setLocalProperty("spark.job.description", None)
    run = {j: d for j, d in jobs(spark).items() if j not in before}
    assert run and all(d is not None and d.startswith("lshbloom: ") for d in run.values()), run
    assert {d.removeprefix("lshbloom: ") for d in run.values()} == steps
    assert result.summary["duplicates"] > 0


def test_steps_are_logged_and_progress_false_is_silent(spark, records):
    df = frame(spark)
    deduplicate(df, id_col="id", progress=True)
    said = records.messages(logging.INFO)
    for name in ("pin", "check input", "keys + driver pass"):
        assert f"{name} ..." in said
        assert any(re.fullmatch(re.escape(name) + r": \d+\.\d\d s", m) for m in said), said
    records.records.clear()
    deduplicate(df, id_col="id", progress=False)
    assert records.messages(logging.INFO) == []


def test_progress_line_shows_before_the_first_keys(records):
    from lshbloom_udf.spark.passes.driver.progress import Progress

    bar = Progress(1000, enabled=True, interval=0.01)
    try:
        while not records.records:  # the timer writes the first line with nothing decided yet
            time.sleep(0.005)
    finally:
        bar.close()
    first = records.messages()[0]
    assert first.startswith("0/1,000 documents (0.0%)") and "waiting for the first keys" in first
    assert records.messages()[-1].startswith("0/1,000 documents") and "done in" in records.messages()[-1]
    silent = Progress(1000, enabled=False, interval=0.01)
    silent.update(5, 1)
    silent.close()
    assert all("done in" not in m for m in records.messages()[:-1])


def test_reproduced_run_says_so_with_the_index_backend(spark, tmp_path):
    df = frame(spark)
    index = str(tmp_path / "index")
    # Unverified: a reproduced run returns the pass's recorded flags.
    first = deduplicate(df, id_col="id", index_dir=index, verify=False, progress=False, return_summary=True)
    again = deduplicate(df, id_col="id", index_dir=index, verify=False, progress=False, return_summary=True)
    assert first.summary["run"] == "new index" and first.summary["pass"] == "driver"
    assert again.summary["run"] == "reproduced" and again.summary["pass"] == "reproduced"
    assert again.summary["index"]["backend"] == first.summary["index"]["backend"] == "cuckoo"
    assert again.summary["duplicates"] == first.summary["duplicates"]
    text = again.summary_text()
    assert f"reproduced run {first.summary['index']['run_id']}" in text
    assert "cuckoo filters, unchanged by this run" in text and "pybloomfiltermmap3" not in text
    assert "0 B" not in text and "not measured (no pass ran)" in text
    grown = deduplicate(frame(spark, 200, seed=5), id_col="id", index_dir=index, verify=False, progress=False,
                        return_summary=True)
    assert grown.summary["run"] == "index grown" and "index grown" in grown.summary_text()


def test_verified_summary_explains_kept_against_inserted(spark, tmp_path):
    df = frame(spark)
    result = deduplicate(df, id_col="id", index_dir=str(tmp_path / "index"), verify=True, verify_threshold=0.9,
                         insert="first", progress=False, return_summary=True)
    s, v = result.summary, result.summary["verify"]
    inserted = s["index"]["inserted_total"] - s["index"]["inserted_before"]
    assert v["unflagged"] > 0
    # The index follows the pass: it holds the pass's kept documents; verification kept the unflagged ones too.
    assert s["kept"] == inserted + v["unflagged"] + s["empty_documents"]
    text = result.summary_text()
    assert f"verification removed {v['unflagged']:,} of those flags" in text
    assert f"inserted the {inserted:,} documents the pass kept, so kept ({s['kept']:,}) exceeds inserted" in text
    # Under verification the pass inserts every document by default (any-earlier), and the summary says so.
    default = deduplicate(df, id_col="id", index_dir=str(tmp_path / "index2"), progress=False, return_summary=True)
    d = default.summary
    # ... but the exact copies, decided before it (their text is in the index once).
    assert d["exact_duplicates"] > 0 and d["insert"] == "all"
    assert d["index"]["inserted_total"] == d["documents"] - d["empty_documents"] - d["exact_duplicates"]
    assert (f"the pass inserted every document with shingles but the {d['exact_duplicates']:,} exact copies "
            f"({d['index']['inserted_total']:,}, any-earlier)") in default.summary_text()


def test_rate_is_over_the_decision_stage_and_says_when_startup_dominates(spark):
    result = deduplicate(frame(spark), id_col="id", progress=False, return_summary=True)
    s = result.summary
    assert s["docs_per_second"] == pytest.approx(s["documents"] / s["seconds"]["driver_pass"], rel=1e-2)
    first = s["seconds"]["first_keys"]
    assert 0 < first <= s["seconds"]["driver_pass"]
    assert s["startup_bound"] == (first > 0.5 * s["seconds"]["driver_pass"])
    assert ("Spark's start-up dominates" in result.summary_text()) == s["startup_bound"]
    assert f"{first:.2f} s of it before the first keys" in result.summary_text()
    assert "temporary (in " in result.summary_text() and "driver pass (the whole index in the driver)" in result.summary_text()


def test_sharded_summary_names_its_pass_and_index(spark):
    result = deduplicate(frame(spark), id_col="id", pass_mode="sharded", progress=False, return_summary=True)
    text = result.summary_text()
    assert result.summary["pass"] == "sharded" and "sharded_pass" in result.summary["seconds"]
    assert "driver_pass" not in result.summary["seconds"]
    assert "temporary (shards on the executors, removed)" in text and "sharded pass (band-key shards" in text


def test_mismatched_bands_warn_once_and_the_summary_reports_both(spark, records):
    df = frame(spark, 200)
    results = [deduplicate(df, bands=(10, 10), num_perm=512, threshold=0.45, progress=False, return_summary=True)
               for _ in range(2)]
    warned = records.messages(logging.WARNING)
    assert len(warned) == 1 and "10 x 10" in warned[0] and "~0.79" in warned[0] and "0.45" in warned[0]
    s = results[1].summary
    assert s["params"]["threshold"] == 0.45 and s["params"]["bands_threshold"] == pytest.approx(0.1 ** 0.1, abs=1e-4)
    assert s["warnings"] and "warning            bands b x r = 10 x 10" in results[1].summary_text()
    records.records.clear()
    ok = deduplicate(df, bands=(85, 6), num_perm=512, threshold=0.45, progress=False, return_summary=True)
    assert records.messages(logging.WARNING) == [] and "warnings" not in ok.summary


def test_order_by_a_minus_name_is_refused_with_the_descending_way(spark):
    df = frame(spark, 100)
    with pytest.raises(DedupInputError, match=r"order-by expression '-len' does not resolve.*'name DESC' sorts"):
        deduplicate(df, order_by="-len")


def test_help_and_params_name_the_real_defaults():
    from lshbloom_udf.config import DEFAULTS, DedupConfig
    from lshbloom_udf.ml import LSHBloomDeduplicator

    doc = deduplicate.__doc__
    assert "``text_col``" in doc and "``text_column``" not in doc
    assert f"a new index is {DedupConfig().new_index_bloom!r}" in doc
    assert f"threshold {DEFAULTS['threshold']}" in doc and f"num_perm {DEFAULTS['num_perm']}" in doc
    explained = LSHBloomDeduplicator().explainParams()
    line = next(l for l in explained.splitlines() if l.startswith("pEffective"))
    with_verify, without = DedupConfig().new_index_p_effective, DedupConfig(verify=False).new_index_p_effective
    assert f"a new index uses {with_verify:g} with verification, {without:g} without" in line


def _lshbloom(*args, check=True):
    return subprocess.run([sys.executable, "-m", "lshbloom_udf", *args], capture_output=True, text=True, check=check)


def test_plan_recommends_a_pass_with_both_times():
    small = json.loads(_lshbloom("plan", "--docs", "1e9", "--json", "--driver-memory", "2t").stdout)
    big = json.loads(_lshbloom("plan", "--docs", "1e9", "--json", "--driver-memory", "64g").stdout)
    assert small["recommended_pass"] == "driver" and big["recommended_pass"] == "sharded"
    assert small["index_bytes"] * 1.25 <= 2 << 40 and big["index_bytes"] > 64 << 30
    for key in ("driver", "sharded"):
        assert small["expected_seconds"][key] > 0
    # Both from the measured per-key costs kept as data (not retyped here): keys overlap the driver's decisions.
    c = small["costs"]
    cores = small["cores"]
    assert small["expected_seconds"]["sharded"] == pytest.approx(
        1e9 * (c["keys_ns_per_doc_core"] + small["b"] * c["decide_ns_per_key_core"]) / cores / 1e9)
    assert small["expected_seconds"]["driver"] == pytest.approx(
        max(1e9 * c["keys_ns_per_doc_core"] / cores, 1e9 * small["b"] * c["driver_ns_per_key"][small["bloom"]]) / 1e9)
    assert c["file"].startswith("lshbloom_udf/measured/") and os.path.exists(os.path.join(ROOT, c["file"]))
    text = _lshbloom("plan", "--docs", "1e9", "--driver-memory", "64g").stdout
    assert "recommended pass         sharded" in text and "expected time, driver" in text
    assert "  = the bands' errors" in text  # a plain-words line under the jargon


def test_sample_writes_exactly_n_or_fails_clearly(tmp_path):
    out = tmp_path / "s.jsonl"
    _lshbloom("sample", "--docs", "700", "--output", str(out))
    assert sum(1 for _ in open(out)) == 700
    failed = _lshbloom("sample", "--docs", "12000", "--output", str(tmp_path / "big.jsonl"), check=False)
    assert failed.returncode == 2 and "at most" in failed.stderr and "12,000" in failed.stderr
    assert not (tmp_path / "big.jsonl").exists()
    helped = " ".join(_lshbloom("sample", "--help").stdout.split())
    assert "documents to write, exactly" in helped and "near-duplicate variants" in helped


def test_summary_fields_are_documented(spark, tmp_path):
    result = deduplicate(frame(spark, 200), id_col="id", index_dir=str(tmp_path / "i"), verify=True,
                         duplicate_of=True, progress=False, return_summary=True)
    doc = open(os.path.join(ROOT, "docs", "summary.md"), encoding="utf-8").read()
    s = result.summary
    fields = set(s) | set(s["params"]) | set(s["index"]) | set(s["seconds"]) | set(s["verify"])
    missing = sorted(f for f in fields if f"`{f}`" not in doc)
    assert not missing, f"docs/summary.md does not explain {missing}"


QUIET_RUN = r"""
import json, sys
from pyspark.sql import SparkSession
from lshbloom_udf import deduplicate, hooks

spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "true").config("spark.driver.extraJavaOptions", sys.argv[1])
         .getOrCreate())
sc = spark.sparkContext
bar = lambda: sc._jsc.sc().progressBar()
seen = {"before": bar().isDefined()}
hooks.install("after-pin", lambda **_: seen.update(during=bar().isDefined()))
df = spark.createDataFrame([(str(i), "some words of document %d and more words" % (i % 50)) for i in range(400)],
                           "id string, text string")
df.count()
sys.stderr.write("\nQUIET-RUN-START\n"); sys.stderr.flush()
# The defaults, verification included: no stage ships a task over Spark's 1000 KiB advisory size, no temporary
# index warns that it is full (any-earlier fills it to the documents it was sized for)
deduplicate(df, id_col="id", progress=False)
restored = bar()
seen.update(after=restored.isDefined())
sys.stderr.write("\nQUIET-RUN-END\n"); sys.stderr.flush()
sys.stdout.write(json.dumps(seen) + "\n")
spark.stop()
"""


@pytest.mark.slow
def test_quiet_run_turns_off_sparks_console_progress_bar_and_gives_it_back(tmp_path):
    script = tmp_path / "quiet.py"
    script.write_text(QUIET_RUN)
    done = subprocess.run([sys.executable, str(script), JVM_OPTIONS], capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"before": True, "during": False, "after": True}
    during = done.stderr.split("QUIET-RUN-START")[1].split("QUIET-RUN-END")[0]
    assert "[Stage" not in during and "lshbloom:" not in during
    assert "WARN" not in during  # no stray warning from the run's job group (nor anything else)
    assert "Warning" not in during  # nor a Python warning (CapacityWarning)


def test_the_jobs_steps_are_described_and_its_log_level_applies(spark, tmp_path, capsys):
    from lshbloom_udf.job import main

    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in sample_docs(200, 3) if d["text"] is not None))

    def job(*flags):
        with pytest.raises(SystemExit) as exc:
            main(["--input", str(path), "--output", str(tmp_path / f"out{len(flags)}"), *flags])
        err = capsys.readouterr().err
        assert exc.value.code == 0, err
        return err

    before = set(jobs(spark))
    err = job()
    run = {j: d for j, d in jobs(spark).items() if j not in before}
    steps = {"lshbloom: " + s for s in ("read input", "pin", "exact copies", "keys + driver pass", "write")}
    described = set(run.values())
    # verify: when the settings verify; check input: not here (no id column nor kept index: the keys stage measures)
    assert steps <= described <= steps | {"lshbloom: verify"}
    assert "lshbloom: read input ..." in err and re.search(r"lshbloom: write: \d+\.\d\d s", err)
    quiet = job("--log-level", "warning")
    assert "lshbloom:" not in quiet
    assert "lshbloom:" not in job("--quiet")


def test_help_lists_every_setting_with_its_default():
    import inspect
    import pydoc

    from lshbloom_udf import deduplicate as public
    from lshbloom_udf.config import DEFAULTS, settings

    text = pydoc.render_doc(public, renderer=pydoc.plaintext)
    parameters = inspect.signature(public).parameters
    run_settings = {next((a for a in spec.aliases if a.endswith("_col")), f.name): f.name
                    for f, spec in settings() if spec.scope != "job"}
    assert len(run_settings) > 30 and "text_col" in run_settings
    for name, setting in run_settings.items():
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert parameters[name].default == DEFAULTS[setting]
        assert f"``{name}`` = ``{DEFAULTS[setting]!r}``" in text, name
    assert "output_format" not in parameters  # the job's own settings are not deduplicate's
