"""A directory on the driver's Hadoop filesystem: what the sharded index
(:mod:`~lshbloom_udf.spark.passes.sharded.store`) reads, publishes and deletes, on any filesystem Spark can write
(local, NFS, HDFS, object stores)."""

from __future__ import annotations

from lshbloom_udf.common import hadoop_jvm
from lshbloom_udf.errors import DedupInputError, IndexLockedError


class HadoopDir:
    """A directory on the driver's Hadoop filesystem (through the JVM of a classic Spark session)."""

    def __init__(self, spark, path: str):
        driver = hadoop_jvm(spark)
        if driver is None:  # Spark Connect: no JVM on this side
            raise DedupInputError(
                "the sharded index commits its manifest through the driver's Hadoop filesystem, which Spark Connect "
                "does not expose: use a classic Spark session, or the sharded pass without index_dir"
            )
        jvm, conf = driver
        self._jvm = jvm
        root = jvm.org.apache.hadoop.fs.Path(path.rstrip("/") or "/")
        self.fs = root.getFileSystem(conf)
        self.root = self.fs.makeQualified(root)
        self.uri = self.root.toString()

    def path(self, name: str):
        return self._jvm.org.apache.hadoop.fs.Path(self.root, name)

    def child(self, name: str) -> str:
        return self.path(name).toString()

    def names(self) -> list[str]:
        if not self.fs.exists(self.root):
            return []
        return [status.getPath().getName() for status in self.fs.listStatus(self.root)]

    def exists(self, name: str) -> bool:
        return bool(self.fs.exists(self.path(name)))

    def read_text(self, name: str) -> str:
        stream = self.fs.open(self.path(name))
        try:
            return self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()

    def publish_text(self, name: str, text: str) -> None:
        """Write ``name`` whole or not at all: a temporary file, then a rename (refused if ``name`` exists: HDFS's
        rename refuses atomically; elsewhere the check before it narrows the race to that moment)."""
        if self.exists(name):
            raise IndexLockedError(f"{self.child(name)}: another run committed this version meanwhile; one run at a "
                                   "time per sharded index. Run again: it starts from the newest version")
        tmp = self.path(f"_tmp-{name}")
        out = self.fs.create(tmp, True)
        try:
            out.write(bytearray(text.encode("utf-8")))
            out.hsync()
        finally:
            out.close()
        if not self.fs.rename(tmp, self.path(name)):
            self.fs.delete(tmp, False)
            raise IndexLockedError(f"{self.child(name)}: cannot commit: another run committed this version first; "
                                   "one run at a time per sharded index. Run again: it starts from the newest version")

    def size(self, name: str) -> int:
        """Bytes of the files under ``name`` (the filesystem's metadata; nothing is read)."""
        return int(self.fs.getContentSummary(self.path(name)).getLength())

    def is_symlink(self, name: str) -> bool:
        """Is ``name`` a symbolic link (on a filesystem that has them)?"""
        import os

        from py4j.protocol import Py4JJavaError

        if self.fs.getScheme() == "file":  # Hadoop hides local symlinks unless enabled: ask the OS
            return os.path.islink(self.path(name).toUri().getPath())
        try:
            return bool(self.fs.getFileLinkStatus(self.path(name)).isSymlink())
        except Py4JJavaError:  # no symlinks on this filesystem (object stores, HDFS with them disabled)
            return False

    def delete(self, name: str) -> None:
        self.fs.delete(self.path(name), True)
