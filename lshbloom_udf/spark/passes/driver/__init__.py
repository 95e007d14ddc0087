"""The driver pass (``pass_mode="driver"``): the whole index in the driver, which decides every document's band keys
in processing order.

- :mod:`~lshbloom_udf.spark.passes.driver.decide` — :class:`DriverPass` (the pass: its index, local store, transfer);
- :mod:`~lshbloom_udf.spark.passes.driver.sender` — the executors' end of the socket key stream (the keys stage's
  ``mapInArrow`` function and the wire format);
- :mod:`~lshbloom_udf.spark.passes.driver.stream` — the driver's end (:class:`KeyStream`: its spool, retried
  attempts, the kept keys verification reads again);
- :mod:`~lshbloom_udf.spark.passes.driver.loop` — the loop that decides the chunks in row order (and the
  ``toLocalIterator`` transfer under Spark Connect);
- :mod:`~lshbloom_udf.spark.passes.driver.progress` — its progress line;
- :mod:`~lshbloom_udf.spark.passes.driver.temporary` — the temporary index's directory.
"""

from lshbloom_udf.spark.passes.driver.decide import PASS, DriverPass

__all__ = ["PASS", "DriverPass"]
