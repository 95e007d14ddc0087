"""What the study tries: a MinHash configuration, the paper's, and the grids of them.

A grid names LSHBloom's values (threshold x num_perm x n-gram size x
normalization), datasketch ``MinHashLSH``'s (threshold x num_perm at the
paper's shingling) and the overlap methods' (overlap threshold, and n-gram
size for the n-gram methods). ``tiny`` is for tests, ``default`` for
``make evaluate``, ``full`` is the paper's grid (§5.1.5) plus ours.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Optional

from lshbloom_udf.lsh import optimal_params
from lshbloom_udf.minhash import normalization_name

P_EFFECTIVE = 1e-5


@dataclass(frozen=True)
class MinHashConfig:
    threshold: float
    num_perm: int
    ngram: int = 1
    normalize: str = "none"
    scheme: str = "affine32"
    seed: int = 1

    @property
    def bands(self) -> tuple[int, int]:
        return optimal_params(self.threshold, self.num_perm)

    def label(self) -> str:
        return f"T={self.threshold:g} k={self.num_perm} n={self.ngram} norm={self.normalize}" + (
            f" {self.scheme}" if self.scheme != "affine32" else ""
        )

    def params(self) -> dict:
        b, r = self.bands
        return {**asdict(self), "b": b, "r": r}

    @property
    def shingling(self) -> tuple:
        return (self.num_perm, self.ngram, self.normalize, self.scheme, self.seed)


# The paper's LSHBloom configuration (conf/paper.toml): unigrams, T = 0.5, 256 permutations,
# no normalization, datasketch < 2 permutations.
PAPER = MinHashConfig(threshold=0.5, num_perm=256, ngram=1, normalize="none", scheme="legacy")


@dataclass(frozen=True)
class Grid:
    thresholds: tuple[float, ...]
    num_perms: tuple[int, ...]
    ngrams: tuple[int, ...]
    normalizations: tuple[str, ...]
    overlap_thresholds: tuple[float, ...]
    overlap_ngrams: tuple[int, ...]
    minhashlsh: bool = True
    # datasketch MinHashLSH's grid (at the paper's shingling): None = the LSHBloom grid's values
    minhashlsh_thresholds: Optional[tuple[float, ...]] = None
    minhashlsh_num_perms: Optional[tuple[int, ...]] = None

    def minhash_configs(self) -> list[MinHashConfig]:
        return [
            MinHashConfig(t, k, n, normalization_name(z))
            for z in self.normalizations
            for n in self.ngrams
            for k in self.num_perms
            for t in self.thresholds
        ]

    def minhashlsh_configs(self) -> list[MinHashConfig]:
        """datasketch MinHashLSH's threshold x num_perm grid at the paper's shingling (unigrams, no normalization)."""
        return [
            MinHashConfig(t, k, 1, "none")
            for k in (self.minhashlsh_num_perms or self.num_perms)
            for t in (self.minhashlsh_thresholds or self.thresholds)
        ]


GRIDS = {
    # a few seconds: for tests and smoke runs
    "tiny": Grid((0.4, 0.6), (64, 128), (1, 3), ("none", "all"), (0.2, 0.6, 1.0), (2, 5), True),
    # the default: a few minutes on two (shared) cores with --docs 2000
    "default": Grid(
        (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8),
        (64, 128, 256, 512),
        (1, 2, 3, 4, 5),
        ("none", "all"),
        (0.2, 0.4, 0.6, 0.8, 1.0),
        (2, 5, 13),
        True,
        (0.3, 0.4, 0.5, 0.6, 0.7, 0.8),
        (128, 256),
    ),
    # the paper's full grid (§5.1.5) plus ours: tens of minutes
    "full": Grid(
        (0.2, 0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8, 0.9),
        (32, 48, 64, 128, 256, 512),
        (1, 2, 3, 4, 5, 7),
        ("none", "lower", "nfkc,lower", "all"),
        (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
        (1, 2, 5, 7, 13, 26),
        True,
    ),
}


def config_label(method: str, params: dict) -> str:
    """A row's short label: a MinHash configuration's, or ``T=...`` (and ``n=...``) for an overlap method."""
    if "num_perm" in params:
        return MinHashConfig(**{k: params[k] for k in ("threshold", "num_perm", "ngram", "normalize", "scheme", "seed")}).label()
    parts = [f"T={params['threshold']:g}"]
    if params.get("ngram") is not None:
        parts.append(f"n={params['ngram']}")
    return " ".join(parts)


def config_from_params(params: str | dict) -> MinHashConfig:
    """The MinHash configuration of a row's ``params`` (JSON text or a dict)."""
    p = json.loads(params) if isinstance(params, str) else params
    return MinHashConfig(p["threshold"], p["num_perm"], p["ngram"], p["normalize"], p.get("scheme", "affine32"), p.get("seed", 1))
