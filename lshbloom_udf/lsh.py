"""LSH banding parameters.

A MinHash signature of ``k`` values is cut into ``b`` bands of ``r`` rows. Two
documents with Jaccard similarity ``s`` share at least one band with
probability ``1 - (1 - s^r)^b``, the S-curve. For a threshold ``T``, the
probability mass of the S-curve that falls on the wrong side of ``T`` is

    FP(T, b, r) = ∫_0^T 1 - (1 - s^r)^b ds          (pairs below T that collide)
    FN(T, b, r) = ∫_T^1 (1 - s^r)^b ds              (pairs above T that do not)

and :func:`optimal_params` picks ``(b, r)`` minimising ``w_fp·FP + w_fn·FN``
over ``1 <= b <= k``, ``1 <= r <= k // b``, the first minimum winning — exactly
datasketch's ``_optimal_param``. Exact ties do occur (k=2, T=0.5: (1, 1) and
(1, 2) both give 0.125), so the integrals are evaluated with the same SciPy
``quad`` calls datasketch makes: any other quadrature could break such a tie
the other way.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from types import MappingProxyType

import numpy as np


def false_positive_probability(threshold: float, b: int, r: int) -> float:
    """∫_0^T 1 - (1 - s^r)^b ds: the S-curve mass below the threshold."""
    from scipy import integrate  # imported on first use: Spark workers never need it

    return integrate.quad(lambda s: 1 - (1 - s ** float(r)) ** float(b), 0.0, threshold)[0]


def false_negative_probability(threshold: float, b: int, r: int) -> float:
    """∫_T^1 (1 - s^r)^b ds: the mass the S-curve misses above the threshold."""
    from scipy import integrate

    return integrate.quad(lambda s: 1 - (1 - (1 - s ** float(r)) ** float(b)), threshold, 1.0)[0]


@functools.lru_cache(maxsize=256)
def _optimal_params_cached(threshold: float, num_perm: int, w_fp: float, w_fn: float) -> tuple[int, int]:
    best, best_error = (0, 0), float("inf")
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            error = (false_positive_probability(threshold, b, r) * w_fp
                     + false_negative_probability(threshold, b, r) * w_fn)
            if error < best_error:
                best, best_error = (b, r), error
    return best


# (b, r) of the (threshold, num_perm, w_fp, w_fn) the defaults, the paper preset and the earlier defaults
# (T 0.45, 512 permutations) ask for, as _optimal_params_cached computes them: a job's start-up would otherwise
# import SciPy and run ~3,000 quadratures. tests/core/test_core_lsh_plan.py keeps them equal to the quadratures and to
# datasketch's.
KNOWN_OPTIMA = MappingProxyType({
    (0.3, 256, 0.5, 0.5): (64, 4),
    (0.5, 256, 0.5, 0.5): (42, 6),
    (0.45, 512, 0.5, 0.5): (85, 6),
})


def optimal_params(threshold: float, num_perm: int, weights: Sequence[float] = (0.5, 0.5)) -> tuple[int, int]:
    """The ``(b, r)`` datasketch's ``MinHashLSH``/``MinHashLSHBloom`` would choose.

    Args:
        threshold: Jaccard similarity threshold, in (0, 1].
        num_perm: number of MinHash permutations ``k`` (>= 2).
        weights: ``(false_positive_weight, false_negative_weight)``, each in
            [0, 1], summing to 1.
    """
    validate_threshold(threshold)
    validate_num_perm(num_perm)
    if len(weights) != 2 or any(not 0.0 <= w <= 1.0 for w in weights) or abs(sum(weights) - 1.0) > 1e-12:
        raise ValueError(f"weights must be two numbers in [0, 1] summing to 1, got {tuple(weights)!r}")
    key = (float(threshold), int(num_perm), float(weights[0]), float(weights[1]))
    known = KNOWN_OPTIMA.get(key)
    return known if known is not None else _optimal_params_cached(*key)


def validate_threshold(threshold: float) -> None:
    if not isinstance(threshold, (int, float)) or not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")


def validate_num_perm(num_perm: int) -> None:
    if isinstance(num_perm, bool) or not isinstance(num_perm, (int, np.integer)) or num_perm < 2:
        raise ValueError(f"num_perm must be an integer >= 2, got {num_perm!r}")


def validate_bands(b: int, r: int, num_perm: int) -> None:
    """Check an explicit ``(b, r)`` against the signature length."""
    for name, value in (("b", b), ("r", r)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if b * r > num_perm:
        raise ValueError(f"b * r = {b} * {r} = {b * r} exceeds num_perm = {num_perm}")
