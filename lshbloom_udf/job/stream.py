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

import json
import signal
import threading
from typing import TYPE_CHECKING

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

    writer = StreamDedup(config.index_dir, args.output, config=config, on_batch=on_batch)
    query = writer.start(read_stream(spark, config, args), args.checkpoint_location, trigger=trigger_of(args.trigger))
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
            schema = spark.read.format(config.input_format).options(**options).load(args.input).schema
        except AnalysisException as e:
            raise JobError(f"cannot infer the schema of --input {args.input} ({first_line(e)}): give --stream-schema "
                           "'id string, text string' (or let files arrive first)") from None
    reader = spark.readStream.format(config.input_format).options(**options).schema(schema)
    if args.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", args.max_files_per_trigger)
    return reader.load(args.input)


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
