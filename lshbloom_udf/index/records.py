"""A kept index's records: what verification needs to judge a later run's document against an earlier run's.

The Bloom filters forget which document made a key, so a document flagged only by an earlier run's
documents could not be verified. Each committed run therefore keeps, beside the index, one record per
document it kept (not flagged, with shingles):

    row     long    the document's row id in that run
    id      string  its ``id_column`` value as a string (null: the run had no id column)
    sketch  binary  the low 8 bits of each of its ``num_perm`` MinHash values (b-bit MinHash, b = 8)
    size    float   its shingle count ``|S|``, estimated from the full signature (docs/algorithm.md)
    text_hash binary  the 128-bit hash of its text (docs/algorithm.md §9): a later byte-identical copy is
                    verified exact (similarity 1) by it

Two layouts (the run record's ``records.layout``):

- ``lookup``, the local store's (:mod:`lshbloom_udf.index.lookup`): the records in position order with a
  lookup by band key, so that a run reads only the records its flags' band keys name; the sketch kept at 4 bits
  (384 bytes per document at ``num_perm`` 256, ``b`` 64: 128 of sketch, 208 of lookup, 48 of the rest).
- ``parquet``, the sharded store's: a Parquet dataset that Spark writes on any Hadoop path (about 290 bytes
  per document), scanned whole by a Spark job; band ``i``'s candidates are the records whose sketch bytes
  ``[i·r, (i+1)·r)`` equal the flagged document's (:mod:`lshbloom_udf.spark.verify.crossrun`).

Where the records are, committed with the run, and what the run record in the manifest says of them
(``records``: ``path``, ``documents``, ``bytes``, ``checksums`` {``algorithm``, ``files``: part name -> hex}):

- the local store (:class:`~lshbloom_udf.index.IndexTransaction`): written to ``.staging-*/records`` and
  renamed by the commit's journal onto ``runs/<run id>.records`` with the band files and the manifest; its
  files checksummed with xxh3-64 (as the band files). A crash before the journal leaves them in the staging
  copy, which the next writer deletes.
- the sharded store (:class:`~lshbloom_udf.spark.passes.sharded.store.ShardedTransaction`): written to
  ``<version dir>/records`` of the version the run writes, committed by its manifest; part files checksummed
  with Spark's xxhash64 of their bytes. A killed run's version (and its records) is never named and is
  deleted by the next commit of that version.

A reproduced run commits nothing, so it writes no records; a forced new ingest is a new run with its own.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping, Optional

from lshbloom_udf.errors import IndexCorruptError
from lshbloom_udf.index.run_record import RunRecord

# The record's field in a run record of the manifest.
RECORDS = "records"
# What a run's staging copy (local store) calls the records Spark wrote, and their committed name's suffix.
STAGED_RECORDS = "records"
RECORDS_SUFFIX = ".records"
# The part files of a records dataset (Spark's names; its _SUCCESS and .crc files are not data).
PART_FILE = re.compile(r"part-[A-Za-z0-9._=-]+\.parquet")
# The sketch: the low SKETCH_BITS bits of each MinHash value.
SKETCH_BITS = 8
LOCAL_ALGORITHM = "xxh3-64"
# A record's bytes besides its sketch, as Parquet stores it: the row id, the estimated size, an id of up to ~12
# characters and the framing (measured: docs/algorithm.md §8), and the 16-byte text hash (incompressible).
RECORD_FIXED_BYTES = 34
# The same in the lookup layout's Arrow file (uncompressed): row 8, size 4, text hash 16 and its offset 4, an id
# of ~12 characters and its offset 4 (measured: 512 bytes a record with the sketch and the lookup at k 256, b 64).
LOOKUP_FIXED_BYTES = 48
HADOOP_ALGORITHM = "xxhash64"
# How a run's records are laid out (its record's ``records.layout``): the local store's with a lookup by band key
# (:mod:`lshbloom_udf.index.lookup`), or Spark's Parquet parts (the sharded store's, scanned by a Spark job).
LOOKUP_LAYOUT = "lookup"
PARQUET_LAYOUT = "parquet"


def record_bytes(num_perm: int, b: Optional[int] = None) -> int:
    """Bytes one kept document's record takes on disk (``plan``'s figure: the sketch is incompressible): in the
    lookup layout with ``b`` bands (:func:`lookup_bytes`), or as Parquet (``b`` None)."""
    if b is None:
        return num_perm * SKETCH_BITS // 8 + RECORD_FIXED_BYTES
    from lshbloom_udf.index.lookup import packed_width

    return packed_width(num_perm) + LOOKUP_FIXED_BYTES + lookup_bytes(b)


def lookup_bytes(b: int) -> int:
    """Bytes the lookup (:mod:`lshbloom_udf.index.lookup`) takes per document of ``b`` bands: a group (2 bytes)
    and a fragment (1) per band key, and a fence (4) per ``FENCE_EVERY`` keys."""
    from lshbloom_udf.index.lookup import FENCE_EVERY

    return -(-b * (3 * FENCE_EVERY + 4) // FENCE_EVERY)


def local_name(run_id: str) -> str:
    """Where a committed run's records are in a local index directory (relative)."""
    return f"runs/{run_id}{RECORDS_SUFFIX}"


def entry(documents: int, size_bytes: int, algorithm: str, files: Mapping[str, str], num_perm: int,
          layout: str) -> dict:
    """The run record's ``records`` field (its ``path`` is set by the store's commit)."""
    from lshbloom_udf.index import lookup

    bits = lookup.SKETCH_BITS if layout == LOOKUP_LAYOUT else SKETCH_BITS
    return {"documents": int(documents), "bytes": int(size_bytes), "sketch_bits": bits,
            "num_perm": int(num_perm), "layout": layout,
            "checksums": {"algorithm": algorithm, "files": dict(files)}}


def layout_of(recorded: Mapping) -> str:
    """A run record's records layout (:data:`LOOKUP_LAYOUT` or :data:`PARQUET_LAYOUT`)."""
    layout = recorded.get("layout")
    if layout not in (LOOKUP_LAYOUT, PARQUET_LAYOUT):
        raise IndexCorruptError(f"records of layout {layout!r}: this version reads {LOOKUP_LAYOUT!r} and "
                                f"{PARQUET_LAYOUT!r}; rebuild the index from its runs' inputs into a new --index-dir")
    return str(layout)


def of_run(run: RunRecord) -> Optional[dict]:
    """A run record's ``records`` field, or None (a run that kept no document's record)."""
    value = run.records
    return dict(value) if isinstance(value, Mapping) else None


def part_names(names) -> list:
    """The data files among a records directory's file names (Parquet parts, or the lookup layout's), sorted."""
    from lshbloom_udf.index.lookup import FILES

    return sorted(n for n in names if PART_FILE.fullmatch(n) or n in FILES)


@dataclass(frozen=True)
class StagedRecords:
    """The records a run wrote, as the driver finds them where it will commit them: their part files' checksums
    (part name -> hex), bytes and records (counted from the Parquet footers)."""

    checksums: dict
    bytes: int
    documents: int


def local_staged(path: str) -> StagedRecords:
    """The records in the local directory ``path`` (:class:`StagedRecords`)."""
    import pyarrow.parquet as pq

    from lshbloom_udf.index import lookup

    checksums, size = local_checksums(path)
    if lookup.is_layout(path):
        return StagedRecords(checksums, size, lookup.documents_in(path))
    documents = sum(pq.read_metadata(os.path.join(path, name)).num_rows for name in checksums)
    return StagedRecords(checksums, size, documents)


# The checksums this process computed of records files, by the file's identity (device, inode, size, modification
# and change times: a commit's rename of the records' directory keeps it). A run's records are never written again
# once staged, so a later run in the same process (a stream's next batch) does not read them all again to check
# them. Any write changes the change time, which no user call can set back (tests/spark/verify/
# test_spark_crossrun.py damages a file).
_SUMS: dict = {}


def _identity(path: str) -> tuple:
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def local_checksums(path: str) -> tuple[dict, int]:
    """``({part name: xxh3-64 hex}, bytes)`` of the part files in the local directory ``path``."""
    from lshbloom_udf.index.checksums import file_checksums

    names = part_names(os.listdir(path))
    paths = [os.path.join(path, n) for n in names]
    identities = {p: _identity(p) for p in paths}
    known = {p: _SUMS[identities[p]] for p in paths if identities[p] in _SUMS}
    todo = [p for p in paths if p not in known]
    for p, checksum in zip(todo, file_checksums(todo)):
        known[p] = _SUMS[identities[p]] = checksum
    return {n: known[p] for n, p in zip(names, paths)}, sum(os.path.getsize(p) for p in paths)


def check_files(where: str, run: RunRecord, got: Mapping[str, str]) -> None:
    """Refuse (:class:`IndexCorruptError`) records whose part files differ from what the run record says."""
    recorded = of_run(run) or {}
    sums = recorded.get("checksums")
    if not isinstance(sums, dict):
        sums = {}
    want = sums.get("files")
    if not isinstance(want, dict):
        want = None
    if want is None:
        raise IndexCorruptError(f"{where}: run {run.run_id}'s record of its records has no checksums")
    advice = ("the records changed outside lshbloom (disk, copy). Restore the index from a backup, or rebuild it from "
              "its runs' inputs into a new --index-dir (docs/reliability.md)")
    for name in sorted(set(want) | set(got)):
        if name not in got:
            raise IndexCorruptError(
                f"{where}/{name}: missing: run {run.run_id}'s records are incomplete; {advice}")
        if name not in want:
            raise IndexCorruptError(f"{where}/{name}: not a part of run {run.run_id}'s records; {advice}")
        if got[name] != want[name]:
            raise IndexCorruptError(
                f"{where}/{name}: corrupt records file (its {sums.get('algorithm')} checksum is {got[name]}, the "
                f"manifest recorded {want[name]} when run {run.run_id} was committed): {advice}")
