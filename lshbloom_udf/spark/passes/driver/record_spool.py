"""The run's records taken from its keys stage: one MinHash per document for the pass and the records.

The records of a kept index (:mod:`lshbloom_udf.index.records`) are a sketch of each kept document's MinHash.
Computed by their own Spark job after verification, they cost a second MinHash of every kept document (24 s of
84 at 10⁶ documents of 2.4 kB, docs/benchmarks.md). When the driver pass takes the keys over the socket stream
into a local index, the keys stage sends each row's record fields with its keys instead
(:class:`~lshbloom_udf.spark.passes.driver.sender.RecordFields`), the driver spools those of the rows with
shingles here as the pass reads them (an Arrow stream file in the run's temporary directory: each row once, in
row order, whatever the task attempts), and after verification writes the kept ones' records where the
index's transaction stages them (:meth:`RecordSpool.write`). The files hold the same rows and values the records
job writes (``tests/spark/passes/test_spark_record_spool.py``).

Bytes: ``k + 21`` per document with shingles, and its id's; the spool is used only where it takes at most
:data:`~lshbloom_udf.spark.verify.sources.SPOOL_SHARE_OF_FREE` of its filesystem's free space
(:func:`fits`), else the records job runs.
"""

from __future__ import annotations

import os
import shutil

import numpy as np

from lshbloom_udf.litter import make_temp_dir

# The fixed bytes of one row's record fields on the wire and in the spool: has shingles 1, size 4, text hash 16
# (and 4 for an id's length).
FIXED_BYTES = 21


def spooled_bytes(documents: int, num_perm: int, with_id: bool) -> int:
    """What the spool and the key stream's spool add for ``documents`` documents (ids counted at 16 bytes)."""
    return documents * (num_perm + FIXED_BYTES + (20 if with_id else 0))


def fits(spool_dir: str, documents: int, num_perm: int, with_id: bool) -> bool:
    """Whether the record fields of ``documents`` documents may be spooled in ``spool_dir`` (twice: the key
    stream's spool and this one)."""
    from lshbloom_udf.spark.verify.sources import SPOOL_SHARE_OF_FREE

    try:
        free = shutil.disk_usage(spool_dir).free
    except OSError:
        return False
    return 2 * spooled_bytes(documents, num_perm, with_id) <= SPOOL_SHARE_OF_FREE * free


def record_schema():
    import pyarrow as pa

    return pa.schema([("row", pa.int64()), ("id", pa.string()), ("sketch", pa.binary()), ("size", pa.float32()),
                      ("text_hash", pa.binary())])


class RecordSpool:
    """The record fields of every row with shingles, in row order, as the driver pass reads the key stream."""

    def __init__(self, num_perm: int, with_id: bool):
        import pyarrow as pa

        self.num_perm, self.with_id = num_perm, with_id
        self.directory = make_temp_dir("records")
        self.path = os.path.join(self.directory, "records.arrow")
        self._sink = pa.OSFile(self.path, "wb")
        self._writer = pa.ipc.new_stream(self._sink, record_schema())
        self.rows = 0

    def add(self, start: int, has, sketch, size, hashes, lengths=None, id_bytes=b"") -> None:
        """A chunk of rows ``start ..`` (the wire's arrays, :mod:`~lshbloom_udf.spark.passes.driver.sender`)."""
        import pyarrow as pa

        from lshbloom_udf.index.binary import fixed_binary

        n = len(has)
        rows = start + np.arange(n, dtype=np.int64)
        ids = _id_array(lengths, id_bytes) if self.with_id else pa.nulls(n, pa.string())
        batch = pa.RecordBatch.from_arrays(
            [pa.array(rows), ids, fixed_binary(sketch), pa.array(size, pa.float32()), fixed_binary(hashes)],
            schema=record_schema())
        self._writer.write_batch(batch.filter(pa.array(has)))
        self.rows += int(np.count_nonzero(has))

    def write(self, target: str, flagged_rows: np.ndarray, spec) -> None:
        """Write the records of the spooled rows not in ``flagged_rows`` in the local directory ``target`` (made if
        missing), laid out for lookups (:class:`~lshbloom_udf.index.lookup.LookupWriter`) of ``spec``'s bands."""
        from lshbloom_udf.index.lookup import LookupWriter
        from lshbloom_udf.memory import machine_available

        writer = LookupWriter(target, self.num_perm, machine_available())
        for kept in self._batches(flagged_rows, inside=False):
            writer.add(kept)
        writer.close(spec.b, spec.r)

    def among(self, rows: np.ndarray):
        """The spooled rows among ``rows`` (those with shingles) as a table of the records' columns, in row order:
        what :func:`~lshbloom_udf.spark.records.sketch_frame` computes again for them."""
        import pyarrow as pa

        return pa.Table.from_batches(list(self._batches(rows, inside=True)), schema=record_schema())

    def _batches(self, rows: np.ndarray, inside: bool):
        """The spooled batches' rows in (``inside``) or out of ``rows``, non-empty ones."""
        import pyarrow as pa

        from lshbloom_udf.spark.keys import is_in

        self._close_writer()
        chosen = np.unique(np.asarray(rows, np.int64))
        with pa.memory_map(self.path) as source:
            for batch in pa.ipc.open_stream(source):
                hit = is_in(batch.column(0).to_numpy(), chosen)
                out = batch.filter(pa.array(hit if inside else ~hit))
                if out.num_rows:
                    yield out

    def _close_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._sink.close()
            self._writer = None

    def close(self) -> None:
        """Delete the spool."""
        self._close_writer()
        shutil.rmtree(self.directory, ignore_errors=True)


def _id_array(lengths: np.ndarray, id_bytes: bytes):
    """The string array of the wire's id ``lengths`` (-1: null) and their concatenated UTF-8 ``id_bytes``."""
    import pyarrow as pa

    valid = lengths >= 0
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(np.where(valid, lengths, 0), out=offsets[1:])
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.string(), len(lengths), [bitmap, pa.py_buffer(offsets), pa.py_buffer(id_bytes)],
                                 null_count=int(len(lengths) - np.count_nonzero(valid)))
