"""The OS lock of an index directory (``<index>/.lock``, ``flock``): exclusive for a writer, shared for readers.

An :class:`IndexLock` owns its file descriptor. Used as a context manager it
is released when the block ends — unless the block handed it over with
:meth:`IndexLock.keep` to the object that holds it from then on (an open
index, a transaction), which releases it when it closes::

    with IndexLock(path, read_only=False) as lock:
        ...                       # an error here (or in Index()) releases the lock
        index = Index(..., lock=lock)
        lock.keep()               # from here on the index releases it
    return index

Being an OS lock, it disappears with its process: a killed job never leaves
a stale lock behind. :class:`LockHolder` is what an index and a transaction
share as holders of a lock until they close.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from typing import Callable, Optional, TypeVar

from lshbloom_udf.errors import IndexLockedError

LOCK_NAME = ".lock"
# How often a caller that waits for a held lock tries again.
LOCK_POLL_SECONDS = 0.5
T = TypeVar("T")


def waiting_for_lock(take: Callable[[], T], seconds: float) -> T:
    """``take()`` (something that takes an index's lock), tried again while another process holds the lock, for up
    to ``seconds``; then its :class:`IndexLockedError`."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return take()
        except IndexLockedError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(LOCK_POLL_SECONDS)


class IndexLock:
    """The lock of the index directory ``path``, taken at construction (``enabled=False``: a no-op stand-in).

    A reader of an index in a directory it cannot write goes without (it
    changes nothing); a writer there gets ``PermissionError`` ("not writable").
    A lock held by another process raises :class:`IndexLockedError` naming
    the writer's pid.
    """

    def __init__(self, path: str, read_only: bool = False, *, enabled: bool = True):
        self.path = path
        self.read_only = read_only
        self._fd: Optional[int] = self._acquire() if enabled else None
        self._kept = False

    def _acquire(self) -> Optional[int]:
        lock_path = os.path.join(self.path, LOCK_NAME)
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            if self.read_only:
                return None
            raise PermissionError(e.errno, f"{self.path}: index directory is not writable ({e.strerror})",
                                  lock_path) from None
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if self.read_only else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise IndexLockedError(
                f"{self.path}: index is in use by another process (pid {holder}); two jobs cannot share an index "
                "directory at once — wait for the other one or use another --index-dir"
            ) from None
        if not self.read_only:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        return fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def keep(self) -> "IndexLock":
        """Hand the lock over: leaving the ``with`` block no longer releases it; the new holder calls
        :meth:`release`."""
        self._kept = True
        return self

    def release(self) -> None:
        """Release the lock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def __enter__(self) -> "IndexLock":
        return self

    def __exit__(self, *exc) -> None:
        if not self._kept:
            self.release()

    def __repr__(self) -> str:
        mode = "shared" if self.read_only else "exclusive"
        return f"IndexLock({self.path!r}, {mode}, {'held' if self.held else 'not held'})"


class LockHolder:
    """An object that holds an index directory's lock until :meth:`close`: a context manager, unusable once closed."""

    path: str
    closed: bool = True
    _lock: Optional[IndexLock] = None
    # what messages call it ("index", "index transaction")
    _kind = "index"

    def close(self) -> None:
        raise NotImplementedError

    def _release_lock(self) -> None:
        """Mark closed and release the lock, if one is held."""
        self.closed = True
        if self._lock is not None:
            self._lock.release()

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"{self.path}: {self._kind} is closed")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
