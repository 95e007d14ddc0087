"""The sharded pass as a :class:`~lshbloom_udf.spark.passes.base.Pass`: any-earlier decisions on the executors.

The mechanics (band-key shards, their filters, the blobs that travel) are in
:mod:`~lshbloom_udf.spark.passes.sharded.shuffle` and :mod:`~lshbloom_udf.spark.passes.sharded.filters`; a kept
index's versions on a Hadoop filesystem in :mod:`~lshbloom_udf.spark.passes.sharded.store`. docs/algorithm.md
explains the rule and why shards are independent.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Optional

from lshbloom_udf import hooks
from lshbloom_udf.common import over_capacity_warning, unique_rows
from lshbloom_udf.index.shards import plan_shards, shard_bloom
from lshbloom_udf.log import logger
from lshbloom_udf.spark.keys import ACTIVE_COL, ArrowBatchLimits
from lshbloom_udf.spark.passes.base import Decided, KeyedPass, PassInput, PassOutcome, PassResult
from lshbloom_udf.spark.passes.scan import ScanResult
from lshbloom_udf.spark.passes.sharded.shuffle import decided_frame
from lshbloom_udf.spark.verify.spark_source import SparkCandidates

if TYPE_CHECKING:
    from lshbloom_udf.spark.passes.sharded.store import ShardedTransaction


class ShardedPass(KeyedPass):
    """Any-earlier (``insert="all"``) decisions, band-key shard by shard, with no index on the driver."""

    name, title, timer = "sharded", "keys + sharded pass", "sharded_pass"

    def open_index(self, index_dir: str, config, spark=None):
        """The sharded store: versioned Parquet parts on any Hadoop filesystem (opened once Spark runs)."""
        from lshbloom_udf.spark.passes.sharded.store import ShardedTransaction

        return ShardedTransaction(index_dir, spark, verify=config.verify_index)

    def holds_index(self, index_dir: str) -> bool:
        """A Hadoop URI, or a local directory with versioned manifests (``manifest-<version>.json``)."""
        from lshbloom_udf.spark.passes.sharded.store import holds_sharded

        return "://" in index_dir or holds_sharded(index_dir)

    def check_index(self, index_dir: str) -> str:
        """Every filter part of the committed version against its checksum (a local Spark session reads them)."""
        from pyspark.sql import SparkSession

        from lshbloom_udf.spark.passes.sharded.store import ShardedTransaction

        spark = SparkSession.getActiveSession() or SparkSession.builder.master("local[1]").appName(
            "lshbloom-check-index").getOrCreate()
        done = ShardedTransaction(index_dir, spark).verify()
        records = f"; {done['records']} run(s)' records match theirs" if done.get("records") else ""
        return f"{index_dir}: ok: {done['filter_parts']} filter part(s) match their checksums{records}"

    def decide_keys(self, given: PassInput) -> Decided:
        from pyspark import StorageLevel

        # Computed once: the pass counts the active documents, then shuffles their keys; verification then reads the
        # same keys (SparkCandidates.over owns them from here), so no document is keyed twice.
        keyed = given.keyed().persist(StorageLevel.MEMORY_AND_DISK)
        try:
            decided = self._run(given, keyed)
        except BaseException:
            keyed.unpersist()
            raise
        if not given.config.verify:
            keyed.unpersist()
            return Decided(decided, ScanResult())
        return Decided(decided, ScanResult(candidates=SparkCandidates.over(keyed, given.params.b)))

    def _run(self, given: PassInput, keyed) -> PassResult:
        """``given.txn``: a :class:`~lshbloom_udf.spark.passes.sharded.store.ShardedTransaction` (the run writes the
        index's next version, committed later) or None (a temporary index: nothing is written, only the hit rows
        travel)."""
        from pyspark.sql import functions as F

        from lshbloom_udf.spark.passes.sharded.store import ShardedTransaction

        c, txn = given.config, given.kept_store(ShardedTransaction)
        active = keyed.where(F.col(ACTIVE_COL)).count()
        params, manifest = _index_params(given, txn)
        # An index keeps the backend it was written with (the manifest's "bloom"); a new one takes the setting's.
        bloom = manifest.bloom if manifest else shard_bloom(c.bloom)
        plan = plan_shards(params, c.shard_memory, manifest.shards_per_band if manifest else None, bloom)
        if c.progress:
            from lshbloom_udf.sizing import human_bytes

            logger.info(f"sharded pass: {plan.b} bands x {plan.shards_per_band} shards, "
                        f"{human_bytes(plan.shard_bytes())} per shard filter")
        before = manifest.inserted if manifest else 0
        with ArrowBatchLimits(keyed.sparkSession):
            if txn is None:
                rows = unique_rows(r[0] for r in decided_frame(keyed, plan).select("data").collect())
                fill = {"keys": None, "bytes": plan.index_bytes()}
            else:
                decided = decided_frame(keyed, plan, txn.stored_filters(manifest), keep_filters=True)
                _, rows, fill = txn.write_version(decided, manifest)
                txn.stage_manifest(params, plan.to_dict(), before + active, fill, manifest)
        hooks.fire("sharded-pass", duplicates=len(rows))
        if params.growth == "fixed" and before + active > params.capacity and txn is not None:
            logger.warning(over_capacity_warning(before + active, params.capacity, None, params.p_effective,
                                                 "the sharded index", ", or --growth grow"))
        report = _report(given, plan, params, before, before + active, fill["bytes"])
        outcome = PassOutcome([rows], len(rows), given.documents - active, given.documents)
        return PassResult(outcome, report, params, {"inserted": before + active})


PASS = ShardedPass()


def _index_params(given: PassInput, txn: Optional[ShardedTransaction]) -> tuple:
    """(the parameters this run uses, the committed manifest or None); ``txn``: the kept index's (None: temporary)."""
    if txn is None:
        return dataclasses.replace(given.params, growth="fixed"), None
    return txn.index_params(given.params, given.config.sizing_given)


def _report(given: PassInput, plan, params, before: int, total: int, bytes_on_disk: Optional[int]):
    from lshbloom_udf.index import backend
    from lshbloom_udf.index.params import effective_p

    mean_keys = total / plan.shards_per_band
    band_fp = backend(plan.bloom).band_false_positive(int(mean_keys), plan.shard_capacity(), plan.p_band())
    return given.report().replace(
        inserted_before=before, backend=plan.bloom, reused=before > 0 and not given.temporary,
        shard_plan=plan.to_dict(), bytes_on_disk=bytes_on_disk, inserted_total=total, capacity=params.capacity,
        p_effective=params.p_effective, p_band=plan.p_band(), expected_false_positive=effective_p(band_fp, plan.b),
        location=given.index_dir or "executors (temporary)")
