"""The sharded pass (``pass_mode="sharded"``): any-earlier decisions made on the executors, band-key shard by shard,
with no index on the driver (docs/algorithm.md §4b).

- :mod:`~lshbloom_udf.spark.passes.sharded.decide` — :class:`ShardedPass` (the pass: its plan, report, store);
- :mod:`~lshbloom_udf.spark.passes.sharded.shuffle` — the keys' explode into per-shard blobs and their shuffle;
- :mod:`~lshbloom_udf.spark.passes.sharded.filters` — each shard's filters, test-and-set in row order on an executor;
- :mod:`~lshbloom_udf.spark.passes.sharded.store` — a kept sharded index: versioned Parquet parts and manifests on
  any Hadoop filesystem (:class:`~lshbloom_udf.spark.passes.sharded.store.ShardedTransaction`), through
  :mod:`~lshbloom_udf.spark.passes.sharded.hadoop`.

The index layer's parts of it stay in ``lshbloom_udf/index/`` (``shards``: the plan; ``generations``: the growth).
"""

from lshbloom_udf.spark.passes.sharded.decide import PASS, ShardedPass

__all__ = ["PASS", "ShardedPass"]
