"""The filter generations of an index, open: decisions over every generation, inserts into the newest.

A fixed index has one generation; a growing one (:mod:`~.growth`) adds a
generation when the newest is full. Generation ``g`` is ``b`` band files
(:meth:`BloomBackend.file_name`), sized for its own capacity and rate, which
the manifest records. Sealed generations (all but the newest) are only read.

Keep-first over generations is decided without a per-row loop in Python: a
row found in a sealed generation is a duplicate and inserts nothing, so the
sealed generations are queried for the whole batch first, and the newest
generation's native ``query_insert`` decides the other rows in order. When the
newest fills up in the middle of a batch, the rows left are first queried
against it (now sealed), and the rest go on in the next generation.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from lshbloom_udf import hooks
from lshbloom_udf.errors import (
    IndexCorruptError,
    IndexFilesMissingError,
    IndexFullError,
    IndexMismatchError,
    IndexStorageError,
)
from lshbloom_udf.index.backends import BloomBackend
from lshbloom_udf.index.fs import check_free_space, human_bytes, reserve_space
from lshbloom_udf.index.params import IndexParams, effective_p


@dataclass
class Generation:
    """One generation's sizing and fill, as the manifest records it."""

    capacity: int
    p_band: float
    inserted: int = 0
    # The backend's fields (its filters' geometry) as the manifest recorded them: the band files keep the
    # geometry they were made with even if the sizing rule changes later (cuckoo's did). None: sized now.
    geometry: Optional[dict] = field(default=None, compare=False, repr=False)
    # A delta (lshbloom_udf.index.deltas): its files' name and its key log's SHA-256; None for the base's generations.
    name: Optional[str] = None
    keys_sha256: Optional[str] = None

    @property
    def room(self) -> int:
        return self.capacity - self.inserted

    def record(self, backend: BloomBackend) -> dict:
        geometry = self.geometry if self.geometry is not None else backend.manifest_fields(self.capacity, self.p_band)
        delta = {"name": self.name, "keys_sha256": self.keys_sha256} if self.name is not None else {}
        return {"capacity": self.capacity, "p_band": self.p_band, "inserted": self.inserted, **delta, **geometry}


# The seed generation of every delta's band files (deterministic: the same run makes the same files).
DELTA_SEED_GENERATION = 1 << 20


def generation_paths(directory: str, backend: BloomBackend, b: int, generation: int,
                     name: Optional[str] = None) -> list[str]:
    """Generation ``generation``'s band files (a delta's, named ``name``: ``<name>-band-<i>.<ext>``)."""
    if name is not None:
        return [os.path.join(directory, f"{name}-band-{i}.{backend.extension}") for i in range(b)]
    return [os.path.join(directory, backend.file_name(i, generation)) for i in range(b)]


def create_generation(directory: str, backend: BloomBackend, b: int, generation: int, gen: Generation) -> list[str]:
    """Create generation ``generation``'s empty band files, their space reserved (or nothing and an ``OSError``)."""
    needed = backend.index_bytes(gen.capacity, gen.p_band, b)
    what = "the index" if generation == 0 else f"generation {generation} of the index"
    check_free_space(directory, needed, what, "see `python -m lshbloom_udf plan`")
    paths = generation_paths(directory, backend, b, generation, gen.name)
    seed_generation = generation if gen.name is None else DELTA_SEED_GENERATION
    try:
        for i, band_path in enumerate(paths):
            backend.create_file(band_path, gen.capacity, gen.p_band, i, seed_generation)
        reserve_space(paths)
    except OSError as e:
        for band_path in paths:
            if os.path.exists(band_path):
                os.remove(band_path)
        raise IndexStorageError(e.errno, f"cannot reserve {human_bytes(needed)} for {what}: {e.strerror}",
                                directory) from e
    return paths


class SealAndGrow:
    """Any-earlier test-and-insert over a stack of filter generations: the one seal-and-grow, for every store.

    Used by the local index's :class:`FilterStack` (b band files per
    generation) and the sharded pass's shard filters
    (:class:`lshbloom_udf.spark.passes.sharded.filters.ShardFilters`, one filter per
    generation). A subclass says what each sealed generation finds, how to query
    the newest, how much room the newest has, how to test-and-insert into it and
    add a generation, and what a fixed stack does past its capacity
    (:meth:`_past_capacity`: raise, or return to let the newest take the rest).
    """

    def test_insert(self, keys: np.ndarray) -> np.ndarray:
        """Any-earlier decisions: every row is inserted into the newest generation; a row is a duplicate when one
        of its keys was in its filter of any generation before it (earlier rows of ``keys`` count)."""
        sealed = self._query_sealed(keys)
        duplicate = np.zeros(len(keys), dtype=bool) if sealed is None else sealed.copy()
        start = 0
        while start < len(keys):
            room = self._room()
            if room <= 0 and self._grows():
                # The rows left were not yet tested against what earlier rows put into the generation now sealed.
                duplicate[start:] |= self._query_newest(np.ascontiguousarray(keys[start:]))
                self.add_generation()
                continue
            if room <= 0:
                self._past_capacity(len(keys) - start)
                room = len(keys) - start
            part = self._test_insert_newest(np.ascontiguousarray(keys[start : start + room]))
            duplicate[start : start + len(part)] |= part
            start += len(part)
        return duplicate

    def _query_sealed(self, keys: np.ndarray) -> Optional[np.ndarray]:
        """The rows (or keys) found in a sealed generation (``None`` when there is none)."""
        hit = None
        for found in self._sealed_hits(keys):
            hit = found if hit is None else hit | found
        return hit

    def _sealed_hits(self, keys: np.ndarray):
        """Each sealed generation's hits of ``keys``, oldest first."""
        raise NotImplementedError

    def _query_newest(self, keys: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _test_insert_newest(self, keys: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _room(self) -> int:
        raise NotImplementedError

    def _grows(self) -> bool:
        raise NotImplementedError

    def _past_capacity(self, incoming: int) -> None:
        raise NotImplementedError

    def add_generation(self) -> None:
        raise NotImplementedError


class FilterStack(SealAndGrow):
    """Every generation's band filters, open (the newest writable unless ``read_only``)."""

    def __init__(self, directory: str, backend: BloomBackend, params: IndexParams, generations: list[Generation],
                 read_only: bool, label: str):
        self.directory, self.backend, self.params = directory, backend, params
        self.generations = generations
        self.read_only = read_only
        # The keys the newest generation receives are appended here when it is a delta (lshbloom_udf.index.deltas).
        self.key_log = None
        # The generations this stack wrote (their files' checksums change; the others' stay as recorded).
        self.written: set[int] = set() if read_only else {len(generations) - 1}
        # the directory named in messages
        self.label = label
        for g, gen in enumerate(generations):
            self._check_files(g, gen)
        self._sets: list = []
        try:
            for g in range(len(generations)):
                self._sets.append(self._open(g))
        except BaseException:
            self.close()
            raise

    def _open(self, g: int):
        writable = not self.read_only and g == len(self.generations) - 1
        return self.backend.open_bands(self.paths(g), writable)

    def paths(self, g: int) -> list[str]:
        """The band files of the stack's ``g``-th generation (a base generation is numbered among the base's)."""
        ordinal = sum(gen.name is None for gen in self.generations[:g])
        return generation_paths(self.directory, self.backend, self.params.b, ordinal, self.generations[g].name)

    def written_paths(self) -> list[str]:
        return [p for g in sorted(self.written) for p in self.paths(g)]

    def _logged(self, keys: np.ndarray, inserted: Optional[np.ndarray] = None) -> None:
        """Append the rows of ``keys`` the newest generation took (``inserted``: which; None: all) to the key log."""
        if self.key_log is not None:
            self.key_log.append(keys if inserted is None else keys[inserted])

    def all_paths(self) -> list[str]:
        return [p for g in range(len(self.generations)) for p in self.paths(g)]

    def _check_files(self, g: int, gen: Generation) -> None:
        paths = self.paths(g)
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            raise IndexFilesMissingError(
                f"{self.directory}: band files missing: {', '.join(os.path.basename(p) for p in missing)}"
            )
        # Each file must be one of this index's filters, not a stray from another.
        for band_path in paths:
            try:
                with self.backend.open_file(band_path) as bloom:
                    sized = (bloom.capacity, bloom.error_rate)
            except ValueError as e:  # truncated, bad magic, bad header: the native message names the file
                raise IndexCorruptError(str(e)) from None
            if sized[0] != gen.capacity or not math.isclose(sized[1], gen.p_band, rel_tol=1e-12):
                raise IndexMismatchError(
                    f"{band_path}: sized for capacity {sized[0]} at rate {sized[1]:.6g}, but the manifest says "
                    f"capacity {gen.capacity} at rate {gen.p_band:.6g}: not this index's filter"
                )

    # -- state ------------------------------------------------------------------

    @property
    def inserted(self) -> int:
        return sum(gen.inserted for gen in self.generations)

    @property
    def newest(self) -> Generation:
        return self.generations[-1]

    def expected_false_positive(self) -> float:
        """The effective rate expected from the fill: any band of any generation answering for a new document."""
        miss = 1.0
        for gen in self.fill():
            miss *= 1.0 - gen["false_positive"]
        return 1.0 - miss

    def fill(self) -> list[dict]:
        """Each generation's ``capacity``, documents ``inserted`` and effective ``false_positive`` rate now."""
        out = []
        for gen in self.generations:
            band_fp = self.backend.band_false_positive(gen.inserted, gen.capacity, gen.p_band, gen.geometry)
            out.append({"capacity": gen.capacity, "inserted": gen.inserted,
                        "false_positive": effective_p(band_fp, self.params.b)})
        return out

    # -- decisions ----------------------------------------------------------------

    def query(self, keys: np.ndarray) -> np.ndarray:
        """For each row: is any band's key in that band's filter of any generation?"""
        hit = self._sets[-1].query(keys)
        sealed = self._query_sealed(keys)
        return hit if sealed is None else hit | sealed

    def _sealed_hits(self, keys: np.ndarray):
        return (filters.query(keys) for filters in self._sets[:-1])

    def query_insert(self, keys: np.ndarray) -> np.ndarray:
        """Keep-first decisions over every generation; new rows go to the newest (which grows or fills up)."""
        sealed = self._query_sealed(keys)
        if sealed is None or not sealed.any():
            return self._decide_in_newest(keys)
        duplicate = sealed.copy()
        rest = ~sealed
        duplicate[rest] = self._decide_in_newest(np.ascontiguousarray(keys[rest]))
        return duplicate

    def _decide_in_newest(self, keys: np.ndarray) -> np.ndarray:
        # Each row inserts at most once, so `room` rows at a time can never overfill the newest generation.
        duplicate = np.zeros(len(keys), dtype=bool)
        start = 0
        while start < len(keys):
            if self.newest.room <= 0:
                self._full(keys[start:], duplicate[start:])
                break
            chunk = keys[start : start + self.newest.room]
            part = self._sets[-1].query_insert(chunk)
            self._logged(chunk[: len(part)], ~part)
            duplicate[start : start + len(part)] = part
            self.newest.inserted += int(len(part) - np.count_nonzero(part))
            start += len(part)
        return duplicate

    def _full(self, keys: np.ndarray, duplicate: np.ndarray) -> None:
        """The newest generation is full and ``keys`` are left: a fixed index fails unless all are known."""
        found = self._sets[-1].query(keys)
        duplicate[found] = True
        if found.all():
            return
        if self.params.growth == "fixed":
            raise self.full_error(1)
        self.add_generation()
        duplicate[~found] = self._decide_in_newest(np.ascontiguousarray(keys[~found]))

    # -- SealAndGrow's steps: test_insert (any-earlier) over the band files of every generation --------------

    def _room(self) -> int:
        return self.newest.room

    def _grows(self) -> bool:
        return self.params.growth != "fixed"

    def _past_capacity(self, incoming: int) -> None:
        raise self.full_error(incoming)

    def _query_newest(self, keys: np.ndarray) -> np.ndarray:
        return self._sets[-1].query(keys)

    def _test_insert_newest(self, keys: np.ndarray) -> np.ndarray:
        part = self._sets[-1].test_insert(keys)
        self._logged(keys)
        self.newest.inserted += len(part)
        return part

    def insert(self, keys: np.ndarray) -> None:
        """Insert every row (the newest generation grows, or a fixed index refuses before inserting anything)."""
        if self.params.growth == "fixed" and len(keys) > self.newest.room:
            raise self.full_error(len(keys))
        start = 0
        while start < len(keys):
            if self.newest.room <= 0:
                self.add_generation()
            part = keys[start : start + self.newest.room]
            self._sets[-1].insert(part)
            self._logged(part)
            self.newest.inserted += len(part)
            start += len(part)

    def full_error(self, incoming: int) -> IndexFullError:
        return IndexFullError(
            f"{self.label}: inserting {incoming} more documents would exceed the capacity of "
            f"{self.params.capacity:,} the filters were sized for ({self.inserted:,} inserted); past it the "
            "false-positive rate rises above p_effective. Deduplicate into a new --index-dir sized with "
            "--expected-docs for the whole corpus."
        )

    # -- growth ---------------------------------------------------------------------

    def add_generation(self) -> None:
        """Seal the newest generation and add an empty one after it (fires the ``generation-added`` hook point)."""
        g = sum(gen.name is None for gen in self.generations)  # the new base generation's number
        if self.newest.name is not None:
            raise IndexFullError(f"{self.label}: delta {self.newest.name} is full (it is sized for its run's "
                                 "documents): a bug, report it")
        gen = Generation(self.params.generation_capacity(g), self.params.generation_p_band(g))
        create_generation(self.directory, self.backend, self.params.b, g, gen)
        if not self.read_only:
            # The sealed generation is only read from now on.
            self._sets[-1].sync()
        self.generations.append(gen)
        self.written.add(len(self.generations) - 1)
        self._sets.append(self._open(len(self.generations) - 1))
        hooks.fire("generation-added", generation=g, path=self.directory)

    def sync(self) -> None:
        for filters in self._sets:
            filters.sync()

    def close(self) -> None:
        sets, self._sets = self._sets, []
        for filters in sets:
            filters.close()
