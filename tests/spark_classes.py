"""The tests' JVM class archive: ``python tests/spark_classes.py`` (``make test`` runs it beside the builds).

Every Spark JVM of the suite (the sessions', each spark-submit's, the cluster's
daemons) loads and verifies the same ~10,000 classes of Spark's jars before its
job starts: about 3 of the 7 CPU seconds an empty spark-submit costs here. A
dynamic class-data-sharing archive (JDK 13+: ``-XX:ArchiveClassesAtExit``,
then ``-XX:SharedArchiveFile``) maps them ready-made instead.
``tests/spark_support.py`` adds the archive to ``JVM_OPTIONS`` when it exists.

The archive is written by one small job run through spark-submit (its JVM must
exit itself for the archive to be written) with the classpath every test JVM of
this venv has. It is only a cache: a JVM whose classpath, jars or version differ
from the archive's maps nothing from it and runs as without it (the options
below keep that silent), and a missing archive is the same.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ARCHIVE = os.path.join(os.path.dirname(HERE), "build", "spark-classes.jsa")
# A JVM that cannot use the archive says so on stdout unless told not to: the tests read some JVMs' output.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_options() -> str:
    """The JVM options that map the archive, or "" without one."""
    return f"-XX:SharedArchiveFile={ARCHIVE} {QUIET}" if os.path.exists(ARCHIVE) else ""


def _key() -> str:
    """What the archive is valid for: the JVM, Spark's jars and this file."""
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    with open(__file__, "rb") as f:
        own = hashlib.sha256(f.read()).hexdigest()[:16]
    return f"{java.strip()}\n{pyspark.__version__} {jars} {sorted(os.listdir(jars))[:3]} {own}\n"


def _job() -> None:
    """What the suite's JVMs do most: read JSON, key through Arrow, checkpoint, aggregate, join, write Parquet."""
    import tempfile

    from pyspark.sql import SparkSession, functions as F

    spark = SparkSession.builder.getOrCreate()
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "in.jsonl")
        with open(src, "w") as f:
            f.writelines(f'{{"id": "{i}", "text": "word {i % 7} text"}}\n' for i in range(200))
        df = spark.read.json(src).withColumn("row", F.monotonically_increasing_id()).localCheckpoint()
        keyed = df.select("row", "text").mapInArrow(lambda batches: batches, "row long, text string")
        counts = keyed.groupBy("text").agg(F.count("*").alias("n"), F.min("row").alias("first"))
        out = df.join(F.broadcast(counts), "text", "left").join(counts.select("text"), "text", "left_semi")
        out.write.parquet(os.path.join(tmp, "out"))
        spark.read.parquet(os.path.join(tmp, "out")).count()
    spark.stop()


def build() -> None:
    from spark_support import JVM_OPTIONS_WITHOUT_ARCHIVE

    key_file = ARCHIVE + ".key"
    key = _key()
    if os.path.exists(ARCHIVE) and os.path.exists(key_file) and open(key_file).read() == key:
        return
    os.makedirs(os.path.dirname(ARCHIVE), exist_ok=True)
    for stale in (ARCHIVE, key_file):
        if os.path.exists(stale):
            os.remove(stale)
    partial = ARCHIVE + ".partial"
    submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    env.pop("JDK_JAVA_OPTIONS", None)
    cmd = [submit, "--master", "local[2]", "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
           "--conf", "spark.driver.bindAddress=127.0.0.1",
           "--conf", f"spark.driver.extraJavaOptions={JVM_OPTIONS_WITHOUT_ARCHIVE} -XX:ArchiveClassesAtExit={partial}",
           __file__, "--job"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not os.path.exists(partial):
        # Only a cache: the tests run without it, a few seconds slower per JVM.
        print(f"spark_classes: no archive ({done.returncode}): {done.stderr[-2000:]}", file=sys.stderr)
        return
    os.replace(partial, ARCHIVE)
    with open(key_file, "w") as f:
        f.write(key)


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    if sys.argv[1:] == ["--job"]:
        _job()
    else:
        build()
