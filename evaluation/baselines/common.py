"""What every method returns (:class:`RunResult`), and where its temporary index lives."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field

import numpy as np


def scratch_dir() -> str:
    """A directory for temporary indexes: /dev/shm when present (as the paper does), else the system temp."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()


@dataclass
class RunResult:
    """One method's decisions on one stream."""

    duplicate: np.ndarray
    seconds: float
    index_bytes: int
    extra: dict = field(default_factory=dict)
