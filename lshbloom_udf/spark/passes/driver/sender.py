"""The executors' end of the socket transfer (:mod:`~lshbloom_udf.spark.passes.driver.stream`): the keys stage's
``mapInArrow`` function, which sends its partition's band keys to the driver as it computes them.

Wire format, little-endian: a hello ``(b"LSHB", token[16], partition i32,
attempt i32)``, then chunks ``(first row id i64, n i64, active[n] u8,
keys[n * b] u64)``, each followed, when the pass writes the run's records (:class:`RecordFields`), by the chunk's
records: ``has shingles[n] u8, sketches[n * k] u8, sizes[n] f32, text hashes[n * 16] u8`` and with their ids
``lengths[n] i32`` (-1: null) and the ids' UTF-8 bytes; with an id column then ``(m i64, -2, hashes[m] i64)``
(the partition's non-null ids' hashes, :mod:`lshbloom_udf.spark.ids`), then
``(documents i64, -1)``.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Optional

import numpy as np

from lshbloom_udf import hooks
from lshbloom_udf.errors import InternalError
from lshbloom_udf.minhash import KeySpec
from lshbloom_udf.spark.keys import TaskThreads, chunks, keyed_batches, task_start

MAGIC = b"LSHB"
HELLO = struct.Struct("<4s16sii")
HEADER = struct.Struct("<qq")
END, ID_HASHES = -1, -2  # a header's second field: the partition's end, its id hashes
SENT_SCHEMA = "pid int, documents long, sums string"


@dataclass(frozen=True)
class RecordFields:
    """The keys stage also sends each row's record fields (:func:`~lshbloom_udf.spark.records.recorded_batches`):
    the run's records then come from its one MinHash. ``with_id``: the rows carry the id column's strings."""

    with_id: bool


def send_records(sock, has, sketch, size, hashes, ids) -> None:
    """A chunk's record fields, in the wire format (see the module docs)."""
    sock.sendall(has.view(np.uint8).data)
    sock.sendall(np.ascontiguousarray(sketch).data)
    sock.sendall(np.ascontiguousarray(size, dtype="<f4").data)
    sock.sendall(np.ascontiguousarray(hashes).data)
    if ids is not None:
        lengths = np.fromiter((-1 if v is None else len(v) for v in ids), dtype="<i4", count=len(ids))
        sock.sendall(lengths.data)
        sock.sendall(b"".join(v for v in ids if v is not None))


def stream_mapper(text_col: str, spec: KeySpec, chunk_rows: int, address: tuple, token: bytes,
                  measure: bool = False, skip=None, threads: TaskThreads = TaskThreads(), ids: bool = False,
                  records: Optional[RecordFields] = None):
    """The ``mapInArrow`` function of the keys stage: sends the keys to the driver, yields (partition, documents,
    and with ``measure`` the partition's :class:`~lshbloom_udf.spark.ingest.InputSums` as JSON); ``skip``: rows
    sent inactive, not keyed (:func:`~lshbloom_udf.spark.keys.keyed_batches`), but measured; ``threads``: the pinned
    partitions' :class:`~lshbloom_udf.spark.keys.TaskThreads`; ``ids``: the rows carry
    :data:`~lshbloom_udf.spark.ids.ID_HASH_COL`, sent after the keys; ``records``: each chunk's records sent
    after its keys (the rows carry :func:`~lshbloom_udf.spark.records.record_columns`)."""
    b = spec.b
    task_hook = hooks.task_hook()  # shipped with the task: executors are other processes

    def send(batches):
        import pyarrow as pa

        from lshbloom_udf.spark.ingest import InputSums, measured

        # imported, not shipped by value
        from lshbloom_udf.spark.passes.driver.sender import END, HEADER, HELLO, ID_HASHES, MAGIC

        ctx = task_start(task_hook, "keys")
        pid = ctx.partitionId() if ctx is not None else 0
        attempt = ctx.attemptNumber() if ctx is not None else 0
        total = 0
        with socket.create_connection(address) as sock:
            sock.sendall(HELLO.pack(MAGIC, token, pid, attempt))
            sums: list = []
            id_hashes: list = []
            read = measured(batches, text_col, sums) if measure else batches
            keyed = keyed_stream(with_id_hashes(read, id_hashes) if ids else read, text_col, spec, threads.of(ctx),
                                 skip, records)
            for start, keys, active, *fields in chunks(keyed, chunk_rows):
                if keys.shape[1] != b:
                    raise InternalError(f"internal error: {keys.shape[1]} band keys per document, expected {b}")
                sock.sendall(HEADER.pack(start, len(active)))
                sock.sendall(active.view(np.uint8).data)
                sock.sendall(keys.data)
                if records is not None:
                    send_records(sock, *fields, *(() if records.with_id else (None,)))
                total += len(active)
                if task_hook is not None:
                    task_hook(stage="keys-sent", partition=pid, attempt=attempt)
            if ids:
                hashes = np.ascontiguousarray(np.concatenate(id_hashes) if id_hashes else np.zeros(0, np.int64),
                                              dtype="<i8")
                sock.sendall(HEADER.pack(len(hashes), ID_HASHES))
                sock.sendall(hashes.data)
            sock.sendall(HEADER.pack(total, END))
            # Done only once the driver spooled it all: it closes the connection after the last byte.
            sock.shutdown(socket.SHUT_WR)
            if sock.recv(1):
                raise InternalError("internal error: the driver answered the keys stream")
        sent = sum(sums, InputSums()).to_json() if measure else None
        yield pa.RecordBatch.from_pydict({"pid": pa.array([pid], pa.int32()),
                                          "documents": pa.array([total], pa.int64()),
                                          "sums": pa.array([sent], pa.string())})

    return send


def keyed_stream(batches, text_col: str, spec: KeySpec, threads: int, skip, records: Optional[RecordFields]):
    """The keys stage's batches: :func:`~lshbloom_udf.spark.keys.keyed_batches`, or with ``records``
    :func:`~lshbloom_udf.spark.records.recorded_batches` (the same keys and active flags, and the record fields)."""
    if records is None:
        return keyed_batches(batches, text_col, spec, threads, skip)
    from lshbloom_udf.spark.records import recorded_batches

    return recorded_batches(batches, text_col, spec, threads, skip, records.with_id)


def with_id_hashes(batches, id_hashes: list):
    """``batches`` unchanged, each one's non-null id hashes appended to ``id_hashes``."""
    from lshbloom_udf.spark.ids import batch_id_hashes

    for batch in batches:
        id_hashes.append(batch_id_hashes(batch))
        yield batch
