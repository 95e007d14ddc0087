"""The driver's memory, derived from the live session: every budget of the driver is a named share of it.

A run's driver is two processes: a JVM (``--driver-memory``, Spark's default
1 GiB; in local mode it is the executors' too) and the Python process that
runs the driver pass and verification. :class:`DriverMemory` reads what they
have from the session and the kernel, once per stage that needs it:

- ``heap``: the driver JVM's max heap (``Runtime.maxMemory()`` through py4j;
  ``spark.driver.memory`` where there is no JVM on this side, Spark Connect);
- ``max_result``: ``spark.driver.maxResultSize`` (0: no limit);
- ``python``: the memory this Python process may still take: the least of
  ``/proc/meminfo``'s MemAvailable and the cgroup's limit minus its usage
  (v2 ``memory.max - memory.current``, v1 ``memory.limit_in_bytes -
  memory.usage_in_bytes``, page cache not counted), less what the driver JVM
  may still grow by (``maxMemory - totalMemory``: it runs on this host and
  takes it first).

The budgets (each share is named once below, with why):

- :attr:`DriverMemory.texts`: the texts verification holds on the driver, counted as the Python ``str``
  objects they become (:func:`str_cost`), not their UTF-8 bytes;
- :attr:`DriverMemory.collect`: the bytes one collect may bring into the JVM
  (Arrow batches of texts, in one ``toArrow`` or two partitions of a stream);
- :attr:`DriverMemory.arrays`: whatever else verification buffers in Python (pair arrays, results);
- :attr:`DriverMemory.shingle_cache`: the recurring earlier texts' shingle lists (native, built once).

What passes a budget goes to the executors (verification's similarities) or
streams in pieces the budget holds; what cannot fit at all is refused at the
start with the setting to change (:meth:`DriverMemory.require`).
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from typing import Optional

from lshbloom_udf.errors import DriverMemoryError

log = logging.getLogger(__name__)

# -- the shares -----------------------------------------------------------------------------------------------------

# Texts held on the driver: a quarter of the Python process's available memory. The rest is for what verification
# builds from them (the native shingle sets of the pairs in flight, on every core), the Arrow batch being decoded,
# the pair arrays (ARRAYS_SHARE) and, in local mode, the executors' Python workers on the same host.
TEXTS_SHARE = 0.25
# Verification's other buffers in Python (candidate pair arrays, the executors' verified pairs): another quarter.
ARRAYS_SHARE = 0.25
# The shingle lists of the earlier texts that recur among the driver's candidate pairs (a template family's anchors,
# a source with many copies), built once in native memory and shared by its threads: an eighth (a 3 kB page's list
# takes ~70 kB: 2 GB hold ~28,000 of them).
SHINGLE_CACHE_SHARE = 0.125
# An explicit verify_driver_bytes wins up to half the available memory: past it the kernel (or the cgroup) kills the
# process before the texts are in, so it is capped there with a warning.
EXPLICIT_TEXTS_SHARE = 0.5
# One collect: at most half of spark.driver.maxResultSize (Spark fails a job whose results pass it) ...
COLLECT_SHARE_OF_MAX_RESULT = 0.5
# ... and a quarter of the heap outside Spark's unified memory (spark.memory.fraction of the heap less 300 MiB):
# task results land there, not in the unified region, which in local mode holds the pinned rows: in a small heap a
# collect well under maxResultSize can fill that part (docs/benchmarks.md, "A default 1 GiB driver").
COLLECT_SHARE_OF_USER_HEAP = 0.25
# Spark's reserved system memory (UnifiedMemoryManager.RESERVED_SYSTEM_MEMORY_BYTES) and spark.memory.fraction's
# default.
RESERVED_HEAP = 300 << 20
MEMORY_FRACTION = 0.6
# A stream (toLocalIterator with prefetch) holds two partitions in the JVM: each gets half of the collect budget.
PARTITIONS_IN_FLIGHT = 2
# A broadcast semi-join's row ids: the driver collects them and builds Spark's hash relation of longs (sparse row
# ids: a map of a key, its slots and a one-long row each, ~48 bytes a row), held as a collect's results are; 64
# leaves room.
BROADCAST_ROW_BYTES = 64
# Bits per (band, key) pair in verification's Bloom filter of the flagged documents' pairs (spark.verify.spark_source,
# built on the driver and broadcast): with 4 probes a false positive ((1 - e^{-4/12})^4 <= 0.6 %) only costs a kept
# pair in the join. Declared here, with the budgets it is held to, for plan's projection too.
PAIR_FILTER_BITS = 12
# The least one collect must be able to bring (a streamed partition of texts, the verified pairs' batches): below it
# the run cannot move results to the driver in bounded pieces.
MIN_COLLECT = 8 << 20
# The driver's Python needs this much besides any per-document arrays (interpreter, pyarrow, py4j, the native module).
PYTHON_FLOOR = 256 << 20
# Bytes per *flagged* document the driver's Python keeps whatever the budgets: its row id (int64) and its band keys
# (b x uint64, the pass keeps them for verification's candidates), plus a few verification arrays of row ids. Not
# counted at the start (how many the pass flags is not known then): ``plan`` shows them for a flagged share.
BYTES_PER_FLAGGED = 32
# A held text's entry beside its str: the int row id (28-36 B) and its dict slot (~40 B at dict's 2/3 load).
HELD_ENTRY_BYTES = 72

# -- reading the machine --------------------------------------------------------------------------------------------


def meminfo_available(path: str = "/proc/meminfo") -> Optional[int]:
    """MemAvailable of ``path`` in bytes (None where the file or the line is missing)."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _read_int(path: str) -> Optional[int]:
    try:
        with open(path, encoding="ascii") as f:
            text = f.read().strip()
    except OSError:
        return None
    return None if text in ("", "max") else int(text)


def _inactive_file(path: str, key: str) -> int:
    """Page cache the kernel reclaims before it kills (memory.stat's ``key``): not counted as used."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _cgroup_dirs(proc_cgroup: str, root: str) -> list[tuple[str, int]]:
    """The cgroup directories that may limit this process, innermost first, each with its version (2 or 1).

    ``/proc/self/cgroup`` names the process's cgroup; inside a container the mount's root already is it
    (a cgroup namespace), so the named path is tried under the mount, then the mount's root."""
    found: list[tuple[str, int]] = []
    paths: dict[int, str] = {}
    try:
        with open(proc_cgroup, encoding="ascii") as f:
            for line in f:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) == 3 and (parts[0] == "0" and parts[1] == "" or "memory" in parts[1].split(",")):
                    paths[2 if parts[1] == "" else 1] = parts[2]
    except OSError:
        return found
    for version, mount in ((2, root), (1, os.path.join(root, "memory"))):
        if version not in paths:
            continue
        here = os.path.join(mount, paths[version].lstrip("/"))
        here = here if os.path.isdir(here) else mount
        while True:  # the process's cgroup and its parents up to the mount: the tightest limit counts
            found.append((here, version))
            if os.path.normpath(here) == os.path.normpath(mount):
                break
            here = os.path.dirname(here)
    return found


def cgroup_available(proc_cgroup: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> Optional[int]:
    """The least ``limit - usage`` over the process's cgroup and its parents (usage without inactive page cache),
    v2 or v1; None where no limit is set."""
    best = None
    for here, version in _cgroup_dirs(proc_cgroup, root):
        if version == 2:
            limit, usage = _read_int(os.path.join(here, "memory.max")), _read_int(os.path.join(here, "memory.current"))
            cache = _inactive_file(os.path.join(here, "memory.stat"), "inactive_file")
        else:
            limit = _read_int(os.path.join(here, "memory.limit_in_bytes"))
            usage = _read_int(os.path.join(here, "memory.usage_in_bytes"))
            cache = _inactive_file(os.path.join(here, "memory.stat"), "total_inactive_file")
            limit = None if limit is not None and limit >= 1 << 60 else limit  # v1's "no limit" is a huge number
        if limit is None or usage is None:
            continue
        free = max(0, limit - max(0, usage - cache))
        best = free if best is None else min(best, free)
    return best


def machine_available() -> Optional[int]:
    """What this process may still take: the least of MemAvailable and the cgroup's room (None: neither is known)."""
    known = [v for v in (meminfo_available(), cgroup_available()) if v is not None]
    return min(known) if known else None


def str_cost(text: Optional[str]) -> int:
    """The memory a held text takes on the driver: its ``str`` (1, 2 or 4 bytes per code point, by its widest, plus
    a header: one emoji in an ASCII text makes every character 4 bytes) and its entry."""
    return HELD_ENTRY_BYTES + (0 if text is None else sys.getsizeof(text))


# -- the session ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DriverMemory:
    """What the driver has (bytes; see the module's docs) and the budgets derived from it."""

    heap: int
    max_result: int  # 0: spark.driver.maxResultSize is off
    python: int
    memory_fraction: float = MEMORY_FRACTION
    heap_source: str = "jvm"  # jvm (Runtime.maxMemory) | conf (spark.driver.memory)
    # What the host or cgroup has free now, before the JVM's possible growth is set aside (None: ``python``).
    available: Optional[int] = None

    @classmethod
    def of_session(cls, spark) -> "DriverMemory":
        """The live session's driver (classic: its JVM through py4j; Spark Connect: the confs it shows)."""
        from lshbloom_udf.common import spark_context
        from lshbloom_udf.sizing import parse_bytes

        def conf(key: str, default: str) -> str:
            try:
                return spark.conf.get(key, default) or default
            except Exception:  # a session that does not show this conf: Spark's default
                return default

        heap = grow = None
        sc = spark_context(spark)
        try:
            runtime = sc._jvm.java.lang.Runtime.getRuntime()
            heap, grow = int(runtime.maxMemory()), int(runtime.maxMemory() - runtime.totalMemory())
        except Exception:  # Spark Connect, or no py4j gateway on this side: the driver's configured memory
            pass
        source = "jvm" if heap is not None else "conf"
        if heap is None:
            heap = parse_bytes(conf("spark.driver.memory", "1g"))
        try:
            max_result = parse_bytes(conf("spark.driver.maxResultSize", "1g"))
        except ValueError:
            max_result = 1 << 30
        try:
            fraction = float(conf("spark.memory.fraction", str(MEMORY_FRACTION)))
        except ValueError:
            fraction = MEMORY_FRACTION
        available = machine_available()
        python = (available if available is not None else heap) - (grow or 0)
        return cls(heap, max_result, max(0, python), fraction, source, available)

    # -- budgets

    @property
    def user_heap(self) -> int:
        """The heap outside Spark's unified memory: where a collect's task results are held."""
        return int(max(0, self.heap - RESERVED_HEAP) * (1 - self.memory_fraction))

    @property
    def collect(self) -> int:
        """The bytes one collect may bring into the driver's JVM."""
        heap_part = int(self.user_heap * COLLECT_SHARE_OF_USER_HEAP)
        if not self.max_result:
            return heap_part
        return min(heap_part, int(self.max_result * COLLECT_SHARE_OF_MAX_RESULT))

    @property
    def partition(self) -> int:
        """The bytes one streamed partition may carry (two are in the JVM at once)."""
        return self.collect // PARTITIONS_IN_FLIGHT

    @property
    def broadcast_rows(self) -> int:
        """The row ids one broadcast semi-join may carry: one collect's budget of them."""
        return self.collect // BROADCAST_ROW_BYTES

    @property
    def texts(self) -> int:
        """The texts verification may hold on the driver (their :func:`str_cost`)."""
        return int(self.python * TEXTS_SHARE)

    @property
    def arrays(self) -> int:
        """Verification's other buffers in Python (pair arrays, results)."""
        return int(self.python * ARRAYS_SHARE)

    @property
    def shingle_cache(self) -> int:
        """The shingle lists of the recurring earlier texts of the driver's candidate pairs (native memory)."""
        return int(self.python * SHINGLE_CACHE_SHARE)

    def texts_budget(self, explicit: Optional[int]) -> int:
        """``verify_driver_bytes``: None derives it (:attr:`texts`); an explicit value wins up to
        :data:`EXPLICIT_TEXTS_SHARE` of the available memory, capped there with a warning."""
        if explicit is None:
            return self.texts
        cap = int(self.python * EXPLICIT_TEXTS_SHARE)
        if explicit > cap:
            log.warning("verify_driver_bytes %s is more than the driver's Python can hold (%s available, %d %% of it "
                        "%s): capped there", _human(explicit), _human(self.python), EXPLICIT_TEXTS_SHARE * 100,
                        _human(cap))
            return cap
        return explicit

    def require(self, documents: int) -> None:
        """Refuse a run of ``documents`` that cannot proceed within this memory, before any of its work
        (:class:`DriverMemoryError`, naming the setting to change): a one-collect budget under :data:`MIN_COLLECT`,
        or less than :data:`PYTHON_FLOOR` available. What grows with the documents the pass flags (not known yet)
        is not refused here: ``plan`` shows it (:func:`run_needs`)."""
        if self.collect < MIN_COLLECT:
            limit = ("spark.driver.maxResultSize" if self.max_result and self.max_result * COLLECT_SHARE_OF_MAX_RESULT
                     < self.user_heap * COLLECT_SHARE_OF_USER_HEAP else "--driver-memory (spark.driver.memory)")
            raise DriverMemoryError(
                f"the driver can bring only {_human(self.collect)} per collect (heap {_human(self.heap)}, "
                f"spark.driver.maxResultSize {_human(self.max_result)}); a run needs {_human(MIN_COLLECT)}: "
                f"raise {limit}")
        # Refused on what is free now: the JVM's growth is only possible, and the budgets already set it aside.
        free = self.python if self.available is None else self.available
        if free < PYTHON_FLOOR:
            raise DriverMemoryError(
                f"the driver's Python process has {_human(free)} of memory available (the machine's or its "
                f"cgroup's) and a run of {documents:,} documents needs at least {_human(PYTHON_FLOOR)}: free memory "
                "on the driver's host, raise its container's memory limit, or lower --driver-memory "
                "(spark.driver.memory) so that the JVM leaves room for Python")

    def summary(self, texts_budget: Optional[int] = None) -> dict:
        """What the run's summary reports (``verify.memory``); ``texts_budget``: the one used, if not derived."""
        return {"heap": self.heap, "heap_source": self.heap_source, "max_result_size": self.max_result,
                "python_available": self.python, "collect_bytes": self.collect, "partition_bytes": self.partition,
                "texts_budget": self.texts if texts_budget is None else texts_budget, "arrays_budget": self.arrays,
                "shingle_cache_budget": self.shingle_cache}


def _human(n: int) -> str:
    from lshbloom_udf.index.fs import human_bytes

    return human_bytes(n)


# -- what a run of N documents needs (``lshbloom plan``) -------------------------------------------------------------

# Spark refuses a heap below 1.5x its reserve ("System memory ... must be at least").
SPARK_MIN_HEAP = RESERVED_HEAP * 3 // 2
# A str of an ASCII text: its bytes plus the header sys.getsizeof counts (CPython's compact ASCII strings).
STR_HEADER_BYTES = 49


def min_heap() -> int:
    """The least driver heap a run needs: Spark's floor, and a one-collect budget of :data:`MIN_COLLECT`."""
    user = MIN_COLLECT / COLLECT_SHARE_OF_USER_HEAP / (1 - MEMORY_FRACTION)
    return max(SPARK_MIN_HEAP, int(RESERVED_HEAP + user) + 1)


def run_needs(documents: int, flagged_share: float, text_bytes: float, b: int = 64) -> dict:
    """The driver memory a run of ``documents`` needs (bytes), for ``plan``.

    - ``heap``: the least ``--driver-memory`` (:func:`min_heap`): verification streams texts in partitions its
      one-collect budget holds, whatever ``documents``; Spark's default 1 GiB is more;
    - ``python``: what the driver's Python process needs whatever the budgets: :data:`PYTHON_FLOOR`, and per
      flagged document its row id, its ``b`` band keys and verification's arrays (:data:`BYTES_PER_FLAGGED`);
    - ``python_for_driver_similarities``: the available memory at which verification keeps the texts of
      ``flagged_share`` of the documents and one candidate each (``text_bytes`` each, ASCII) on the driver
      (:data:`TEXTS_SHARE` of it); with less they go to the executors (slower, same decisions).
    """
    flagged = int(documents * flagged_share)
    texts = 2 * flagged * (text_bytes + STR_HEADER_BYTES + HELD_ENTRY_BYTES)
    return {"heap": min_heap(), "python": PYTHON_FLOOR + flagged * (8 * b + BYTES_PER_FLAGGED),
            "python_for_driver_similarities": int(texts / TEXTS_SHARE), "flagged_share": flagged_share,
            "text_bytes": text_bytes}


def run_needs_text(needs: dict) -> str:
    return "\n".join([
        f"driver JVM heap          at least {_human(needs['heap'])} (--driver-memory; Spark's default 1g is more)",
        "  = verification streams the candidates' texts in pieces a share of the heap holds, whatever the documents",
        f"driver Python            at least {_human(needs['python'])} available, besides the index's pages "
        f"(the flagged documents' row ids and band keys)",
        f"  similarities on driver {_human(needs['python_for_driver_similarities'])} available keeps them there "
        f"({needs['flagged_share']:.0%} flagged, {needs['text_bytes']:,.0f} B per text; less: on the executors, "
        "slower, the same decisions)",
    ])
