"""IndexTransaction: one run's hold on an index directory, from its start to its all-or-nothing commit."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from typing import Optional, Sequence

import numpy as np

from lshbloom_udf import hooks
from lshbloom_udf.errors import IndexCorruptError, IndexDirectoryError, IndexStorageError, TransactionStateError
from lshbloom_udf.index import deltas, journal, paragraph_filter
from lshbloom_udf.index import manifest as mf
from lshbloom_udf.index import records as rec
from lshbloom_udf.index.backends import DEFAULT_BLOOM, backend
from lshbloom_udf.index.compat import check_compatible
from lshbloom_udf.index.delta_staging import live_files, stage_delta
from lshbloom_udf.index.fs import check_free_space, fsync_path, fsync_tree, rmtree
from lshbloom_udf.index.lock import IndexLock, LockHolder
from lshbloom_udf.index.params import IndexParams, SizingGiven, expected_params, run_params
from lshbloom_udf.index.paths import OUTPUT_TMP_SUFFIX, inside, is_temporary_of
from lshbloom_udf.index.run_record import RunRecord
from lshbloom_udf.index.store import LSHBloomIndex
from lshbloom_udf.index.workspace import working_place


class IndexTransaction(LockHolder):
    """One run's hold on an index directory, from its start to its all-or-nothing commit.

    Opening takes the directory's exclusive OS lock (``.lock``, ``flock``; a
    second run fails at once with :class:`IndexLockedError`) and keeps it
    until :meth:`close`. It first runs :func:`recover`. The run then works on
    a *staging copy* (:meth:`stage`: ``<index>/.staging-*/``, a copy of every
    band file and the manifest, on the same file system): the live index is
    never written. :meth:`commit` makes the staged index, the duplicates'
    row ids, the run record in the manifest's ``runs`` list and the run's
    outputs (temporary path → final path) live together: it writes a journal
    listing the renames, then performs them (band files, then the manifest
    last), then deletes the journal. A crash before the journal leaves the old
    index and no output; a crash after it is finished by the next writer.
    """

    _kind = "index transaction"

    def __init__(self, path: str):
        path = os.fspath(path)
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            raise type(e)(e.errno, f"{path}: cannot create the index directory ({e.strerror})") from None
        if not os.path.isdir(path):
            raise NotADirectoryError(f"{path}: index path is not a directory")
        self.path = path
        with IndexLock(path) as lock:
            self.recovered = journal.recover(path)
            mf.check_directory(path)
            self.recovered["deltas_removed"] = _sweep_deltas(path)
            self._lock = lock.keep()
        self.staging: Optional[str] = None
        self.work: Optional[str] = None  # where the staged index's files are written: the staging copy, or memory
        self.index: Optional[LSHBloomIndex] = None
        self.paragraphs: Optional[paragraph_filter.StagedParagraphs] = None
        self.delta: Optional[str] = None  # the name of the delta this run writes (lshbloom_udf.index.deltas)
        self._outputs: list[str] = []
        self.closed = False

    # -- what is committed ---------------------------------------------------

    def manifest(self) -> Optional[mf.Manifest]:
        return mf.read_manifest(self.path) if LSHBloomIndex.exists(self.path) else None

    def runs(self) -> list[RunRecord]:
        manifest = self.manifest()
        return list(manifest.runs) if manifest is not None else []

    def check_compatible(
        self, params: IndexParams, sizing_given: SizingGiven = True, bloom: Optional[str] = None
    ) -> Optional[IndexParams]:
        """Refuse (:class:`IndexMismatchError`) an index in this directory that ``params`` and ``bloom`` cannot use.

        Cheap (the manifest only): call it before any work. ``sizing_given``:
        which sizing fields of ``params`` the caller gave (``True``: all,
        ``False``: none, or their names); the others are the index's own.
        Returns the index's parameters, or ``None`` if the directory holds no index.
        """
        manifest = self.manifest()
        if manifest is None:
            return None
        return check_compatible(self.path, manifest.bloom, manifest.params, expected_params(params, sizing_given),
                                bloom)

    def find_run(self, content_fingerprint: str, params: IndexParams) -> Optional[RunRecord]:
        """The latest committed run that ingested documents with this content fingerprint and these parameters."""
        return latest_run(self.runs(), content_fingerprint, params)

    def verify(self) -> dict:
        """The full check (``verify_index``): every band file against its checksum, every run's duplicates against
        its SHA-256. :class:`IndexCorruptError` names the first damaged file; returns what was checked."""
        manifest = self.manifest()
        if manifest is None:
            return {"band_files": 0, "runs": 0}
        live = LSHBloomIndex(self.path, manifest, read_only=True)  # verifies the band files' checksums
        bands = len(live.band_paths())
        live.close()
        for delta in manifest.deltas:
            deltas.read_keys(self.path, delta, manifest.params.b)
        kept = 0
        runs = self.runs()
        for run in runs:
            self.load_duplicates(run)
            if run.paragraphs is not None:
                paragraph_filter.load_pairs(self.path, run.paragraphs, run.run_id)
            kept += self.verify_records(run) is not None
        return {"band_files": bands, "runs": len(runs), "records": kept,
                "paragraph_band_files": paragraph_filter.verify(self.path)}

    def load_duplicates(self, run: RunRecord) -> np.ndarray:
        """The row ids a committed run flagged (checked against the SHA-256 its record holds)."""
        path = inside(self.path, run.duplicates_file, os.path.join(self.path, mf.MANIFEST_NAME))
        with open(path, "rb") as f:
            data = f.read()
        if len(data) % 8 or hashlib.sha256(data).hexdigest() != run.duplicates_sha256:
            raise IndexCorruptError(
                f"{path}: corrupt (size or SHA-256 differs from the manifest's run {run.run_id})")
        return np.frombuffer(data, dtype="<i8").astype(np.int64)

    def records_location(self, run: RunRecord) -> Optional[str]:
        """The local directory of a committed run's records (None: it has none), checked to be the name the job
        gives them (:func:`~lshbloom_udf.index.records.local_name`)."""
        recorded = rec.of_run(run)
        if recorded is None:
            return None
        manifest_path = os.path.join(self.path, mf.MANIFEST_NAME)
        if recorded["path"] != rec.local_name(str(run.run_id)):
            raise IndexCorruptError(f"{manifest_path}: run {run.run_id} names records at "
                                    f"{recorded['path']!r}, not where the job writes them")
        return inside(self.path, recorded["path"], manifest_path)

    def verify_records(self, run: RunRecord) -> Optional[str]:
        """Check a committed run's records against their checksums (:class:`IndexCorruptError` names a damaged,
        missing or foreign part file); their directory, or None when the run has none."""
        where = self.records_location(run)
        if where is None:
            return None
        if not os.path.isdir(where):
            raise IndexCorruptError(f"{where}: run {run.run_id}'s records are missing; restore the index from "
                                    "a backup, or rebuild it from its runs' inputs into a new --index-dir")
        rec.check_files(where, run, rec.local_checksums(where)[0])
        return where

    def verify_records_many(self, runs) -> dict:
        """``{run id: records directory}`` of the runs with records, each checked (:meth:`verify_records`)."""
        checked = {str(run.run_id): self.verify_records(run) for run in runs}
        return {k: v for k, v in checked.items() if v is not None}

    # -- the run's work -------------------------------------------------------

    def records_target(self) -> str:
        """Where this run's records are written before the commit (a directory in its staging copy)."""
        return os.path.join(self._ensure_staging(), rec.STAGED_RECORDS)

    def staged_records(self) -> rec.StagedRecords:
        """The records this run wrote (:meth:`records_target`), read where the commit will take them."""
        return rec.local_staged(self.records_target())

    records_algorithm = rec.LOCAL_ALGORITHM
    records_layout = rec.LOOKUP_LAYOUT

    def _ensure_staging(self) -> str:
        self._check_open()
        if self.staging is None:
            self.staging = tempfile.mkdtemp(prefix=journal.STAGING_PREFIX, dir=self.path)
            journal.write_pending(self.staging, self._outputs)
        return self.staging

    def add_output(self, tmp_path: str) -> None:
        """Register a temporary output, so that a crash before the commit has it removed by the next run."""
        staging = self._ensure_staging()
        self._outputs.append(_temporary_output(tmp_path))
        journal.write_pending(staging, self._outputs)

    def stage(self, params: IndexParams, sizing_given: SizingGiven = True, bloom: str = DEFAULT_BLOOM,
              documents: Optional[int] = None) -> LSHBloomIndex:
        """The writable staged index (a new empty one with ``bloom`` filters if the directory holds none), in memory
        while the run writes it when it fits there (:func:`working_place`).

        A run of ``documents`` small beside the index writes a delta and reads the live filters in place; any other
        copies them and first folds the pending deltas into its copy (:mod:`~lshbloom_udf.index.deltas`)."""
        bloom_backend = backend(bloom)
        staging = self._ensure_staging()
        if self.index is not None:
            raise TransactionStateError("the index is already staged")
        if not LSHBloomIndex.exists(self.path):
            self.work = working_place(staging, bloom_backend.index_bytes(params.capacity, params.p_band, params.b))
            self.index = LSHBloomIndex.create(self.work, params, bloom=bloom, lock=False)
        else:
            self.check_compatible(params, sizing_given, bloom)
            manifest = mf.read_manifest(self.path)
            plan = deltas.plan(manifest, documents, os.listdir(self.path))
            expected = expected_params(params, sizing_given)
            self._verify_live(manifest)  # a bad file is named before the run reads or copies it
            if plan.name is not None:
                size = bloom_backend.index_bytes(documents or 1, manifest.generations[-1].p_band, params.b)
                self.work = working_place(staging, size)
                self.index = stage_delta(self.path, self.work, manifest, plan, documents or 0, expected)
                self.delta = plan.name
            else:
                self.work = self._copy_live_index(staging, manifest)
                self.index = LSHBloomIndex.open(self.work, expected=expected, lock=False, verify=False)
                for delta in manifest.deltas:  # the fold: every pending delta's keys into the copy of the base
                    self.index.insert(deltas.read_keys(self.path, delta, params.b))
        self.index.label = self.path
        return self.index

    def stage_paragraphs(self, params: IndexParams) -> LSHBloomIndex:
        """The writable staging copy of the index's paragraph filter (a new one, sized by ``params``, if it holds
        none): committed with the run record, which then needs the removed pairs (:meth:`commit`)."""
        staging = self._ensure_staging()
        if self.paragraphs is not None:
            raise TransactionStateError("the paragraph filter is already staged")
        self.paragraphs = paragraph_filter.StagedParagraphs(self.path, staging, params)
        return self.paragraphs.index

    def load_paragraphs(self, run: RunRecord) -> np.ndarray:
        """The ``(row, paragraph)`` pairs a committed run removed (checked against the SHA-256 its record holds)."""
        if run.paragraphs is None:
            raise TransactionStateError(f"run {run.run_id} decided no paragraphs")
        return paragraph_filter.load_pairs(self.path, run.paragraphs, run.run_id)

    def _verify_live(self, manifest: mf.Manifest) -> None:
        """Check every live band file against its checksum (:class:`IndexCorruptError` names a bad one)."""
        LSHBloomIndex(self.path, manifest, read_only=True).close()

    def _copy_live_index(self, staging: str, manifest: mf.Manifest) -> str:
        """Copy the live index's base generations (its manifest without deltas) where the run will write it
        (:func:`working_place`); that directory."""
        names = live_files(manifest, ())
        need = sum(os.path.getsize(os.path.join(self.path, n)) for n in names)
        # The copy is made once more at the commit: the index's file system needs room for two either way.
        check_free_space(
            staging, need, "the staging copy of the index",
            "a run works on a copy, so the index's file system needs room for two"
        )
        work = working_place(staging, need)
        try:
            for name in names:
                shutil.copyfile(os.path.join(self.path, name), os.path.join(work, name))
            mf.write_manifest(work, manifest.replace(deltas=()))
        except OSError as e:
            if work != staging:
                rmtree(work)
            raise IndexStorageError(e.errno, f"cannot make the staging copy of the index in {work}: "
                                             f"{e.strerror}", self.path) from e
        return work

    def _drop_work(self) -> None:
        """Remove the in-memory working copy (the staging copy itself is removed by the caller)."""
        if self.work is not None and self.work != self.staging:
            rmtree(self.work)
        self.work = None

    def commit(
        self,
        run: Optional[RunRecord] = None,
        duplicates: Optional[np.ndarray] = None,
        outputs: Sequence[tuple[str, str]] = (),
        paragraph_pairs: Optional[np.ndarray] = None,
    ) -> Optional[RunRecord]:
        """Make the staged index, the run record and the outputs live together (see the class docs).

        ``run``: the record appended to the manifest's ``runs`` (needs a staged
        index); it gets ``run_id``, ``duplicates_file`` and its SHA-256.
        ``paragraph_pairs``: the paragraphs the run removed, with a staged paragraph filter (:meth:`stage_paragraphs`).
        ``outputs``: ``(temporary, final)`` local paths, renamed in the same
        commit (an existing directory at ``final`` is replaced).
        """
        self._check_open()
        if self.index is None and run is not None:
            raise TransactionStateError("a run record needs a staged index")
        if (self.paragraphs is not None) != (paragraph_pairs is not None) or (
                self.paragraphs is not None and (run is None or run.paragraphs is None)):
            raise TransactionStateError("a staged paragraph filter is committed with a run record of its paragraphs "
                                        "and the pairs it removed")
        ops: list = []
        for tmp, final in outputs:
            tmp, final = _temporary_output(tmp, final), os.path.abspath(final)
            fsync_tree(tmp)
            ops.append([tmp, final])
        record = None
        if self.index is not None:
            record, index_ops = self._seal_staged_index(run, duplicates, paragraph_pairs)
            ops += index_ops
        if ops:
            hooks.fire("before-commit")
            journal.commit(self.path, {"run_id": record.run_id if record else None, "ops": ops})
            _sweep_deltas(self.path)  # the deltas this commit merged or folded
        self.delta = None
        self._outputs = []
        if self.staging is not None:
            rmtree(self.staging)
            self.staging = None
        return record

    def _seal_staged_index(self, run: Optional[RunRecord], duplicates: Optional[np.ndarray],
                           paragraph_pairs: Optional[np.ndarray] = None) -> tuple[Optional[RunRecord], list]:
        """Close the staged index, add the run's record and duplicates to it; the renames that make it live."""
        index, staging = self.index, self.staging
        if index is None or staging is None:  # commit calls this with a staged index (stage made its staging)
            raise TransactionStateError("no staged index to seal")
        rel = os.path.basename(staging)
        index.sync()
        manifest = index.manifest
        work = self.work if self.work is not None else staging
        # What the run wrote (a delta run's links to the live files are not moved).
        band_names = [name for name in (os.path.basename(p) for p in index.band_paths())
                      if not os.path.islink(os.path.join(work, name))]
        if self.delta is not None:
            band_names.append(deltas.keys_file_name(self.delta))
        index.close()
        self.index = None
        if self.work is not None and self.work != staging:  # the working copy onto the index's file system
            for name in band_names + [mf.MANIFEST_NAME]:
                shutil.copyfile(os.path.join(self.work, name), os.path.join(staging, name))
            self._drop_work()
        ops: list = []
        if self.paragraphs is not None:  # the filter's directory, renamed before the manifest names its run
            staged, self.paragraphs = self.paragraphs, None
            ops += staged.seal()
        record = None
        if run is not None:
            if paragraph_pairs is not None:
                op, live, sha256 = paragraph_filter.write_pairs(staging, manifest.next_run_id(), paragraph_pairs)
                ops.append(op)
                run = run.replace(paragraphs={**(run.paragraphs or {}), "file": live, "sha256": sha256})
            record = self._record_run(staging, manifest, run, duplicates)
            os.makedirs(os.path.join(self.path, journal.RUNS_DIR), exist_ok=True)
            dups = str(record.duplicates_file)
            ops.append([f"{rel}/{os.path.basename(dups)}", dups])
            recorded = rec.of_run(record)
            if recorded is not None:  # the run's records, renamed with it (their checksums are recorded)
                name = os.path.basename(recorded["path"])
                os.rename(os.path.join(staging, rec.STAGED_RECORDS), os.path.join(staging, name))
                fsync_tree(os.path.join(staging, name))
                ops.append([f"{rel}/{name}", recorded["path"]])
        for name in band_names:
            fsync_path(os.path.join(staging, name))
            ops.append([f"{rel}/{name}", name])
        ops.append([f"{rel}/{mf.MANIFEST_NAME}", mf.MANIFEST_NAME])
        return record, ops

    @staticmethod
    def _record_run(staging: str, manifest: mf.Manifest, run: RunRecord,
                    duplicates: Optional[np.ndarray]) -> RunRecord:
        """Write the run's duplicates file and its record into the staged manifest; the record."""
        run_id = manifest.next_run_id()
        data = np.ascontiguousarray(duplicates if duplicates is not None else [], dtype="<i8").tobytes()
        dups_name = f"{run_id}.dups.i64"
        with open(os.path.join(staging, dups_name), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        recorded = rec.of_run(run)
        record = run.replace(
            run_id=run_id, duplicates_file=f"{journal.RUNS_DIR}/{dups_name}",
            duplicates_sha256=hashlib.sha256(data).hexdigest(), inserted_total=manifest.inserted,
            records={**recorded, "path": rec.local_name(run_id)} if recorded is not None else None)
        mf.write_manifest(staging, manifest.replace(runs=(*manifest.runs, record)))
        return record

    def abort(self) -> None:
        """Drop the staging copy and the registered temporary outputs; the live index is untouched."""
        if self.index is not None:
            index, self.index = self.index, None
            index.discard()
        if self.paragraphs is not None:
            staged, self.paragraphs = self.paragraphs, None
            staged.discard()
        for tmp in self._outputs:
            if os.path.lexists(tmp):
                rmtree(tmp)
        self._outputs = []
        self.delta = None
        self._drop_work()
        if self.staging is not None:
            rmtree(self.staging)
            self.staging = None

    def close(self) -> None:
        """Abort what was not committed and release the lock."""
        if self.closed:
            return
        try:
            self.abort()
        finally:
            self._release_lock()


def _sweep_deltas(path: str) -> list[str]:
    """Delete the delta files the live manifest no longer names (:func:`~lshbloom_udf.index.deltas.sweep`)."""
    try:
        manifest = mf.read_manifest(path) if LSHBloomIndex.exists(path) else None
    except IndexDirectoryError:  # named where the run reads the manifest; nothing is deleted on its word
        return []
    return deltas.sweep(path, manifest.delta_files()) if manifest is not None else []


def _temporary_output(tmp: str, final: Optional[str] = None) -> str:
    """The absolute path of a temporary output, which must be named ``<final>.lshbloom-tmp``: the only paths
    outside the index directory that its recovery deletes or renames (:mod:`~lshbloom_udf.index.paths`)."""
    tmp = os.path.abspath(tmp)
    if not tmp.endswith(OUTPUT_TMP_SUFFIX) or (final is not None and not is_temporary_of(tmp, os.path.abspath(final))):
        raise ValueError(f"a temporary output must be named <final path>{OUTPUT_TMP_SUFFIX} (or hidden, "
                         f"<dir>/.<name>{OUTPUT_TMP_SUFFIX}), not {tmp}")
    return tmp


def latest_run(runs: Sequence[RunRecord], content_fingerprint: str, params: IndexParams) -> Optional[RunRecord]:
    """The last of ``runs`` that ingested documents with this content fingerprint and these parameters."""
    want = run_params(params)
    return next((run for run in reversed(runs)
                 if run.content_fingerprint == content_fingerprint and dict(run.params) == want), None)
