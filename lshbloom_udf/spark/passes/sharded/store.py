"""The sharded index: every shard's Bloom filters as a Parquet dataset on any Hadoop filesystem, versioned.

Layout of ``index_dir`` (local, NFS, HDFS, or an object store through its Hadoop filesystem)::

    v-00000003-<id>/kind=1/part-*.parquet  (band, shard, generation, part, count, data): every shard's filters
                                           after run 3, in parts of 4 MiB
    v-00000003-<id>/kind=0/part-*.parquet  the row ids run 3 flagged (its duplicates, to reproduce it)
    manifest-00000003.json                 the commit of version 3: its directory, parameters, shard plan, runs

Spark's executors write a version; the driver commits it by renaming one
small JSON file into place (``manifest-<N>.json``, written under a temporary
name first). The committed version is the highest manifest; a killed run
leaves at most a ``v-<N+1>-<id>`` directory no manifest names, which the next
run ignores (each run writes its own directory) and deletes once it commits
version N+1, so a rerun equals a clean run. Filters of versions
older than the committed one are deleted after a commit; hit rows are kept.
Only the manifests pass through the driver, never a filter or a key.

One writer at a time: a second commit of the same version fails
(:class:`IndexLockedError`) — atomically on HDFS, whose rename refuses an
existing target; on local, NFS and object-store paths by a check just before
the rename, which leaves a small race: do not run two jobs on one sharded
index at once there.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from lshbloom_udf.common import unique_rows
from lshbloom_udf.errors import IndexCorruptError, IndexMismatchError, InternalError, SparkSessionRequiredError
from lshbloom_udf.index import records as rec
from lshbloom_udf.index.compat import check_expected
from lshbloom_udf.index.params import IndexParams, expected_params
from lshbloom_udf.index.run_record import RunRecord
from lshbloom_udf.spark.passes.sharded.hadoop import HadoopDir
from lshbloom_udf.spark.passes.sharded.manifest import VERSION_DIR as _VERSION_DIR
from lshbloom_udf.spark.passes.sharded.manifest import ShardedManifest

log = logging.getLogger(__name__)

MANIFEST_PREFIX, MANIFEST_SUFFIX = "manifest-", ".json"
DRIVER_MANIFEST = "manifest.json"
# the column of every stored part holding xxhash64 of its data
CHECKSUM_COL = "checksum"
# What a sharded index's directory holds before its first commit: killed runs' versions, a manifest's temporary,
# Hadoop's checksum files.
_NEW_INDEX_NAMES = re.compile(r"v-[0-9]{8}-[0-9a-f]{12}|_tmp-manifest-[0-9]{8}\.json|\..*\.crc")


def version_dir(version: int) -> str:
    return f"v-{version:08d}"


def manifest_name(version: int) -> str:
    return f"{MANIFEST_PREFIX}{version:08d}{MANIFEST_SUFFIX}"


def holds_sharded(path: str) -> bool:
    """Whether the local directory ``path`` holds a sharded index (versioned ``manifest-<N>.json`` files)."""
    import os

    return os.path.isdir(path) and any(
        n.startswith(MANIFEST_PREFIX) and n.endswith(MANIFEST_SUFFIX) and n != DRIVER_MANIFEST
        for n in os.listdir(path))


def refuse_sharded(path: str) -> None:
    """Refuse (:class:`IndexMismatchError`) a local directory that holds a sharded index, for the driver pass."""
    if holds_sharded(path):
        raise IndexMismatchError(
            f"{path}: this index was written by the sharded pass (manifest-<version>.json, filters per shard). Use "
            "pass_mode 'sharded' (--pass sharded) with it, or a new --index-dir for the driver pass"
        )


@dataclass(frozen=True)
class StagedVersion:
    """The version a run wrote: its number and directory, then (staged) its manifest before the run record."""

    version: int
    data: str
    manifest: Optional[ShardedManifest] = None


class ShardedTransaction:
    """One run on a sharded index: what is committed, the version this run writes, and its commit.

    A :class:`~lshbloom_udf.index.kept.KeptIndex`, as
    :class:`~lshbloom_udf.index.IndexTransaction` is: the run and the job use
    either without knowing which. Its versions are immutable, so opening has
    nothing to recover: a killed run's version is never committed, and the
    next commit of that version drops it.
    """

    def __init__(self, path: str, spark=None, verify: bool = False):
        self.path: str = path
        self.recovered: dict = {"rolled_forward": None, "discarded": []}
        self.verify_parts = verify  # check every stored filter part's checksum before the run uses it
        self._spark = spark
        self._dir: Optional[HadoopDir] = None
        self.staged: Optional[StagedVersion] = None
        self._outputs: list = []

    @property
    def dir(self) -> HadoopDir:
        if self._dir is None:
            from pyspark.sql import SparkSession

            spark = self._spark or SparkSession.getActiveSession()
            if spark is None:
                raise SparkSessionRequiredError("the sharded index needs a Spark session")
            self._dir = HadoopDir(spark, self.path)
        return self._dir

    # -- what is committed ------------------------------------------------------

    def committed_version(self) -> Optional[int]:
        names = self.dir.names()
        if DRIVER_MANIFEST in names:
            raise IndexMismatchError(
                f"{self.path}: this index was written by the driver pass (manifest.json); its filters are one file per "
                "band, not shards. Use pass_mode 'driver' (--pass driver) with it, or a new --index-dir for the "
                "sharded pass"
            )
        versions = [int(n[len(MANIFEST_PREFIX):-len(MANIFEST_SUFFIX)]) for n in names
                    if n.startswith(MANIFEST_PREFIX) and n.endswith(MANIFEST_SUFFIX)
                    and n[len(MANIFEST_PREFIX):-len(MANIFEST_SUFFIX)].isdigit()]
        if not versions:
            foreign = [n for n in names if not _NEW_INDEX_NAMES.fullmatch(n)]
            if foreign:
                raise IndexMismatchError(
                    f"{self.path}: not an LSHBloom index directory (it holds {', '.join(sorted(foreign)[:4])} and no "
                    "manifest-<version>.json); give --index-dir a new or empty directory, or an existing index's")
        return max(versions) if versions else None

    def manifest(self) -> Optional[ShardedManifest]:
        version = self.committed_version()
        if version is None:
            return None
        name = manifest_name(version)
        try:
            data = json.loads(self.dir.read_text(name))
        except ValueError as e:
            raise IndexCorruptError(f"{self.dir.child(name)}: corrupt manifest ({e})") from None
        return ShardedManifest.from_json(data, self.dir.child(name), version)

    def runs(self) -> list[RunRecord]:
        manifest = self.manifest()
        return list(manifest.runs) if manifest else []

    def check_compatible(self, params: IndexParams, sizing_given=True, bloom: Optional[str] = None):
        """Refuse an index these parameters cannot use (:class:`IndexMismatchError`); its parameters, or None."""
        from lshbloom_udf.index.shards import SHARD_BLOOMS

        if bloom is not None and bloom not in SHARD_BLOOMS:
            raise IndexMismatchError(f"{self.path}: the sharded pass keeps {' or '.join(SHARD_BLOOMS)} filters; "
                                     f"drop bloom={bloom!r}")
        manifest = self.manifest()
        if manifest is None:
            return None
        if bloom is not None and bloom != manifest.bloom:
            raise IndexMismatchError(f"{self.path}: this sharded index keeps {manifest.bloom} "
                                     f"filters; drop bloom={bloom!r} or use another index_dir")
        have = manifest.params
        check_expected(self.path, have, expected_params(params, sizing_given))
        return have

    def find_run(self, content_fingerprint: str, params: IndexParams) -> Optional[RunRecord]:
        from lshbloom_udf.index.transaction import latest_run

        return latest_run(self.runs(), content_fingerprint, params)

    def load_duplicates(self, run: RunRecord) -> np.ndarray:
        from pyspark.sql import functions as F

        spark = self._spark_session()
        if not self.dir.exists(f"{run.data}/kind=0"):  # the run flagged nothing
            return np.zeros(0, dtype=np.int64)
        parts = spark.read.parquet(self.dir.child(f"{run.data}/kind=0")).select(F.col("data")).collect()
        return unique_rows(r[0] for r in parts)  # (kind 0 parts carry a checksum too)

    def _spark_session(self):
        from pyspark.sql import SparkSession

        return self._spark or SparkSession.getActiveSession()

    def records_location(self, run: RunRecord) -> Optional[str]:
        """The Hadoop path of a committed run's records (None: it has none): ``<its version dir>/records``
        (:mod:`lshbloom_udf.index.records`), the only place the job writes them."""
        recorded = rec.of_run(run)
        if recorded is None:
            return None
        data = run.data
        if not (isinstance(data, str) and _VERSION_DIR.fullmatch(data)) or recorded.get("path") != f"{data}/records":
            raise IndexCorruptError(f"{self.path}: run {run.run_id} names records at {recorded.get('path')!r}, "
                                    "not where the job writes them (docs/reliability.md, 'threat model')")
        return self.dir.child(recorded["path"])

    def verify_records(self, run: RunRecord) -> Optional[str]:
        """Check a committed run's records against their checksums; their path, or None when it has none."""
        return self.verify_records_many([run]).get(str(run.run_id))

    def verify_records_many(self, runs) -> dict:
        """``{run id: records path}`` of the runs with records, every part file checked against its checksum in one
        Spark job (``binaryFile``): :class:`IndexCorruptError` names a damaged, missing or foreign one."""
        from lshbloom_udf.spark.records import hadoop_checksums

        found = {str(run.run_id): (run, where) for run in runs
                 if (where := self.records_location(run)) is not None}
        for run, where in found.values():
            recorded = rec.of_run(run)
            if recorded is None:  # records_location found them
                raise InternalError(f"internal error: run {run.run_id} has a records location but no records")
            if not self.dir.exists(recorded["path"]):
                raise IndexCorruptError(f"{where}: run {run.run_id}'s records are missing; restore the index "
                                        "from a backup, or rebuild it from its runs' inputs into a new --index-dir")
        sums = hadoop_checksums(self._spark_session(), [where for _, where in found.values()]) if found else {}
        for run, where in found.values():
            rec.check_files(where, run, sums[where][0])
        return {k: where for k, (_, where) in found.items()}

    # -- this run -----------------------------------------------------------------

    records_algorithm = "xxhash64"
    records_layout = rec.PARQUET_LAYOUT

    def records_target(self) -> str:
        """Where this run's records are written: ``records`` in the version directory this run wrote."""
        return self.dir.child(f"{self._written('records').data}/records")

    def _written(self, what: str) -> StagedVersion:
        """The version this run wrote (:meth:`write_version`), which ``what`` needs."""
        if self.staged is None:
            raise InternalError(f"internal error: {what} before the sharded pass wrote its version")
        return self.staged

    def staged_records(self) -> rec.StagedRecords:
        """The records this run wrote (checksums: xxhash64 hex), read through the Hadoop filesystem the commit
        uses."""
        from lshbloom_udf.spark.records import hadoop_checksums

        target, spark = self.records_target(), self._spark_session()
        checksums, size = hadoop_checksums(spark, [target])[target]
        documents = spark.read.parquet(target).count()  # Parquet footers: nothing is scanned
        return rec.StagedRecords(checksums, size, documents)

    def index_params(self, params: IndexParams, sizing_given) -> tuple[IndexParams, Optional[ShardedManifest]]:
        """(the parameters this run uses: the index's own sizing unless given, the committed manifest or None)."""
        manifest = self.manifest()
        if manifest is None:
            return params, None
        have = self.check_compatible(params, sizing_given)
        return have, manifest

    def stored_filters(self, manifest: Optional[ShardedManifest]):
        """The committed version's filters as a DataFrame (shard, generation, [part,] count, data), or None."""
        if manifest is None:
            return None
        spark = self._spark_session()
        stored = spark.read.parquet(self.dir.child(f"{manifest.data}/kind=1"))
        if self.verify_parts:
            self.verify(manifest, stored)
        return stored.drop(CHECKSUM_COL)

    def verify(self, manifest: Optional[ShardedManifest] = None, stored=None) -> dict:
        """The full check of the committed version: every filter part's bytes against the checksum recorded when it
        was written (one Spark job over the parts). :class:`IndexCorruptError` names the first damaged part."""
        from pyspark.sql import functions as F

        manifest = manifest or self.manifest()
        if manifest is None:
            return {"filter_parts": 0}
        where = self.dir.child(f"{manifest.data}/kind=1")
        stored = stored if stored is not None else self._spark_session().read.parquet(where)
        row = stored.agg(
            F.count(F.lit(1)).alias("parts"),
            F.min(F.when(F.xxhash64("data") != F.col(CHECKSUM_COL),
                         F.struct("band", "shard", "generation", "part"))).alias("bad")).collect()[0]
        if row["bad"] is not None:
            b = row["bad"]
            raise IndexCorruptError(
                f"{where}: corrupt filter part (band {b['band']}, shard {b['shard']}, generation {b['generation']}, "
                f"part {b['part']}): its bytes no longer match the checksum recorded when it was committed. "
                "Restore the index from a backup, or rebuild it from its runs' inputs into a new --index-dir "
                "(docs/reliability.md)")
        records = len(self.verify_records_many(manifest.runs))
        return {"filter_parts": int(row["parts"]), "records": records}

    def write_version(self, decided, manifest: Optional[ShardedManifest]) -> tuple[str, np.ndarray, dict]:
        """Write ``decided`` (the sharded pass's output) as the next version; (its directory, hit rows, fill)."""
        from pyspark.sql import functions as F

        version = (manifest.version if manifest else 0) + 1
        # This run's own directory: a killed or concurrent run writing the same version never shares it.
        data = f"{version_dir(version)}-{uuid.uuid4().hex[:12]}"
        self.staged = StagedVersion(version, data)
        # Each part with the checksum of its bytes (Spark's native xxhash64), verified by verify_index.
        decided.withColumn(CHECKSUM_COL, F.xxhash64("data")).write.partitionBy("kind").parquet(self.dir.child(data))
        spark = self._spark_session()
        hits = spark.read.parquet(self.dir.child(f"{data}/kind=0")) if self.dir.exists(f"{data}/kind=0") else None
        rows = unique_rows(r[0] for r in hits.select("data").collect()) if hits is not None else unique_rows([])
        # Parquet reads only the small columns here; the filters' bytes are the files' sizes (metadata).
        fill = spark.read.parquet(self.dir.child(f"{data}/kind=1")).where(F.col("part") == 0).agg(
            F.sum("count").alias("keys"), F.count(F.lit(1)).alias("files"),
            F.max("generation").alias("generation")).collect()[0]
        return data, rows, {"keys": int(fill["keys"] or 0), "bytes": self.dir.size(f"{data}/kind=1"),
                              "files": int(fill["files"]), "generations": int(fill["generation"] or 0) + 1}

    def stage_manifest(self, params: IndexParams, plan: dict, inserted: int, fill: dict,
                       previous: Optional[ShardedManifest]) -> None:
        """The manifest of the version this run wrote, before its run record (:meth:`commit` adds it)."""
        staged = self._written("the manifest")
        self.staged = replace(staged, manifest=ShardedManifest(
            staged.version, staged.data, str(plan["bloom"]), params, plan, inserted, fill,
            previous.runs if previous else ()))

    def add_output(self, tmp_path: str) -> None:
        self._outputs.append(tmp_path)

    def commit(self, run: Optional[RunRecord] = None, duplicates=None, outputs=(),
               paragraph_pairs=None) -> Optional[RunRecord]:
        """Publish the staged version's manifest (the commit), then rename the outputs, then drop old filters."""
        from lshbloom_udf import hooks
        from lshbloom_udf.index import commit_rename

        if paragraph_pairs is not None:  # the config refuses paragraphs with the sharded pass
            raise InternalError("internal error: the sharded store keeps no paragraph filter")

        record = None
        if self.staged is not None and self.staged.manifest is not None:
            manifest = self.staged.manifest
            if run is not None:
                recorded = rec.of_run(run)
                record = run.replace(run_id=manifest.next_run_id(), data=manifest.data,
                                     inserted_total=manifest.inserted,
                                     records={**recorded, "path": f"{manifest.data}/records"} if recorded else None)
                manifest = manifest.replace(runs=(*manifest.runs, record))
            manifest = manifest.replace(committed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            hooks.fire("before-commit")
            self.dir.publish_text(manifest_name(manifest.version), json.dumps(manifest.to_json(), indent=1) + "\n")
            self.staged = None
            # Committed: a crash from here on leaves the new version; its rerun reproduces the run's flags.
            hooks.fire("mid-commit")
            self._drop_old_filters(manifest.version, manifest.data)
        for tmp, final in outputs:
            commit_rename(tmp, final)
        self._outputs = []
        return record

    def _drop_old_filters(self, version: int, data: str) -> None:
        """After committing ``version`` (in ``data``): drop older versions' filters (their flagged rows stay) and
        what killed runs left for this version."""
        for name in self.dir.names():
            number = name[2:].split("-")[0]
            # Only this index's own version directories, never through a symlink planted in their place.
            if not _VERSION_DIR.fullmatch(name) or name == data or self.dir.is_symlink(name):
                continue
            if int(number) == version:
                self.dir.delete(name)
            elif int(number) < version and self.dir.exists(f"{name}/kind=1"):
                self.dir.delete(f"{name}/kind=1")

    def abort(self) -> None:
        """Drop the version this run wrote (never committed) and its temporary outputs."""
        import shutil

        if self.staged is not None:
            try:
                self.dir.delete(self.staged.data)
            finally:
                self.staged = None
        for tmp in self._outputs:
            shutil.rmtree(tmp, ignore_errors=True)
        self._outputs = []

    def close(self) -> None:
        self.abort()

