"""How a sharded index is cut (docs/algorithm.md §4b): S shards per band, each a Bloom filter for its share of the keys.

A band's filter for ``n`` documents at rate ``p_band`` is split into ``S``
filters for ``n/S`` keys each, at the same rate, so the index keeps the
driver pass's size (up to rounding and the slack below) and its error: a
document's key of band ``i`` meets exactly one shard's filter. ``S`` is the
least count whose shard filter fits a per-task memory budget
(``shard_memory``). Keys per shard are Binomial(n, 1/S); each shard is sized
for ``n/S + 4·sqrt(n/S)`` keys so that none overfills in practice.

No Spark here: :mod:`lshbloom_udf.sizing` (``plan --pass sharded``) and the
sharded pass (:mod:`lshbloom_udf.spark.passes.sharded`) both use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from lshbloom_udf.index.backends import backend
from lshbloom_udf.index.params import IndexParams

# The backends a shard filter can be: their seeds are per (band, generation), and shards of a band hold disjoint
# keys and share them. The first is the default.
SHARD_BLOOMS = ("blocked", "cuckoo")
SHARD_BLOOM = SHARD_BLOOMS[0]


def shard_bloom(bloom: Optional[str]) -> str:
    """The shard filters' backend for the ``bloom`` setting: itself if a shard can be one, else the default."""
    return bloom if bloom in SHARD_BLOOMS else SHARD_BLOOM


@dataclass(frozen=True)
class ShardPlan:
    """How an index of ``params`` is sharded: ``shards_per_band`` (S) filters per band, each for ``shard_capacity``
    keys of generation 0 (generation g of a growing index: ``shard_capacity(g)``)."""

    params: IndexParams
    shards_per_band: int
    bloom: str = SHARD_BLOOM

    @property
    def b(self) -> int:
        return self.params.b

    @property
    def growth(self) -> str:
        return self.params.growth

    @property
    def shards(self) -> int:
        return self.b * self.shards_per_band

    def shard_capacity(self, generation: int = 0) -> int:
        return shard_keys(self.params.generation_capacity(generation), self.shards_per_band)

    def p_band(self, generation: int = 0) -> float:
        return self.params.generation_p_band(generation)

    def shard_bytes(self, generation: int = 0) -> int:
        return backend(self.bloom).file_bytes(self.shard_capacity(generation), self.p_band(generation))

    def index_bytes(self) -> int:
        """Bytes of generation 0 of every shard (what a fixed index holds; a growing one adds generations)."""
        return self.shards * self.shard_bytes(0)

    def to_dict(self) -> dict:
        return {"shards_per_band": self.shards_per_band, "shard_capacity": self.shard_capacity(0),
                "shard_bytes": self.shard_bytes(0), "shards": self.shards, "index_bytes": self.index_bytes(),
                "bloom": self.bloom}


def shard_keys(capacity: int, shards_per_band: int) -> int:
    """Keys one shard is sized for: its mean share plus 4 standard deviations (Binomial(capacity, 1/S))."""
    mean = capacity / shards_per_band
    return max(1, math.ceil(mean + 4 * math.sqrt(mean)))


def plan_shards(params, shard_memory: int, shards_per_band: Optional[int] = None,
                bloom: str = SHARD_BLOOM) -> ShardPlan:
    """The least S whose generation-0 shard filter (of backend ``bloom``) fits ``shard_memory`` bytes (or the given
    S of an index)."""
    if shards_per_band is not None:
        return ShardPlan(params, shards_per_band, bloom)
    file_bytes = backend(bloom).file_bytes

    def fits(s: int) -> bool:
        return file_bytes(shard_keys(params.capacity, s), params.p_band) <= shard_memory

    hi = 1
    while not fits(hi) and hi < params.capacity:
        hi *= 2
    lo = hi // 2  # does not fit (or 0); the shard's bytes shrink as s grows
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    s = hi
    return ShardPlan(params, s, bloom)
