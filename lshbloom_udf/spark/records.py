"""A kept index's records on the executors: each kept document's sketch, written as Parquet; read back, verified.

The layout, where a run's records live and how they are committed: :mod:`lshbloom_udf.index.records`.
Here: the sketch of a batch of texts (:func:`sketch_batch`, the native MinHash kernel of the run's own
signature settings), the records job (:func:`write_records`) and the committed runs' records as one
DataFrame, their checksums verified first (:func:`prior_runs`).

The sketch of a document with signature ``sig`` (``k = num_perm`` values) is ``sig & 0xFF`` (b-bit MinHash,
b = 8: ``k`` bytes); two documents at Jaccard ``J`` agree on a byte with probability ``J + (1 - J)/256``.
Its shingle count is estimated from the full values (no second shingling: it would cost more than the MinHash,
docs/algorithm.md §8): under the ``poisson`` scheme row ``j`` is the minimum over ``n = |S|`` shingles of Exp(1)
arrivals, stored in units of ``1/k``, so ``Σ_j sig_j / k ~ Gamma(k, n)`` and ``n̂ = k (k - 1) / Σ_j sig_j`` is
unbiased (relative error ``1/√(k-2)``: 6.3 % at k = 256); under ``affine32``/``legacy`` the values are minima of
``n`` uniform 32-bit hashes and ``n̂ = (k - 1) / Σ_j (sig_j / 2^32)``.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from lshbloom_udf import hooks
from lshbloom_udf.common import col, default_parallelism
from lshbloom_udf.errors import IndexCorruptError
from lshbloom_udf.index import records as rec
from lshbloom_udf.index.binary import fixed_binary
from lshbloom_udf.sizing import parse_bytes
from lshbloom_udf.spark.frames import among_rows
from lshbloom_udf.spark.keys import ROW_COL, TaskThreads, _replace_invalid_utf8, _selected, ship, task_start

ID_COL = "_lshb_id"
# text_hash: the 128-bit hash of the text the exact copies are found by (lshbloom_udf.spark.exact: two xxhash64,
# little-endian); null in the records of runs before it, which a schema-on-read fills in.
RECORD_SCHEMA = "row long, id string, sketch binary, size float, text_hash binary"
HASH_COLS = ("_lshb_h1", "_lshb_h2")
EMPTY = 0xFFFFFFFF  # a signature row without shingles
SKETCH_MASK = (1 << rec.SKETCH_BITS) - 1


def estimated_sizes(sig: np.ndarray, scheme: str) -> np.ndarray:
    """``|S|`` of each row of an ``(n, k)`` signature matrix, estimated from its values (see the module docs)."""
    k = sig.shape[1]
    if scheme == "poisson":
        total = sig.view(np.float32).astype(np.float64).sum(axis=1) / k
    else:
        total = sig.astype(np.float64).sum(axis=1) / 2.0**32
    return np.divide(k - 1, total, out=np.zeros(len(sig)), where=total > 0).astype(np.float32)


def signatures(texts, spec, threads: int = 1) -> np.ndarray:
    """The ``(n, k)`` MinHash signatures of a pyarrow string array (or a list of str/None) under ``spec``'s
    settings; invalid UTF-8 (from Spark) hashed as the keys stage hashes it (``keys._band_keys``)."""
    from lshbloom_udf import _native
    from lshbloom_udf.minhash import _arrow_buffers, _is_arrow

    settings, _ = spec.native_settings(threads)

    def of(values):
        return _native.minhash(_native.ArrowTexts(*_arrow_buffers(values)) if _is_arrow(values) else list(values),
                               settings)

    try:
        return of(texts)
    except ValueError as e:
        if "invalid UTF-8" not in str(e):
            raise
        return of(_replace_invalid_utf8(texts))


def sketches_of(sig: np.ndarray, scheme: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(sketches (n, k) uint8, estimated |S| (n,) float32, has shingles (n,) bool)`` of ``(n, k)`` signatures."""
    return (sig & SKETCH_MASK).astype(np.uint8), estimated_sizes(sig, scheme), (sig != EMPTY).any(axis=1)


def sketch_batch(texts, spec, threads: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(sketches (n, k) uint8, estimated |S| (n,) float32, has shingles (n,) bool)`` of a pyarrow string array
    (or a list of str/None), from the native MinHash of ``spec``'s signature settings."""
    return sketches_of(signatures(texts, spec, threads), spec.scheme)


def recorded_batches(batches, text_col: str, spec, threads: int, skip=None, with_id: bool = False):
    """The keys stage with the records' fields (one MinHash for both): per Arrow batch of (row id, text,
    :data:`HASH_COLS`[, :data:`ID_COL`]), ``(rows, keys (n, b), active, has shingles, sketches (n, k), sizes,
    text hashes (n, 16)[, ids])`` (the wire's order, :mod:`~lshbloom_udf.spark.passes.driver.sender`); ``ids``:
    the id strings' UTF-8 (an object array, None for null).
    ``skip``: as :func:`~lshbloom_udf.spark.keys.keyed_batches` (rows inactive with zero keys), but still recorded
    as the records job would record them (the run flags them, so none is kept)."""
    from lshbloom_udf import _native
    from lshbloom_udf.spark.keys import is_in, shipped_value, with_row_ids

    skip = shipped_value(skip)
    for batch, rows in with_row_ids(batches):
        sig = signatures(batch.column(batch.schema.get_field_index(text_col)), spec, threads)
        keys = np.ascontiguousarray(_native.band_keys(sig, spec.b, spec.r, spec.band_key), dtype=np.uint64)
        sketch, size, has = sketches_of(sig, spec.scheme)
        active = has.copy()
        if skip is not None:
            skipped = is_in(rows, skip)
            keys[skipped] = 0
            active[skipped] = False
        ids = (np.array(batch.column(batch.schema.get_field_index(ID_COL)).cast("binary").to_pylist(), dtype=object)
               if with_id else None)
        yield rows, keys, active, has, sketch, size, text_hashes(batch), *((ids,) if with_id else ())


def record_columns(text_col: str, id_col: Optional[str]) -> list:
    """The columns besides the row id and text that :func:`recorded_batches` reads (the text hashes, the id)."""
    from lshbloom_udf.spark.exact import text_hash_columns

    cols = [*text_hash_columns(text_col, HASH_COLS)]
    return cols + ([col(id_col).cast("string").alias(ID_COL)] if id_col else [])


def sketch_mapper(text_col: str, spec, among, inside: bool, with_id: bool, threads: TaskThreads = TaskThreads()):
    """The ``mapInArrow`` function giving :data:`RECORD_SCHEMA` rows of the pinned rows (row id, text[, id]) that
    are (``inside``) or are not in the shipped sorted row ids ``among``; rows without shingles are left out."""
    task_hook = hooks.task_hook()

    def compute(batches):
        import pyarrow as pa

        ctx = task_start(task_hook, "records")
        native_threads = threads.of(ctx)
        for batch in _selected(batches, among, inside):
            if batch.num_rows == 0:
                continue
            sketch, size, active = sketch_batch(batch.column(batch.schema.get_field_index(text_col)), spec,
                                                native_threads)
            keep = pa.array(active)
            ids = (batch.column(batch.schema.get_field_index(ID_COL)) if with_id
                   else pa.nulls(batch.num_rows, pa.string()))
            out = pa.RecordBatch.from_arrays(
                [batch.column(batch.schema.get_field_index(ROW_COL)), ids, fixed_binary(sketch), pa.array(size),
                 fixed_binary(text_hashes(batch))],
                names=["row", "id", "sketch", "size", "text_hash"])
            yield out.filter(keep)

    return compute


def text_hashes(batch) -> np.ndarray:
    """The ``(n, 16)`` uint8 text hashes of a batch with the :data:`HASH_COLS` columns (two int64, little-endian)."""
    halves = [np.asarray(batch.column(batch.schema.get_field_index(c)).to_numpy(zero_copy_only=False), "<i8")
              for c in HASH_COLS]
    return np.ascontiguousarray(np.stack(halves, axis=1)).view(np.uint8)


def sketch_frame(pinned, text_col: str, id_col: Optional[str], spec, among: np.ndarray, inside: bool,
                 threads: TaskThreads = TaskThreads()):
    """The records (:data:`RECORD_SCHEMA`) of the pinned rows in (``inside``) or out of the sorted ``among``;
    ``threads``: the pinned partitions' (used only where the rows keep their partitions: not ``inside``)."""
    from lshbloom_udf.spark.exact import text_hash_columns

    cols = [col(ROW_COL), col(text_col), *text_hash_columns(text_col, HASH_COLS)]
    cols += [col(id_col).cast("string").alias(ID_COL)] if id_col else []
    if inside:  # a few rows (flags): chosen in the JVM, so that only their texts go to Python
        rows, shipped, threads = among_rows(pinned, among), None, TaskThreads()
    else:
        rows, shipped = pinned, ship(pinned.sparkSession, np.asarray(among, np.int64))
    return rows.select(*cols).mapInArrow(sketch_mapper(text_col, spec, shipped, inside, id_col is not None, threads),
                                         RECORD_SCHEMA)


def hadoop_uri(path: str) -> str:
    """A local path as a ``file:`` URI (Spark must not resolve it against another default filesystem); a URI as is."""
    return path if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", path) else "file://" + os.path.abspath(path)


def write_records(txn, pinned, text_col: str, id_col: Optional[str], spec, flagged_rows: np.ndarray,
                  kept: Optional[int] = None, threads: TaskThreads = TaskThreads(), spool=None) -> dict:
    """Write the records of the pinned documents this run kept (not in ``flagged_rows``, with shingles) where the
    store says (``txn.records_target()``), as one Spark job; the run record's ``records`` entry. ``kept``: how many
    that is (checked: the executors write the files, and a local index directory they do not share with the
    driver would lose them); ``threads``: the pinned partitions' :class:`~lshbloom_udf.spark.keys.TaskThreads`;
    ``spool``: the keys stage's :class:`~lshbloom_udf.spark.passes.driver.record_spool.RecordSpool` of them (then
    the driver writes them, without a Spark job), or None."""
    t0 = time.monotonic()
    target = hadoop_uri(txn.records_target())
    flagged = np.unique(np.asarray(flagged_rows, np.int64))
    lookup = txn.records_layout == rec.LOOKUP_LAYOUT
    if spool is not None:
        spool.write(txn.records_target(), flagged, spec)
    else:
        written = hadoop_uri(txn.records_target() + PARQUET_SUFFIX) if lookup else target
        sketch_frame(pinned, text_col, id_col, spec, flagged, False, threads).write.mode("overwrite").parquet(written)
        if lookup:
            lookup_from_parquet(txn.records_target() + PARQUET_SUFFIX, txn.records_target(), spec)
    hooks.fire("after-records")
    staged = txn.staged_records()
    if kept is not None and staged.documents != kept:
        from lshbloom_udf.errors import IndexStorageError

        raise IndexStorageError(
            f"{target}: the executors wrote {staged.documents:,} of the run's {kept:,} records where the driver "
            "reads them: on a cluster a local --index-dir must be on a filesystem the executors share (NFS), or use "
            "--pass sharded with an HDFS/object-store --index-dir")
    out = rec.entry(staged.documents, staged.bytes, txn.records_algorithm, staged.checksums, spec.num_perm,
                    txn.records_layout)
    out["seconds"] = round(time.monotonic() - t0, 3)
    out["computed_by"] = "keys stage" if spool is not None else "records job"
    return out


# Where the records job's Parquet goes before the driver lays it out for lookups (beside the records directory).
PARQUET_SUFFIX = ".parquet"


def lookup_from_parquet(parquet_dir: str, target: str, spec) -> None:
    """Lay out the Parquet records in the local ``parquet_dir`` for lookups in ``target``
    (:class:`~lshbloom_udf.index.lookup.LookupWriter`, in the parts' order), then delete the Parquet."""
    import shutil

    import pyarrow.parquet as pq

    from lshbloom_udf.index.lookup import LookupWriter
    from lshbloom_udf.memory import machine_available

    writer = LookupWriter(target, spec.num_perm, machine_available())
    for name in rec.part_names(os.listdir(parquet_dir)):
        for batch in pq.ParquetFile(os.path.join(parquet_dir, name)).iter_batches():
            writer.add(batch)
    writer.close(spec.b, spec.r)
    shutil.rmtree(parquet_dir)


@dataclass
class PriorRuns:
    """The committed runs a run's documents may duplicate, with their records (their checksums verified):
    ``looked_up`` the local store's (``(run id, directory, documents)``, :mod:`lshbloom_udf.index.lookup`),
    ``scanned`` the sharded store's Parquet (``(run id, Hadoop path)``). Documents of band files adopted from
    datasketch have none: they verify nothing."""

    looked_up: list = field(default_factory=list)
    scanned: list = field(default_factory=list)
    documents: int = 0
    bytes: int = 0
    scanned_documents: int = 0
    scanned_bytes: int = 0

    @property
    def with_records(self) -> list:
        """The run ids with records, oldest first."""
        return sorted([run for run, *_ in self.looked_up] + [run for run, _ in self.scanned])

    def frame(self, spark):
        """The scanned runs' records, with a column ``run`` (the run id), as one DataFrame, in as many partitions
        as one read of their bytes would make (at least one per core): a union keeps a run's partitions apart, and
        a stream's many small runs would otherwise pay a task each (its fixed cost: the scan's lookup index built
        again)."""
        from pyspark.sql import functions as F

        frames = [spark.read.schema(RECORD_SCHEMA).parquet(path).withColumn("run", F.lit(run_id))
                  for run_id, path in self.scanned]
        out = frames[0]
        for f in frames[1:]:
            out = out.unionByName(f)
        split = parse_bytes(spark.conf.get("spark.sql.files.maxPartitionBytes"))
        return out.coalesce(max(default_parallelism(spark), -(-self.scanned_bytes // split)))


def hadoop_checksums(spark, wheres: list) -> dict:
    """``{directory: ({part name: Spark's xxhash64 of its bytes, hex}, bytes)}`` of the Parquet part files in each
    of the Hadoop directories ``wheres`` (qualified, as the store names them): one Spark job (``binaryFile``), on
    any filesystem Spark reads."""
    from pyspark.sql import functions as F

    files = (spark.read.format("binaryFile").option("pathGlobFilter", "part-*.parquet").load(list(wheres))
             .select("path", F.xxhash64("content").alias("h"), "length").collect())
    out: dict = {where: ({}, 0) for where in wheres}
    for r in files:
        parent, name = r["path"].rsplit("/", 1)
        if parent in out and rec.PART_FILE.fullmatch(name):
            sums, size = out[parent]
            sums[name] = f"{int(r['h']) & 0xFFFFFFFFFFFFFFFF:016x}"
            out[parent] = (sums, size + int(r["length"]))
    return out


def prior_runs(txn, before: Optional[str] = None) -> PriorRuns:
    """The committed runs of ``txn``'s index before run ``before`` (None: all), their records verified
    (:class:`IndexCorruptError` names a damaged file)."""
    out = PriorRuns()
    runs = [run for run in txn.runs() if before is None or str(run.run_id) < before]
    checked = txn.verify_records_many(runs)
    for run in runs:
        run_id = str(run.run_id)
        where, recorded = checked.get(run_id), rec.of_run(run)
        if where is None or recorded is None:
            if run.inserted > 0:  # every run that inserts documents writes their records
                raise IndexCorruptError(f"{txn.path}: run {run_id} inserted {run.inserted:,} documents but its record "
                                        "names no records; restore the index's manifest from a backup")
            continue
        documents, size = int(recorded["documents"]), int(recorded["bytes"])
        if rec.layout_of(recorded) == rec.LOOKUP_LAYOUT:
            out.looked_up.append((run_id, where, documents))
        else:
            out.scanned.append((run_id, hadoop_uri(where)))
            out.scanned_documents += documents
            out.scanned_bytes += size
        out.documents += documents
        out.bytes += size
    return out
