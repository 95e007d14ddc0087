"""Verification's candidate source without a spool, :class:`SparkCandidates` (:mod:`~lshbloom_udf.spark.verify.sources`
has the interface and the bounds; :mod:`lshbloom_udf.spark.verify`, "Cost"): the Bloom filter of the flagged
documents' (band, key) pairs, the kept documents' keys scanned through it on the executors, and the pairs that pass
matched with the flagged documents' pairs: on the driver while the flagged documents' keys fit its arrays budget
(:data:`DRIVER_KEY_COPIES`), by a Spark join past it; round 2 likewise. The keys are a pass's persisted frame
(:meth:`SparkCandidates.over`: the sharded pass) or computed again from the pinned texts."""

from __future__ import annotations

from typing import Optional

import numpy as np

from lshbloom_udf.common import GOLDEN, collect_arrow, iter_arrow, local_rows, mix64
from lshbloom_udf.errors import InternalError
from lshbloom_udf.memory import PAIR_FILTER_BITS, DriverMemory
from lshbloom_udf.spark.frames import row_frame
from lshbloom_udf.spark.keys import KEYED_SCHEMA, ROW_COL, is_in, selected_mapper, ship, shipped_value
from lshbloom_udf.spark.verify.sources import (
    ANCHORS_PER_BUCKET,
    BoundedSource,
    count_pairs,
    keys_of,
    shared_key_pairs,
    strongest,
)

F_ROW, K_ROW = "_lshb_frow", "_lshb_krow"
BANDS, BUCKET = "_lshb_bands", "_lshb_bucket"
BLOOM_PROBES = 4
# A round on the driver holds its documents' keys about this many times over (round 1: the keys, their pair hashes,
# the hashes' order and the sorted hashes; round 2: the batches, the concatenation, the sorted copy, the native
# self-join's sort).
DRIVER_KEY_COPIES = 4


def pair_hashes(keys: np.ndarray) -> np.ndarray:
    """A well-mixed 64-bit hash of each (band i, key) of an ``(n, b)`` key matrix (splitmix64's finalizer), row by
    row: entry ``i·b + band`` is row ``i``'s."""
    return pair_hash(np.arange(keys.shape[1], dtype=np.uint64)[None, :], keys).ravel()


def pair_hash(band: np.ndarray, key: np.ndarray) -> np.ndarray:
    """:func:`pair_hashes`' hash of (``band``, ``key``) pairs (broadcast arrays)."""
    return mix64(key.astype(np.uint64, copy=False) ^ ((band.astype(np.uint64) + np.uint64(1)) * GOLDEN))


def match_kept(rows: np.ndarray, keys: np.ndarray, kept_batches) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Round 1's pairs on the driver: (flagged row, kept row, bands shared) as :func:`count_pairs` gives them, from
    the flagged documents' sorted ``rows`` and ``keys`` (``(n, b)``) and batches of kept (band, key, row) pairs
    (:data:`PAIRS_SCHEMA`), matched by their pair hashes sorted once, each match checked on its band and key."""
    b = keys.shape[1]
    hashes = pair_hashes(keys)
    order = np.argsort(hashes, kind="stable")
    ordered = hashes[order]
    fs, ks = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for batch in kept_batches:
        band = batch.column("band").to_numpy().astype(np.int64)
        key = batch.column("key").to_numpy().view(np.uint64)
        row = batch.column("row").to_numpy()
        q = pair_hash(band, key)
        lo, hi = np.searchsorted(ordered, q, "left"), np.searchsorted(ordered, q, "right")
        counts = hi - lo
        which = np.repeat(np.arange(len(q)), counts)  # the kept pair of each match
        at = order[np.repeat(lo, counts) + np.arange(len(which)) - np.repeat(np.cumsum(counts) - counts, counts)]
        f_row, f_band = at // b, at % b
        same = (f_band == band[which]) & (keys[f_row, f_band] == key[which])  # not a mere hash collision
        fs.append(rows[f_row[same]])
        ks.append(row[which[same]])
    return count_pairs(np.concatenate(fs), np.concatenate(ks))


class PairBloom:
    """A plain Bloom filter over 64-bit hashes: ``m`` = a power of two >= 12·n bits, 4 probes (double hashing).

    False-positive rate ``(1 - e^{-4n/m})^4 <= 0.6 %``: a false positive only
    costs a kept pair in the join, never a wrong decision.
    """

    def __init__(self, n: int):
        bits = 8 * self.bytes_for(n)
        self.mask = np.uint64(bits - 1)
        self.bits = np.zeros(bits // 8, dtype=np.uint8)

    @staticmethod
    def bytes_for(n: int) -> int:
        """The filter's bytes for ``n`` pairs."""
        return (1 << max(6, int(np.ceil(np.log2(max(1, n) * PAIR_FILTER_BITS))))) // 8

    def _positions(self, h: np.ndarray):
        h1, h2 = h & np.uint64(0xFFFFFFFF), (h >> np.uint64(32)) | np.uint64(1)
        for j in range(BLOOM_PROBES):
            yield (h1 + np.uint64(j) * h2) & self.mask

    def add(self, h: np.ndarray) -> None:
        for pos in self._positions(h):
            byte, bit = (pos >> np.uint64(3)).astype(np.intp), (pos & np.uint64(7)).astype(np.uint8)
            for value in range(8):
                # One bit value at a time: a byte hit twice gets the same OR both times (ufunc.at is far slower).
                at = byte[bit == value]
                self.bits[at] |= np.uint8(1 << value)

    def contains(self, h: np.ndarray) -> np.ndarray:
        hit = np.ones(len(h), dtype=bool)
        for pos in self._positions(h):
            hit &= ((self.bits[(pos >> np.uint64(3)).astype(np.intp)] >> (pos & np.uint64(7)).astype(np.uint8)) & 1) > 0
        return hit


def _batch_keys(batch, b: int):
    """(row ids, (n, b) uint64 keys, active mask) of a batch of (row, keys, active)."""
    from lshbloom_udf.spark.keys import unpack_keyed

    if not batch.num_rows:
        return np.zeros(0, np.int64), np.zeros((0, b), np.uint64), np.zeros(0, np.bool_)
    rows, data, active = unpack_keyed(batch, 8 * b)
    return rows, np.frombuffer(data, dtype="<u8").reshape(batch.num_rows, b), active


def flagged_hashes_mapper(b: int):
    """One row per batch of flagged documents' keys: their pair hashes (for the driver's Bloom filter)."""

    def run(batches):
        import pyarrow as pa

        for batch in batches:
            _, keys, _ = _batch_keys(batch, b)
            if len(keys):
                yield pa.RecordBatch.from_pydict({"h": pa.array([pair_hashes(keys).tobytes()], pa.binary())})

    return run


PAIRS_SCHEMA = "band int, key long, row long"


def _pairs_batch(band_ids: np.ndarray, rows: np.ndarray, keys: np.ndarray, hit: np.ndarray):
    import pyarrow as pa

    return pa.RecordBatch.from_pydict({
        "band": pa.array(np.broadcast_to(band_ids, hit.shape)[hit], pa.int32()),
        "key": pa.array(keys[hit].view(np.int64), pa.int64()),
        "row": pa.array(np.broadcast_to(rows[:, None], hit.shape)[hit], pa.int64()),
    })


def pairs_mapper(among: Optional[np.ndarray], b: int):
    """(band, key, row) rows: every pair of the documents whose row id is among the sorted ``among`` (or
    :func:`~lshbloom_udf.spark.keys.ship`'s broadcast of them; None: of every document)."""

    def run(batches):
        mine_of = shipped_value(among)
        band_ids = np.arange(b, dtype=np.int32)
        for batch in batches:
            rows, keys, _ = _batch_keys(batch, b)
            mine = is_in(rows, mine_of) if mine_of is not None else np.ones(len(rows), dtype=bool)
            if mine.any():
                yield _pairs_batch(band_ids, rows[mine], keys[mine], np.ones((int(mine.sum()), b), dtype=bool))

    return run


def kept_pairs_mapper(bloom: Optional[PairBloom], b: int):
    """(band, key, row) rows: the pairs of the active documents (the unflagged ones: the pass kept them) that
    pass ``bloom`` (or :func:`~lshbloom_udf.spark.keys.ship`'s broadcast of it; None: every pair)."""

    def run(batches):
        filt = shipped_value(bloom)
        band_ids = np.arange(b, dtype=np.int32)
        for batch in batches:
            rows, keys, active = _batch_keys(batch, b)
            rows, keys = rows[active], keys[active]
            if filt is None:
                hit = np.ones(keys.shape, dtype=bool)
            else:
                hit = filt.contains(pair_hashes(keys)).reshape(keys.shape)
            if hit.any():
                yield _pairs_batch(band_ids, rows, keys, hit)

    return run


def flagged_bloom(flagged_keys, documents: int, b: int) -> PairBloom:
    """The Bloom filter of the flagged documents' pairs, built on the driver from a stream of their hashes."""
    bloom = PairBloom(documents * b)
    for row in local_rows(flagged_keys.mapInArrow(flagged_hashes_mapper(b), "h binary")):
        bloom.add(np.frombuffer(row["h"], dtype=np.uint64))
    return bloom


def candidates(f, k, anchors: Optional[int] = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(later row of ``f``, earlier row of ``k``) pairs sharing a (band, key), distinct, with the bands they share
    and the fewest ``k`` rows in one of those buckets, as four int64 arrays
    (:func:`~lshbloom_udf.spark.verify.sources.strongest`'s evidence). ``anchors``: only the first ``anchors`` rows of
    each bucket of ``k`` are paired (None: every row: ``k``'s keys are unique per band, a bucket holds one row)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    f = f.withColumnRenamed("row", F_ROW)
    k = k.withColumnRenamed("row", K_ROW)
    if anchors is None:
        k = k.withColumn(BUCKET, F.lit(1))
    else:
        bucket = Window.partitionBy("band", "key")
        k = (k.withColumn(BUCKET, F.count(F.lit(1)).over(bucket))
             .withColumn("_lshb_rank", F.row_number().over(bucket.orderBy(K_ROW)))
             .where(F.col("_lshb_rank") <= anchors).drop("_lshb_rank"))
    pairs = (f.join(k, ["band", "key"]).where(F.col(F_ROW) > F.col(K_ROW)).groupBy(F_ROW, K_ROW)
             .agg(F.count(F.lit(1)).alias(BANDS), F.min(BUCKET).alias(BUCKET)))
    table = collect_arrow(pairs)
    return tuple(table.column(c).to_numpy().astype(np.int64) for c in (F_ROW, K_ROW, BANDS, BUCKET))


class SparkCandidates(BoundedSource):
    """Candidates by Spark joins of keys on the executors (see the module's docs).

    ``keyed_of(among, inside)``: a DataFrame with ``_lshb_row``, ``_lshb_keys``
    (``b`` little-endian uint64) and ``_lshb_active`` of the rows whose id is
    (``inside``) or is not among the sorted row ids ``among`` (None: of every row).
    """

    def __init__(self, keyed_of, b: int, spark, owned=None):
        self.keyed_of, self.b, self.spark = keyed_of, b, spark
        self._flagged_keys = None
        self._shipped: list = []
        self._owned = owned
        self._held: Optional[tuple[np.ndarray, np.ndarray]] = None  # round 1's flagged (rows, keys) on the driver
        self._rows_shipped: Optional[tuple] = None  # (the last row ids _rows_of broadcast, their broadcast)

    @classmethod
    def over(cls, keyed, b: int) -> "SparkCandidates":
        """Candidates from ``keyed``, a persisted frame of every pinned row's keys (:data:`KEYED_SCHEMA`) a pass
        already computed: its rows are filtered, not keyed again; the source owns it (``close`` unpersists it)."""
        def keyed_of(among, inside: bool = True):
            return keyed.mapInArrow(selected_mapper(among, inside), KEYED_SCHEMA)

        return cls(keyed_of, b, keyed.sparkSession, owned=keyed)

    def _ship(self, value):
        shipped = ship(self.spark, value)
        self._shipped.append(shipped)
        return shipped

    def _rows_of(self, keyed_of, rows: np.ndarray, inside: bool):
        """``keyed_of(among, inside)``'s frame of the rows among the sorted ``rows`` (``inside``) or of the others.
        The row ids travel as a broadcast (keys.ship: in every task's closure they would make it large) while one
        collect of the driver holds them (``DriverMemory.broadcast_rows``: a broadcast passes through the driver's
        JVM), else as a frame of their own, semi- (anti-) joined."""
        if len(rows) <= DriverMemory.of_session(self.spark).broadcast_rows:
            if self._rows_shipped is None or self._rows_shipped[0] is not rows:  # each set of rows broadcast once
                self._rows_shipped = (rows, self._ship(rows))
            return keyed_of(self._rows_shipped[1], inside)
        return keyed_of(None, True).join(row_frame(self.spark, rows), ROW_COL, "left_semi" if inside else "left_anti")

    def _filter_fits(self, documents: int) -> bool:
        """Whether the Bloom filter of ``documents``' pairs fits one collect of the driver (it is broadcast) and its
        arrays budget (it is built there); past them the kept documents' pairs are all joined."""
        memory = DriverMemory.of_session(self.spark)
        return PairBloom.bytes_for(documents * self.b) <= min(memory.collect, memory.arrays)

    def _flagged_frame(self, flagged: np.ndarray):
        from pyspark import StorageLevel

        if self._flagged_keys is None:
            # Read by every scan below (F·b keys, kept); every other document's keys once, never stored.
            self._flagged_keys = self._rows_of(self.keyed_of, flagged, True).persist(StorageLevel.MEMORY_AND_DISK)
        return self._flagged_keys

    def _on_driver(self, documents: int) -> bool:
        """Whether ``documents``' keys fit the driver's arrays budget (the work on them is then native there)."""
        return documents * 8 * self.b * DRIVER_KEY_COPIES <= DriverMemory.of_session(self.spark).arrays

    def round1(self, flagged: np.ndarray, lap) -> tuple[np.ndarray, np.ndarray]:
        """The kept documents' pairs that pass the Bloom filter of the flagged documents' pairs, scanned on the
        executors; matched on the driver while the flagged documents' keys fit it (held there for round 2), else
        by a Spark join."""
        filtered = self._filter_fits(len(flagged))
        if filtered and self._on_driver(len(flagged)):
            rows, keys = self._held = self._keys_on_driver(self._rows_of(self.keyed_of, flagged, True))
            bloom = PairBloom(len(rows) * self.b)
            bloom.add(pair_hashes(keys))
            lap("bloom")
            kept = self._rows_of(self.keyed_of, flagged, False).mapInArrow(
                kept_pairs_mapper(self._ship(bloom), self.b), PAIRS_SCHEMA)
            f, k, bands = match_kept(rows, keys, iter_arrow(kept))
            return self._count(strongest(f, k, bands, np.ones(len(f), np.int64)))
        flagged_keys = self._flagged_frame(flagged)
        shipped = self._ship(flagged_bloom(flagged_keys, len(flagged), self.b)) if filtered else None
        lap("bloom")
        kept_pairs = self._rows_of(self.keyed_of, flagged, False).mapInArrow(kept_pairs_mapper(shipped, self.b),
                                                                            PAIRS_SCHEMA)
        return self._count(strongest(*candidates(flagged_keys.mapInArrow(pairs_mapper(None, self.b), PAIRS_SCHEMA),
                                                 kept_pairs)))

    def round2(self, unflagged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Natively on the driver (:func:`shared_key_pairs`, as the spool's round 2) from the keys round 1 held, or
        brought there while they fit its arrays budget; else a Spark self-join of their pairs. The same pairs."""
        if self._held is not None:
            return self._count(shared_key_pairs(unflagged, keys_of(*self._held, unflagged)))
        flagged_keys = self._flagged_keys
        if flagged_keys is None:
            raise InternalError("internal error: round 2 before round 1")
        def among(shipped, inside: bool = True):
            return flagged_keys.mapInArrow(selected_mapper(shipped, inside), KEYED_SCHEMA)

        mine = self._rows_of(among, unflagged, True)
        if self._on_driver(len(unflagged)):
            return self._count(shared_key_pairs(*self._keys_on_driver(mine)))
        pairs = mine.mapInArrow(pairs_mapper(None, self.b), PAIRS_SCHEMA)
        return self._count(strongest(*candidates(pairs, pairs, anchors=ANCHORS_PER_BUCKET)))

    def _keys_on_driver(self, keyed) -> tuple[np.ndarray, np.ndarray]:
        """(sorted row ids, their ``(n, b)`` keys) of the rows of ``keyed``, streamed to the driver."""
        rows, keys = [], []
        for batch in iter_arrow(keyed):
            r, k, _ = _batch_keys(batch, self.b)
            rows.append(r)
            keys.append(k)
        if not rows:
            return np.zeros(0, np.int64), np.zeros((0, self.b), np.uint64)
        row, key = np.concatenate(rows), np.concatenate(keys)
        order = np.argsort(row, kind="stable")
        return row[order], np.ascontiguousarray(key[order])

    def close(self) -> None:
        if self._flagged_keys is not None:
            self._flagged_keys.unpersist()
            self._flagged_keys = None
        if self._owned is not None:
            self._owned.unpersist()
            self._owned = None
        self._held = None
        self._rows_shipped = None
        for shipped in self._shipped:
            if hasattr(shipped, "unpersist"):  # a broadcast variable
                shipped.unpersist()
        self._shipped = []
