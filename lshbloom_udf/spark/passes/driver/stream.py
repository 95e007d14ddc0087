"""The socket transfer: executors send their partitions' band keys to the driver pass while they compute them.

The keys stage is one Spark job over the pinned input (all executors busy, in
any cluster size). Each task connects to a server on the driver
(:class:`KeyStream`, bound to ``spark.driver.bindAddress`` or
``spark.driver.host``, authenticated by a random token shipped with the task)
and sends its partition's keys in chunks of ``chunk_rows`` documents as soon as
they are computed. The driver spools every connection to a file of its own
(the operating system's page cache holds what the driver pass has not reached
yet, the disk what does not fit: the driver's memory stays bounded whatever
the partitions' sizes) and hands the chunks to the pass in row-id order,
partition after partition. Keying, transfer and the driver pass overlap; no
Spark task result carries keys.

The wire format is the sender's (:mod:`~lshbloom_udf.spark.passes.driver.sender`). The driver takes a
partition's id hashes once its end arrived (an attempt that broke off sends them again whole).

Kept keys (``keep=True``, under verification): the spool is not deleted
partition by partition as the pass decides it but stays until :meth:`KeyStream.close`,
so that verification reads every document's keys again (:meth:`KeyStream.replay`)
instead of computing them again on the executors. Then the spool holds
``N·(8b+1)`` bytes at the end of the pass (:func:`spool_bytes`; the caller
checks it fits, :mod:`lshbloom_udf.spark.verify.sources`).

Retries and speculative copies: every attempt of a task sends its partition
from its start, to a spool file of its own. The pass reads one attempt; if it
breaks off (a failed or killed task), it goes on with the next attempt of the
same partition, skipping the rows it already decided. The input is pinned
before this stage (:meth:`~lshbloom_udf.spark.pipeline.DedupRun.pin`), so every
attempt sends the same keys for the same row ids. The input's sums (``measure``,
:class:`~lshbloom_udf.spark.ingest.InputSums`) come back as the job's output
rows instead: one successful attempt's of each partition.
"""

from __future__ import annotations

import hmac
import os
import shutil
import socket
import threading
import time
import uuid
from typing import Iterator, Optional

import numpy as np

from lshbloom_udf.errors import InternalError
from lshbloom_udf.litter import make_temp_dir
from lshbloom_udf.spark.keys import POS_BITS
from lshbloom_udf.spark.passes.driver.sender import HEADER, HELLO, ID_HASHES, MAGIC

# How long the pass waits without any news (no byte, no attempt, no end of the job) before it calls the job stuck.
IDLE_CHECK_SECONDS = 5.0


def spool_bytes(documents: int, b: int, chunk_rows: int, record_bytes: int = 0) -> int:
    """The bytes one attempt of every partition spools for ``documents`` documents of ``b`` band keys (and
    ``record_bytes`` of record fields, :mod:`~lshbloom_udf.spark.passes.driver.record_spool`)."""
    chunks = -(-documents // max(1, chunk_rows))
    return documents * (8 * b + 1) + record_bytes + HEADER.size * (chunks + 1)


class _AttemptClosedError(Exception):
    """An attempt's connection closed before its partition's end."""


class _Attempt:
    """One task attempt's connection, spooled to ``path``: ``size`` bytes so far, ``closed`` once it ended."""

    def __init__(self, partition: int, attempt: int, path: str):
        self.partition, self.attempt, self.path = partition, attempt, path
        self.size = 0
        self.closed = False


class KeyStream:
    """The driver's end of the socket transfer; use as a context manager around :meth:`run`."""

    def __init__(self, spark, b: int, keep: bool = False, id_hashes=None, records=None):
        conf = spark.sparkContext.getConf()
        host = conf.get("spark.driver.host", None) or socket.gethostname()
        bind = conf.get("spark.driver.bindAddress", None) or host
        self.spark, self.b, self.keep = spark, b, keep
        # The partitions' id hashes (spark.ids.IdHashes), taken as the pass reads each partition's end; None: not sent.
        self.id_hashes = id_hashes
        # The run's records spooled as the pass reads each chunk (record_spool.RecordSpool); None: not sent.
        self.records = records
        self.server = socket.create_server((bind, 0))
        self.address = (host, self.server.getsockname()[1])
        self.token = os.urandom(16)
        self.spool = make_temp_dir("keys")
        self.cond = threading.Condition()
        self.attempts: dict[int, list[_Attempt]] = {}
        self.job_done = False
        self.job_seconds: Optional[float] = None  # the keys stage's, once it ended
        self.sent: list = []  # the keys stage's output rows (stream_mapper's), once it ended
        self.job_error: Optional[BaseException] = None
        self.group = f"lshbloom-keys-{uuid.uuid4().hex}"
        self._job: Optional[threading.Thread] = None
        threading.Thread(target=self._accept, name="lshbloom-key-stream", daemon=True).start()

    def __enter__(self) -> "KeyStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the Spark job and the connections (other threads) -------------------------

    def start(self, df) -> None:
        """Run the keys stage ``df`` (``stream_mapper``'s output) as a Spark job in a thread of its own."""
        from pyspark import InheritableThread

        sc = self.spark.sparkContext

        def job():
            t = time.monotonic()
            try:
                # The thread inherited the run's local properties; the group (to cancel the job) replaces the
                # description.
                sc.setJobGroup(self.group, "lshbloom: keys + driver pass", interruptOnCancel=True)
                sent = df.collect()
            except BaseException as e:  # handed to the pass, which raises it
                with self.cond:
                    self.job_error = e
                    self.cond.notify_all()
                return
            with self.cond:
                self.job_seconds = time.monotonic() - t
                self.sent = sent
                self.job_done = True
                self.cond.notify_all()

        self._job = InheritableThread(target=job, name="lshbloom-keys-job", daemon=True)
        self._job.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._receive, args=(conn,), daemon=True).start()

    def _receive(self, conn: socket.socket) -> None:
        with conn:
            hello = _recv_exact(conn, HELLO.size)
            if hello is None:
                return
            magic, token, pid, attempt = HELLO.unpack(hello)
            if magic != MAGIC or not hmac.compare_digest(token, self.token):
                return
            att = _Attempt(pid, attempt, os.path.join(self.spool, f"p{pid}-a{attempt}-{uuid.uuid4().hex[:8]}"))
            buf = bytearray(1 << 20)
            try:
                with open(att.path, "wb", buffering=0) as f:
                    with self.cond:
                        self.attempts.setdefault(pid, []).append(att)
                        self.cond.notify_all()
                    while True:
                        k = conn.recv_into(buf)
                        if k == 0:
                            break
                        _write_all(f, memoryview(buf)[:k])
                        with self.cond:
                            att.size += k
                            self.cond.notify_all()
            except OSError:
                pass
            finally:
                with self.cond:
                    att.closed = True
                    self.cond.notify_all()

    # -- the pass's side (the calling thread) ------------------------------------

    def chunks(self, partitions: int) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """``(first row id, keys (n, b), active (n,))`` of every partition ``0 .. partitions-1``, in row order."""
        for pid in range(partitions):
            yield from self._partition(pid, self.id_hashes, self.records)
            if not self.keep:
                self._drop(pid)
        self._wait(lambda: self.job_done, "the end of the keys stage")

    def input_sums(self):
        """The partitions' :class:`~lshbloom_udf.spark.ingest.InputSums` added up (the stage measured, and ended):
        one successful attempt's of each partition."""
        from lshbloom_udf.spark.ingest import InputSums

        self._wait(lambda: self.job_done, "the end of the keys stage")
        if any(row["sums"] is None for row in self.sent):
            raise InternalError("internal error: the keys stage did not measure the input")
        return sum((InputSums.from_json(row["sums"]) for row in self.sent), InputSums())

    def replay(self, partitions: int) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """The chunks of :meth:`chunks` again, read from the kept spool (``keep=True``, after the pass): each
        partition from the same attempts, retries and speculative copies handled alike."""
        if not self.keep:
            raise InternalError("internal error: the key stream did not keep its spool")
        for pid in range(partitions):
            yield from self._partition(pid)

    def _partition(self, pid: int, id_hashes=None, records=None):
        """A partition's chunks from its first attempt that sends it whole; its id hashes into ``id_hashes``, its
        record fields into ``records`` (each row once)."""
        base, done, tried = pid << POS_BITS, 0, 0
        while True:
            att = self._next_attempt(pid, tried)
            tried += 1
            reader = _Reader(self, att)
            try:
                hashes = None
                while True:
                    start, n = HEADER.unpack(reader.read(HEADER.size))
                    if n == ID_HASHES:
                        if id_hashes is not None:
                            hashes = reader.read(8 * start)
                        else:
                            reader.skip(8 * start)
                        continue
                    if n < 0:
                        if start != done:
                            raise InternalError(f"internal error: partition {pid} sent {start} documents, "
                                               f"the driver pass decided {done}")
                        if id_hashes is not None:
                            if hashes is None:
                                raise InternalError(f"internal error: partition {pid} sent no id hashes")
                            id_hashes.add(np.frombuffer(hashes, dtype="<i8"), start)
                        return
                    active = np.frombuffer(reader.read(n), dtype=np.bool_)
                    keys = np.frombuffer(reader.read(8 * n * self.b), dtype="<u8").reshape(n, self.b)
                    skip = done - (start - base)  # rows an earlier attempt already sent
                    if skip < 0:
                        raise InternalError(f"internal error: partition {pid}'s keys skip rows {done}..{start - base}")
                    if self.records is not None:
                        self._read_records(reader, n, records if skip < n else None, start, skip)
                    if skip < n:
                        yield start + skip, keys[skip:], active[skip:]
                        done = start - base + n
            except _AttemptClosedError:
                continue  # that attempt failed or was killed: the next one sends the partition again
            finally:
                reader.close()

    def _read_records(self, reader, n: int, records, start: int, skip: int) -> None:
        """A chunk's record fields (after its keys), its rows from ``skip`` on added to ``records`` (None: read
        past them)."""
        k = self.records.num_perm
        if records is None:  # passed over: only the ids' lengths are read, to know how far
            reader.skip(n * (1 + k + 4 + 16))
            if self.records.with_id:
                reader.skip(int(np.maximum(np.frombuffer(reader.read(4 * n), dtype="<i4"), 0).sum()))
            return
        fields = [reader.read(n), reader.read(n * k), reader.read(4 * n), reader.read(16 * n)]
        lengths, id_bytes = None, b""
        if self.records.with_id:
            lengths = np.frombuffer(reader.read(4 * n), dtype="<i4")
            id_bytes = reader.read(int(np.maximum(lengths, 0).sum()))
        has = np.frombuffer(fields[0], dtype=np.bool_)[skip:]
        sketch = np.frombuffer(fields[1], dtype=np.uint8).reshape(n, k)[skip:]
        size = np.frombuffer(fields[2], dtype="<f4")[skip:]
        hashes = np.frombuffer(fields[3], dtype=np.uint8).reshape(n, 16)[skip:]
        if lengths is not None:
            id_bytes = id_bytes[int(np.maximum(lengths[:skip], 0).sum()):]
            lengths = lengths[skip:]
        records.add(start + skip, has, sketch, size, hashes, lengths, id_bytes)

    def _next_attempt(self, pid: int, tried: int) -> _Attempt:
        def ready():
            return len(self.attempts.get(pid, ())) > tried or self.job_done

        self._wait(ready, f"partition {pid}'s keys")
        with self.cond:
            if len(self.attempts.get(pid, ())) > tried:
                return self.attempts[pid][tried]
        raise InternalError(f"internal error: the keys stage ended but partition {pid}'s keys never arrived whole")

    def _wait(self, condition, what: str) -> None:
        """Wait until ``condition()`` holds (under the lock); raise the keys job's error if it failed."""
        with self.cond:
            while True:
                if self.job_error is not None:
                    raise self.job_error
                if condition():
                    return
                if not self.cond.wait(IDLE_CHECK_SECONDS) and self._job is not None and not self._job.is_alive():
                    if self.job_error is None and not self.job_done:
                        raise InternalError(f"internal error: the keys stage ended without {what}")

    def _drop(self, pid: int) -> None:
        """Delete a decided partition's spool files (a speculative copy still sending writes to an unlinked file)."""
        with self.cond:
            for att in self.attempts.get(pid, ()):
                try:
                    os.unlink(att.path)
                except OSError:
                    pass

    def close(self) -> None:
        """Stop the keys job if it still runs, then close the server and delete the spool.

        In that order: a task that starts after the server closed fails with ``ConnectionRefusedError``, and its
        Python traceback would print on the executors' log after the run's own one-line error (a run that fails
        while the keys stage runs, e.g. on a corrupt index)."""
        try:
            if self._job is not None and self._job.is_alive():
                self._stop_job(self._job)
        finally:
            self.server.close()
            shutil.rmtree(self.spool, ignore_errors=True)

    def _stop_job(self, job: threading.Thread, timeout: float = 60.0) -> None:
        """Cancel the keys job, wait for its thread ``job`` to end. The group is cancelled only while it has an active
        job: cancelling a group whose jobs all ended makes Spark's DAGScheduler warn "Failed to cancel job group"
        (the pass read every key while the job was finishing), and one not submitted yet is cancelled once it is."""
        sc = self.spark.sparkContext
        tracker = sc.statusTracker()
        deadline = time.monotonic() + timeout
        while job.is_alive() and time.monotonic() < deadline:
            with self.cond:
                done = self.job_done or self.job_error is not None
            if not done and set(tracker.getJobIdsForGroup(self.group)) & set(tracker.getActiveJobsIds()):
                sc.cancelJobGroup(self.group)
                job.join(timeout=max(0.0, deadline - time.monotonic()))
                return
            job.join(timeout=0.1)


class _Reader:
    """Reads an attempt's spool file as it grows; :class:`_AttemptClosedError` if the attempt closed short of a read."""

    def __init__(self, stream: KeyStream, att: _Attempt):
        self.stream, self.att = stream, att
        self.fd = os.open(att.path, os.O_RDONLY)
        self.offset = 0

    def read(self, k: int) -> bytes:
        if k == 0:
            return b""
        att, end = self.att, self.offset + k
        self.stream._wait(lambda: att.size >= end or att.closed, f"partition {att.partition}'s keys")
        if att.size < end:
            raise _AttemptClosedError()
        parts, got = [], 0
        while got < k:
            part = os.pread(self.fd, k - got, self.offset + got)
            if not part:
                raise InternalError(f"internal error: short read of {att.path}")
            parts.append(part)
            got += len(part)
        self.offset = end
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def skip(self, k: int) -> None:
        """Past ``k`` bytes, unread."""
        att, end = self.att, self.offset + k
        self.stream._wait(lambda: att.size >= end or att.closed, f"partition {att.partition}'s keys")
        if att.size < end:
            raise _AttemptClosedError()
        self.offset = end

    def close(self) -> None:
        os.close(self.fd)


def _write_all(f, data: memoryview) -> None:
    while data:
        data = data[f.write(data):]


def _recv_exact(conn: socket.socket, k: int) -> Optional[bytes]:
    data = bytearray()
    while len(data) < k:
        try:
            part = conn.recv(k - len(data))
        except OSError:
            return None
        if not part:
            return None
        data += part
    return bytes(data)
