"""Verification of the pass's flags, and the kept document each removed one duplicates (``verify=True``).

The pass flags a document ``d`` when one of its ``b`` band keys is in its
band's Bloom filter. That happens when an earlier kept document ``e`` shares
the band (``sig_d[i·r:(i+1)·r] = sig_e[i·r:(i+1)·r]``, probability ``s^r`` per
band at Jaccard ``s``, so ``1 - (1 - s^r)^b`` in all: the LSH S-curve, which is
not a step at the threshold ``T``) or by a Bloom false positive. Verification
keeps the flag only where it is earned. Round 1:

    d stays flagged  ⇔  ∃ e kept by the pass, row(e) < row(d), e shares a (band, key) with d,
                        and J(S_d, S_e) = |S_d ∩ S_e| / |S_d ∪ S_e| >= T_v

with ``S`` the shingle sets of the contract (the same shingles, n-grams and
normalization as the signatures) and ``T_v = verify_threshold`` (default the
threshold). ``J`` is exact, not the MinHash estimate: decisions are the
definition's (a user can recompute them from the two texts), as MLlib's
``approxSimilarityJoin`` verifies with the exact distance. Measured on 450
candidate-like pairs of the evaluation streams (2.5 kB documents, defaults): the
estimate from 512 permutations costs 93 µs per pair and decides 1 of 450 pairs
differently at ``T = 0.45``; the exact sets 245 µs (docs/algorithm.md, "verification").

Round 2: a document round 1 unflagged is kept, so it is a candidate for the
later ones: among the round-1-unflagged documents, in processing order, ``d``
is flagged when an earlier one that stays kept shares a (band, key) with it at
``J >= T_v``. (Without round 2 a permissive candidate stage loses recall: the
first copy of a source, falsely flagged by a collision and then unflagged, was
never inserted, and its later copies could find no kept source.)

Guarantees (tests/test_spark_verify.py):

- verification never adds a flag (only the pass's flagged rows are examined);
- every document still flagged has an earlier document that is kept in the
  output with ``J >= T_v``: ``duplicate_of`` names it — the earliest (smallest row
  id, the processing order) verified one among those the pass kept, or if none,
  the earliest verified one among those round 2 kept — and ``similarity`` is
  their exact Jaccard.
- With a kept index that held documents before this run, a flagged document
  that shares no band key with any document this run kept was flagged by an
  earlier run's document (or a Bloom false positive): neither its keys nor its
  text are stored, so it cannot be verified; it stays flagged with
  ``duplicate_of`` and ``similarity`` null.

Cost: candidates are found without a self-join of every document's keys. The
flagged documents' ``(band, key)`` pairs go into a Bloom filter (built on the
driver from a stream of their keys, ~12 bits per pair, 4 probes: ~0.6 % false
positives); the kept documents' keys are scanned through it on the executors, and
only the pairs that pass are joined with the flagged documents' pairs. Keep-first
inserts each kept key once, so each flagged pair meets at most one kept document:
the join's output is at most ``b`` rows per flagged document. Then only the texts
of the documents in a candidate pair are read. Round 2 joins the pairs of the
``U`` round-1-unflagged documents with themselves (``U·b`` pairs; ``U`` is the
S-curve's tail, a small share of ``F``). Work and shuffle grow with the flagged
documents (``F·b`` pairs), not with ``N²``. The one cost in ``N``: the streamed
pass keeps no keys, so they are computed again from the pinned input — the
flagged documents' once, kept in Spark's storage (``F·b`` keys) for the three
scans that read them; every other document's once, streamed through the Bloom
filter as they are computed, never stored (``N·b`` keys would weigh as much as
the index).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

import numpy as np

from lshbloom_udf.spark.keys import ROW_COL, is_in

F_ROW, K_ROW, SIM = "_lshb_frow", "_lshb_krow", "_lshb_sim"
TEXT_F, TEXT_K = "_lshb_ftext", "_lshb_ktext"
BLOOM_BITS_PER_PAIR = 12
BLOOM_PROBES = 4
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@dataclass
class Verified:
    """The flags verification kept, each with its kept document and similarity.

    ``rows`` (sorted int64 row ids), ``of_rows`` (the earliest verified kept
    document's row id, ``-1`` where it cannot be verified: an earlier run's
    document) and ``similarity`` (float64, NaN where ``of_rows`` is -1) are
    aligned; ``pass_flagged`` the pass's flags, ``candidate_pairs`` the
    (flagged, earlier kept) pairs whose similarity was computed.
    """

    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    of_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    similarity: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    pass_flagged: int = 0
    candidate_pairs: int = 0
    seconds: float = 0.0
    stages: dict = field(default_factory=dict)

    def summary(self, threshold: float) -> dict:
        return {
            "threshold": threshold,
            "pass_flagged": self.pass_flagged,
            "kept_flagged": int(len(self.rows)),
            "unflagged": self.pass_flagged - int(len(self.rows)),
            "unverifiable": int(np.count_nonzero(self.of_rows < 0)),
            "candidate_pairs": self.candidate_pairs,
            "seconds": round(self.seconds, 3),
            "stages": dict(self.stages),
        }


# -- the Bloom filter of the flagged documents' (band, key) pairs ----------------------------


def pair_hashes(keys: np.ndarray) -> np.ndarray:
    """A well-mixed 64-bit hash of each (band i, key) of an ``(n, b)`` key matrix (splitmix64's finalizer)."""
    bands = (np.arange(keys.shape[1], dtype=np.uint64) + np.uint64(1)) * _GOLDEN
    h = keys.astype(np.uint64, copy=False) ^ bands[None, :]
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return (h ^ (h >> np.uint64(31))).ravel()


class PairBloom:
    """A plain Bloom filter over 64-bit hashes: ``m`` = a power of two >= 12·n bits, 4 probes (double hashing).

    False-positive rate ``(1 - e^{-4n/m})^4 <= 0.6 %``: a false positive only
    costs a kept pair in the join, never a wrong decision.
    """

    def __init__(self, n: int):
        bits = 1 << max(6, int(np.ceil(np.log2(max(1, n) * BLOOM_BITS_PER_PAIR))))
        self.mask = np.uint64(bits - 1)
        self.bits = np.zeros(bits // 8, dtype=np.uint8)

    def _positions(self, h: np.ndarray):
        h1, h2 = h & np.uint64(0xFFFFFFFF), (h >> np.uint64(32)) | np.uint64(1)
        for j in range(BLOOM_PROBES):
            yield (h1 + np.uint64(j) * h2) & self.mask

    def add(self, h: np.ndarray) -> None:
        for pos in self._positions(h):
            np.bitwise_or.at(self.bits, (pos >> np.uint64(3)).astype(np.intp),
                             (np.uint8(1) << (pos & np.uint64(7)).astype(np.uint8)))

    def contains(self, h: np.ndarray) -> np.ndarray:
        hit = np.ones(len(h), dtype=bool)
        for pos in self._positions(h):
            hit &= ((self.bits[(pos >> np.uint64(3)).astype(np.intp)] >> (pos & np.uint64(7)).astype(np.uint8)) & 1) > 0
        return hit


# -- executor functions (mapInArrow) -----------------------------------------------------------


def _batch_keys(batch, b: int):
    """(row ids, (n, b) uint64 keys, active mask) of a batch of (row, keys, active)."""
    from lshbloom_udf.spark.keys import _unpack_keyed

    if not batch.num_rows:
        return np.zeros(0, np.int64), np.zeros((0, b), np.uint64), np.zeros(0, np.bool_)
    rows, data, active = _unpack_keyed(batch, 8 * b)
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


def pairs_mapper(among: np.ndarray, b: int):
    """(band, key, row) rows: every pair of the documents whose row id is among the sorted ``among``."""

    def run(batches):
        band_ids = np.arange(b, dtype=np.int32)
        for batch in batches:
            rows, keys, _ = _batch_keys(batch, b)
            mine = is_in(rows, among)
            if mine.any():
                yield _pairs_batch(band_ids, rows[mine], keys[mine], np.ones((int(mine.sum()), b), dtype=bool))

    return run


def kept_pairs_mapper(bloom: PairBloom, b: int):
    """(band, key, row) rows: the pairs of the active documents (the unflagged ones: the pass kept them) that
    pass ``bloom``."""

    def run(batches):
        band_ids = np.arange(b, dtype=np.int32)
        for batch in batches:
            rows, keys, active = _batch_keys(batch, b)
            rows, keys = rows[active], keys[active]
            hit = bloom.contains(pair_hashes(keys)).reshape(keys.shape)
            if hit.any():
                yield _pairs_batch(band_ids, rows, keys, hit)

    return run


def similarity_mapper(ngram: int, normalize_mask: int, shingle: str = "words"):
    """(flagged row, kept row, exact Jaccard of their shingle sets) for each pair of texts."""

    def run(batches):
        import pyarrow as pa

        from lshbloom_udf import _native

        cache: dict = {}

        def shingle_set(text):
            got = cache.get(text)
            if got is None:
                if len(cache) > 256:
                    cache.clear()
                got = cache[text] = frozenset(_native.shingles(_decoded(text), ngram, normalize_mask, shingle))
            return got

        for batch in batches:
            f_rows, k_rows = batch.column(0), batch.column(1)
            f_text = batch.column(2).cast(pa.binary()).to_pylist()
            k_text = batch.column(3).cast(pa.binary()).to_pylist()
            sims = np.empty(batch.num_rows, dtype=np.float64)
            for i, (ft, kt) in enumerate(zip(f_text, k_text)):
                a, c = shingle_set(ft), shingle_set(kt)
                union = len(a | c) if a or c else 0
                sims[i] = len(a & c) / union if union else 0.0
            yield pa.RecordBatch.from_arrays([f_rows, k_rows, pa.array(sims, pa.float64())], names=[F_ROW, K_ROW, SIM])

    return run


def _decoded(raw):
    # Spark strings may hold invalid UTF-8: decoded as the keys stage decodes them (errors="replace").
    return None if raw is None else raw.decode("utf-8", "replace")


# -- the driver's side ------------------------------------------------------------------------


def verify_flags(keyed_of, texts_of, flagged_rows, *, b: int, ngram: int, normalize_mask: int, threshold: float,
                 prior_documents: bool, broadcast_limit: int,
                 shingle: str = "words") -> Verified:
    """Verify the pass's flags (see the module's docs).

    ``keyed_of(among, inside)``: a DataFrame with ``_lshb_row`` (processing
    order), ``_lshb_keys`` (``b`` little-endian uint64 band keys) and
    ``_lshb_active`` of the rows whose id is (``inside``) or is not among the
    sorted row ids ``among``;
    ``texts_of(rows_frame, small)``: a DataFrame (``_lshb_row``, ``text``) of
    the rows of a one-column row-id frame (``small``: it may be broadcast);
    ``flagged_rows``: the pass's duplicates (int64 row ids);
    ``prior_documents``: the index held documents before this run.
    """
    from pyspark import StorageLevel

    t0 = time.monotonic()
    flagged = np.unique(np.asarray(flagged_rows, dtype=np.int64))
    out = Verified(pass_flagged=len(flagged))
    if not len(flagged):
        out.seconds = time.monotonic() - t0
        return out
    # The flagged documents' keys are read three times (kept: F·b keys); every other document's once, as they are
    # computed, through the Bloom filter (not kept: N·b keys would be as large as the index).
    flagged_keys = keyed_of(flagged, True).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        similar = functools.partial(_similarities, flagged_keys.sparkSession, texts_of=texts_of, ngram=ngram,
                                    normalize_mask=normalize_mask, threshold=threshold, broadcast_limit=broadcast_limit,
                                    shingle=shingle)
        # Round 1: against the documents the pass kept (their keys are unique: keep-first inserted each once).
        bloom = _flagged_bloom(flagged_keys, len(flagged), b)
        lap = _laps(out.stages, t0)
        lap("bloom")
        kept_pairs = keyed_of(flagged, False).mapInArrow(kept_pairs_mapper(bloom, b), PAIRS_SCHEMA)
        cand = _candidates(flagged_keys.mapInArrow(pairs_mapper(flagged, b), PAIRS_SCHEMA), kept_pairs)
        out.candidate_pairs = len(cand[0])
        lap("candidates")
        _decide(out, flagged, cand[0], similar(cand), prior_documents)
        lap("similarity")
        # Round 2: the documents round 1 unflagged are kept, so candidates for the later ones of them.
        unflagged = flagged[~is_in(flagged, out.rows)]
        if len(unflagged) > 1:
            pairs = flagged_keys.mapInArrow(pairs_mapper(unflagged, b), PAIRS_SCHEMA)
            cand = _candidates(pairs, pairs)
            out.candidate_pairs += len(cand[0])
            _chain(out, similar(cand))
            lap("round2")
    finally:
        flagged_keys.unpersist()
    out.seconds = time.monotonic() - t0
    return out


def _laps(stages: dict, t0: float):
    last = [t0]

    def lap(name: str) -> None:
        now = time.monotonic()
        stages[name] = round(now - last[0], 3)
        last[0] = now

    return lap


def _chain(out: Verified, sims) -> None:
    """Add to ``out`` the round-1-unflagged documents an earlier one of them verifies, in processing order.

    ``sims``: (later row, earlier row, similarity >= T) among the round-1-unflagged
    documents. A document is flagged when an earlier one *that stays kept* verifies
    it (the earliest such names it); the others stay kept, so candidates for later ones.
    """
    f_rows, k_rows, sim = sims
    if not len(f_rows):
        return
    order = np.lexsort((k_rows, f_rows))
    f_rows, k_rows, sim = f_rows[order], k_rows[order], sim[order]
    starts = np.flatnonzero(np.r_[True, f_rows[1:] != f_rows[:-1]])
    ends = np.r_[starts[1:], len(f_rows)]
    flagged: dict = {}
    for lo, hi in zip(starts.tolist(), ends.tolist()):
        for j in range(lo, hi):
            if int(k_rows[j]) not in flagged:
                flagged[int(f_rows[lo])] = (int(k_rows[j]), float(sim[j]))
                break
    if flagged:
        rows = np.fromiter(flagged, np.int64, len(flagged))
        of = np.array([v[0] for v in flagged.values()], np.int64)
        sm = np.array([v[1] for v in flagged.values()], np.float64)
        rows, of_rows, similarity = (np.concatenate([a, c]) for a, c in
                                     ((out.rows, rows), (out.of_rows, of), (out.similarity, sm)))
        order = np.argsort(rows, kind="stable")
        out.rows, out.of_rows, out.similarity = rows[order], of_rows[order], similarity[order]


def _flagged_bloom(flagged_keys, documents: int, b: int) -> PairBloom:
    """The Bloom filter of the flagged documents' pairs, built on the driver from a stream of their hashes."""
    bloom = PairBloom(documents * b)
    for row in flagged_keys.mapInArrow(flagged_hashes_mapper(b), "h binary").toLocalIterator(prefetchPartitions=True):
        bloom.add(np.frombuffer(row["h"], dtype=np.uint64))
    return bloom


def _candidates(f, k) -> tuple[np.ndarray, np.ndarray]:
    """(later row of ``f``, earlier row of ``k``) pairs sharing a (band, key): distinct, as two int64 arrays."""
    from pyspark.sql import functions as F

    f = f.withColumnRenamed("row", F_ROW)
    k = k.withColumnRenamed("row", K_ROW)
    pairs = f.join(k, ["band", "key"]).where(F.col(F_ROW) > F.col(K_ROW)).select(F_ROW, K_ROW).distinct()
    table = collect_arrow(pairs)
    return (table.column(F_ROW).to_numpy().astype(np.int64), table.column(K_ROW).to_numpy().astype(np.int64))


def _similarities(spark, cand, *, texts_of, ngram: int, normalize_mask: int, threshold: float, broadcast_limit: int,
                  shingle: str = "words"):
    """(flagged row, kept row, similarity) arrays of the candidate pairs whose similarity is >= threshold."""
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from lshbloom_udf.spark.join import row_frame

    f_rows, k_rows = cand
    if not len(f_rows):
        return f_rows, k_rows, np.zeros(0, np.float64)
    involved = np.unique(np.concatenate([f_rows, k_rows]))
    texts = texts_of(row_frame(spark, involved), len(involved) <= broadcast_limit)
    text_col = [c for c in texts.columns if c != ROW_COL][0]
    schema = T.StructType([T.StructField(F_ROW, T.LongType(), False), T.StructField(K_ROW, T.LongType(), False)])
    pairs = spark.createDataFrame(pa.table({F_ROW: f_rows, K_ROW: k_rows}), schema)
    tf = texts.select(F.col(ROW_COL).alias(F_ROW), F.col(text_col).alias(TEXT_F))
    tk = texts.select(F.col(ROW_COL).alias(K_ROW), F.col(text_col).alias(TEXT_K))
    joined = pairs.join(tf, F_ROW).join(tk, K_ROW).select(F_ROW, K_ROW, TEXT_F, TEXT_K)
    sims = joined.mapInArrow(similarity_mapper(ngram, normalize_mask, shingle), f"{F_ROW} long, {K_ROW} long, {SIM} double")
    table = collect_arrow(sims.where(F.col(SIM) >= F.lit(threshold)))
    return (table.column(F_ROW).to_numpy().astype(np.int64), table.column(K_ROW).to_numpy().astype(np.int64),
            table.column(SIM).to_numpy().astype(np.float64))


def _decide(out: Verified, flagged: np.ndarray, cand_f: np.ndarray, sims, prior_documents: bool) -> None:
    """Fill ``out``: each verified flagged row with its earliest verified kept row; the unverifiable ones."""
    f_rows, k_rows, sim = sims
    order = np.lexsort((k_rows, f_rows))
    f_rows, k_rows, sim = f_rows[order], k_rows[order], sim[order]
    first = np.ones(len(f_rows), dtype=bool)
    first[1:] = f_rows[1:] != f_rows[:-1]
    rows, of_rows, similarity = f_rows[first], k_rows[first], sim[first]
    if prior_documents:
        # No kept document of this run shares a key: flagged by an earlier run's document, which cannot be read.
        lone = flagged[~is_in(flagged, np.unique(cand_f))]
        rows = np.concatenate([rows, lone])
        of_rows = np.concatenate([of_rows, np.full(len(lone), -1, np.int64)])
        similarity = np.concatenate([similarity, np.full(len(lone), np.nan)])
        order = np.argsort(rows, kind="stable")
        rows, of_rows, similarity = rows[order], of_rows[order], similarity[order]
    out.rows, out.of_rows, out.similarity = rows, of_rows, similarity


def collect_arrow(df):
    """A DataFrame's rows on the driver as a pyarrow Table (``toArrow`` where PySpark has it)."""
    import pyarrow as pa

    if hasattr(df, "toArrow"):
        return df.toArrow()
    return pa.Table.from_pandas(df.toPandas(), preserve_index=False)


def texts_source(pinned, text_col: str):
    """``texts_of`` for :func:`verify_flags`: the (row id, text) of some rows of the pinned input, read without
    shuffling every text (a broadcast semi-join when ``small``)."""
    from pyspark.sql import functions as F

    from lshbloom_udf.spark.ingest import col

    def texts_of(rows, small: bool):
        return pinned.join(F.broadcast(rows) if small else rows, ROW_COL, "left_semi").select(ROW_COL, col(text_col))

    return texts_of
