"""The package's logger (``lshbloom_udf``) and the run's steps: a Spark job description and a log line each.

Warnings and progress go through :data:`logger`; only the command line's own
output prints. The command line configures the handler (:func:`configure`:
``--quiet``, ``--log-level``); a library caller's logging configuration is
left alone, except that a process with no handler at all gets one on stderr
when a run shows progress, so that a notebook sees it without setup.

:func:`step` names the Spark jobs a step starts (``lshbloom: pin``,
``lshbloom: keys + driver pass``, ...) through ``spark.job.description``, the
local property Spark's UI and console progress bar show, restored afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from typing import Iterator, Optional

from lshbloom_udf.common import spark_context

logger = logging.getLogger("lshbloom_udf")
_FORMAT = "lshbloom: %(message)s"
STEP_PREFIX = "lshbloom: "


class _Stderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a line is logged (a notebook or a test may replace it)."""

    # Set on the handler configure() adds, so that the next call removes it (read with getattr: any handler).
    _lshbloom_cli: bool

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def configure(level: int | str = logging.INFO) -> None:
    """The command line's handler: ``lshbloom: message`` lines on stderr at ``level`` (for this package only)."""
    for h in list(logger.handlers):
        if getattr(h, "_lshbloom_cli", False):
            logger.removeHandler(h)
    handler = _Stderr()
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler._lshbloom_cli = True
    logger.addHandler(handler)
    logger.setLevel(level.upper() if isinstance(level, str) else level)
    logger.propagate = False


def ensure_visible() -> None:
    """Progress of a run that shows it reaches stderr even when nobody configured logging (a notebook)."""
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = _Stderr()
    handler.setFormatter(logging.Formatter(_FORMAT))
    logger.addHandler(handler)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)


@contextlib.contextmanager
def step(spark, name: str, show: bool = True) -> Iterator[None]:
    """Spark jobs started inside carry the description ``lshbloom: <name>``; one log line at start and at end.

    ``show=False`` (``progress=False``): the description is still set (Spark's
    UI names the step), the log lines are not written.
    """
    sc = spark_context(spark) if spark is not None else None
    previous: Optional[str] = sc.getLocalProperty("spark.job.description") if sc is not None else None
    if sc is not None:
        sc.setJobDescription(STEP_PREFIX + name)
    if show:
        logger.info("%s ...", name)
    t = time.monotonic()
    try:
        yield
    finally:
        if sc is not None:
            # None removes the property: a job started later by the caller carries the caller's description again.
            sc.setLocalProperty("spark.job.description", previous)
        if show:
            logger.info("%s: %.2f s", name, time.monotonic() - t)


@contextlib.contextmanager
def console_progress(spark, enabled: bool) -> Iterator[None]:
    """``enabled=False``: Spark's console progress bar (``[Stage 3: ...]`` on stderr) is off for the run's jobs.

    ``spark.ui.showConsoleProgress`` is read once, when the SparkContext
    starts; the bar is the context's ``ConsoleProgressBar`` object, which polls
    every active stage of the application. So the run stops that bar and, at
    its end, puts a new one in its place (SparkContext's ``_progressBar``
    field): the caller's later jobs show their bar again. No bar (the default
    of ``spark-submit``), Spark Connect, or a JVM that does not allow it:
    nothing to do.
    """
    sc = None if enabled else spark_context(spark)
    field = _progress_bar_field(sc) if sc is not None else None
    if sc is None or field is None:
        yield
        return
    jsc = sc._jsc.sc()
    field.get(jsc).get().stop()
    field.set(jsc, sc._jvm.scala.Option.empty())
    try:
        yield
    finally:
        try:
            field.set(jsc, sc._jvm.scala.Some(sc._jvm.org.apache.spark.ui.ConsoleProgressBar(jsc)))
        except Exception as e:  # the context stopped meanwhile
            logger.debug("Spark's console progress bar not restored: %s", e)


def _progress_bar_field(sc):
    """SparkContext's ``_progressBar`` field, made accessible, when it holds a bar; else None."""
    try:
        jsc = sc._jsc.sc()
        if not jsc.progressBar().isDefined():
            return None
        field = jsc.getClass().getDeclaredField("_progressBar")
        field.setAccessible(True)
        return field
    except Exception as e:  # Spark Connect, a Spark without the field, a JVM that refuses reflection
        logger.debug("Spark's console progress bar left as it is: %s", e)
        return None
