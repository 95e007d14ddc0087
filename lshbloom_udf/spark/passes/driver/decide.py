"""The driver pass as a :class:`~lshbloom_udf.spark.passes.base.Pass`: the whole index in the driver.

The keys are computed on the executors and streamed to the driver
(:mod:`~lshbloom_udf.spark.passes.driver.stream`; ``toLocalIterator`` under Spark Connect),
which decides them in processing order (:mod:`~lshbloom_udf.spark.passes.driver.loop`)
into a temporary index (:mod:`~lshbloom_udf.spark.passes.driver.temporary`) or the transaction's staging copy of
the kept one.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time

from lshbloom_udf.common import col, is_connect, over_capacity_warning
from lshbloom_udf.errors import DedupInputError, InternalError
from lshbloom_udf.index import IndexTransaction, LSHBloomIndex
from lshbloom_udf.log import logger
from lshbloom_udf.spark.ids import IdHashes, id_hash_column
from lshbloom_udf.spark.keys import ROW_COL, ArrowBatchLimits
from lshbloom_udf.spark.passes.base import Decided, KeyedPass, PassInput, PassOutcome, PassResult
from lshbloom_udf.spark.passes.driver.loop import run_driver_pass, spark_chunks
from lshbloom_udf.spark.passes.driver.record_spool import RecordSpool, fits, spooled_bytes
from lshbloom_udf.spark.passes.driver.sender import SENT_SCHEMA, stream_mapper
from lshbloom_udf.spark.passes.driver.stream import KeyStream
from lshbloom_udf.spark.passes.driver.temporary import temporary_index_dir
from lshbloom_udf.spark.passes.scan import ScanResult
from lshbloom_udf.spark.records import record_columns
from lshbloom_udf.spark.verify.sources import keep_spool, spool_source


class DriverPass(KeyedPass):
    """Keep-first (``insert="first"``) or any-earlier (``"all"``) decisions by one index in the driver."""

    name, title, timer = "driver", "keys + driver pass", "driver_pass"

    def open_index(self, index_dir: str, config, spark=None) -> IndexTransaction:
        """The local store (a journal, an OS lock); it refuses a directory that holds a sharded index."""
        from lshbloom_udf.spark.passes.sharded.store import refuse_sharded

        refuse_sharded(index_dir)
        txn = IndexTransaction(index_dir)
        if config.verify_index:
            try:
                txn.verify()
            except BaseException:
                txn.close()
                raise
        return txn

    def holds_index(self, index_dir: str) -> bool:
        import os

        from lshbloom_udf.index import MANIFEST_NAME

        return "://" not in index_dir and os.path.isfile(os.path.join(index_dir, MANIFEST_NAME))

    def check_index(self, index_dir: str) -> str:
        """Every band file against its checksum and every run's duplicates against their SHA-256 (the exclusive lock
        is taken, so a crashed run's commit is finished first)."""
        import os

        if not os.path.isdir(index_dir):
            raise FileNotFoundError(f"{index_dir}: no such index directory")
        txn = IndexTransaction(index_dir)
        try:
            done = txn.verify()
        finally:
            txn.close()
        if not done["band_files"]:
            return f"{index_dir}: no index here yet (nothing to check)"
        records = f"; {done['records']} run(s)' records match their checksums" if done["records"] else ""
        paragraphs = (f"; the paragraph filter's {done['paragraph_band_files']} band file(s) match"
                      if done["paragraph_band_files"] else "")
        return (f"{index_dir}: ok: {done['band_files']} band files (checksums match), {done['runs']} run record(s) "
                f"verified{records}{paragraphs}")

    def decide_keys(self, given: PassInput) -> Decided:
        c, txn = given.config, given.kept_store(IndexTransaction)
        if txn is None:  # a temporary index
            # Sized for exactly this input (or expected_docs): it never needs another generation.
            params = dataclasses.replace(given.params, growth="fixed")
            path = temporary_index_dir(params, c.new_index_bloom)

            def temporary() -> LSHBloomIndex:
                index = LSHBloomIndex.create(path, params, bloom=c.new_index_bloom)
                index.plan_inserts(given.documents)  # filled as planned, not "near capacity" (any-earlier: to N)
                return index

            try:
                return self._run(given, temporary, path, params, close=True)
            finally:
                shutil.rmtree(path, ignore_errors=True)
        manifest = txn.manifest()
        bloom = c.bloom or (manifest.bloom if manifest is not None else c.new_index_bloom)
        return self._run(given, lambda: txn.stage(given.params, c.sizing_given, bloom, given.documents), txn.path,
                         given.params)

    def _run(self, given: PassInput, make_index, path: str, params, close: bool = False) -> Decided:
        """Decide into the index ``make_index()`` opens (at ``path``; closed after with ``close``); ``params``: what
        the run records as its parameters."""
        seconds: dict = {}
        opened: list = []  # (index, documents it held before), once _keys_through made it

        def index_now() -> LSHBloomIndex:
            index = make_index()
            opened.append((index, index.inserted))
            return index

        try:
            outcome, scanned = self._keys_through(given, index_now, seconds)
            index, before = opened[0]
            try:
                index.sync()
                stats = index.stats()
            except BaseException:
                scanned.close()
                raise
        finally:
            if close and opened:
                opened[0][0].close()
        real = os.path.realpath(path)
        report = given.report().replace(
            inserted_before=before, backend=index.bloom, reused=before > 0 and not given.temporary,
            bytes_on_disk=stats["bytes_on_disk"], inserted_total=stats["inserted"], capacity=index.params.capacity,
            p_effective=index.params.p_effective, p_band=stats["p_band"],
            expected_false_positive=stats["expected_false_positive"], generations=tuple(stats["generation_fill"]),
            location="/dev/shm" if real.startswith("/dev/shm") else os.path.dirname(real),
        )
        if stats["inserted"] > stats["capacity_now"]:  # a fixed index past its capacity (a grown one grew)
            logger.warning(over_capacity_warning(stats["inserted"], index.params.capacity,
                                                 stats["expected_false_positive"], index.params.p_effective))
        return Decided(PassResult(outcome, report, params, stats, seconds), scanned)

    def _keys_through(self, given: PassInput, index_now, seconds: dict) -> tuple[PassOutcome, ScanResult]:
        """(the pass's outcome, what the scan took: :class:`ScanResult`), the keys by the socket stream (which
        also takes what ``given.scan`` asks: the sums, the ids' hashes, the records when they fit) or
        ``toLocalIterator`` (the template sample only); the keys
        stage's time in ``seconds`` when the stream measured it. ``index_now()`` opens the index the pass decides
        into: after the stream's job started, so that its files are made while the executors start."""
        c, pinned, ask = given.config, given.pinned, given.scan
        spark, text, spec, b = pinned.sparkSession, c.text_column, given.params.key_spec, given.params.b
        with ArrowBatchLimits(spark):
            if not streams(spark, c.key_transfer):
                chunks = spark_chunks(pinned, text, spec, c.chunk_rows, ask.skip, ask.threads)
                outcome, sample = run_driver_pass(chunks, index_now(), given.documents, c.progress, c.insert_rule,
                                                  sample_below=ask.template_sample_below)
                return outcome, ScanResult(template_sample=sample)
            partitions = pinned.rdd.getNumPartitions()
            chunk = chunk_rows_for(c, given.documents, partitions)
            fields = ask.records
            if fields is not None and not fits(tempfile.gettempdir(), given.documents, spec.num_perm, fields.with_id):
                fields = None  # the records job computes them (lshbloom_udf.spark.records)
            record_bytes = spooled_bytes(given.documents, spec.num_perm, fields.with_id) if fields else 0
            # Under verification the stream keeps its spool: verification's candidates come from it (verify.sources).
            keep = c.verify and keep_spool(tempfile.gettempdir(), given.documents, b, chunk, record_bytes)
            id_hashes = IdHashes() if ask.hash_ids is not None else None
            records = RecordSpool(spec.num_perm, fields.with_id) if fields else None
            stream = KeyStream(spark, b, keep=keep, id_hashes=id_hashes, records=records)
            candidates = None
            try:
                mapper = stream_mapper(text, spec, chunk, stream.address, stream.token, ask.measure_input,
                                       ask.skip, ask.threads, ids=id_hashes is not None, records=fields)
                started = time.monotonic()  # the time before the first keys counts from here, not from the index
                ids = [id_hash_column(ask.hash_ids)] if ask.hash_ids is not None else []  # as id_hashes is made
                ids += record_columns(text, c.id_column) if fields else []
                stream.start(pinned.select(ROW_COL, col(text), *ids).mapInArrow(mapper, SENT_SCHEMA))
                index = index_now()
                if index.params.b != b:
                    raise InternalError(f"internal error: the index has {index.params.b} bands, the keys {b}")
                outcome, sample = run_driver_pass(stream.chunks(partitions), index, given.documents, c.progress,
                                                  c.insert_rule, keep_keys=keep, started=started,
                                                  sample_below=ask.template_sample_below)
                sums = stream.input_sums() if ask.measure_input else None
                candidates = spool_source(stream, partitions, outcome)
            except BaseException:
                if records is not None:
                    records.close()
                raise
            finally:
                if candidates is None:  # nothing owns the stream past the pass: stop it and delete its spool
                    stream.close()
            seconds["keys"] = stream.job_seconds
            return outcome, ScanResult(sums, id_hashes, sample, records, candidates)


PASS = DriverPass()

# Without a chunk_rows setting, each partition sends at least this many chunks (so that the pass starts deciding
# while the executors still key: a stream's micro-batch of 10^5 documents in 2 partitions of 50,000 would otherwise
# be keyed whole before the pass began), none under MIN_CHUNK_ROWS documents (a chunk's fixed cost).
CHUNKS_PER_PARTITION = 4
MIN_CHUNK_ROWS = 5_000


def chunk_rows_for(config, documents: int, partitions: int) -> int:
    """The documents per chunk of keys: ``chunk_rows`` when given, else at most it, for
    :data:`CHUNKS_PER_PARTITION` chunks per partition."""
    if "chunk_rows" in config.given:
        return config.chunk_rows
    per_partition = -(-documents // max(1, partitions))
    return min(config.chunk_rows, max(MIN_CHUNK_ROWS, -(-per_partition // CHUNKS_PER_PARTITION)))


def streams(spark, key_transfer: str) -> bool:
    """Whether the keys go to the driver over the socket stream (a classic session) or ``toLocalIterator``."""
    classic = not is_connect(spark)
    if key_transfer == "socket" and not classic:
        raise DedupInputError(
            "key_transfer='socket' needs a classic Spark session: over Spark Connect the executors cannot reach "
            "this process. Use key_transfer='auto' (the default) or 'spark'."
        )
    return classic if key_transfer == "auto" else key_transfer == "socket"
