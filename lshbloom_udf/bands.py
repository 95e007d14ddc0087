"""Which Jaccard threshold a run's bands serve (:func:`bands_for`), and the check of a kept index's bands against it.

The default ``threshold`` (0.3) bands permissively *because* verification
follows: the bands only propose candidates, and exact Jaccard >=
``verify_threshold`` (0.4) or containment decides. Without verification the
bands decide alone, and the same permissive bands flag near-misses, many
more than the true duplicates (docs/algorithm.md §3b). So
without verification the bands serve the threshold the user means:

- ``threshold`` when it was given, or set to other than its default (a preset:
  ``--preset paper`` bands for its own 0.5, bit-identical to datasketch);
- otherwise ``verify_threshold``'s value (0.4 by default; ``threshold`` when it
  is none): the similarity the run would have decided at with verification.

Explicit ``bands`` are the user's (b, r) whatever the threshold; the threshold
then only names what they are checked against (their warning).

A kept index keeps the bands it was made with (they are in its band keys). A
run that would band it otherwise is refused (:class:`IndexMismatchError`) by
:func:`check_kept_bands` with a message that says what each set of bands is for
and which setting to give: above all ``--no-verify`` against an index banded
permissively for verification.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from lshbloom_udf.errors import IndexMismatchError

if TYPE_CHECKING:  # config imports this module (lazily); types only, no import at run time
    from lshbloom_udf.config import DedupConfig
    from lshbloom_udf.index.params import IndexParams

VERIFICATION_OFF = "verification off: the bands decide"


@dataclass(frozen=True)
class BandsFor:
    """The threshold the bands serve (``threshold``), the setting it comes from and why (``text``: the summary's
    ``params.bands_for``)."""

    threshold: float
    setting: str  # threshold | verify_threshold | bands
    why: str

    @property
    def text(self) -> str:
        return f"{self.setting} ({self.why})"


def bands_for(config: DedupConfig) -> BandsFor:
    """Which threshold ``config``'s bands serve (the module's rule)."""
    given = config.is_given("threshold")
    meant = given or not math.isclose(config.threshold, _declared_default(config, "threshold"))
    if config.verify:
        source = "given" if given else "preset" if meant else "default"
        return BandsFor(config.threshold, "threshold", f"{source}: candidates, verification decides")
    if config.bands is not None:
        return BandsFor(config.threshold if meant else _decision(config), "bands", "given")
    if meant:
        return BandsFor(config.threshold, "threshold", "given" if given else "preset")
    return BandsFor(_decision(config), "verify_threshold", VERIFICATION_OFF)


def _declared_default(config: DedupConfig, name: str) -> Any:
    """A setting's declared default, read off the config's class: :mod:`lshbloom_udf.config` imports this module,
    so this module does not import it."""
    return type(config).__dataclass_fields__[name].default


def _decision(config: DedupConfig) -> float:
    """The similarity the run would decide at with verification: ``verify_threshold``, or ``threshold`` if none."""
    return config.verify_threshold if config.verify_threshold is not None else config.threshold


def check_kept_bands(path: str, have: Optional[IndexParams], config: DedupConfig, params: IndexParams) -> None:
    """Refuse a kept index whose bands (threshold, b, r in its parameters ``have``) differ from the run's ``params``
    when the run did not give ``threshold`` or ``bands`` itself, saying what each set of bands is for and what to give.
    (Given settings that differ get the general parameter mismatch.)"""
    if have is None or config.is_given("threshold") or config.is_given("bands"):
        return
    if have.threshold is None or params.threshold is None:
        return  # no threshold recorded (an index made with explicit IndexParams): the general check compares (b, r)
    if (have.b, have.r) == (params.b, params.r) and math.isclose(have.threshold, params.threshold):
        return
    ours = bands_for(config)
    rises = round((1.0 / have.b) ** (1.0 / have.r), 2)
    head = (f"{path}: the index was banded for threshold {have.threshold} (b x r = {have.b} x {have.r}: pairs become "
            f"candidates from Jaccard ~{rises}); this run bands for {params.threshold} ({ours.text}, "
            f"b x r = {params.b} x {params.r}). ")
    if not config.verify and have.threshold < params.threshold:
        raise IndexMismatchError(
            head + "Without verification the bands decide, and these permissive bands would flag documents well "
            "below the similarity verification asks for (docs/algorithm.md, Bands that follow the decision). Keep "
            f"verification on (drop --no-verify / verify=False), use a new --index-dir, or give --threshold "
            f"{have.threshold} to decide by the index's bands knowingly.")
    raise IndexMismatchError(head + f"Give --threshold {have.threshold} (threshold={have.threshold}) to use the "
                             "index's bands, or use a new --index-dir.")


def check_kept_rate(path: str, kept: Optional[IndexParams], config: DedupConfig) -> None:
    """Refuse a run whose flags are final (no verification, or ``insert`` first) on a kept index sized for the higher
    rate verification absorbs (:data:`~lshbloom_udf.index.params.P_VERIFIED`): its Bloom false positives would remove
    that share of the run's new documents. A run that gives ``p_effective`` itself accepts the index's rate."""
    if kept is None or config.is_given("p_effective"):
        return
    from lshbloom_udf.index.params import default_p_effective

    have = kept.p_effective
    final = config.new_index_p_effective
    if final != default_p_effective(False) or have <= final:
        return
    raise IndexMismatchError(
        f"{path}: the index's filters were sized for p_effective {have:g}, the rate verification absorbs when it "
        f"checks every flag; this run's flags are final ({'insert first' if config.verify else 'no verification'}), "
        f"so Bloom false positives would remove about {have:.1%} of its new documents. Keep verification on with "
        f"the default insert rule, use a new --index-dir (sized for {final:g}), or give --p-effective {have:g} to "
        "accept that rate knowingly.")
