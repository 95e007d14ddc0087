"""Sizing and error of an LSHBloom index (the paper's §4.3–4.5).

Each of the ``b`` bands gets a Bloom filter sized for ``n`` documents at the
per-band false-positive rate ``p``, chosen so that the probability that *any*
band reports a false hit is the user's effective overhead ``p_eff``:

    1 - (1 - p)^b = p_eff   =>   p = 1 - (1 - p_eff)^(1/b) = -expm1(log1p(-p_eff) / b)

An optimal Bloom filter for ``n`` items at rate ``p`` needs

    m = -n ln p / (ln 2)^2  bits per band,  b·m bits in all.

(pybloomfiltermmap3 rounds the hash count down to ``floor(log2(1/p))`` and
``m`` up to whole bytes; :func:`bloom_file_bytes` gives the exact file size.)

With ``N = 2^61 - 1`` band-key values, a band-key collision adds ``b/N`` to
the Bloom error, and the document-level error rates become (eqs. 3–4)

    FP_bloom = FP_lsh + (1 - FP_lsh)(p_eff + b/N)
    FN_bloom = (1 - (p_eff + b/N)) FN_lsh

where ``FP_lsh``/``FN_lsh`` are the S-curve integrals of :mod:`lshbloom_udf.lsh`.

A blocked index (``bloom="blocked"``) sets 16 bits per key in one 512-bit
block; its block count is the smallest whose exact false-positive rate is
within ``p`` (:mod:`lshbloom_udf.index.backends`), larger than ``m`` at low rates.

A cuckoo index (``bloom="cuckoo"``) stores an f-bit fingerprint per key in
one of two 512-bit buckets; ``f`` and the bucket count come from the closed
form of its false-positive rate ``1 − (1 − 1/(2^f − 1))^(2n/B)`` and a 95 %
load limit (the Rust module ``cuckoo``, docs/algorithm.md): below ``m`` at
LSHBloom's per-band rates (0.96x at the defaults).

A growing index (``growth="grow"``, :mod:`lshbloom_udf.index.growth`) sizes
generation ``g`` for ``n·2^g`` documents at the effective rate
``p_eff·2^-(g+1)``; :func:`plan` gives its first generation's figures and
:attr:`Plan.growth_table` what each further generation costs. The figures of
a fixed index are the paper's.
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import asdict, dataclass, field

from lshbloom_udf.advice import measured_costs
from lshbloom_udf.compat import COMPAT_DEFAULTS as _D
from lshbloom_udf.index.backends import BLOOM_PREAMBLE_BYTES, DEFAULT_BLOOM, backend
from lshbloom_udf.index.fs import human_bytes
from lshbloom_udf.index.params import IndexParams, effective_p, per_band_p, validate_capacity, validate_p_effective
from lshbloom_udf.index.records import lookup_bytes, record_bytes
from lshbloom_udf.lsh import (
    false_negative_probability,
    false_positive_probability,
    optimal_params,
    validate_bands,
    validate_num_perm,
    validate_threshold,
)

KEY_RANGE = (1 << 61) - 1
# Defined with the index (which validates its own parameters) and re-exported here, the sizing module.
__all__ = [
    "BLOOM_PREAMBLE_BYTES",
    "KEY_RANGE",
    "Plan",
    "bloom_file_bytes",
    "human_bytes",
    "optimal_bits",
    "growth_table",
    "per_band_p",
    "plan",
    "validate_capacity",
    "validate_p_effective",
]


def optimal_bits(n: int, p: float) -> float:
    """Bits of an optimal Bloom filter for ``n`` items at false-positive rate ``p``."""
    return -n * math.log(p) / (math.log(2) ** 2)


def bloom_file_bytes(capacity: int, p: float) -> int:
    """Exact size of one pybloomfiltermmap3 file for ``capacity`` items at rate ``p``."""
    return backend(DEFAULT_BLOOM).file_bytes(capacity, p)


@dataclass(frozen=True)
class Plan:
    docs: int
    bloom: str
    threshold: float
    num_perm: int
    ngram: int
    b: int
    r: int
    p_effective: float
    p_band: float
    hashes_per_band: int
    bits_per_band: int
    formula_bits_per_band: float
    index_bytes: int
    formula_index_bytes: float
    lsh_false_positive: float
    lsh_false_negative: float
    lshbloom_false_positive: float
    lshbloom_false_negative: float
    shm_free_bytes: int
    ram_bytes: int
    fits_in_shm: bool
    fits_in_ram: bool
    growth: str = _D["growth"]
    # A growing index: one row per generation (see growth_table); empty for a fixed index.
    growth_table: list = field(default_factory=list)
    # A kept index's records beside its filters (lshbloom_udf.index.records): at most one per document.
    records_bytes: int = 0
    # Of the records: the lookup by band key that bounds a run's reads (lshbloom_udf.index.lookup).
    lookup_bytes: int = 0
    # The most the small runs' pending deltas take before they are folded (lshbloom_udf.index.deltas).
    write_buffer_bytes: int = 0

    @property
    def kept_index_bytes(self) -> int:
        """What a kept index of ``docs`` documents takes: the filters and the records."""
        return self.index_bytes + self.records_bytes

    def to_dict(self) -> dict:
        return {**asdict(self), "kept_index_bytes": self.kept_index_bytes}

    def to_text(self) -> str:
        where = "/dev/shm" if self.fits_in_shm else ("RAM (not /dev/shm)" if self.fits_in_ram else "disk only")
        return "\n".join(
            [
                f"documents (capacity)     {self.docs:,}",
                "  = how many documents the index is sized for (more and its false-positive rate rises)",
                f"Bloom filters            {self.bloom}",
                f"threshold / num_perm     {self.threshold} / {self.num_perm} (ngram {self.ngram})",
                f"bands b x rows r         {self.b} x {self.r}",
                "  = a pair is flagged when its signatures agree on all r values of at least one of the b bands",
                f"p_effective / per band   {self.p_effective:.3g} / {self.p_band:.6g}",
                "  = chance that a new document is flagged by a Bloom false positive (any band / one band)",
                f"{backend(self.bloom).key_bits_label:25s}{self.hashes_per_band}",
                f"bits per band            {self.bits_per_band:,}  (formula {self.formula_bits_per_band:,.0f})",
                "  = size of one band's filter; the formula is an optimal Bloom filter's, -n ln p / (ln 2)^2",
                f"index size               {human_bytes(self.index_bytes)}  ({self.index_bytes:,} bytes, "
                f"{self.index_bytes / self.formula_index_bytes:.2f}x a classic Bloom filter's bits)",
                f"records (kept index)     {human_bytes(self.records_bytes)}  "
                f"(<= {self.records_bytes // max(self.docs, 1)}"
                f" bytes per kept document); with the filters {human_bytes(self.kept_index_bytes)}",
                "  = what --index-dir keeps beside the filters so later runs verify against this run's documents",
                f"bytes per document       filters {self.index_bytes / max(self.docs, 1):.0f} + records "
                f"{self.records_bytes / max(self.docs, 1):.0f} (of which lookup "
                f"{self.lookup_bytes / max(self.docs, 1):.0f}) = {self.kept_index_bytes / max(self.docs, 1):.0f}",
                "  = the lookup lets a later run read only the records its flags' band keys name, not all of them",
                f"write buffer (pending)   <= {human_bytes(self.write_buffer_bytes)} "
                f"({self.write_buffer_bytes / max(self.docs, 1):.0f} bytes per document at most)",
                "  = small runs' deltas (filters and key logs) until a run folds them into the filters",
                f"false flags to verify    <= {self.p_effective * self.docs:,.0f} ({self.p_effective:.3g} of the "
                "documents)",
                "  = the pass's Bloom false positives up to capacity; verification unflags each (no candidate "
                "shares its key)",
                f"LSH FP / FN (integrals)  {self.lsh_false_positive:.6g} / {self.lsh_false_negative:.6g}",
                "  = the bands' errors: share of pairs below the threshold flagged / above it missed (S-curve areas)",
                f"LSHBloom FP / FN         {self.lshbloom_false_positive:.6g} / {self.lshbloom_false_negative:.6g}",
                "  = the same with the Bloom filters' false positives added (what a run should see)",
                f"fits here in             {where}  (/dev/shm free {human_bytes(self.shm_free_bytes)}, "
                f"RAM {human_bytes(self.ram_bytes)})",
                "  = where this machine can hold the index: /dev/shm or RAM is fast, disk only is slow for the "
                "driver pass",
            ]
            + self._growth_lines()
        )

    def _growth_lines(self) -> list[str]:
        if self.growth == "fixed":
            return ["growth                   fixed (a run past the capacity fails with IndexFullError)"]
        first = self.growth_table[0]
        lines = [
            "growth                   grow: generation g holds docs x 2^g at p_effective x 2^-(g+1) "
            f"(generation 0 costs {human_bytes(first['bytes'] - first['fixed_bytes'])}, "
            f"+{first['bytes'] / first['fixed_bytes'] - 1:.1%}, over a fixed index)",
            f"  {'gen':>3s} {'capacity':>15s} {'total':>15s} {'rate':>9s} {'per band':>10s} {'bytes':>10s} "
            f"{'total bytes':>11s} {'fixed for total':>15s}",
        ]
        for row in self.growth_table:
            lines.append(
                f"  {row['generation']:3d} {row['capacity']:15,} {row['total_capacity']:15,} {row['p_effective']:9.3g} "
                f"{row['p_band']:10.3g} {human_bytes(row['bytes']):>10s} {human_bytes(row['total_bytes']):>11s} "
                f"{human_bytes(row['fixed_bytes']):>15s}"
            )
        return lines


def _shm_free() -> int:
    try:
        return shutil.disk_usage("/dev/shm").free
    except OSError:
        return 0


def _ram_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def plan(
    docs: int,
    threshold: float = _D["threshold"],
    num_perm: int = _D["num_perm"],
    p_effective: float = _D["p_effective"],
    ngram: int = _D["ngram"],
    bands: tuple[int, int] | None = None,
    bloom: str = DEFAULT_BLOOM,
    growth: str = _D["growth"],
    generations: int = 5,
) -> Plan:
    """Size an index of ``bloom`` filters for ``docs`` documents before running anything.

    The defaults are the low-level API's (:data:`~lshbloom_udf.compat.COMPAT_DEFAULTS`
    and datasketch's files), those of an index built with
    :meth:`IndexParams.for_threshold <lshbloom_udf.index.IndexParams.for_threshold>`;
    ``lshbloom plan`` passes the job's (:data:`lshbloom_udf.config.DEFAULTS`).
    ``growth="grow"`` sizes the first generation of a growing index and shows
    ``generations`` of them in :attr:`Plan.growth_table`.
    """
    b, r = _plan_bands(docs, threshold, num_perm, p_effective, bands)
    sized = IndexParams(b=b, r=r, capacity=docs, num_perm=num_perm, p_effective=p_effective, growth=growth)
    p = sized.p_band
    hashes, bits = backend(bloom).geometry(docs, p)
    index_bytes = backend(bloom).index_bytes(docs, p, b)
    fp_lsh = false_positive_probability(threshold, b, r)
    fn_lsh = false_negative_probability(threshold, b, r)
    bloom_error = p_effective + b / KEY_RANGE
    shm, ram = _shm_free(), _ram_bytes()
    return Plan(
        docs=docs,
        bloom=bloom,
        threshold=threshold,
        num_perm=num_perm,
        ngram=ngram,
        b=b,
        r=r,
        p_effective=p_effective,
        p_band=p,
        hashes_per_band=hashes,
        bits_per_band=bits,
        formula_bits_per_band=optimal_bits(docs, p),
        index_bytes=index_bytes,
        formula_index_bytes=b * optimal_bits(docs, p) / 8,
        lsh_false_positive=fp_lsh,
        lsh_false_negative=fn_lsh,
        lshbloom_false_positive=fp_lsh + (1 - fp_lsh) * bloom_error,
        lshbloom_false_negative=(1 - bloom_error) * fn_lsh,
        shm_free_bytes=shm,
        ram_bytes=ram,
        fits_in_shm=index_bytes < shm,
        fits_in_ram=index_bytes < ram,
        growth=growth,
        growth_table=growth_table(sized, bloom, generations) if growth == "grow" else [],
        records_bytes=docs * record_bytes(num_perm, b),
        lookup_bytes=docs * lookup_bytes(b),
        write_buffer_bytes=write_buffer_bytes(docs, p, b, bloom),
    )


def write_buffer_bytes(docs: int, p_band: float, b: int, bloom: str) -> int:
    """The pending deltas' most bytes in an index of ``docs``: filters and key logs of FOLD_SHARE of the documents."""
    from lshbloom_udf.index import deltas

    kind = backend(bloom)
    if kind.datasketch_compatible:
        return 0
    pending = max(1, int(deltas.FOLD_SHARE * docs))
    return kind.index_bytes(pending, p_band / deltas.MAX_DELTAS, b) + pending * 8 * b


def _plan_bands(docs: int, threshold: float, num_perm: int, p_effective: float,
                bands: tuple[int, int] | None) -> tuple[int, int]:
    """A plan's ``(b, r)``: ``bands``, or the optimum for ``threshold``; the plan's arguments checked first."""
    validate_capacity(docs)
    validate_threshold(threshold)
    validate_num_perm(num_perm)
    validate_p_effective(p_effective)
    if bands is None:
        return optimal_params(threshold, num_perm)
    b, r = bands
    validate_bands(b, r, num_perm)
    return b, r


def growth_table(params: IndexParams, bloom: str, generations: int) -> list[dict]:
    """What the first ``generations`` generations of a growing index cost.

    Per generation: its capacity and the total so far, the effective rate it
    is sized for and its per-band rate, its bytes and the total so far, and
    the bytes of a fixed index sized for that total at ``p_effective``.
    """
    if isinstance(generations, bool) or not isinstance(generations, int) or generations < 1:
        raise ValueError(f"generations must be a positive integer, got {generations!r}")
    index_bytes = backend(bloom).index_bytes
    rows, total_capacity, total_bytes = [], 0, 0
    for g in range(generations):
        capacity, p_band = params.generation_capacity(g), params.generation_p_band(g)
        size = index_bytes(capacity, p_band, params.b)
        total_capacity += capacity
        total_bytes += size
        rows.append(
            {
                "generation": g,
                "capacity": capacity,
                "total_capacity": total_capacity,
                "p_effective": effective_p(p_band, params.b),
                "p_band": p_band,
                "bytes": size,
                "total_bytes": total_bytes,
                "fixed_bytes": index_bytes(total_capacity, per_band_p(params.p_effective, params.b), params.b),
            }
        )
    return rows


# Costs per core of the sharded pass, measured by benchmarks/sharded.py on local[2] (benchmarks/log.md,
# "The sharded pass"), kept as data with the machine's name (lshbloom_udf/measured/, read by lshbloom_udf.advice).
# A cluster's network shuffle costs more per key than local[2]'s loopback: plan reads them as a lower bound.
SHARDED_COSTS = {k: measured_costs()[k] for k in ("keys_ns_per_doc_core", "decide_ns_per_key_core", "machine")}


def parse_bytes(text) -> int:
    """``"8g"``, ``"512m"``, ``"1.5t"``, ``"65536"`` (Spark's memory notation, binary units) as bytes."""
    s = str(text).strip().lower().removesuffix("b")
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    try:
        return int(float(s[:-1]) * units[s[-1]]) if s and s[-1] in units else int(s)
    except ValueError:
        raise ValueError(f"not a memory size: {text!r} (e.g. 8g, 512m)") from None


def sharded_plan(params: IndexParams, shard_memory: int, executors: int, executor_cores: int,
                 executor_memory: int, costs: dict = SHARDED_COSTS, bloom: str | None = None) -> dict:
    """What ``--pass sharded`` needs for an index of ``params`` on ``executors`` x ``executor_cores`` cores.

    S (shards per band) is the least whose shard filter fits ``shard_memory``
    (:func:`~lshbloom_udf.index.shards.plan_shards`). A task's Python worker
    holds one shard filter memory-mapped, plus one copy of it while a kept
    index's new version is emitted: ``2 x shard bytes`` (+ ~64 MiB of
    interpreter and Arrow batches); Spark counts it outside the JVM heap
    (``spark.executor.memoryOverhead`` or ``spark.executor.pyspark.memory``).
    Time: ``docs x (keys_ns_per_doc + b x decide_ns_per_key) / (executors x
    cores)``, from :data:`SHARDED_COSTS`. ``bloom``: the shard filters'
    backend (:func:`~lshbloom_udf.index.shards.shard_bloom`).
    """
    from lshbloom_udf.index.shards import plan_shards, shard_bloom

    if min(executors, executor_cores) < 1:
        raise ValueError("executors and executor cores must be >= 1")
    shards = plan_shards(params, shard_memory, bloom=shard_bloom(bloom))
    task_bytes = 2 * shards.shard_bytes() + (64 << 20)
    cores = executors * executor_cores
    ns = params.capacity * (costs["keys_ns_per_doc_core"] + params.b * costs["decide_ns_per_key_core"])
    return {
        **shards.to_dict(),
        "shard_memory": shard_memory,
        "python_bytes_per_task": task_bytes,
        "python_bytes_per_executor": task_bytes * executor_cores,
        "executor_memory": executor_memory,
        "tasks_in_flight": cores,
        "driver_bytes": "the hit row ids only (8 bytes per duplicate)",
        "expected_seconds": ns / cores / 1e9,
        "costs": dict(costs),
    }


def sharded_text(s: dict, executors: int, executor_cores: int) -> str:
    fits = s["python_bytes_per_executor"] <= s["executor_memory"]
    return "\n".join([
        f"pass                     sharded (any-earlier) on {executors} executors x {executor_cores} cores",
        f"shards                   {s['shards']:,} = b x {s['shards_per_band']:,} per band, "
        f"{s['shard_capacity']:,} keys each",
        f"shard filter             {human_bytes(s['shard_bytes'])} (--shard-memory {human_bytes(s['shard_memory'])})",
        f"index (generation 0)     {human_bytes(s['index_bytes'])} as a Parquet dataset under --index-dir",
        f"python memory per task   {human_bytes(s['python_bytes_per_task'])}; per executor "
        f"{human_bytes(s['python_bytes_per_executor'])} "
        + ("(set spark.executor.memoryOverhead to at least this)" if fits else
           f"(MORE than --executor-memory {human_bytes(s['executor_memory'])}: lower --shard-memory)"),
        f"driver memory            {s['driver_bytes']}",
        f"expected time            {s['expected_seconds'] / 3600:,.2f} h of keys + decisions "
        f"({s['costs']['keys_ns_per_doc_core'] / 1e3:,.0f} us/doc, {s['costs']['decide_ns_per_key_core']:,.0f} "
        "ns/key per core, measured on local[2]: a lower bound on a real network)",
    ])
