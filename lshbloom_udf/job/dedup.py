"""The dedup job: read, deduplicate, write, commit — with the index and the output committed together.

Exit status (:data:`lshbloom_udf.errors.EXIT_CODES`): 0 on success, 2 on bad
input or settings or an index that refuses the run (one ``error:`` line on
stderr, no traceback), 1 on other failures, 130 when interrupted.
"""

from __future__ import annotations

import contextlib
import errno
import json
import sys
import time
from typing import TYPE_CHECKING

from lshbloom_udf import hooks
from lshbloom_udf.common import stop_session
from lshbloom_udf.errors import JobError, LSHBloomError, exit_code
from lshbloom_udf.job.cli import PROG, build_parser, config_from
from lshbloom_udf.job.io import first_line, read_input, refuse_output_over_input, unreadable_input_file, write_text
from lshbloom_udf.log import configure, console_progress, logger, step
from lshbloom_udf.spark.output import Output

if TYPE_CHECKING:
    from lshbloom_udf.config import DedupConfig


def main(argv=None, prog: str = PROG, spark=None) -> None:
    """Run the job and exit with its status."""
    try:
        code = run(argv, prog, spark)
    except LSHBloomError as e:
        code = exit_code(e)
        if code == 1:  # a failure of the run, not of its settings: the traceback is what finds it
            raise
        print(f"error: {first_line(e)}", file=sys.stderr)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        code = 130
    sys.exit(code)


# The OSErrors a user fixes (space, quota, permissions, a read-only file system); any other is a failure (exit 1).
USER_OS_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM})


@contextlib.contextmanager
def _refused(prefix: str = ""):
    """Spark's analysis errors, unreadable input files and the index's storage refusing a write (unwritable, full
    disk) as job errors. Any other error, a ValueError or OSError included, is an internal failure: it propagates
    with its traceback (exit 1)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import AnalysisException, PySparkException

    try:
        yield
    except LSHBloomError:
        raise
    except AnalysisException as e:
        raise JobError(prefix + first_line(e)) from None
    except OSError as e:
        if e.errno not in USER_OS_ERRNOS:
            raise
        raise JobError(prefix + first_line(e)) from None
    except (Py4JJavaError, PySparkException) as e:
        unreadable = unreadable_input_file(e)
        if unreadable is None:
            raise
        raise JobError(prefix + unreadable) from None


def run(argv=None, prog: str = PROG, spark=None) -> int:
    """The job; ``spark``: a session to use (and leave running) instead of the active one or a new one."""
    from pyspark.sql import SparkSession

    args = build_parser(prog).parse_args(argv)
    config = config_from(args)
    configure(args.log_level or ("WARNING" if not config.progress else "INFO"))
    if args.stream:
        if args.report:
            raise JobError("--report is for a batch run: a stream writes a summary per micro-batch")
        return _run_stream(args, config, spark)
    t0 = time.monotonic()
    txn = _open_index(config)
    # A session that already exists (given, a notebook's, a test's) is used and left running.
    existing = spark or SparkSession.getActiveSession()
    result = None
    try:
        spark = existing or SparkSession.builder.appName("lshbloom-dedup").getOrCreate()
        output = Output(spark, args.output)
        written = [(_summary_path(args), "the summary")] + ([(_report_path(args), "the report")] if args.report else [])
        refuse_output_over_input(spark, output, args.input, written)
        with _refused():  # a corrupt manifest, named by the message
            committed = {r.output for r in txn.runs()} if txn is not None else set()
        if output.exists() and not args.overwrite and output.qualified not in committed:
            raise JobError(f"cannot write --output {args.output}: it already exists (use --overwrite to replace it)")
        with step(spark, "read input", show=config.progress):
            df = read_input(spark, config, args.input)
        check_report_args(args, df.columns)
        t_read = time.monotonic()
        with _refused():
            result = _deduplicate(df, config, txn, args, output)
        t_dedup = time.monotonic()
        _write_and_commit(result, txn, output, args, config)
        hooks.fire("after-commit")
        seconds = {"read_schema": t_read - t0, "write": time.monotonic() - t_dedup, "job_total": time.monotonic() - t0}
        _report(spark, result, args, config, seconds)
    finally:
        try:
            if result is not None:
                result.close()
            if txn is not None:
                txn.close()
        finally:
            if existing is None and SparkSession.getActiveSession() is not None:
                stop_session(SparkSession.getActiveSession())
    return 0


def _run_stream(args, config: DedupConfig, spark) -> int:
    """The job over a stream of arriving files (:mod:`lshbloom_udf.job.stream`): each micro-batch opens the index."""
    from pyspark.sql import SparkSession

    from lshbloom_udf.job.stream import run_stream

    existing = spark or SparkSession.getActiveSession()
    spark = existing or SparkSession.builder.appName("lshbloom-dedup-stream").getOrCreate()
    try:
        refuse_output_over_input(spark, Output(spark, args.output), args.input)
        with _refused():
            return run_stream(spark, args, config)
    finally:
        if existing is None and SparkSession.getActiveSession() is not None:
            stop_session(SparkSession.getActiveSession())


def _open_index(config: DedupConfig):
    """The index's transaction, taken before Spark starts and held until the commit (a second job fails here);
    a sharded index's is opened once Spark runs (its manifests are on a Hadoop filesystem)."""
    from lshbloom_udf.spark.api import open_index

    index_dir = config.index_dir
    if index_dir is None:
        return None
    try:
        txn = open_index(index_dir, config)
    except (LSHBloomError, OSError) as e:
        raise JobError(f"--index-dir {index_dir}: {first_line(e)}") from None
    done = txn.recovered
    if done["rolled_forward"]:
        logger.warning("finished the commit of run %s that a crashed job left half done", done["rolled_forward"])
    if done["discarded"]:
        logger.warning("discarded %d staging copie(s) of crashed run(s)", len(done["discarded"]))
    return txn


def _deduplicate(df, config: DedupConfig, txn, args, output: Output):
    from lshbloom_udf.spark import run

    run_info = {"input": args.input, "output": output.qualified, "output_format": config.output_format}
    return run(df, config, transaction=txn, defer_commit=txn is not None, run_info=run_info)


def _write_and_commit(result, txn, output: Output, args, config: DedupConfig) -> None:
    """Write the output to its temporary path and commit it with the index (or reuse a reproduced run's output)."""
    from pyspark.errors import AnalysisException

    reproduced_from = result.reproduced_from
    if reproduced_from is not None:
        prior = next(r for r in txn.runs() if r.run_id == reproduced_from)
        if prior.output == output.qualified and output.exists():
            # The run completed before (perhaps it was killed after its commit): its output is the result.
            logger.warning(
                f"this input was already ingested by run {reproduced_from}, whose output "
                f"{args.output} is in place: nothing to do (--force-new-ingest to ingest it again)"
            )
            result.close()
            return
    if output.exists() and not args.overwrite:
        raise JobError(f"cannot write --output {args.output}: it already exists (use --overwrite to replace it)")
    writer = result.df.write.format(config.output_format).options(**config.output_options)
    output.prepare_temporary(txn)
    hooks.fire("output-write", path=output.local_tmp)
    try:
        with step(result.df.sparkSession, "write", show=config.progress), console_progress(
                result.df.sparkSession, config.progress):
            writer.save(output.tmp)
    except AnalysisException as e:
        raise JobError(f"cannot write --output {args.output}: {first_line(e)}") from None
    finally:
        hooks.fire("output-written")
    if output.local_tmp:
        if txn is not None:
            result.commit(outputs=[(output.local_tmp, output.local)])
        else:
            output.commit_local()
    else:
        output.commit_hadoop()
        if txn is not None:
            result.commit()


def check_report_args(args, columns) -> None:
    """``--report`` can be written: plotly is installed and ``--report-by`` names a column (checked before the run)."""
    if args.report_by and not args.report:
        raise JobError("--report-by needs --report")
    if not args.report:
        return
    try:
        import plotly  # noqa: F401
    except ImportError:
        raise JobError("--report needs plotly: pip install 'lshbloom-spark[report]'") from None
    if args.report_by and args.report_by not in columns:
        raise JobError(f"--report-by column {args.report_by!r} not found; the input has columns {list(columns)}")


def _report_path(args) -> str:
    from lshbloom_udf.report.cli import report_path

    return args.report_path or report_path(args.output)


def _summary_path(args) -> str:
    return args.summary_path or args.output.rstrip("/") + ".summary.json"


def _report(spark, result, args, config: DedupConfig, seconds: dict) -> None:
    """The summary: printed, and written as JSON beside the output."""
    from lshbloom_udf.spark.result import JobReport, build_summary, format_summary

    summary_path = _summary_path(args)
    job = JobReport(args.input, args.output, config.output_format, summary_path, seconds)
    summary = build_summary(result.report, result.record, job)
    write_text(spark, summary_path, json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n")
    print(format_summary(summary))
    print(f"output             {args.output} ({config.output_format}, mode {config.mode})")
    print(f"summary            {summary_path}")
    if args.report:
        from lshbloom_udf.report import write_report

        path = _report_path(args)
        took = write_report(spark, summary, args.output, path, args.report_by, config.output_options)
        print(f"report             {path} ({took:.2f} s)")
