"""A run's records with a lookup by band key: verification across runs reads what a flag's band keys point at.

A flag no document of its own run verifies must find the earlier kept document that shares a band with it,
from any one of that document's ``b`` band keys (docs/algorithm.md §8b). Scanning every earlier record per run
costs ``O(N)``; this layout answers each key in ``O(log N)`` reads of a few bytes, whatever ``N``.

A run's records directory in a local index (``runs/<run id>.records``, :mod:`lshbloom_udf.index.records`):

    records.arrow   Arrow IPC file of ``row`` (long), ``id`` (string), ``size`` (float), ``text_hash`` (16 bytes),
                    one row per kept document, at positions ``0 .. N-1``
    sketch.u4       ``(N, ⌈k/2⌉)`` uint8: the 4-bit sketches (the low 4 bits of each MinHash value, two a byte,
                    the even value low), in the same positions (memory-mapped, read by row)
    fence.u32       ``(b, ⌈N/F⌉)`` uint32: every ``F``-th of each band's folded keys, sorted
    fragment.u8     ``(b, N)`` uint8: the low 8 bits of each band's folded keys, sorted
    group.u16       ``(b, N)`` uint16: the group (``position // G``) of each sorted key

Band ``i``'s key of a record is its 8-bit sketch bytes ``[i·r, (i+1)·r)`` packed
(:func:`~lshbloom_udf._native.sketch_band_keys`), hashed to 32 bits (:func:`fold`): the lookup is built from the
8-bit sketches the run wrote, which are then kept at 4 bits (the estimates' spread at J 0.4, k 256: 0.033 against
0.031 at 8 bits; docs/algorithm.md §8b). Its entries are sorted by (key, position). A lookup of key ``x``: the
fences bound the blocks of ``F`` entries that may hold ``x``; the fragments pick those entries; each names a group
of ``G = ⌈N / 2^16⌉`` consecutive positions, whose ``G`` sketches are read and compared on the band's ``r`` values
(4 bits each: another record of the group matches by chance ``G · 2^-4r``, and is only a candidate). So a key costs
a binary search of ``N/F`` fences, ``F`` fragments and ``G`` sketch values per entry that matches its fragment (one
in 256 of the others): bounded by the run's size, never by the index's. The lookup takes ``b · (2 + 1 + 4/F)`` bytes
per document: 208 at ``b = 64``, ``F = 16``. A key many records share (a template's band) reads at most
:data:`ENTRIES_PER_KEY` of them, the earliest positions first.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np

RECORDS_FILE = "records.arrow"
SKETCH_FILE = "sketch.u4"
# The 8-bit sketches while the lookup is built from them (removed before the commit; never checksummed).
SKETCH8_FILE = "sketch8.tmp"
# Bits kept of each MinHash value.
SKETCH_BITS = 4
FENCE_FILE = "fence.u32"
FRAGMENT_FILE = "fragment.u8"
GROUP_FILE = "group.u16"
FILES = (RECORDS_FILE, SKETCH_FILE, FENCE_FILE, FRAGMENT_FILE, GROUP_FILE)
# Sorted keys per fence: a lookup reads this many fragments per block (and a fence array a sixteenth of the keys).
FENCE_EVERY = 16
# Fibonacci hashing's multiplier (2^64 / φ, odd): band keys to the lookup's 32-bit keys.
FOLD_MULTIPLIER = 0x9E3779B97F4A7C15
# Groups per band at most: a group is a uint16.
GROUPS_MAX = 1 << 16
# Entries of one key a lookup follows at most, the earliest positions first: a key a template's thousand pages
# share would otherwise read them all for each flag (verification keeps 4 candidates per flag, ranked by shared
# bands: a true source shares many, docs/algorithm.md §8).
ENTRIES_PER_KEY = 64
# The share of this process's available memory that building a run's lookup may take: the folded keys of as many
# bands as fit (KEY_BYTES a record and band), and one band's sort per core (SORT_BYTES_PER_KEY: the (key, position)
# pairs, sorted, and the sorted keys).
BUILD_SHARE = 0.25
KEY_BYTES = 4
SORT_BYTES_PER_KEY = 28
SCHEMA_FIELDS = (("row", "int64"), ("id", "string"), ("size", "float32"), ("text_hash", "binary"))


def group_rows(documents: int) -> int:
    """``G``: consecutive positions per group, so that a run's groups fit a uint16."""
    return max(1, -(-int(documents) // GROUPS_MAX))


def fold(keys: np.ndarray) -> np.ndarray:
    """64-bit band keys hashed to the 32 bits the lookup sorts by: the high half of a multiplicative hash, so that
    neither the fragments nor the keys near one in the sorted order follow the sketch values the groups compare."""
    keys = np.asarray(keys, np.uint64)
    return ((keys * np.uint64(FOLD_MULTIPLIER)) >> np.uint64(32)).astype(np.uint32)


def meta_schema(num_perm: int):
    import pyarrow as pa

    return pa.schema([(name, getattr(pa, kind)()) for name, kind in SCHEMA_FIELDS],
                     metadata={"num_perm": str(int(num_perm))})


class LookupWriter:
    """Writes a run's records in this layout: :meth:`add` batches of the records' columns (``row``, ``id``,
    ``sketch``, ``size``, ``text_hash``) in position order, then :meth:`close` builds the lookup."""

    def __init__(self, directory: str, num_perm: int, available: Optional[int] = None):
        import pyarrow as pa

        os.makedirs(directory, exist_ok=True)
        self.directory, self.num_perm, self.documents = directory, int(num_perm), 0
        # what this process may take (lshbloom_udf.memory.machine_available): the build takes BUILD_SHARE of it
        self.available = available
        self._sink = pa.OSFile(os.path.join(directory, RECORDS_FILE), "wb")
        self._meta = pa.ipc.new_file(self._sink, meta_schema(num_perm))
        self._sketch = open(os.path.join(directory, SKETCH8_FILE), "wb")

    def add(self, batch) -> None:
        """One Arrow batch (or table) of records."""
        import pyarrow as pa

        from lshbloom_udf.index.binary import binary_matrix

        if batch.num_rows == 0:
            return
        self._sketch.write(np.ascontiguousarray(binary_matrix(batch.column("sketch"), self.num_perm)).tobytes())
        columns = [batch.column(name) for name, _ in SCHEMA_FIELDS]
        self._meta.write(pa.Table.from_arrays(columns, schema=meta_schema(self.num_perm)))
        self.documents += batch.num_rows

    def close(self, b: int, r: int) -> int:
        """Finish the files and build the lookup of ``b`` bands of ``r`` sketch bytes; the records written."""
        self._meta.close()
        self._sink.close()
        self._sketch.close()
        n, k = self.documents, self.num_perm
        wide = os.path.join(self.directory, SKETCH8_FILE)
        sketch8 = _raw_map(self.directory, SKETCH8_FILE, np.uint8, (n, k), "r")
        build(self.directory, sketch8, b, r, None if self.available is None else int(BUILD_SHARE * self.available))
        packed = _raw_map(self.directory, SKETCH_FILE, np.uint8, (n, packed_width(k)))
        for start in range(0, n, 1 << 16):
            packed[start:start + (1 << 16)] = pack(np.asarray(sketch8[start:start + (1 << 16)]))
        if isinstance(packed, np.memmap):
            packed.flush()
        del packed, sketch8
        os.remove(wide)
        return self.documents


def packed_width(num_perm: int) -> int:
    return -(-int(num_perm) // 2)


def pack(sketch8: np.ndarray) -> np.ndarray:
    """``(n, k)`` 8-bit sketches as ``(n, ⌈k/2⌉)`` bytes of two 4-bit values (the even value low)."""
    n, k = sketch8.shape
    low = np.zeros((n, packed_width(k) * 2), np.uint8)
    low[:, :k] = sketch8 & 0x0F
    return low[:, 0::2] | (low[:, 1::2] << 4)


def unpack(packed: np.ndarray, num_perm: int) -> np.ndarray:
    """The ``(n, k)`` 4-bit values (0-15) of packed sketches."""
    out = np.empty((len(packed), packed.shape[1] * 2), np.uint8)
    out[:, 0::2] = packed & 0x0F
    out[:, 1::2] = packed >> 4
    return out[:, :num_perm]


def build(directory: str, sketch: np.ndarray, b: int, r: int, budget: Optional[int] = None) -> None:
    """Write the fences, fragments and groups of the ``(n, k)`` 8-bit ``sketch`` matrix in ``directory`` (see the
    module docs), as many bands at a time as ``budget`` bytes hold (None: :data:`BUILD_SHARE` of 1 GiB)."""
    from lshbloom_udf import _native

    n = len(sketch)
    fences = -(-n // FENCE_EVERY)
    out = {name: _raw_map(directory, name, dtype, (b, width)) for name, dtype, width in
           ((FENCE_FILE, np.uint32, fences), (FRAGMENT_FILE, np.uint8, n), (GROUP_FILE, np.uint16, n))}
    room = budget if budget is not None else int(BUILD_SHARE * (1 << 30))
    threads = max(1, min(b, os.cpu_count() or 1))
    per_pass = max(1, min(b, (room - threads * n * SORT_BYTES_PER_KEY) // max(1, n * KEY_BYTES)))
    g = group_rows(n)
    chunk = 1 << 16

    def sort_band(band: int, keys: np.ndarray) -> None:
        # One sort of (key, position) pairs: the order, ties by position, and the sorted keys at once.
        pairs = np.sort((keys.astype(np.uint64) << np.uint64(32)) | np.arange(n, dtype=np.uint64))
        ordered = (pairs >> np.uint64(32)).astype(np.uint32)
        out[FENCE_FILE][band] = ordered[::FENCE_EVERY]
        out[FRAGMENT_FILE][band] = (ordered & 0xFF).astype(np.uint8)
        out[GROUP_FILE][band] = ((pairs & np.uint64(0xFFFFFFFF)) // np.uint64(g)).astype(np.uint16)

    with ThreadPoolExecutor(threads, thread_name_prefix="lshbloom-lookup") as pool:  # numpy sorts without the GIL
        for first in range(0, b, per_pass):
            bands = range(first, min(b, first + per_pass))
            keys = np.empty((len(bands), n), np.uint32)
            for start in range(0, n, chunk):  # one read of the sketches per pass
                part = _native.sketch_band_keys(np.ascontiguousarray(sketch[start:start + chunk]), b, r)
                keys[:, start:start + len(part)] = fold(part[:, bands.start:bands.stop]).T
            list(pool.map(sort_band, bands, keys))
            del keys
    for array in out.values():
        if isinstance(array, np.memmap):
            array.flush()
    out.clear()  # unmapped: the commit syncs the records' directory (IndexTransaction, fsync_tree)


def _raw_map(directory: str, name: str, dtype, shape, mode: Literal["r", "w+"] = "w+"):
    if 0 in shape:  # numpy cannot map an empty file
        if mode == "w+":
            open(os.path.join(directory, name), "wb").close()
        return np.zeros(shape, dtype)
    return np.memmap(os.path.join(directory, name), dtype=dtype, mode=mode, shape=shape)


def _sketch_map(directory: str, documents: int, num_perm: int):
    return _raw_map(directory, SKETCH_FILE, np.uint8, (documents, packed_width(num_perm)), mode="r")


@dataclass
class Matches:
    """What a lookup found: per (flag, record) pair sharing a band, the flag (``owner``), the record's position
    and how many of the flag's bands it shares (``shared``)."""

    owner: np.ndarray
    position: np.ndarray
    shared: np.ndarray


class RunLookup:
    """One committed run's records, opened for lookups (memory-mapped, read only)."""

    def __init__(self, directory: str, documents: int, num_perm: int, b: int, r: int):
        self._init_records(directory, documents, num_perm)
        self.b, self.r = int(b), int(r)
        self.g = group_rows(self.n)
        fences = -(-self.n // FENCE_EVERY)
        self.fence = _raw_map(directory, FENCE_FILE, np.uint32, (self.b, fences), "r")
        self.fragment = _raw_map(directory, FRAGMENT_FILE, np.uint8, (self.b, self.n), "r")
        self.group = _raw_map(directory, GROUP_FILE, np.uint16, (self.b, self.n), "r")

    def _init_records(self, directory: str, documents: int, num_perm: int) -> RunLookup:
        self.directory, self.n, self.k = directory, int(documents), int(num_perm)
        self.sketch = _sketch_map(directory, self.n, self.k)
        return self

    def matches(self, flags: np.ndarray) -> Matches:
        """The records sharing a band with each of the flags' ``(F, k)`` 8-bit sketches (see the module docs):
        native, :func:`~lshbloom_udf._native.lookup_records`."""
        from lshbloom_udf import _native

        if not self.n or not len(flags):
            empty = np.zeros(0, np.int64)
            return Matches(empty, empty, empty)
        flags = np.ascontiguousarray(flags, np.uint8)
        keys = np.ascontiguousarray(fold(_native.sketch_band_keys(flags, self.b, self.r)))
        values = np.ascontiguousarray((flags[:, :self.b * self.r] & 0x0F).reshape(len(flags), self.b, self.r))
        owner, position = _native.lookup_records((self.fence, self.fragment, self.group, self.sketch), keys, values,
                                                 self.g, FENCE_EVERY, ENTRIES_PER_KEY)
        if not len(owner):
            empty = np.zeros(0, np.int64)
            return Matches(empty, empty, empty)
        pair, shared = np.unique((owner.astype(np.int64) << 32) | position.astype(np.int64), return_counts=True)
        return Matches(pair >> 32, pair & 0xFFFFFFFF, shared.astype(np.int64))

    def records(self, positions: np.ndarray):
        """The records at ``positions`` (an Arrow table: ``row``, ``id``, ``sketch``, ``size``, ``text_hash``)."""
        import pyarrow as pa

        from lshbloom_udf.index.binary import fixed_binary

        with pa.memory_map(os.path.join(self.directory, RECORDS_FILE)) as source:
            meta = pa.ipc.open_file(source).read_all().take(pa.array(positions, pa.int64()))
        rows = np.asarray(self.sketch[positions]) if len(positions) else np.zeros((0, packed_width(self.k)), np.uint8)
        return meta.append_column("sketch", fixed_binary(np.ascontiguousarray(unpack(rows, self.k))))


def read_records(directory: str):
    """All the records of a directory of this layout, in position order (an Arrow table: ``row``, ``id``,
    ``size``, ``text_hash``, ``sketch`` its 4-bit values): for tools and tests, not for a run (it reads them all)."""
    import pyarrow as pa

    n = documents_in(directory)
    with pa.memory_map(os.path.join(directory, RECORDS_FILE)) as source:
        num_perm = int(pa.ipc.open_file(source).schema.metadata[b"num_perm"])
    # the lookup's own files are not read: b and r only matter to a lookup
    return RunLookup.__new__(RunLookup)._init_records(directory, n, num_perm).records(np.arange(n))


def documents_in(directory: str) -> int:
    """The records in a directory of this layout (from the Arrow file's batches: no data is read)."""
    import pyarrow as pa

    with pa.memory_map(os.path.join(directory, RECORDS_FILE)) as source:
        reader = pa.ipc.open_file(source)
        return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))


def is_layout(directory: str) -> bool:
    """Whether a records directory holds this layout (else Spark's Parquet parts: the sharded store's)."""
    return os.path.exists(os.path.join(directory, RECORDS_FILE))
