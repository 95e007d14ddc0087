"""The run report: written by the job (``--report``) and by ``lshbloom report``, opened in a real headless Chromium:
it renders without console messages and without network requests, and shows the summary's numbers."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from browser_support import render
from lshbloom_udf.report.html import highlight
from spark_support import sample_docs
from test_spark_job import _load_job, run_job



@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """One job over the sample (a site column of three values) with --report --report-by site."""
    root = tmp_path_factory.mktemp("report")
    docs = [d for d in sample_docs() if d["text"] is not None]
    src = root / "in.jsonl"
    with open(src, "w", encoding="utf-8") as f:
        for i, d in enumerate(docs):
            f.write(json.dumps({"id": d["id"], "text": d["text"], "site": f"site-{i % 3}"}) + "\n")
    out = str(root / "out")
    return root, out, docs


def _fields(dom: str) -> dict:
    return {m[1]: m[2] for m in re.finditer(r"data-field='?\"?([a-z_]+)'?\"?[^>]*>([^<]*)<", dom)}


def _number(text: str) -> float:
    return float(text.replace(",", "").rstrip("%"))


@pytest.mark.slow
def test_the_job_writes_a_report_chromium_renders_offline_with_the_summarys_numbers(reported, capsys, spark,
                                                                                     tmp_path):
    root, out, docs = reported
    job = _load_job()
    code, stdout, err = run_job(job, ["--input", str(root / "in.jsonl"), "--output", out, "--id-column", "id",
                                      "--duplicate-of", "--duplicate-count", "--report", "--report-by", "site",
                                      "--quiet"], capsys)
    assert code == 0, err
    assert f"report             {out}.report.html" in stdout
    summary = json.load(open(out + ".summary.json"))
    page = render(out + ".report.html", tmp_path, screenshot=str(tmp_path / "report.png"))
    assert page.console == [], page.console
    assert page.requests == [], page.requests
    figures = re.findall(r'<div [^>]*class="([^"]*plotly-graph-div[^"]*)"', page.dom)
    assert len(figures) == 4 and all("js-plotly-plot" in f for f in figures), "every chart was drawn"
    shown = _fields(page.dom)
    for field in ("documents", "duplicates", "kept", "empty_documents", "exact_duplicates"):
        assert _number(shown[field]) == summary[field], field
    assert _number(shown["duplicate_rate"]) == pytest.approx(100 * summary["duplicate_rate"], abs=0.005)
    v = summary["verify"]
    assert _number(shown["pass_flagged"]) == v["pass_flagged"] and _number(shown["unflagged"]) == v["unflagged"]
    assert _number(shown["similarity_total"]) == summary["duplicates"] - v["unverifiable"]
    assert _number(shown["inserted_total"]) == summary["index"]["inserted_total"]
    # The duplicate rate by site equals a count of the output's rows.
    rows = spark.read.parquet(out).collect()
    per_site = Counter(r["site"] for r in rows)
    removed = Counter(r["site"] for r in rows if r["is_duplicate"])
    for site, n in per_site.items():
        assert re.search(rf"<td>{site}</td><td class=\"n\">{n:,}</td><td class=\"n\">{removed[site]:,}</td>",
                         page.dom), site
    # The largest groups are the kept documents named most.
    named = Counter(r["duplicate_of"] for r in rows if r["is_duplicate"])
    top_id, top_n = sorted(named.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    assert re.search(rf"<td>{top_id}</td><td class=\"n\">{top_n}</td>", page.dom)
    assert (tmp_path / "report.png").stat().st_size > 10_000


@pytest.mark.slow
def test_the_report_command_reads_the_output_back(reported, capsys, tmp_path):
    from lshbloom_udf.__main__ import main

    _, out, _ = reported
    path = str(tmp_path / "again.html")
    main(["report", out, "--report-path", path, "--pairs", "2"])
    assert "report" in capsys.readouterr().out
    page = render(path, tmp_path)
    assert page.console == [] and page.requests == []
    assert page.dom.count("<div class=\"pair\">") == 2
    with pytest.raises(SystemExit) as exit_:
        main(["report", out, "--report-path", path, "--report-by", "nope"])
    assert exit_.value.code == 2 and "report-by column 'nope' not found" in capsys.readouterr().err


def test_shared_runs_are_marked():
    a, b = highlight("one two three four five six", "zero two three four nine")
    assert a == "one <mark>two three four</mark> five six"
    assert b == "zero <mark>two three four</mark> nine"
    a, _ = highlight("<b> x y", "<b> x y")
    assert a == "<mark>&lt;b&gt; x y</mark>"


@pytest.mark.parametrize("settings, note", [
    ({"mode": "filter", "duplicate_count": True}, "mode flag with duplicate_of"),
    ({"mode": "duplicates", "duplicate_of": True}, "mode flag with duplicate_of"),
    ({"verify": False}, "did not verify"),
])
def test_what_an_output_cannot_show_is_said(spark, settings, note):
    from lshbloom_udf.report import report_html
    from lshbloom_udf.spark import deduplicate

    df = spark.createDataFrame([(d["id"], d["text"]) for d in sample_docs(200) if d["text"]], "id string, text string")
    result = deduplicate(df, id_col="id", progress=False, return_summary=True, **settings)
    page = report_html(result)
    assert note in page and f"data-field='duplicates'>{result.summary['duplicates']:,}<" in page
    assert "<div class='pair'>" not in page


def test_a_report_path_over_the_input_is_refused(reported, capsys):
    root, out, _ = reported
    source = root / "in.jsonl"
    before = source.read_bytes()
    code, _, err = run_job(_load_job(), ["--input", str(source), "--output", str(root / "o-refused"), "--report",
                                         "--report-path", str(source), "--quiet"], capsys)
    assert code == 2 and "the report" in err and "would overwrite the input" in err
    assert source.read_bytes() == before
