"""``lshbloom dedup --stream``: the files arriving in ``--input`` deduplicated micro-batch by micro-batch.

Each micro-batch is one run of the kept index (``--index-dir``), written to
``<output>/batch=<n>`` and committed with the index, exactly once across
crashes and restarts from ``--checkpoint-location``
(:mod:`lshbloom_udf.spark.streaming`). Each batch's summary is written to
``<summary-path>/batch-<n>.json`` (default ``<output>.summaries``). SIGTERM or
Ctrl-C to this (the driver's Python) process stops the query between two
batches; under ``spark-submit`` a SIGTERM goes to the JVM, which stops the query
where it is (a batch cut short commits nothing and is redone on restart).
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import threading
from typing import TYPE_CHECKING, Optional

from lshbloom_udf.common import hadoop_jvm
from lshbloom_udf.errors import JobError
from lshbloom_udf.job.io import JSON_MAX_STRING_LEN, first_line, write_text
from lshbloom_udf.log import logger

if TYPE_CHECKING:
    from lshbloom_udf.config import DedupConfig

# Reader formats whose bad records Spark would turn into rows of nulls unless told to fail (a silent loss).
PERMISSIVE_FORMATS = ("json", "csv")
# How often the job looks whether it was asked to stop.
STOP_POLL_SECONDS = 0.5


def run_stream(spark, args, config: DedupConfig) -> int:
    """Run the stream until its trigger ends it (available-now) or it is stopped; the exit status."""
    from lshbloom_udf.spark.streaming import StreamDedup

    if config.index_dir is None:
        raise JobError("--stream needs --index-dir: the stream's micro-batches are runs of one kept index")
    if not args.checkpoint_location:
        raise JobError("--stream needs --checkpoint-location DIR (the query's progress; restart with it to resume)")
    summaries = args.summary_path or args.output.rstrip("/") + ".summaries"

    def on_batch(entry: dict) -> None:
        write_text(spark, f"{summaries}/batch-{entry['batch']}.json", json.dumps(entry, indent=2, default=str) + "\n")

    writer = StreamDedup(config.index_dir, args.output, config=config, on_batch=on_batch,
                         before_batch=RemovedFiles(spark, args.checkpoint_location))
    stream = read_stream(spark, config, args)
    # A batch's failure reaches this process as the query's exception, which the job reports in one line (exit 2)
    # or raises (exit 1, its Java and Python traces in it): the JVM's own logs of it would print them a second time.
    with quiet_task_failures(spark, STREAM_FAILURE_LOGGERS), removed_while_read(args.checkpoint_location):
        query = writer.start(stream, args.checkpoint_location, trigger=trigger_of(args.trigger))
        _await(query)
    done = list(writer.progress)
    print(f"stream             {len(done)} batch(es) this run, {sum(e['documents'] or 0 for e in done):,} documents, "
          f"{sum(e['duplicates'] or 0 for e in done):,} duplicates")
    print(f"output             {args.output}/batch=<n> ({config.output_format}, mode {config.mode})")
    print(f"summaries          {summaries}")
    return 0


def read_stream(spark, config: DedupConfig, args):
    """The streaming DataFrame of the files in ``--input``: the schema given, or the files' already there."""
    from pyspark.errors import AnalysisException

    options = dict(config.input_options)
    if config.input_format in PERMISSIVE_FORMATS:
        options.setdefault("mode", "FAILFAST")
    if config.input_format == "json":
        options.setdefault("maxStringLen", str(JSON_MAX_STRING_LEN))
    schema = args.stream_schema
    if schema is None:
        try:
            with quiet_task_failures(spark, READ_LOGGERS):
                schema = spark.read.format(config.input_format).options(**options).load(args.input).schema
        except AnalysisException as e:
            raise JobError(f"cannot infer the schema of --input {args.input} ({first_line(e)}): give --stream-schema "
                           "'id string, text string' (or let files arrive first)") from None
        except Exception as e:  # Py4JJavaError or PySparkException, by Spark version: a file it cannot parse
            if not unparsable(e):
                raise
            raise JobError(unparsable_file(spark, config, options, args.input, e)) from None
    reader = spark.readStream.format(config.input_format).options(**options).schema(schema)
    if args.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", args.max_files_per_trigger)
    return reader.load(args.input)


# Spark's error classes for an input record or file it cannot parse or read.
_UNPARSABLE = ("MALFORMED_RECORD_IN_PARSING", "FAILED_READ_FILE", "CANNOT_READ_FILE_FOOTER")
# The JVM loggers that print a failed task's Java stack trace (the job says what failed, in one line), and with them
# those that print a failed micro-batch's (the query's terminating error, a block it could not cache).
TASK_FAILURE_LOGGERS = ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager")
STREAM_FAILURE_LOGGERS = (*TASK_FAILURE_LOGGERS, "org.apache.spark.sql.execution.streaming",
                          "org.apache.spark.storage.BlockManager")
# The loggers off while the job reads the landing files in a batch (the schema, a bad file's name): those of a failed
# task, and FileStreamSink's, which prints a Java trace for a glob --input (it looks for a metadata directory at the
# glob's literal path: a warning, not an error).
READ_LOGGERS = (*TASK_FAILURE_LOGGERS, "org.apache.spark.sql.execution.streaming")


def unparsable(error: BaseException) -> bool:
    text = str(getattr(error, "java_exception", None) or "") + str(error)
    return any(c in text for c in _UNPARSABLE)


def unparsable_file(spark, config: DedupConfig, options: dict, input_path: str, error: BaseException) -> str:
    """The ``error:`` line for a landing file Spark cannot parse: the file found by reading each one (an error path
    only), and what to do."""
    bad = None
    for path in _landing_files(spark, input_path):
        try:
            with quiet_task_failures(spark, READ_LOGGERS):
                spark.read.format(config.input_format).options(**options).load(path).schema
        except Exception as e:
            if unparsable(e):
                bad = path
                break
            raise
    where = f"the file {bad}" if bad else f"a file of --input {input_path}"
    return (f"{where} has a record that cannot be parsed as {config.input_format}: fix or remove it, or drop such "
            "records knowingly with --input-option mode=DROPMALFORMED")


def _landing_files(spark, input_path: str) -> list:
    """The files the stream would read, in name order (Hadoop's listing: any file system): those of the directory
    ``input_path``, or of each directory or file its glob matches (``/landing/*.json``, ``/landing/2026-*``)."""
    jvm, conf = _hadoop(spark)
    path = jvm.org.apache.hadoop.fs.Path(input_path)
    fs = path.getFileSystem(conf)
    # globStatus: the path itself when it has no wildcard, None when nothing matches; listStatus of a file: itself.
    found = [s.getPath() for m in fs.globStatus(path) or [] for s in fs.listStatus(m.getPath()) if s.isFile()]
    names = sorted((p.toString() for p in found), key=lambda n: n.rsplit("/", 1)[-1])
    return [n for n in names if not n.rsplit("/", 1)[-1].startswith((".", "_"))]


def _hadoop(spark) -> tuple:
    """(jvm, Hadoop configuration) of the job's classic session (the job refuses Spark Connect before it starts)."""
    found = hadoop_jvm(spark)
    if found is None:
        raise JobError("the stream job needs a classic Spark session (spark-submit); over Spark Connect use "
                       "StreamDedup(...).start(df, checkpoint_location) (docs/deployment.md)")
    return found


# The one source of the job's query: Spark's file source records each batch's files under sources/0 of the checkpoint.
SOURCE_LOG = "sources/0"


class RemovedFiles:
    """``before_batch`` of the job's stream: the files Spark listed for a micro-batch that are gone from ``--input``.

    Spark's file source plans a batch over the files it listed that still exist and drops the others with a log
    line of its own, so a file removed between its listing and its batch would leave the batch silently short of
    its documents (empty, for a batch of that file alone). Each such batch gets a warning line naming the files,
    and its summary their list (``removed_files``).
    """

    def __init__(self, spark, checkpoint: str):
        from lshbloom_udf.spark.passes.sharded.hadoop import HadoopDir

        self._jvm, self._conf = _hadoop(spark)
        self._log = HadoopDir(spark, f"{checkpoint.rstrip('/')}/{SOURCE_LOG}")

    def __call__(self, batch_id: int) -> dict:
        removed = [p for p in self.listed(batch_id) if not self._exists(p)]
        if removed:
            logger.warning(
                "warning: stream batch %d: %d file(s) listed for it were removed from --input before it read them; "
                "their documents are not in this batch (to deduplicate them, copy the files back into --input under "
                "new names: the stream skips a name it listed once): %s", batch_id, len(removed), ", ".join(removed))
        return {"removed_files": removed}

    def listed(self, batch_id: int) -> list:
        """The files of batch ``batch_id`` in the source log: ``<n>`` or, every 10th batch, ``<n>.compact`` (all the
        batches' entries so far): a ``v1`` line, then one JSON object per file (path, timestamp, batchId)."""
        name = next((n for n in (str(batch_id), f"{batch_id}.compact") if self._log.exists(n)), None)
        if name is None:
            return []
        lines = self._log.read_text(name).splitlines()[1:]
        entries = [json.loads(line) for line in lines if line.startswith("{")]
        return [e["path"] for e in entries if e.get("batchId") == batch_id and "path" in e]

    def _exists(self, uri: str) -> bool:
        path = self._jvm.org.apache.hadoop.fs.Path(self._jvm.java.net.URI(uri))  # the log holds URIs (%20 for a space)
        return bool(path.getFileSystem(self._conf).exists(path))


# Spark's error when a task finds a file of its batch gone (removed after the batch was planned).
_REMOVED = re.compile(r"\[FAILED_READ_FILE\.FILE_NOT_EXIST\][^\n]*? reading file (?P<path>.+?)\. File does not exist")


def removed_file(error: BaseException) -> Optional[str]:
    """The file a failed query's batch found removed while it read it, or None."""
    found = _REMOVED.search(str(getattr(error, "java_exception", None) or "") + "\n" + str(error))
    return found["path"] if found else None


@contextlib.contextmanager
def removed_while_read(checkpoint: str):
    """The query's failure on a file removed while its batch read it, as one ``error:`` line (exit 2)."""
    try:
        yield
    except Exception as e:
        path = removed_file(e)
        if path is None:
            raise
        raise JobError(f"the file {path} was removed from --input while the stream read it; nothing of its batch is "
                       f"committed. Restart the job with --checkpoint-location {checkpoint}: the batch is redone "
                       "without it (with a warning), and a copy of the file put back into --input under a new name "
                       "is deduplicated by a later batch") from None


@contextlib.contextmanager
def quiet_task_failures(spark, loggers: tuple = TASK_FAILURE_LOGGERS):
    """The JVM's ``loggers`` off for the block, then as they were (no JVM here, Spark Connect: unchanged)."""
    try:
        log4j = spark.sparkContext._jvm.org.apache.logging.log4j
        context = log4j.LogManager.getContext(False)
        config = context.getConfiguration()
        # A logger without its own configuration gets one to be turned off; it is removed after, not left set
        # (one set explicitly would pass records the root's appender filters out).
        own = {name: config.getLoggers().containsKey(name) for name in loggers}
        levels = {name: log4j.LogManager.getLogger(name).getLevel() for name in loggers}
    except Exception:  # Spark Connect (no SparkContext), or another logging backend
        yield
        return
    for name in loggers:
        log4j.core.config.Configurator.setLevel(name, log4j.Level.OFF)
    try:
        yield
    finally:
        for name in loggers:
            if own[name]:
                log4j.core.config.Configurator.setLevel(name, levels[name])
            else:
                config.removeLogger(name)
        context.updateLoggers()


def trigger_of(text: str) -> dict:
    """``DataStreamWriter.trigger``'s arguments for ``--trigger``."""
    if text == "available-now":
        return {"availableNow": True}
    if text == "once":
        return {"once": True}
    return {"processingTime": text}


def _await(query) -> None:
    """Wait for the query; SIGTERM or Ctrl-C stops it once no batch runs (a batch cut short commits nothing)."""
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not query.awaitTermination(STOP_POLL_SECONDS):
            if stop.is_set() and not query.status["isTriggerActive"]:
                logger.info("stopping the stream between two batches")
                query.stop()
    except KeyboardInterrupt:
        query.stop()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
