"""``lshbloom report OUT``: the run report of a job's output, from the summary beside it."""

from __future__ import annotations

import argparse
import os
import sys

from lshbloom_udf.report.facts import PAIRS


def report_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lshbloom_udf report",
                                description="Write the run report (one self-contained HTML file) of a job's output.")
    p.add_argument("output", help="the job's --output")
    p.add_argument("--summary-path", help="the job's summary (default <output>.summary.json)")
    p.add_argument("--report-path", help="where to write the report (default <output>.report.html)")
    p.add_argument("--report-by", help="a column of the output to give the duplicate rate by, e.g. lang or source")
    p.add_argument("--pairs", type=int, default=PAIRS, help="removed documents shown beside their kept one "
                                                            "(default %(default)s)")
    p.add_argument("--output-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an option for reading the output back (the job's --output-option), repeatable")
    return p


def report_path(output: str) -> str:
    return output.rstrip("/") + ".report.html"


def main(argv: list[str]) -> None:
    """Write the report; exit 2 with one ``error:`` line for a missing summary or a bad column."""
    from pyspark.sql import SparkSession

    from lshbloom_udf.errors import LSHBloomError
    from lshbloom_udf.job.io import first_line
    from lshbloom_udf.report import load_summary, write_report

    args = report_parser().parse_args(argv)
    options = dict(o.split("=", 1) for o in args.output_option if "=" in o)
    summary_path = args.summary_path or args.output.rstrip("/") + ".summary.json"
    path = args.report_path or report_path(args.output)
    spark = SparkSession.getActiveSession() or SparkSession.builder.appName("lshbloom-report").getOrCreate()
    try:
        summary = load_summary(spark, summary_path)
        seconds = write_report(spark, summary, args.output, path, args.report_by, options, args.pairs)
    except FileNotFoundError:
        print(f"error: no summary at {summary_path}: give the job's summary with --summary-path", file=sys.stderr)
        sys.exit(2)
    except LSHBloomError as e:
        print(f"error: {first_line(e)}", file=sys.stderr)
        sys.exit(2)
    print(f"report             {os.path.abspath(path) if '://' not in path else path} ({seconds:.2f} s)")
