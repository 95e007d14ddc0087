"""Fidelity metrics as the paper defines them (§5.1.3), and agreement between two methods.

A *positive* is a document labelled duplicate (an earlier document in the
stream comes from the same source). With TP, FP, FN counted over a stream:

    precision = TP / (TP + FP)        the share of flagged documents that are duplicates
    recall    = TP / (TP + FN)        the share of duplicates that are flagged
    F1        = TP / (TP + (FP + FN) / 2)

Empty denominators: precision is 1.0 when nothing is flagged, recall is 1.0
when there is nothing to find, and F1 is 1.0 when both hold (nothing to find,
nothing flagged) — the method made no error.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class Scores:
    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        denom = self.tp + 0.5 * (self.fp + self.fn)
        return self.tp / denom if denom else 1.0

    @property
    def flagged(self) -> int:
        return self.tp + self.fp

    @property
    def duplicates(self) -> int:
        return self.tp + self.fn

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(precision=self.precision, recall=self.recall, f1=self.f1)
        return d


def _bools(x: Sequence[bool], name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    if a.dtype != bool:
        if not np.isin(a, (0, 1)).all():
            raise ValueError(f"{name} must hold booleans")
        a = a.astype(bool)
    return a


def score(labels: Sequence[bool], predicted: Sequence[bool]) -> Scores:
    """Confusion counts of ``predicted`` duplicate flags against ``labels``."""
    y = _bools(labels, "labels")
    p = _bools(predicted, "predicted")
    if y.shape != p.shape:
        raise ValueError(f"labels and predicted differ in length: {len(y)} != {len(p)}")
    tp = int(np.count_nonzero(y & p))
    fp = int(np.count_nonzero(~y & p))
    fn = int(np.count_nonzero(y & ~p))
    tn = int(len(y) - tp - fp - fn)
    return Scores(tp, fp, fn, tn)


@dataclass(frozen=True)
class Agreement:
    """How two methods' decisions on the same stream compare."""

    n: int
    both: int  # flagged by both
    only_a: int
    only_b: int

    @property
    def neither(self) -> int:
        return self.n - self.both - self.only_a - self.only_b

    @property
    def rate(self) -> float:
        """Share of documents with the same decision."""
        return (self.n - self.only_a - self.only_b) / self.n if self.n else 1.0

    @property
    def identical(self) -> bool:
        return self.only_a == 0 and self.only_b == 0

    @property
    def kappa(self) -> float:
        """Cohen's kappa (1.0 when both decide identically, even if constant)."""
        if self.identical:
            return 1.0
        n = self.n
        po = self.rate
        pa, pb = (self.both + self.only_a) / n, (self.both + self.only_b) / n
        pe = pa * pb + (1 - pa) * (1 - pb)
        return (po - pe) / (1 - pe) if pe < 1 else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(neither=self.neither, rate=self.rate, kappa=self.kappa, identical=self.identical)
        return d


def agreement(a: Sequence[bool], b: Sequence[bool]) -> Agreement:
    x = _bools(a, "a")
    y = _bools(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"decisions differ in length: {len(x)} != {len(y)}")
    return Agreement(
        n=len(x),
        both=int(np.count_nonzero(x & y)),
        only_a=int(np.count_nonzero(x & ~y)),
        only_b=int(np.count_nonzero(~x & y)),
    )
