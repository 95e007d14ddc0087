"""How an index grows past its capacity: filter generations (a scalable Bloom filter, Almeida et al. 2007).

``growth="fixed"`` (what every index written before growth existed is; the
low-level API's default, :data:`~lshbloom_udf.compat.COMPAT_DEFAULTS`): one generation of
``b`` band filters sized for ``capacity`` documents at ``p_effective``. At the
limit a run fails clearly (:class:`~lshbloom_udf.errors.IndexFullError`).

``growth="grow"``: when the newest generation is full, a new one is added.
Queries check every generation, inserts go to the newest. Generation ``g``
holds ``capacity * GROWTH_FACTOR**g`` documents at the effective (any band)
rate ``q_g = p_effective * (1 - TIGHTENING) * TIGHTENING**g``, so that however
many generations are added, the rate of the whole index stays within
``p_effective`` (union bound: ``sum_g q_g < p_effective``). With the defaults
(x2 capacity, x1/2 rate) generation 0 gets ``p_effective / 2``, generation 1
``p_effective / 4``, ...; ``k`` generations hold ``(2**k - 1) * capacity``
documents. The price is paid up front: generation 0's filters are sized for
half the rate a fixed index gets (``ln 2 / (ln 2)**2 ~ 1.44`` more bits per
document per band: +4.3 % bytes with p_effective 1e-5 over 85 bands), and each later
generation costs ~2x the previous one plus ~1.44 bits per document per band
for its tighter rate (:func:`lshbloom_udf.sizing.plan` shows the figures).

Datasketch: generation 0 is ``band-{i}.bf`` exactly as in a fixed index, so
``datasketch.MinHashLSHBloom(save_dir=...)`` still reads a grown
pybloomfiltermmap3 index of ``sum`` band keys — but it sees generation 0
only: documents stored in later generations (``gen{g}-band-{i}.bf``) are
invisible to it, and what it inserts goes to generation 0, past its capacity.
A fixed index is exactly what it always was, and the reference sizing figures
(docs/algorithm.md §6, ``plan``'s defaults) are a fixed index's.
"""

from __future__ import annotations

GROWTH_MODES = ("fixed", "grow")
# Capacity multiplier and rate multiplier from one generation to the next.
GROWTH_FACTOR = 2
TIGHTENING = 0.5


def validate_growth(growth: str) -> None:
    if growth not in GROWTH_MODES:
        raise ValueError(f"growth must be one of {GROWTH_MODES}, got {growth!r}")


def generation_capacity(capacity: int, generation: int) -> int:
    """Documents generation ``generation`` of an index of ``capacity`` holds."""
    return capacity * GROWTH_FACTOR**generation


def generation_rate(p_effective: float, growth: str, generation: int) -> float:
    """The effective (any band) false-positive rate generation ``generation`` is sized for."""
    if growth == "fixed":
        if generation:
            raise ValueError("a fixed index has one generation")
        return p_effective
    return p_effective * (1 - TIGHTENING) * TIGHTENING**generation
