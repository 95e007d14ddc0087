"""An output directory on any Hadoop file system, written to ``<output>.lshbloom-tmp`` and renamed into place
with (local) or just before (any other file system) the index's commit: the job's output, and each micro-batch's
of a stream."""

from __future__ import annotations

from typing import Optional

from lshbloom_udf.common import hadoop_jvm
from lshbloom_udf.errors import InternalError, JobError, OutputCommitError
from lshbloom_udf.index.paths import temporary_of


class Output:
    """The job's output: written to ``<output>.lshbloom-tmp`` (``hidden``: ``<dir>/.<name>.lshbloom-tmp``, which
    Spark's readers of ``<dir>`` skip), then renamed into place.

    On the local file system the rename is part of the index's commit (one
    journal, see :class:`~lshbloom_udf.index.IndexTransaction`); on another
    Hadoop file system it is a Hadoop rename just before the index commit.
    """

    def __init__(self, spark, path: str, hidden: bool = False):
        classic = hadoop_jvm(spark)  # None under Spark Connect: no JVM on this side
        if classic is None:
            raise JobError(
                "the dedup job needs a classic Spark session: it commits its output through the driver's Hadoop "
                "file system, which Spark Connect does not expose. Over Spark Connect (Databricks serverless or "
                "standard access mode) call lshbloom_udf.deduplicate(df, ...) and write its result (docs/deployment.md)"
            )
        jvm, conf = classic
        hpath = jvm.org.apache.hadoop.fs.Path(path.rstrip("/") or "/")
        self._fs = hpath.getFileSystem(conf)
        self._hpath = self._fs.makeQualified(hpath)
        self.qualified = self._hpath.toString()
        self.tmp = temporary_of(self.qualified, hidden)
        self._htmp = jvm.org.apache.hadoop.fs.Path(self.tmp)
        # On the local file system: the output's local path and its temporary's (None elsewhere).
        self.local: Optional[str] = None
        self.local_tmp: Optional[str] = None
        if self._fs.getScheme() == "file":
            local: str = self._hpath.toUri().getPath()
            self.local, self.local_tmp = local, temporary_of(local, hidden)

    def exists(self) -> bool:
        return bool(self._fs.exists(self._hpath))

    def prepare_temporary(self, txn) -> None:
        """Remove a temporary output a crashed run left, and register this one with the index's run."""
        if self._fs.exists(self._htmp):
            self._fs.delete(self._htmp, True)
        if txn is not None and self.local_tmp:
            txn.add_output(self.local_tmp)

    def commit_local(self) -> None:
        from lshbloom_udf.index import commit_rename

        if self.local_tmp is None or self.local is None:
            raise InternalError(f"internal error: a local commit of {self.qualified}, not on the local file system")
        commit_rename(self.local_tmp, self.local)

    def commit_hadoop(self) -> None:
        if self._fs.exists(self._hpath):
            self._fs.delete(self._hpath, True)
        if not self._fs.rename(self._htmp, self._hpath):
            raise OutputCommitError(f"cannot rename {self.tmp} to {self.qualified}")
