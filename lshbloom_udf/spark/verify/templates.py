"""Verification's template rule: pages made from one template are not copies of each other (``template_max_df``).

Pages generated from one template (the man pages of a family of functions, a site's product pages) share the
template's shingles, so two siblings can reach the Jaccard a noisy copy has (0.4-0.6) with little else in common.
The pair's own counts cannot tell them apart; how many other documents hold the shared shingles can. Rule, for a
candidate pair (later ``d``, earlier ``e``) that verifies by Jaccard alone (``J_v <= J < below``, containment does
not verify it, :class:`~lshbloom_udf.spark.verify.rule.VerifyRule`)::

    it still verifies  ⇔  J'(d, e) = |R_d ∩ R_e| / |R_d ∪ R_e| >= min_jaccard,      R_x = S_x \\ T

where ``T``, the template shingles, are the shingles held by at least ``max_df`` documents of a sample of the
documents the pass kept in this run (its flagged documents are copies the bands proposed: a much-copied source counts
once). A noisy copy's shared shingles are its source's own, mostly rare, so ``J' ≈ J`` for it; templated siblings
share mostly ``T`` (``J'`` 0.04-0.15 for the study's pairs, docs/evaluation.md §0.8). Pairs at ``J >= below``, and
pairs containment verifies, are never refused.

The sample: every kept document when the run keeps at most :data:`SAMPLE` (then ``T`` is exact: the rule the study
measured, max_df 5 over each stream's kept documents), else :data:`SAMPLE` of them: those whose row id has the
smallest hash (Spark's ``xxhash64``; a bottom-k sample: uniform, and the same rows on every run of the same input),
so that ``T`` is the shingles held by about ``max_df / SAMPLE`` of the kept documents (0.5 % at the default): a
share, not a count, so that at scale ordinary phrases do not become a template's. A run that is mostly one template
family keeps almost nothing (its siblings are flagged): with fewer than ``TOP_UP_BELOW · max_df`` kept documents in
the sample it is topped up with flagged candidates, copies of one source entering once (:data:`TOP_UP_BELOW`). The
driver pass notes the rows whose hash is small enough to be candidates (:func:`sample_candidates`, about ``2·SAMPLE``)
and round 1 brings
their texts with its own; without a driver pass (the sharded pass), or when round 1's texts stay on the executors,
one Spark job finds the same rows (:meth:`~lshbloom_udf.spark.verify.texts.TextsSource.sample_texts`), only
when some verified pair is a suspect. The sample's shingles are hashed (xxh3-64,
:func:`lshbloom_udf._native.shingle_hash_sets`), so two distinct shingles may merge their counts (about ``m² / 2^65``
among ``m``). ``J'`` and the containment check of the suspects
are computed on the same hashes.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Optional

import numpy as np

from lshbloom_udf.spark.keys import is_in
from lshbloom_udf.spark.verify.rule import JACCARD, TemplateRule, VerifiedPairs

log = logging.getLogger(__name__)

# The kept documents sampled to count the shingles' frequencies; max_df of them make a shingle a template's.
SAMPLE = 1024
# The sample's shingles held at once (8 bytes each): documents past it are not added (long texts).
SAMPLE_HASHES = 1 << 25
# Fewer sampled kept documents than TOP_UP_BELOW · max_df cannot show a shingle held by max_df of them: the pass kept
# almost nothing (a run that is mostly one template family: its siblings are all flagged). The sample is then topped
# up to TOP_UP_TO · max_df documents with flagged candidates, each taken only if its Jaccard with every document
# already in is below the rule's ``below`` (copies of one source enter once; siblings of a template, at 0.3-0.5, do).
TOP_UP_BELOW, TOP_UP_TO = 2, 4
# A row is a sample candidate when the low 30 bits of its row id's hash fall under a share of 2^30 (twice the
# sample's share of the documents, so that the kept ones among them are enough when up to half are flagged).
SAMPLE_MASK = (1 << 30) - 1

_P1, _P2, _P3, _P4, _P5 = (np.uint64(p) for p in (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                                                  0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5))


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def row_hashes(rows: np.ndarray) -> np.ndarray:
    """Spark's ``xxhash64`` of int64 row ids (XXH64 of the 8-byte value, seed 42), as uint64: the driver and a Spark
    filter pick the same rows (tests/spark/verify/test_spark_verify_templates.py checks it against Spark)."""
    x = np.asarray(rows, dtype=np.int64).astype(np.uint64)
    h = np.full(x.shape, np.uint64(42) + _P5 + np.uint64(8), np.uint64)
    h ^= _rotl(x * _P2, 31) * _P1
    h = _rotl(h, 27) * _P1 + _P4
    h ^= h >> np.uint64(33)
    h *= _P2
    h ^= h >> np.uint64(29)
    h *= _P3
    return h ^ (h >> np.uint64(32))


def sample_below(documents: int) -> int:
    """The bound the low bits of a sample candidate's row hash are under (all rows in a small run)."""
    return int(min(1.0, 2 * SAMPLE / max(1, documents)) * (SAMPLE_MASK + 1))


def sample_candidates(rows: np.ndarray, below: int) -> np.ndarray:
    """The ``rows`` whose hash is under ``below`` (:func:`sample_below`)."""
    return rows[(row_hashes(rows) & np.uint64(SAMPLE_MASK)) < np.uint64(below)]


def flagged_sample(candidates: np.ndarray, flagged: np.ndarray, n: int) -> np.ndarray:
    """The ``n`` ``flagged`` candidates whose row hashes are smallest, in that order (the top-up's: the module's
    docs)."""
    rows = np.unique(np.asarray(candidates, np.int64))
    rows = rows[is_in(rows, flagged)]
    return rows[np.argsort(row_hashes(rows) & np.uint64(SAMPLE_MASK), kind="stable")[:n]]


def top_up_size(rule: TemplateRule) -> int:
    """The flagged candidates read for a top-up: twice the most it may take (some are copies, and skipped)."""
    return 2 * TOP_UP_TO * rule.max_df


def kept_sample(candidates: np.ndarray, flagged: np.ndarray) -> np.ndarray:
    """The sample: the :data:`SAMPLE` candidates not ``flagged`` whose row hashes are smallest (a bottom-k sample:
    uniform, and the same rows whichever way the candidates were found), sorted."""
    rows = np.unique(np.asarray(candidates, np.int64))
    rows = rows[~is_in(rows, flagged)]
    order = np.argsort(row_hashes(rows) & np.uint64(SAMPLE_MASK), kind="stable")
    return np.sort(rows[order[:SAMPLE]])


def hash_sets(texts: list, shingling) -> list[np.ndarray]:
    """Each text's distinct shingle hashes, sorted (uint64)."""
    import os

    from lshbloom_udf import _native

    hashes, offsets = _native.shingle_hash_sets(texts, shingling.ngram, shingling.normalize_mask, shingling.unit,
                                                os.cpu_count() or 1)
    return [hashes[a:b] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]


def template_shingles(sets: list[np.ndarray], max_df: int) -> np.ndarray:
    """The sorted hashes held by at least ``max_df`` of ``sets`` (each a document's distinct hashes)."""
    if not sets:
        return np.zeros(0, np.uint64)
    every, counts = np.unique(np.concatenate(sets), return_counts=True)
    return every[counts >= max_df]


def _jaccard(a: np.ndarray, b: np.ndarray) -> float:
    common = len(np.intersect1d(a, b, assume_unique=True))
    union = len(a) + len(b) - common
    return common / union if union else 0.0


def rare_jaccard(a: np.ndarray, b: np.ndarray, templates: np.ndarray) -> float:
    """``J'``: the Jaccard of two sorted hash sets without the ``templates`` (0 when nothing is left)."""
    return _jaccard(a[~is_in(a, templates)], b[~is_in(b, templates)])


class Templates:
    """Applies a :class:`TemplateRule` to verified pairs; reads its sample the first time a pair is a suspect.

    ``sample()``: the sampled kept documents' texts and the flagged candidates' (the top-up's, in hash order);
    ``texts(rows)``: ``{row id: text}`` of the suspects' rows; ``verify_rule``: the rule the pairs passed (its
    containment branch exempts a pair).
    """

    def __init__(self, rule: TemplateRule, verify_rule, shingling, sample: Callable, texts: Callable):
        self.rule, self.verify_rule, self.shingling = rule, verify_rule, shingling
        self._sample, self._texts = sample, texts
        self.templates: Optional[np.ndarray] = None
        self.sampled = self.refused = self.topped_up = 0
        self.seconds = 0.0

    def summary(self) -> dict:
        return {"max_df": self.rule.max_df, "sampled": self.sampled, "topped_up": self.topped_up,
                "refused_pairs": self.refused,
                "template_shingles": None if self.templates is None else int(len(self.templates)),
                "seconds": round(self.seconds, 3)}

    def _template_hashes(self) -> np.ndarray:
        if self.templates is None:
            sets = self._sample_sets()
            self.sampled = len(sets)
            self.templates = template_shingles(sets, self.rule.max_df)
            log.debug("template rule: %d sampled kept documents, %d template shingles", self.sampled,
                      len(self.templates))
        return self.templates

    def _sample_sets(self) -> list[np.ndarray]:
        """The sampled documents' hash sets, in the order read, until :data:`SAMPLE_HASHES` hashes are held; topped
        up with flagged candidates when the kept ones are too few (:data:`TOP_UP_BELOW`)."""
        kept, flagged = self._sample()
        sets, held = [], 0
        for s in hash_sets(kept, self.shingling):
            if held + len(s) > SAMPLE_HASHES:
                break
            sets.append(s)
            held += len(s)
        if len(sets) >= TOP_UP_BELOW * self.rule.max_df or not flagged:
            return sets
        for s in hash_sets(flagged, self.shingling):
            if len(sets) >= TOP_UP_TO * self.rule.max_df or held + len(s) > SAMPLE_HASHES:
                break
            if all(_jaccard(s, t) < self.rule.below for t in sets):
                sets.append(s)
                held += len(s)
                self.topped_up += 1
        return sets

    def refuse(self, pairs):
        """``pairs`` (:class:`~lshbloom_udf.spark.verify.rule.VerifiedPairs`) without the suspects ``J'`` refuses."""
        suspect = np.flatnonzero((pairs.measure == JACCARD) & (pairs.similarity < self.rule.below))
        if not len(suspect):
            return pairs
        t0 = time.monotonic()
        try:
            return self._refuse(pairs, suspect)
        finally:
            self.seconds += time.monotonic() - t0

    def _refuse(self, pairs, suspect: np.ndarray):
        f_rows, k_rows = pairs.f_rows[suspect], pairs.k_rows[suspect]
        rows = np.unique(np.concatenate([f_rows, k_rows]))
        texts = self._texts(rows)
        sets = dict(zip(rows.tolist(), hash_sets([texts[r] for r in rows.tolist()], self.shingling)))
        templates = self._template_hashes()
        drop = [i for i, f, k in zip(suspect.tolist(), f_rows.tolist(), k_rows.tolist())
                if self._refused(sets[f], sets[k], templates)]
        self.refused += len(drop)
        if not drop:
            return pairs
        keep = np.ones(len(pairs.f_rows), bool)
        keep[drop] = False
        return VerifiedPairs(pairs.f_rows[keep], pairs.k_rows[keep], pairs.similarity[keep], pairs.measure[keep])

    def _refused(self, d: np.ndarray, e: np.ndarray, templates: np.ndarray) -> bool:
        # Containment, on the same hashes, exempts the pair: the rule is for Jaccard-only matches.
        common = np.array([len(np.intersect1d(d, e, assume_unique=True))])
        if self.verify_rule.contained(common, np.array([len(d)]), np.array([len(e)]))[0]:
            return False
        return rare_jaccard(d, e, templates) < self.rule.min_jaccard
