"""The passes: one :class:`Pass` interface (keyed rows in, a frozen :class:`Decided` out) and their registry.

A pass named ``<name>`` (``pass_mode="<name>"``, ``--pass <name>``) is the
module or package ``lshbloom_udf.spark.passes.<name>``, whose ``PASS`` is the pass
object, and which owns the pass whole (its transfer, its index, its store: ``driver/``, ``sharded/``); the names
are registered once, in :data:`lshbloom_udf.config.PASSES` (the setting's choices). So a new pass is its own
module plus one name there (docs/architecture.md). :func:`select_pass` picks the run's: the registered
one, or :class:`ReproducedPass` when a kept index already ingested the input.
"""

from __future__ import annotations

import importlib

from lshbloom_udf.config import PASSES as PASS_NAMES
from lshbloom_udf.spark.passes.base import (
    Decided,
    Decider,
    IndexReport,
    KeyedPass,
    Pass,
    PassInput,
    PassOutcome,
    PassResult,
)
from lshbloom_udf.spark.passes.reproduced import ReproducedPass
from lshbloom_udf.spark.passes.scan import ScanRequest, ScanResult

# pass_mode -> its pass object, one per registered name
PASSES: dict[str, Pass] = {name: importlib.import_module(f"{__name__}.{name}").PASS for name in PASS_NAMES}

REPRODUCED = ReproducedPass()


def select_pass(given: PassInput) -> Decider:
    """The pass that decides ``given``: the earlier run's flags when it is reproduced, else ``pass_mode``'s."""
    return REPRODUCED if given.reproduce else PASSES[given.config.pass_mode]


__all__ = ["Decided", "Decider", "IndexReport", "KeyedPass", "PASSES", "Pass", "PassInput", "PassOutcome",
           "PassResult", "REPRODUCED", "ScanRequest", "ScanResult", "select_pass"]
