"""The sharded pass (docs/algorithm.md §4b, docs/architecture.md): the any-earlier decisions made on the executors,
band-key shard by shard.

Under any-earlier (``insert = "all"``) a document ``k`` is a duplicate when

    ∃ band i, document j < k (active):  key(j, i) = key(k, i)

(up to Bloom false positives). Every key is inserted, whatever its document's
fate, so the test of key ``(k, i)`` depends only on the earlier keys of band
``i`` that are *equal* to it: bands are independent, and so are disjoint key
ranges within a band. The pass therefore splits band ``i``'s keys into ``S``
shards by a well-mixed hash, ``shard = i·S + (mix(key) · S) >> 64``, shuffles
the ``(row, key)`` pairs to their shard, in processing order, and
test-and-sets the shard's own filter in that order (the native blocked or
cuckoo filter's ``add``: "was present"). A document is a duplicate when any of its
``b`` keys hits; the hit rows are deduplicated on the driver. No process holds
more than one shard's filter at a time.

The pairs travel packed: each input task cuts up to :data:`BLOB_KEYS` keys
(several Arrow batches of consecutive rows) into one blob per shard — its
rows (int64) then its keys (uint64), in row order — so the shuffle moves a
few large rows instead of one Spark row per key. A partition of the keyed
input is a contiguous range of the processing order (row ids increase with
it), so a shard's blobs never interleave: sorted by their first row they
are the shard's keys in processing order (checked while deciding).

Sizing: a band's filter for ``n`` documents at rate ``p_band`` (the same rate
as the driver pass) is split in ``S`` filters for ``n/S`` keys each, so the
index has the driver pass's size (up to per-shard rounding and the slack
below); ``S`` is the least count whose shard fits ``shard_memory`` bytes. The
keys per shard are Binomial(n, 1/S): each shard is sized for
``n/S + 4·sqrt(n/S)`` keys, so that none overfills in practice.

Executor memory per task: one shard filter (≤ ``shard_memory``) plus Spark's
sort buffers (which spill). The driver holds only the hit row ids.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from lshbloom_udf.common import GOLDEN, default_parallelism, mix64
from lshbloom_udf.index.shards import ShardPlan
from lshbloom_udf.spark.keys import ACTIVE_COL, KEYS_COL, ROW_COL, unpack_keyed
from lshbloom_udf.spark.passes.sharded.filters import DECIDED_SCHEMA, FILTER_PART_BYTES, MAX_PARTS, decider

SHARD_COL, FIRST_COL = "shard", "first"
# one blob: a shard's keys from one input chunk (first = its first row id, count = its keys, data = rows then keys);
# a stored filter's part: first = -1 - (generation * MAX_PARTS + part), count = its key count, data = the part's bytes
EXPLODED_SCHEMA = f"{SHARD_COL} int, {FIRST_COL} long, count long, data binary"
# keys one explode task packs at a time (~40 bytes each while cutting them)
BLOB_KEYS = 1 << 21


def shard_of(keys: np.ndarray, shards_per_band: int) -> np.ndarray:
    """``(mix(key) · S) >> 64`` per key, as int32: a well-mixed hash (splitmix64's finalizer), independent of the
    Bloom filter's own (which mixes the key with a per-band seed)."""
    z = mix64(keys.astype(np.uint64) + GOLDEN)
    return ((z >> np.uint64(32)) * np.uint64(shards_per_band) >> np.uint64(32)).astype(np.int32)


def exploder(b: int, shards_per_band: int, blob_keys: int = BLOB_KEYS):
    """``mapInArrow`` function: (row, keys, active) batches → per chunk of ~``blob_keys`` keys, one blob per shard."""
    width = 8 * b
    band_base = (np.arange(b, dtype=np.int32) * shards_per_band)[None, :]

    def explode(batches):
        chunk, pending = [], 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            rows, data, active = unpack_keyed(batch, width)
            keys = np.frombuffer(data, dtype=np.uint64).reshape(-1, b)[active]
            if len(keys):
                chunk.append((np.asarray(rows, dtype=np.int64)[active], keys))
                pending += keys.size
            if pending >= blob_keys:
                yield _blobs(chunk, b, band_base, shards_per_band)
                chunk, pending = [], 0
        if chunk:
            yield _blobs(chunk, b, band_base, shards_per_band)

    return explode


def _blobs(chunk: list, b: int, band_base: np.ndarray, shards_per_band: int):
    """One Arrow batch: a blob per shard of the chunk's keys, each in row order.

    Band by band: with one shard per band the band's column is its blob; with
    more, a stable sort of the column by shard (a linear-time radix sort on
    16-bit shard numbers, which S nearly always fits) keeps each shard's rows
    in order.
    """
    import pyarrow as pa

    rows = np.concatenate([r for r, _ in chunk])
    keys = np.concatenate([k for _, k in chunk])
    shard_ids, firsts, counts, blobs = [], [], [], []
    for band in range(b):
        column = np.ascontiguousarray(keys[:, band])
        if shards_per_band == 1:
            parts = [(int(band_base[0, band]), rows, column)]
        else:
            local = shard_of(column, shards_per_band)
            order = np.argsort(local.astype(np.int16) if shards_per_band < 1 << 15 else local, kind="stable")
            local, band_rows, column = local[order], rows[order], column[order]
            cuts = [0, *(np.flatnonzero(np.diff(local)) + 1).tolist(), len(local)]
            parts = [(int(band_base[0, band] + local[lo]), band_rows[lo:hi], column[lo:hi])
                     for lo, hi in zip(cuts[:-1], cuts[1:])]
        for shard, part_rows, part_keys in parts:
            shard_ids.append(shard)
            firsts.append(int(part_rows[0]))
            counts.append(len(part_rows))
            blobs.append(part_rows.tobytes() + part_keys.tobytes())
    return pa.RecordBatch.from_arrays(
        [pa.array(shard_ids, pa.int32()), pa.array(firsts, pa.int64()), pa.array(counts, pa.int64()),
         pa.array(blobs, pa.binary())],
        names=[SHARD_COL, FIRST_COL, "count", "data"],
    )


def decided_frame(keyed, plan: ShardPlan, stored=None, keep_filters: bool = False, blob_keys: Optional[int] = None,
                  part_bytes: int = FILTER_PART_BYTES):
    """The sharded pass as one lazy DataFrame of :data:`DECIDED_SCHEMA` rows over the keyed rows ``keyed``.

    ``stored``: the index's filters (shard, generation, part, count, data; a
    format-1 index has no part: one part each), merged into each shard's
    stream ahead of its keys; ``part_bytes``: the size of the parts the filters
    are emitted in; ``blob_keys``: the keys per blob (None: :data:`BLOB_KEYS`, read when called). ``keep_filters``:
    also emit
    every shard's filters after the run (the index's next version). Run its
    action inside :class:`~lshbloom_udf.spark.keys.ArrowBatchLimits` (blobs
    and filters are large rows).
    """
    from pyspark.sql import functions as F

    exploded = keyed.select(ROW_COL, KEYS_COL, ACTIVE_COL).mapInArrow(
        exploder(plan.b, plan.shards_per_band, blob_keys or BLOB_KEYS), EXPLODED_SCHEMA)
    if stored is not None:
        exploded = exploded.unionByName(stored.select(
            F.col("shard").cast("int").alias(SHARD_COL),
            (F.lit(-1) - (F.col("generation").cast("long") * F.lit(MAX_PARTS) + F.col("part").cast("long")))
            .alias(FIRST_COL),
            F.col("count").cast("long").alias("count"),
            F.col("data"),
        ))
    cores = default_parallelism(keyed.sparkSession)
    # Each task decides its shards one after the other: memory is one shard's filter whatever the count.
    partitions = max(1, min(plan.shards, 2 * cores))
    return (
        exploded.repartition(partitions, SHARD_COL)
        .sortWithinPartitions(SHARD_COL, FIRST_COL)
        .mapInArrow(decider(plan, keep_filters, part_bytes), DECIDED_SCHEMA)
    )
