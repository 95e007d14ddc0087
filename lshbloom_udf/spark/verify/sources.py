"""Where verification's candidate pairs come from (:mod:`lshbloom_udf.spark.verify`): one interface, two sources.

- :class:`SpoolCandidates` — on the driver, from the keys the socket stream
  kept (:class:`~lshbloom_udf.spark.passes.driver.stream.KeyStream` with ``keep=True``) and
  the flagged documents' keys the pass kept (``F·b``). Round 1 is one
  sequential scan of the spool: every kept document's ``(band, key)`` pairs
  looked up in the flagged documents' (:class:`lshbloom_udf._native.PairIndex`,
  native, exact, a chunk per driver core while the scan reads on), stopping after the last flagged row (a candidate
  source is earlier than its flagged document). Round 2 joins the round-1-unflagged
  documents' keys with themselves in memory (``_native.shared_band_pairs``:
  sorted band by band, the bands shared among the driver's cores, each bucket
  paired with its first :data:`ANCHORS_PER_BUCKET` members). No Spark job, no
  key computed twice, no shuffle.
- :class:`~lshbloom_udf.spark.verify.spark_source.SparkCandidates` — where no spool exists: the keys joined by
  Spark on the executors. After the sharded pass they are the pass's own (persisted by it, never computed twice);
  after the ``toLocalIterator`` transfer of Spark Connect and ``key_transfer="spark"``, a reproduced run, or a
  spool too large for its disk, they are computed again.

Both give the same pairs on the same input (tests/spark/verify/test_spark_verify_sources.py).

**Bounds** (docs/algorithm.md §8, "Bounded candidates"). A flagged document is
checked against at most :data:`CANDIDATES_PER_DOCUMENT` earlier documents in
each round, whatever the input:

- round 1's sources are the documents the pass kept, whose keys are unique per
  band (a kept document shares no key with an earlier one, or the pass would
  have flagged it): at most ``b`` per flagged document before the cut;
- round 2's documents may share keys with many others (pages made from one
  template fill a few buckets of every band with a large share of the family:
  pairing them all is ``O(n²)``), so a bucket (band, key) pairs each member
  only with its first :data:`ANCHORS_PER_BUCKET` members (its anchors);
- then each document keeps the candidates the bands give the most evidence for
  (:func:`strongest`): the most bands shared (two documents at Jaccard ``s``
  share each band with probability ``s^r``: a true source shares many, a
  template sibling one or two), then the smallest bucket shared in (a bucket
  holding just the two says more than one the whole family fills), then the
  earliest.

So verification computes at most ``CANDIDATES_PER_DOCUMENT · F`` similarities
per round, and the pairs behind them take at most ``b · ANCHORS_PER_BUCKET``
entries per document: linear in the documents on any input.

The spool's size: ``N·(8b+1)`` bytes (64 × 4 bands: 513 bytes a document, 0.5 GB at
10⁶, 51 GB at 10⁸). It lives in the temporary directory (the page cache holds
what fits in memory, the disk the rest). It is kept only when it takes at most
:data:`SPOOL_SHARE_OF_FREE` of that filesystem's free space at the start of the
pass; otherwise the run logs it and verifies through ``SparkCandidates``.
"""

from __future__ import annotations

import collections
import os
import shutil
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Optional, Protocol

import numpy as np

from lshbloom_udf.errors import InternalError
from lshbloom_udf.log import logger
from lshbloom_udf.spark.keys import is_in

# The share of the spool filesystem's free space a kept spool may take (the rest: other spills, the index).
SPOOL_SHARE_OF_FREE = 0.5
# The candidates a flagged document is checked against in each round, at most (the module's "Bounds"). A true
# source shares most bands with its copy, so it ranks first; 4 leaves room for the few template siblings that
# share as many bands in small buckets. It is the least at which no decision of the study changes (at 2 and 3 two
# and three held-out ones do: docs/evaluation.md §0.9); each one more costs a similarity per flagged document and
# round (a template family's verification is ~all of them).
CANDIDATES_PER_DOCUMENT = 4
# The members of a bucket (band, key) that the later ones are paired with in round 2 (the earliest).
ANCHORS_PER_BUCKET = 4


class CandidateSource(Protocol):
    """Verification's candidate pairs: (later row, earlier row) sharing a (band, key), distinct, as int64 arrays,
    at most :data:`CANDIDATES_PER_DOCUMENT` per later row; ``beyond``: the pairs found but left out by that bound
    so far."""

    beyond: int

    def round1(self, flagged: np.ndarray, lap) -> tuple[np.ndarray, np.ndarray]:
        """(flagged row, earlier row the pass kept) pairs; ``flagged``: the pass's flags, sorted. ``lap(name)``
        may time a part of the work."""

    def round2(self, unflagged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(later, earlier) pairs among the sorted rows ``unflagged`` (flagged rows round 1 unflagged)."""

    def close(self) -> None:
        """Release what the source holds (cached frames, the spool)."""


def count_pairs(f: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (f, k) pairs with ``f > k`` of pairs given once per band they share, sorted by (f, k), and how
    many times each was given (its shared bands)."""
    f, k = np.asarray(f, np.int64), np.asarray(k, np.int64)
    later = f > k
    f, k = f[later], k[later]
    order = np.lexsort((k, f))
    f, k = f[order], k[order]
    if not len(f):
        return f, k, np.zeros(0, np.int64)
    starts = np.flatnonzero(np.r_[True, (f[1:] != f[:-1]) | (k[1:] != k[:-1])])
    return f[starts], k[starts], np.diff(np.r_[starts, len(f)])


def strongest(f: np.ndarray, k: np.ndarray, bands: np.ndarray, smallest_bucket: np.ndarray,
              per_document: int = CANDIDATES_PER_DOCUMENT) -> tuple[np.ndarray, np.ndarray, int]:
    """Of distinct candidate pairs (later ``f``, earlier ``k``), each later document's ``per_document`` strongest:
    the most ``bands`` shared, then the smallest bucket shared in, then the earliest ``k``; sorted by (f, k); and
    how many pairs that left out."""
    f, k = np.asarray(f, np.int64), np.asarray(k, np.int64)
    order = np.lexsort((k, np.asarray(smallest_bucket, np.int64), -np.asarray(bands, np.int64), f))
    f, k = f[order], k[order]
    if len(f):
        starts = np.flatnonzero(np.r_[True, f[1:] != f[:-1]])
        rank = np.arange(len(f)) - np.repeat(starts, np.diff(np.r_[starts, len(f)]))
        f, k = f[rank < per_document], k[rank < per_document]
    order = np.lexsort((k, f))
    return f[order], k[order], int(len(bands) - len(f))


def shared_key_pairs(rows: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(later, earlier) pairs of ``rows`` (sorted) whose ``keys`` rows ((n, b)) share a (band, key), the earlier
    one among the bucket's first :data:`ANCHORS_PER_BUCKET`, the :func:`strongest` of each later row, sorted by
    (later, earlier), and how many the bound left out; matched natively on the driver's cores (the executors are
    idle meanwhile)."""
    from lshbloom_udf import _native

    rows = np.asarray(rows, np.int64)
    later, earlier, bands, smallest = _native.shared_band_pairs(
        np.ascontiguousarray(keys, np.uint64), ANCHORS_PER_BUCKET, os.cpu_count() or 1)
    # Rows ascend with their index, so the strongest index pairs are the strongest row pairs.
    return strongest(rows[later.astype(np.intp)], rows[earlier.astype(np.intp)], bands, smallest)


def keys_of(rows: np.ndarray, keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The ``keys`` rows of the sorted ``wanted`` row ids among the sorted ``rows`` (a flagged set held on the
    driver); :class:`InternalError` for a row it does not hold."""
    at = np.searchsorted(rows, wanted)
    if len(wanted) and (at.max() >= len(rows) or not np.array_equal(rows[at], wanted)):
        raise InternalError("internal error: verification asked for keys of rows the pass did not flag")
    return keys[at]


class BoundedSource:
    """A candidate source's ``beyond``: the pairs its bound left out, summed over the rounds
    (:class:`CandidateSource`)."""

    beyond = 0

    def _count(self, bounded: tuple[np.ndarray, np.ndarray, int]) -> tuple[np.ndarray, np.ndarray]:
        f, k, beyond = bounded
        self.beyond += beyond
        return f, k


class SpoolCandidates(BoundedSource):
    """Candidates on the driver from the kept key spool (see the module's docs); owns ``stream`` and closes it."""

    def __init__(self, stream, partitions: int, flagged_rows: np.ndarray, flagged_keys: np.ndarray):
        self.stream, self.partitions = stream, partitions
        order = np.argsort(flagged_rows, kind="stable")
        self.rows = np.asarray(flagged_rows, np.int64)[order]
        self.keys = np.ascontiguousarray(flagged_keys[order], dtype=np.uint64)

    def _keys_of(self, rows: np.ndarray) -> np.ndarray:
        return keys_of(self.rows, self.keys, rows)

    def round1(self, flagged: np.ndarray, lap) -> tuple[np.ndarray, np.ndarray]:
        from lshbloom_udf import _native

        if not len(flagged):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        index = _native.PairIndex(self._keys_of(flagged))
        last = flagged[-1]

        def match(start: int, keys: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            rows = np.arange(start, start + len(active), dtype=np.int64)
            kept = np.asarray(active, dtype=bool) & ~is_in(rows, flagged)
            js, f_at = index.matches(keys, kept)  # native, without the GIL
            return flagged[f_at.astype(np.int64)], rows[js.astype(np.int64)]

        # The executors are idle meanwhile: the driver's cores match chunks while this thread reads the next ones
        # (a few chunks in flight bound the memory). Pairs are sorted at the end, so their order does not matter.
        workers = os.cpu_count() or 1
        found: list[tuple[np.ndarray, np.ndarray]] = []
        pending: collections.deque[Future[tuple[np.ndarray, np.ndarray]]] = collections.deque()
        with ThreadPoolExecutor(workers, thread_name_prefix="lshbloom-verify") as pool:
            for start, keys, active in self.stream.replay(self.partitions):
                if start >= last:
                    break  # every later row is too late to be a candidate source
                pending.append(pool.submit(match, start, keys, active))
                if len(pending) > 2 * workers:
                    found.append(pending.popleft().result())
            found.extend(p.result() for p in pending)
        found = [(f, k) for f, k in found if len(f)]
        if not found:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        # One entry per shared band; a bucket holds one kept document (their keys are unique per band).
        f, k, bands = count_pairs(np.concatenate([f for f, _ in found]), np.concatenate([k for _, k in found]))
        return self._count(strongest(f, k, bands, np.ones(len(f), np.int64)))

    def round2(self, unflagged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._count(shared_key_pairs(unflagged, self._keys_of(unflagged)))

    def close(self) -> None:
        self.stream.close()



def keep_spool(spool_dir: str, documents: int, b: int, chunk_rows: int, record_bytes: int = 0) -> bool:
    """Whether a key stream spooling to ``spool_dir`` may keep its spool for verification (the module's docs);
    ``record_bytes``: the record fields it also carries."""
    from lshbloom_udf.spark.passes.driver.stream import spool_bytes

    need = spool_bytes(documents, b, chunk_rows, record_bytes)
    try:
        free = shutil.disk_usage(spool_dir).free
    except OSError:
        free = 0
    if need <= SPOOL_SHARE_OF_FREE * free:
        return True
    logger.info("verification computes the band keys again on the executors: keeping them on the driver would take "
                "%s bytes in %s, which has %s free (at most %.0f%% of it is used)", f"{need:,}", spool_dir,
                f"{free:,}", 100 * SPOOL_SHARE_OF_FREE)
    return False


def spool_source(stream, partitions: int, outcome) -> Optional[SpoolCandidates]:
    """The spool's candidate source after the pass (None: the stream kept no spool)."""
    if not getattr(stream, "keep", False):
        return None
    return SpoolCandidates(stream, partitions, outcome.rows(), outcome.keys(stream.b))
