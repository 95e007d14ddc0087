"""Verification's plain types: the rule a candidate pair verifies by, the measures, how a text becomes its shingle
set, and what a round hands on (:class:`VerifiedPairs`) and returns (:class:`Verified`).

They import nothing else of verification, so every module of :mod:`lshbloom_udf.spark.verify` (and
:mod:`~lshbloom_udf.spark.exact`, :mod:`~lshbloom_udf.spark.join`) can use them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import numpy as np

from lshbloom_udf.config import TEMPLATE_BELOW, TEMPLATE_MIN_JACCARD, DedupConfig

if TYPE_CHECKING:
    from lshbloom_udf.index.params import IndexParams
    from lshbloom_udf.minhash import ShingleUnit

# The measure that verified a pair, by code (Verified.measure, the similarity_measure column); exact: a byte-identical
# copy found before the pass (lshbloom_udf.spark.exact), never computed here.
MEASURES = ("jaccard", "containment", "exact")
JACCARD, CONTAINMENT, EXACT = 0, 1, 2


def _default(name: str):
    """A setting's declared default (lshbloom_udf.config: one declaration per setting)."""
    return DedupConfig.__dataclass_fields__[name].default


@dataclass(frozen=True)
class TemplateRule:
    """``max_df``: a shingle held by this many sampled kept documents is a template's; Jaccard-only matches with
    ``J < below`` must reach ``J' >= min_jaccard`` on the other shingles (:mod:`~lshbloom_udf.spark.verify.templates`;
    the study's values)."""

    max_df: int
    below: float = TEMPLATE_BELOW
    min_jaccard: float = TEMPLATE_MIN_JACCARD


@dataclass(frozen=True)
class VerifyRule:
    """When a candidate pair (later ``d``, earlier ``e``) verifies:
    ``J >= jaccard``, or ``C >= containment`` and ``J >= containment_min_jaccard``.

    ``containment`` None: Jaccard only (the rule before containment_threshold).
    ``containment_min_jaccard`` (default: the setting's, 0.3) is the containment branch's Jaccard floor: a
    partial copy keeping a share ``f`` of its source has ``J ≈ f``, while a small templated page inside a larger
    sibling has ``C`` high but ``J`` low; None: no floor. Decided from the three counts alone, so any similarity
    stage that counts ``|S_d ∩ S_e|``, ``|S_d|``, ``|S_e|`` can feed :meth:`judge`. ``template`` (None: off)
    then refuses the Jaccard-only matches of templated siblings (:mod:`lshbloom_udf.spark.verify.templates`).
    """

    jaccard: float
    containment: Optional[float] = None
    containment_min_jaccard: Optional[float] = field(default_factory=lambda: _default("containment_min_jaccard"))
    template: Optional[TemplateRule] = None

    def judge(self, common: np.ndarray, size_d: np.ndarray, size_e: np.ndarray):
        """(passes, similarity, measure code) of pairs with ``|S_d ∩ S_e|``, ``|S_d|``, ``|S_e|``.

        The similarity is ``J`` where it passes (also when ``C`` does), else ``C``.
        """
        j, c = _measures(common, size_d, size_e)
        by_j = j >= self.jaccard
        if self.containment is None:
            return by_j, j, np.full(len(j), JACCARD, np.int8)
        by_c = self.contained(common, size_d, size_e)
        return by_j | by_c, np.where(by_j, j, c), np.where(by_j, JACCARD, CONTAINMENT).astype(np.int8)

    def contained(self, common: np.ndarray, size_d: np.ndarray, size_e: np.ndarray) -> np.ndarray:
        """Which pairs the containment branch verifies (none without ``containment``)."""
        if self.containment is None:
            return np.zeros(len(common), bool)
        j, c = _measures(common, size_d, size_e)
        by_c = c >= self.containment
        if self.containment_min_jaccard is not None:
            by_c &= j >= self.containment_min_jaccard
        return by_c


def _measures(common: np.ndarray, size_d: np.ndarray, size_e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(J, C)`` of pairs from their counts (0 where a denominator is 0)."""
    common, size_d = common.astype(np.float64), size_d.astype(np.float64)
    union = size_d + size_e - common
    j = np.divide(common, union, out=np.zeros_like(common), where=union > 0)
    return j, np.divide(common, size_d, out=np.zeros_like(common), where=size_d > 0)


@dataclass
class Verified:
    """The flags verification kept, each with its kept document and similarity.

    ``rows`` (sorted int64 row ids), ``of_rows`` (the earliest verified kept
    document's row id; ``-2 - j`` for the ``j``-th earlier-run source of
    :attr:`CrossRun.sources <lshbloom_udf.spark.verify.crossrun.CrossRun>`; ``-1`` where it cannot be verified: an
    earlier run that kept no records), ``similarity`` (float64, NaN where ``of_rows`` is -1) and
    ``measure`` (int8: the index in :data:`MEASURES` of the measure that
    verified, -1 where ``of_rows`` is -1) are aligned; ``pass_flagged`` the
    pass's flags, ``candidate_pairs`` the (flagged, earlier kept) pairs whose
    similarity was computed, ``candidates_beyond_bound`` those found but left out (past a document's
    strongest :data:`~lshbloom_udf.spark.verify.sources.CANDIDATES_PER_DOCUMENT`).
    """

    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    of_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    similarity: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    measure: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    pass_flagged: int = 0
    candidate_pairs: int = 0
    candidates_beyond_bound: int = 0
    seconds: float = 0.0
    stages: dict = field(default_factory=dict)
    template: Optional[dict] = None

    def summary(self, rule: VerifyRule) -> dict:
        return {
            "threshold": rule.jaccard,
            "containment_threshold": rule.containment,
            "containment_min_jaccard": rule.containment_min_jaccard if rule.containment is not None else None,
            "pass_flagged": self.pass_flagged,
            "kept_flagged": int(len(self.rows)),
            "by_containment": int(np.count_nonzero(self.measure == CONTAINMENT)),
            "unflagged": self.pass_flagged - int(len(self.rows)),
            "unverifiable": int(np.count_nonzero(self.of_rows == -1)),
            "candidate_pairs": self.candidate_pairs,
            "candidates_beyond_bound": self.candidates_beyond_bound,
            "template": self.template,
            "seconds": round(self.seconds, 3),
            "stages": dict(self.stages),
        }

    def _set(self, rows, of_rows, similarity, measure) -> None:
        order = np.argsort(rows, kind="stable")
        self.rows, self.of_rows = rows[order], of_rows[order]
        self.similarity, self.measure = similarity[order], measure[order]


@dataclass(frozen=True)
class Shingling:
    """How a text becomes its shingle set: the index's n-gram size, normalization mask and shingle unit."""

    ngram: int
    normalize_mask: int
    unit: ShingleUnit = "words"

    @classmethod
    def of(cls, params: IndexParams) -> Shingling:
        """The shingling of an index's parameters (its signatures' shingles)."""
        from lshbloom_udf.minhash import normalization_mask, validate_shingle

        return cls(params.ngram, normalization_mask(params.normalize), validate_shingle(params.shingle))


def shingle_set(text: Optional[str], shingling: Shingling) -> frozenset:
    """The shingle set ``S`` of a text, by the contract (the signatures' shingles): the reference of the native
    overlaps verification computes (:func:`~lshbloom_udf.spark.verify.similarity.overlaps`, the same sets)."""
    from lshbloom_udf import _native

    return frozenset(_native.shingles(text, shingling.ngram, shingling.normalize_mask, shingling.unit))



@dataclass(frozen=True)
class VerifiedPairs:
    """Candidate pairs (later row, earlier row) the rule verified, sorted by (later, earlier), with the
    similarity and measure code that verified each."""

    f_rows: np.ndarray
    k_rows: np.ndarray
    similarity: np.ndarray
    measure: np.ndarray

    @classmethod
    def of(cls, f_rows, k_rows, similarity, measure) -> "VerifiedPairs":
        order = np.lexsort((k_rows, f_rows))
        return cls(f_rows[order], k_rows[order], similarity[order], measure[order])

    def first_of_each(self) -> np.ndarray:
        """Where each later row's pairs start (its earliest verified earlier row)."""
        if not len(self.f_rows):
            return np.zeros(0, np.int64)
        return np.flatnonzero(np.r_[True, self.f_rows[1:] != self.f_rows[:-1]])
