"""The README's front door: its quickstart runs as written, and its settings table is config.py's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from spark_support import ROOT

sys.path.insert(0, os.path.join(ROOT, "tools"))
import readme  # noqa: E402  (tools/readme.py: the table's generator)

README = os.path.join(ROOT, "README.md")


def _blocks(language: str) -> list[str]:
    with open(README, encoding="utf-8") as f:
        return re.findall(rf"```{language}\n(.*?)```", f.read(), flags=re.S)


def _quickstart(language: str, first_word: str) -> str:
    """The README's ``language`` code block that starts with ``first_word``: the quickstart's."""
    found = [b for b in _blocks(language) if b.startswith(first_word)]
    assert len(found) == 1, f"the README should have one {language} block starting with {first_word!r}"
    return found[0]


def test_settings_table_is_generated_from_config():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    assert readme.with_table(text) == text, "README's settings table is out of date: run `make readme`"


def test_settings_table_names_every_setting():
    from lshbloom_udf.config import DEFAULTS

    table = readme.settings_table()
    missing = [name for name in DEFAULTS if f"| `{name}` |" not in table]
    assert not missing and table.count("\n| `") == len(DEFAULTS)


@pytest.mark.slow
def test_readme_quickstart_runs_as_written(tmp_path, spark):
    """The job's commands in a shell, then the ETL block in this session, in one directory, as a newcomer would."""
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    job = subprocess.run(["bash", "-euc", _quickstart("bash", "lshbloom sample")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert job.returncode == 0, job.stderr[-3000:]
    summary = json.loads((tmp_path / "deduped.summary.json").read_text())
    docs = sum(1 for _ in open(tmp_path / "sample.jsonl"))
    assert summary["documents"] == docs and 0 < summary["duplicates"] < docs
    assert (tmp_path / "deduped.report.html").stat().st_size > 0 and (tmp_path / "my-index").is_dir()
    flagged = spark.read.parquet(str(tmp_path / "deduped"))
    assert flagged.filter("is_duplicate AND duplicate_of IS NOT NULL").count() == summary["duplicates"]

    # The session's JVM resolves relative paths against its own working directory, not this test's: the block's
    # paths are made absolute in the directory the job ran in.
    block = re.sub(r'\.(json|parquet)\("([^"/][^"]*)"\)', lambda m: f'.{m[1]}("{tmp_path / m[2]}")',
                   _quickstart("python", "from pyspark"))
    exec(compile(block, "README.md", "exec"), {})
    kept = {r.id: r.text for r in spark.read.parquet(str(tmp_path / "kept")).collect()}
    assert 0 < docs - len(kept) and len(set(kept)) == len(kept)
    # Another keep order, the same near-duplicates: of a pair the job verified as an exact copy or by a Jaccard
    # of 0.6 or more (symmetric, and past the template rule, whose sample follows the order), one is kept.
    pairs = flagged.filter("similarity_measure = 'exact' OR (similarity_measure = 'jaccard' AND similarity >= 0.6)")
    pairs = pairs.select("id", "duplicate_of").collect()
    assert pairs and not [p for p in pairs if p.id in kept and p.duplicate_of in kept]


def test_docs_stay_reference_sized():
    """docs/ is reference, not a lab log: 3,000 lines in all, benchmarks.md 300 (the history is benchmarks/log.md)."""
    docs = os.path.join(ROOT, "docs")
    lines = {name: sum(1 for _ in open(os.path.join(docs, name), encoding="utf-8"))
             for name in os.listdir(docs) if name.endswith(".md")}
    assert sum(lines.values()) <= 3000, lines
    assert lines["benchmarks.md"] <= 300, lines["benchmarks.md"]
