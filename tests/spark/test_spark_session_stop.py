"""``common.stop_session``: the job's own session stopped without waiting for PySpark's accumulator server.

A session of its own (the test session's is shared and stays up) in a child
process: accumulators used before the stop (the JVM then holds a connection
to the server, the case where ``SparkContext.stop`` waits for the server's
poll), the context stopped, the old server closed by its daemon thread, and a
new session whose accumulators work again.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, threading
from pyspark.sql import SparkSession
from lshbloom_udf.common import stop_session

def session():
    return (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
            .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())

def summed(spark):
    acc = spark.sparkContext.accumulator(0)
    spark.sparkContext.parallelize(range(10), 2).foreach(lambda x: acc.add(x))
    return acc.value

spark = session()
sc = spark.sparkContext
first = summed(spark)
server = sc._accumulatorServer
stop_session(spark)
out = {"first": first, "stopped": sc._jsc is None, "server_detached": sc._accumulatorServer is None,
       "asked_to_stop": server.server_shutdown}
for t in threading.enumerate():
    if t.name == "lshbloom-accumulator-stop":
        t.join(30)
out["server_closed"] = server.socket.fileno() == -1
spark = session()
out["again"] = summed(spark)
stop_session(spark)
print(json.dumps(out))
"""


@pytest.mark.slow
def test_stop_session_stops_the_context_and_closes_the_accumulator_server():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got == {"first": 45, "stopped": True, "server_detached": True, "asked_to_stop": True,
                   "server_closed": True, "again": 45}
