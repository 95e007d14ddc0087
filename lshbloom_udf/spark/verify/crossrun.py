"""Verification across runs of a kept index: a flagged document judged against the earlier runs' records.

A document the pass flagged but no document of this run verifies was flagged by an earlier run's document
(or by a Bloom false positive). With records (:mod:`lshbloom_udf.index.records`) it is judged as one run
would judge it, on estimates:

1. **Candidates.** Its sketch is computed as the records' were (:func:`~lshbloom_udf.spark.records.sketch_batch`).
   Band ``i`` of a document is its sketch bytes ``[i·r, (i+1)·r)``; every earlier document that shares the
   band's ``r`` MinHash values (what made the pass flag it) shares these bytes, so the records sharing a band
   with it are a superset of its band-key candidates. A local index's runs are looked up by band key
   (:mod:`lshbloom_udf.index.lookup`, :func:`looked_up`); a sharded index's Parquet records are scanned on the
   executors (the flagged documents' band keys shipped and indexed band by band,
   :class:`~lshbloom_udf._native.PairIndex`, where each record's are looked up). Either keeps, per flagged
   document, the records sharing the most bands: at most :data:`CANDIDATES_PER_DOCUMENT` (a true source shares
   many bands, ``b·J^r`` expected: 14.8 of 64 at J 0.69; a distinct neighbour at J 0.3 shares 0.5), ties to the
   earliest (run, row).
2. **Estimates.** Matching sketch values ``m`` of ``k`` give ``p̂ = m / k`` and ``Ĵ = (p̂ - 2^-β) / (1 - 2^-β)`` at
   the record's ``β`` bits a value (4 looked up, 8 scanned), except that the ``r`` bytes of one fully matching band
   are left out (``p̂ = (m - r) / (k - r)``): a candidate was chosen *because* a band matched, so counting it biases
   ``Ĵ`` up (docs/algorithm.md §8). Standard deviation about ``√(J(1-J)/(k-r))``: 0.031 at J = 0.4, k = 256 (0.033
   at 4 bits). Containment from ``Ĵ`` and the two estimated sizes: ``|S_d ∩ S_e| = Ĵ (|S_d| + |S_e|) / (1 + Ĵ)``,
   ``Ĉ = |S_d ∩ S_e| / |S_d|``.
3. **Decision.** The run's rule on the estimates (:class:`~lshbloom_udf.spark.verify.rule.VerifyRule.judge`: ``Ĵ >=
   T_v``, or ``Ĉ >= T_c`` and ``Ĵ >= J_c``); the template rule does not apply (it needs texts). A verified
   document names the earliest verified record (``duplicate_of`` its id, ``similarity`` the estimate). One
   no record verifies is unflagged (then kept, and its record is written with this run's).
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import numpy as np

from lshbloom_udf import _native
from lshbloom_udf.index.binary import binary_matrix
from lshbloom_udf.spark.records import PriorRuns, sketch_frame
from lshbloom_udf.spark.verify.rule import EXACT, VerifyRule
from lshbloom_udf.spark.verify.sources import CANDIDATES_PER_DOCUMENT

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lshbloom_udf.minhash import KeySpec
    from lshbloom_udf.spark.passes.driver.record_spool import RecordSpool

log = logging.getLogger(__name__)

# Records a flagged document is compared with at most (verification's bound, one declaration): its candidates ranked
# by shared bands, then by age.
MATCH_SCHEMA = "owner int, shared int, run string, row long, id string, sketch binary, size float, text_hash binary"
# The bits of each sketch value a candidate's record keeps: Parquet records (scanned) 8, the lookup layout's 4.
SCANNED_BITS = 8
MATCH_SCHEMA_RECORD = ("run", "row", "id", "sketch", "size", "text_hash")
# of_rows codes (rule.Verified): -1 unverifiable; -2 - j: the j-th earlier-run source of CrossRun.sources.
UNVERIFIABLE = -1


def estimated_jaccard(equal: np.ndarray, b: int, r: int, bits) -> np.ndarray:
    """``Ĵ`` of pairs from their sketches' per-value equality ``(P, k)`` at ``bits`` bits a value (per pair, or one
    for all), one fully matching band left out."""
    k = equal.shape[1]
    full = np.all(equal[:, : b * r].reshape(len(equal), b, r), axis=2).any(axis=1)
    matches = equal.sum(axis=1) - r * full
    p = matches / (k - r * full)
    chance = 2.0 ** -np.asarray(bits, np.float64)
    return np.clip((p - chance) / (1 - chance), 0.0, 1.0)


def match_mapper(flag_keys, b: int, r: int, k: int, cap: int):
    """The ``mapInArrow`` function over records: those sharing a band with a flagged document (``flag_keys``, shipped:
    the flags' ``(F, b)`` band keys, :func:`~lshbloom_udf._native.sketch_band_keys`), at most ``cap`` per owner
    (flag index) and batch, with ``owner`` and ``shared`` (:data:`MATCH_SCHEMA`)."""
    from lshbloom_udf.spark.keys import shipped_value

    def compute(batches):
        import pyarrow as pa

        from lshbloom_udf import _native

        index = _native.PairIndex(shipped_value(flag_keys))
        for batch in batches:
            if batch.num_rows == 0:
                continue
            sketches = binary_matrix(batch.column(batch.schema.get_field_index("sketch")), k)
            record, owner = index.matches(_native.sketch_band_keys(sketches, b, r))
            if not len(record):
                continue
            pair, shared = np.unique((owner.astype(np.int64) << 32) | record, return_counts=True)
            owner, record = pair >> 32, pair & 0xFFFFFFFF
            order = np.lexsort((record, -shared, owner))
            owner, record, shared = owner[order], record[order], shared[order]
            starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
            rank = np.arange(len(owner)) - np.repeat(starts, np.diff(np.r_[starts, len(owner)]))
            keep = rank < cap
            picked = batch.take(pa.array(record[keep]))
            yield pa.RecordBatch.from_arrays(
                [pa.array(owner[keep].astype(np.int32)), pa.array(shared[keep].astype(np.int32)),
                 *(picked.column(picked.schema.get_field_index(name)) for name in MATCH_SCHEMA_RECORD)],
                names=["owner", "shared", *MATCH_SCHEMA_RECORD])

    return compute


@dataclass
class CrossRun:
    """What verification needs to judge flags against the earlier runs' records (truthy: the index held documents
    before this run), and what it did: ``sources`` the earlier documents it named (``of_rows`` ``-2 - j``)."""

    runs: PriorRuns
    pinned: DataFrame
    text_col: str
    spec: KeySpec
    rule: VerifyRule
    id_column: Optional[str] = None
    spool: Optional[RecordSpool] = None  # the keys stage's record fields: the flags' sketches without a Spark job
    sources: list = field(default_factory=list)  # (run id, row, id or None) of each named earlier document
    stats: dict = field(default_factory=dict)

    def __bool__(self) -> bool:
        return True

    def fill(self, unsourced: np.ndarray, lone: np.ndarray) -> tuple:
        """``(rows, of_rows, similarity, measure)`` of the flags to keep among ``unsourced`` (flagged rows no document
        of this run verifies; ``lone``: those with no candidate of this run at all)."""
        t0 = time.monotonic()
        rows, of, sim, measure = self._judge(unsourced)
        unverified = lone[~np.isin(lone, rows)]
        self.stats.update(looked_up=int(len(unsourced)), verified=int(len(rows)), unflagged=int(len(unverified)),
                          seconds=round(time.monotonic() - t0, 3))
        log.info("verify across runs: %d flags looked up in %d records of %d run(s), %d candidates, %d verified, "
                 "%d unflagged", len(unsourced), self.runs.documents, len(self.runs.with_records),
                 self.stats.get("candidates", 0), self.stats["verified"], self.stats["unflagged"])
        return rows, of, sim, measure

    def _judge(self, flagged: np.ndarray) -> tuple:
        import pyarrow as pa

        none = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int8))
        self.stats["candidates"] = 0
        if not len(flagged) or not self.runs.with_records:
            return none
        spark = self.pinned.sparkSession
        mine = (self.spool.among(flagged) if self.spool is not None else
                _sorted_table(sketch_frame(self.pinned, self.text_col, None, self.spec, flagged, inside=True), "row"))
        f_rows = np.asarray(mine.column("row").to_numpy(), np.int64)
        k, b, r = self.spec.num_perm, self.spec.b, self.spec.r
        f_sketch = binary_matrix(mine.column("sketch"), k)
        f_size = mine.column("size").to_numpy().astype(np.float64)
        from lshbloom_udf.spark.keys import ship

        found = [looked_up(self.runs.looked_up, f_sketch, self.spec)]
        if self.runs.scanned:
            keys = _native.sketch_band_keys(f_sketch, b, r)
            scanned = _collect(self.runs.frame(spark).mapInArrow(
                match_mapper(ship(spark, keys), b, r, k, CANDIDATES_PER_DOCUMENT), MATCH_SCHEMA))
            found.append(scanned.append_column("bits", pa.array(np.full(scanned.num_rows, SCANNED_BITS, np.int8))))
        cand = _best(_concat(found))
        self.stats["records_read"] = int(self.runs.scanned_documents + found[0].num_rows)
        self.stats["candidates"] = int(cand.num_rows)
        if not cand.num_rows:
            return none
        owner = cand.column("owner").to_numpy().astype(np.int64)
        e_sketch = binary_matrix(cand.column("sketch"), k)
        e_size = cand.column("size").to_numpy().astype(np.float64)
        bits = cand.column("bits").to_numpy().astype(np.int64)
        mask = ((1 << bits) - 1).astype(np.uint8)[:, None]
        j = estimated_jaccard((f_sketch[owner] & mask) == e_sketch, b, r, bits)
        d_size = f_size[owner]
        common = j * (d_size + e_size) / (1.0 + j)
        ok, sim, measure = self.rule.judge(common, d_size, e_size)
        exact = same_text(mine.column("text_hash"), cand.column("text_hash"), owner)
        ok, sim[exact], measure[exact] = ok | exact, 1.0, EXACT
        first = _first_per_owner(owner, ok)  # candidates are sorted by (owner, run, row) within the cut
        base = len(self.sources)
        ids = cand.column("id").to_pylist()
        runs, rows = cand.column("run").to_pylist(), cand.column("row").to_numpy()
        self.sources += [(runs[i], int(rows[i]), ids[i]) for i in first.tolist()]
        return (f_rows[owner[first]], -2 - (base + np.arange(len(first), dtype=np.int64)),
                sim[first].astype(np.float64), measure[first].astype(np.int8))

    def source_values(self, of_rows: np.ndarray) -> np.ndarray:
        """``duplicate_of`` of earlier-run sources (``of_rows <= -2``) as strings: the id (the row id when that run
        had no id column); None elsewhere."""
        out = np.full(len(of_rows), None, dtype=object)
        for i in np.flatnonzero(of_rows <= -2).tolist():
            run, row, ident = self.sources[-2 - int(of_rows[i])]
            out[i] = ident if (ident is not None and self.id_column is not None) else str(row)
        return out

    def summary(self, records: Optional[dict]) -> dict:
        """The summary's ``verify.cross_run`` part (docs/summary.md)."""
        return {"records_runs": len(self.runs.with_records), "records_held": self.runs.documents,
                "records_read": self.stats.get("records_read", 0), "looked_up": self.stats.get("looked_up", 0),
                "candidates": self.stats.get("candidates", 0), "verified": self.stats.get("verified", 0),
                "unflagged": self.stats.get("unflagged", 0), "seconds": self.stats.get("seconds", 0.0),
                **_written(records)}


def _written(records: Optional[dict]) -> dict:
    if records is None:
        return {"records_written": 0, "record_bytes": 0}
    return {"records_written": records["documents"], "record_bytes": records["bytes"]}


def unverifiable(rows: np.ndarray) -> tuple:
    """``(rows, of_rows, similarity, measure)`` of flags kept without a source (an earlier run's, unreadable)."""
    n = len(rows)
    return rows, np.full(n, UNVERIFIABLE, np.int64), np.full(n, np.nan), np.full(n, -1, np.int8)


def prior_sources(prior_documents, unsourced: np.ndarray, lone: np.ndarray) -> tuple:
    """What verification keeps of the flags no document of this run verifies: judged against the earlier runs'
    records (``prior_documents`` a :class:`CrossRun`), or, with no records (``True``), the ``lone`` ones (no
    candidate in this run) kept unverifiable."""
    if isinstance(prior_documents, CrossRun):
        return prior_documents.fill(unsourced, lone)
    return unverifiable(lone)


def same_text(mine, theirs, owner: np.ndarray) -> np.ndarray:
    """Whether each candidate's record has the text hash of its flagged document (``owner``): a byte-identical
    copy; never for a record whose hash is null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    known = pc.is_valid(theirs).to_numpy(zero_copy_only=False).astype(bool)

    def filled(array):
        return pc.fill_null(array, pa.scalar(bytes(16), array.type))

    mine_m = binary_matrix(filled(mine), 16)[owner]
    theirs_m = binary_matrix(filled(theirs), 16)
    return known & (mine_m == theirs_m).all(axis=1)


# Flags looked up together: their candidates (at most CANDIDATES_PER_DOCUMENT per run, then per flag) are held
# at once, a few hundred bytes each.
FLAGS_PER_LOOKUP = 1 << 16


def looked_up(runs: list, sketches: np.ndarray, spec):
    """The candidates (:data:`MATCH_SCHEMA` and ``bits``) of the flags' ``(F, k)`` sketches in the local store's runs
    (``(run id, directory, documents)``, :class:`~lshbloom_udf.index.lookup.RunLookup`): per flag, the
    :data:`CANDIDATES_PER_DOCUMENT` records sharing the most bands, then the earliest, of all runs (:func:`_best`,
    run by run: never more than twice that many per flag are held), :data:`FLAGS_PER_LOOKUP` flags at a time."""
    from lshbloom_udf.index.lookup import RunLookup

    opened = [(run_id, RunLookup(directory, documents, spec.num_perm, spec.b, spec.r))
              for run_id, directory, documents in runs]
    threads = max(1, min(len(opened), os.cpu_count() or 1))
    chunks = []
    with ThreadPoolExecutor(threads, thread_name_prefix="lshbloom-lookup") as pool:  # the native lookup drops the GIL
        for start in range(0, len(sketches), FLAGS_PER_LOOKUP):
            flags = sketches[start:start + FLAGS_PER_LOOKUP]
            best = _empty_matches()
            for first in range(0, len(opened), threads):  # a core's worth of runs at a time, reduced in run order
                for found in pool.map(lambda run: _run_candidates(run[0], run[1], flags, start),
                                      opened[first:first + threads]):
                    if found.num_rows:
                        best = _best(_concat([best, found]))
            chunks.append(best)
    return _concat(chunks) if chunks else _empty_matches()


def _run_candidates(run_id: str, lookup, sketches: np.ndarray, first_owner: int):
    """One run's candidates of the flags ``first_owner ..`` (their ``sketches``): at most
    :data:`CANDIDATES_PER_DOCUMENT` per flag."""
    import pyarrow as pa

    from lshbloom_udf.index.lookup import SKETCH_BITS

    m = lookup.matches(sketches)
    if not len(m.owner):
        return _empty_matches()
    order = np.lexsort((m.position, -m.shared, m.owner))
    owner, position, shared = m.owner[order], m.position[order], m.shared[order]
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    keep = (np.arange(len(owner)) - np.repeat(starts, np.diff(np.r_[starts, len(owner)]))) < CANDIDATES_PER_DOCUMENT
    found = lookup.records(position[keep])
    n = int(keep.sum())
    return pa.table({
        "owner": pa.array((owner[keep] + first_owner).astype(np.int32)),
        "shared": pa.array(shared[keep].astype(np.int32)), "run": pa.array([run_id] * n, pa.string()),
        **{name: found.column(name) for name in MATCH_SCHEMA_RECORD if name != "run"},
        "bits": pa.array(np.full(n, SKETCH_BITS, np.int8))})


def _empty_matches():
    import pyarrow as pa

    return pa.table({"owner": pa.array([], pa.int32()), "shared": pa.array([], pa.int32()),
                     "run": pa.array([], pa.string()), "row": pa.array([], pa.int64()),
                     "id": pa.array([], pa.string()), "sketch": pa.array([], pa.large_binary()),
                     "size": pa.array([], pa.float32()), "text_hash": pa.array([], pa.large_binary()),
                     "bits": pa.array([], pa.int8())})


def _concat(tables: list):
    import pyarrow as pa

    tables = [t for t in tables if t.num_rows] or tables[:1]
    schema = _empty_matches().schema
    return pa.concat_tables([t.select(schema.names).cast(schema) for t in tables])


def _collect(frame):
    from lshbloom_udf.common import collect_arrow

    return collect_arrow(frame)


def _sorted_table(frame, by: str):
    table = _collect(frame)
    return table.sort_by(by) if table.num_rows else table


def _best(table):
    """At most :data:`CANDIDATES_PER_DOCUMENT` per owner (most shared bands, then earliest run and row), sorted by
    (owner, run, row)."""
    import pyarrow as pa

    if not table.num_rows:
        return table
    owner = table.column("owner").to_numpy().astype(np.int64)
    shared = table.column("shared").to_numpy().astype(np.int64)
    runs = np.asarray(table.column("run").to_pylist(), dtype=object)
    rows = table.column("row").to_numpy()
    _, run_rank = np.unique(runs, return_inverse=True)
    order = np.lexsort((rows, run_rank, -shared, owner))
    owner = owner[order]
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    rank = np.arange(len(owner)) - np.repeat(starts, np.diff(np.r_[starts, len(owner)]))
    kept = order[rank < CANDIDATES_PER_DOCUMENT]
    by_owner = table.column("owner").to_numpy().astype(np.int64)
    kept = kept[np.lexsort((rows[kept], run_rank[kept], by_owner[kept]))]
    return table.take(pa.array(kept))


def _first_per_owner(owner: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """The index of each owner's first verified candidate (candidates sorted by owner, then age)."""
    at = np.flatnonzero(ok)
    if not len(at):
        return at
    return at[np.r_[True, owner[at][1:] != owner[at][:-1]]]


def crossrun_for(txn, index_info: dict, pinned, config, params, rule, spool=None):
    """``prior_documents`` for verification: False (no earlier document), a :class:`CrossRun` over the earlier
    runs' records, or True (earlier documents, but no transaction to read their records: flags stay unverified);
    ``spool``: the pass's :class:`~lshbloom_udf.spark.passes.driver.record_spool.RecordSpool`, or None."""
    from lshbloom_udf.spark.records import prior_runs

    if not index_info.get("inserted_before"):
        return False
    if txn is None:
        return True
    runs = prior_runs(txn, index_info.get("reproduced_from"))
    if not runs.with_records:  # the earlier documents came with band files adopted from datasketch: no source
        return False
    return CrossRun(runs, pinned, config.text_column, params.key_spec, rule, config.id_column, spool)
