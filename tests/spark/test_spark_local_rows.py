"""Rows streamed to the driver a partition at a time hold a bounded part of its JVM heap, however many partitions
pass (lshbloom_udf.common.local_rows, iter_arrow): a child session with a 512 MiB driver streams 1.5 times its heap."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from spark_support import JVM_OPTIONS, ROOT


# Rows made in the JVM (no input file): PARTS partitions of ROWS_PER_PART rows of TEXT_BYTES bytes each, ~825 MB in
# all through a 512 MiB heap. DataFrame.toLocalIterator kept every served partition: this died past ~400 MB.
CHILD = textwrap.dedent("""
    import sys
    import pyarrow.compute as pc
    from pyspark.sql import SparkSession, functions as F
    from lshbloom_udf.common import iter_arrow

    PARTS, ROWS_PER_PART, TEXT_BYTES = 150, 1250, 4400
    spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", "512m")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.extraJavaOptions", sys.argv[1]).getOrCreate())
    frame = (spark.range(0, PARTS * ROWS_PER_PART, numPartitions=PARTS)
             .select("id", F.expr(f"repeat(cast(id as string), {TEXT_BYTES} div length(cast(id as string)))")
                     .alias("text")))
    rows = total = checksum = 0
    for batch in iter_arrow(frame):
        rows += batch.num_rows  # counted in Arrow: the rows never become Python objects
        total += pc.sum(pc.binary_length(batch.column(1))).as_py()
        checksum += pc.sum(batch.column(0)).as_py()
    runtime = spark.sparkContext._jvm.java.lang.Runtime.getRuntime()
    print("streamed", rows, total, checksum, runtime.maxMemory())
""")


@pytest.mark.slow
def test_a_stream_many_times_the_heap_passes_a_small_driver():
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", CHILD, JVM_OPTIONS], capture_output=True, text=True,
                          timeout=900, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("streamed")][-1]
    rows, total, checksum, heap = map(int, line.split()[1:])
    n = 150 * 1250
    assert rows == n and checksum == n * (n - 1) // 2  # every row once
    assert total >= 1.5 * heap  # the stream passed 1.5 times the driver's heap
