"""``StreamDedup``: near-duplicate removal in Structured Streaming, each micro-batch one run of a kept index.

Exactly once, by construction (docs/reliability.md, streams):

- Micro-batch ``n`` of query ``q`` is one run of the kept index at
  ``index_dir``, recorded with the key ``stream: {query: q, batch: n}``
  (:class:`BatchKey`). Its output, its flags by identity
  (:mod:`~lshbloom_udf.spark.streaming.flags`) and the index are committed
  together, in one journal (a local output; on another file system the
  output is renamed just before the commit and is the batch's own directory,
  so that writing it again is idempotent).
- A batch Spark runs again (its driver died after the commit, before the
  checkpoint's commit log recorded it) finds its key committed: its rows, in
  whatever order they come, get the stored flags; nothing is decided nor
  inserted, and a committed output is left as it is.
- A batch that was not committed left nothing: it is decided again, from the
  index as it was.

A user ``sink(df, batch_id)`` instead of ``output`` is called before the
commit: it must be idempotent by ``batch_id`` (Delta's ``txnAppId`` /
``txnVersion`` options, an overwrite of the batch's partition), as Spark's own
``foreachBatch`` contract asks.
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from lshbloom_udf import hooks
from lshbloom_udf.common import spark_context
from lshbloom_udf.config import DedupConfig
from lshbloom_udf.errors import ConfigError, DedupInputError, InternalError
from lshbloom_udf.index.lock import waiting_for_lock
from lshbloom_udf.index.paths import OUTPUT_TMP_SUFFIX
from lshbloom_udf.index.run_record import RunRecord, StreamBatch
from lshbloom_udf.log import logger
from lshbloom_udf.spark.streaming import flags

log = logger  # the package's: the command line shows its lines (lshbloom_udf.log.configure)

# How long a micro-batch waits for the index's lock (held by `lshbloom check-index`, a backup script) before it
# fails the query.
LOCK_WAIT_SECONDS = 600.0
# The per-batch summaries a writer keeps (StreamDedup.progress), newest last.
PROGRESS_KEPT = 100
# The local property Spark's stream execution thread sets to the query's id (persisted in its checkpoint).
QUERY_ID_PROPERTY = "sql.streaming.queryId"
# A query id names the folder of its batches' flags in the index (streams/<query id>/): a UUID, or a caller's name.
QUERY_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,127}")


@dataclass(frozen=True)
class BatchKey:
    """What identifies a micro-batch across restarts: the query's id (kept in its checkpoint) and the batch id."""

    query: str
    batch: int

    def record(self) -> dict:
        return {"query": self.query, "batch": self.batch}

    def find(self, runs: Sequence[RunRecord]) -> Optional[RunRecord]:
        """The committed run of this batch among a kept index's ``runs``, or None."""
        return next((r for r in reversed(runs) if r.stream is not None and r.stream.query == self.query
                     and r.stream.batch == self.batch), None)


class StreamDedup:
    """A ``foreachBatch`` function: ``stream_df.writeStream.foreachBatch(StreamDedup(index_dir, output))``.

    ``output``: a directory; batch ``n`` is written to ``<output>/batch=<n>``
    (``output_format``, default the setting's) in the mode the settings say.
    Or ``sink(df, batch_id)``: the caller writes the deduplicated batch
    (idempotently by ``batch_id``). ``settings``: any setting of
    :func:`~lshbloom_udf.spark.deduplicate`. ``query_id``: the stream's key in
    the index when called outside a streaming query (default: the query's id).
    ``progress``: the last batches' summaries (each also logged and given to ``on_batch(summary)``).
    ``before_batch(batch_id)``: called before a new batch is decided (not for a batch Spark replays); the dict it
    returns goes into the batch's summary.
    """

    def __init__(self, index_dir: str, output: Optional[str] = None, *, sink: Optional[Callable] = None,
                 query_id: Optional[str] = None, lock_wait_seconds: float = LOCK_WAIT_SECONDS,
                 on_batch: Optional[Callable] = None, before_batch: Optional[Callable[[int], dict]] = None,
                 config: Optional[DedupConfig] = None, **settings):
        self.config = check_stream_config((config or DedupConfig()).replace(index_dir=index_dir, **settings))
        if (output is None) == (sink is None):
            raise DedupInputError("a stream needs exactly one of output (a directory) and sink (a function)")
        self.output, self.sink, self.query_id, self.on_batch = output, sink, query_id, on_batch
        self.before_batch = before_batch
        self.lock_wait_seconds = float(lock_wait_seconds)
        # Each batch: keep-first over its rows in flag mode (the stored flags need every row), its paragraphs
        # annotated (the stored spans are what a replay removes again), then the modes asked.
        annotated = {"paragraphs": "annotate"} if self.config.paragraphs != "off" else {}
        self.run_config = self.config.replace(mode="flag", force_new_ingest=True, **annotated)
        self.sources = _source_columns(self.config)
        self.progress: deque = deque(maxlen=PROGRESS_KEPT)

    def start(self, stream_df, checkpoint_location: str, *, trigger: Optional[dict] = None,
              query_name: Optional[str] = None):
        """Start the streaming query of ``stream_df`` through this writer; the ``StreamingQuery``."""
        from lshbloom_udf.spark.api import check_columns

        if not stream_df.isStreaming:
            raise DedupInputError("start() takes a streaming DataFrame (spark.readStream); deduplicate a batch "
                                  "DataFrame with deduplicate(df, ...)")
        check_columns(stream_df, self.config)
        if "expected_docs" not in self.config.given:
            log.info("the stream's index is sized by its first batch and grows by generations of filters; "
                     "give expected_docs (the documents the stream will bring) to size it once")
        writer = stream_df.writeStream.foreachBatch(self).option("checkpointLocation", checkpoint_location)
        if query_name is not None:
            writer = writer.queryName(query_name)
        return (writer.trigger(**trigger) if trigger else writer).start()

    def __call__(self, batch_df, batch_id: int) -> None:
        t0 = time.monotonic()
        key = BatchKey(self._query_id(batch_df), int(batch_id))
        txn = self._open_index(batch_df.sparkSession)
        try:
            committed = key.find(txn.runs())
            # A replay's rows were decided when it was committed: what before_batch checks concerns new batches only.
            noted = self.before_batch(key.batch) if self.before_batch is not None and committed is None else {}
            hooks.fire("stream-batch", query=key.query, batch=key.batch)
            if committed is not None:
                entry = self._replay(batch_df, key, committed, txn.path)
            else:
                entry = {**self._decide(batch_df, key, txn), **noted}
        finally:
            txn.close()
        entry["seconds"] = round(time.monotonic() - t0, 3)
        self.progress.append(entry)
        log.info("stream batch %s", _progress_line(entry))
        if self.on_batch is not None:
            self.on_batch(entry)

    # -- a new batch -------------------------------------------------------------------

    def _decide(self, batch_df, key: BatchKey, txn) -> dict:
        from lshbloom_udf.spark.api import run

        result = run(batch_df, self.run_config, transaction=txn, defer_commit=True,
                     run_info={"stream": StreamBatch(key.query, key.batch)})
        try:
            final = flags.flags_path(txn.path, key.query, key.batch)
            txn.add_output(final + OUTPUT_TMP_SUFFIX)  # registered first: a crash has it removed
            stored = flags.flagged_table(result.df, self.config, self.sources)
            tmp, sha256 = flags.write_flags(stored, final)
            outputs = [(tmp, final), *self._write(flags.with_mode(result.df, self.config, self.sources), key, txn)]
            also = {"stream": StreamBatch(key.query, key.batch, os.path.relpath(final, txn.path), sha256,
                                          self._batch_output(key))}
            record = result.commit(outputs, also_record=also)
        finally:
            result.close()
        summary = result.summary
        # No record: a batch of no documents (nothing to replay: it is decided again, as trivially).
        return {**key.record(), "run_id": record.run_id if record else None, "replayed": False,
                "documents": summary["documents"], "duplicates": summary["duplicates"], "index": summary["index"],
                "docs_per_second": summary["docs_per_second"], "stages": summary["seconds"],
                "cross_run": (summary.get("verify") or {}).get("cross_run")}

    def _write(self, df, key: BatchKey, txn) -> list:
        """Hand the batch to the sink, or write it to its output's temporary; the (temporary, final) renames the
        commit makes (on another file system than the local one: done now, before the index's commit)."""
        if self.sink is not None:
            self.sink(df, key.batch)
            return []
        return self._write_output(df, key, txn)

    def _write_output(self, df, key: BatchKey, txn) -> list:
        out = self._output_of(df.sparkSession, key)
        out.prepare_temporary(txn)
        df.write.format(self.config.output_format).options(**self.config.output_options).save(out.tmp)
        if out.local_tmp:
            return [(out.local_tmp, out.local)]
        out.commit_hadoop()
        return []

    # -- a batch Spark replays ----------------------------------------------------------

    def _replay(self, batch_df, key: BatchKey, committed: RunRecord, index_dir: str) -> dict:
        """The committed run's flags on the replayed rows; the output written only if it is not in place."""
        stream = committed.stream
        what = f"stream batch {key.batch} (run {committed.run_id})"
        if self.sink is None and self._output_of(batch_df.sparkSession, key).exists():
            log.info("%s was committed with its output: nothing to do", what)
        else:
            sha256 = stream.flags_sha256 if stream is not None else None
            stored = flags.read_flags(flags.flags_path(index_dir, key.query, key.batch), sha256, what)
            df = flags.with_mode(flags.replayed(batch_df, stored, self.config, self.sources), self.config,
                                 self.sources)
            if self.sink is not None:
                self.sink(df, key.batch)
            else:
                self._write_again(df, key)
        return {**key.record(), "run_id": committed.run_id, "replayed": True,
                "documents": committed.documents, "duplicates": committed.duplicates}

    def _write_again(self, df, key: BatchKey) -> None:
        """A committed batch's output that is not in place (removed since): written and renamed, no index change."""
        from lshbloom_udf.index import commit_rename

        for tmp, final in self._write_output(df, key, None):
            commit_rename(tmp, final)

    # -- helpers ------------------------------------------------------------------------

    def _batch_output(self, key: BatchKey) -> Optional[str]:
        return None if self.output is None else f"{self.output.rstrip('/')}/batch={key.batch}"

    def _output_of(self, spark, key: BatchKey):
        from lshbloom_udf.spark.output import Output

        path = self._batch_output(key)
        if path is None:  # a stream with a sink writes no output
            raise InternalError("internal error: a stream with a sink asked for its output directory")
        return Output(spark, path, hidden=True)  # a reader of the output never sees it written

    def _query_id(self, batch_df) -> str:
        if self.query_id is not None:
            if not QUERY_ID.fullmatch(self.query_id):  # it names a folder in the index: no path of the caller's
                raise DedupInputError(f"query_id {self.query_id!r}: use letters, digits, '-' and '_' only")
            return self.query_id
        sc = spark_context(batch_df.sparkSession)  # None under Spark Connect: no local properties to read
        found = sc.getLocalProperty(QUERY_ID_PROPERTY) if sc is not None else None
        if not found or not QUERY_ID.fullmatch(found):
            raise DedupInputError("StreamDedup was called outside a streaming query's foreachBatch: give query_id= "
                                  "(the key of the stream's batches in the index)")
        return found

    def _open_index(self, spark):
        """The batch's transaction on the index; waits while another process (check-index) holds the lock."""
        from lshbloom_udf.spark.api import open_index

        index_dir = self.config.index_dir
        if index_dir is None:  # check_stream_config refuses it
            raise InternalError("internal error: a stream without index_dir")
        return waiting_for_lock(lambda: open_index(index_dir, self.config, spark), self.lock_wait_seconds)


def check_stream_config(config: DedupConfig) -> DedupConfig:
    """The settings a stream can run with (:class:`ConfigError` names the one it cannot)."""
    if config.index_dir is None:
        raise ConfigError("a stream needs index_dir: its micro-batches are runs of one kept index")
    if config.pass_mode != "driver":
        raise ConfigError("a stream runs the driver pass (pass_mode='driver'); the sharded pass is batch only")
    if config.duplicate_of and config.id_column is None:
        raise ConfigError("a stream's duplicate_of needs id_col: row ids number one micro-batch's rows only")
    if config.paragraphs != "off" and config.id_column is None:
        raise ConfigError("a stream's paragraphs needs id_col: a replayed micro-batch gets its removed paragraphs "
                          "back by id")
    return config


def _source_columns(config: DedupConfig) -> tuple:
    from lshbloom_udf.spark.join import SOURCE_COLS

    return SOURCE_COLS if config.duplicate_of else ()


def _progress_line(entry: dict) -> str:
    if entry["replayed"]:
        return (f"{entry['batch']}: replayed run {entry['run_id']} ({entry['documents']} documents) in "
                f"{entry['seconds']} s")
    index = entry["index"]
    fp = index.get("expected_false_positive")
    return (f"{entry['batch']}: {entry['documents']:,} documents, {entry['duplicates']:,} duplicates in "
            f"{entry['seconds']} s; index holds {index.get('inserted_total', 0):,}"
            + (f", false-positive rate now {fp:.2e}" if fp is not None else "") + f" (run {entry['run_id']})")
