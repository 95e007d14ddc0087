"""The driver pass's progress line: documents done, docs/s and ETA, to the ``lshbloom_udf`` logger."""

from __future__ import annotations

import threading
import time

from lshbloom_udf.log import logger

WAITING_INTERVAL = 10.0


class Progress:
    """Documents done, docs/s and ETA, logged every ``interval`` seconds from the pass's first second.

    A timer thread writes the line, so it shows while the first keys are still
    being computed; :meth:`update` only records the counts. Disabled: nothing.
    """

    def __init__(self, total: int, enabled: bool = True, interval: float = 1.0):
        self.total = total
        self.enabled = enabled
        self.interval = interval
        self.start = time.monotonic()
        self.done = 0
        self.duplicates = 0
        self.lines = 0
        self._stop = threading.Event()
        self._thread = None
        if enabled:
            self._thread = threading.Thread(target=self._tick, name="lshbloom-progress", daemon=True)
            self._thread.start()

    def _tick(self) -> None:
        last_done, last_line = -1, 0.0
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            # A line per interval while documents are decided; while nothing moves (Spark starting, the first keys
            # computed), one every WAITING_INTERVAL seconds.
            if self.done != last_done or now - last_line >= WAITING_INTERVAL:
                last_done, last_line = self.done, now
                self._log(final=False)

    def update(self, done: int, duplicates: int) -> None:
        self.done, self.duplicates = done, duplicates

    def close(self) -> None:
        """Stop the timer; one final line if any was written (a pass shorter than ``interval`` writes none)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if self.lines:
            self._log(final=True)

    def _log(self, final: bool) -> None:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        done = self.done
        rate = done / elapsed
        if final:
            eta = f"done in {elapsed:.1f} s"
        elif rate > 0:
            eta = "ETA " + _hms((self.total - done) / rate)
        else:
            eta = "ETA ? (waiting for the first keys)"
        pct = 100.0 * done / self.total if self.total else 100.0
        logger.info("%s/%s documents (%.1f%%), %s duplicates, %s docs/s, %s", f"{done:,}", f"{self.total:,}", pct,
                    f"{self.duplicates:,}", f"{rate:,.0f}", eta)
        self.lines += 1


def _hms(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
