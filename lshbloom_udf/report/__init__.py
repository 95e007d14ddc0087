"""The run report: one self-contained HTML file of what a run removed and why (``lshbloom report OUT``, the job's
``--report``, :func:`report_html` in a notebook).

:mod:`.facts` gathers what to show from the run's summary and output;
:mod:`.html` renders it (plotly charts, inlined: the page makes no network
request). The plots need ``plotly`` (``pip install lshbloom-spark[report]``).
"""

from __future__ import annotations

import json
import time
from typing import Mapping, Optional

from lshbloom_udf.errors import ConfigError
from lshbloom_udf.log import logger
from lshbloom_udf.report.facts import PAIRS, ReportFacts, gather


def _render(facts: ReportFacts) -> str:
    try:
        from lshbloom_udf.report.html import render
    except ImportError as e:  # plotly is an optional dependency
        raise ConfigError(f"the run report needs plotly ({e}): pip install 'lshbloom-spark[report]'") from None
    return render(facts)


def report_html(result, by: Optional[str] = None, pairs: int = PAIRS) -> str:
    """The report of a ``deduplicate(..., return_summary=True)`` result as HTML (``displayHTML(report_html(r))`` on
    Databricks, ``IPython.display.HTML`` in Jupyter); ``by``: a column to give the duplicate rate by."""
    return _render(gather(result.summary, result.df, by, pairs))


def read_output(spark, summary: Mapping, output: str, options: Optional[Mapping] = None):
    """The output a job wrote, read back in its format (``summary['output_format']``)."""
    return spark.read.format(summary.get("output_format", "parquet")).options(**(options or {})).load(output)


def write_report(spark, summary: Mapping, output: str, path: str, by: Optional[str] = None,
                 options: Optional[Mapping] = None, pairs: int = PAIRS) -> float:
    """Write the report of the job whose ``summary`` and ``output`` are given to ``path``; its seconds."""
    from lshbloom_udf.job.io import write_text

    t0 = time.monotonic()
    write_text(spark, path, _render(gather(summary, read_output(spark, summary, output, options), by, pairs)))
    seconds = time.monotonic() - t0
    logger.info("report: %s (%.2f s)", path, seconds)
    return seconds


def load_summary(spark, path: str) -> dict:
    """A job's JSON summary."""
    from lshbloom_udf.job.io import read_text

    return json.loads(read_text(spark, path))


__all__ = ["ReportFacts", "gather", "load_summary", "read_output", "report_html", "write_report"]
