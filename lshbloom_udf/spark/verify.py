"""Verification of the pass's flags, and the kept document each removed one duplicates (``verify=True``).

The pass flags a document ``d`` when one of its ``b`` band keys is in its
band's Bloom filter. That happens when an earlier kept document ``e`` shares
the band (``sig_d[i·r:(i+1)·r] = sig_e[i·r:(i+1)·r]``, probability ``s^r`` per
band at Jaccard ``s``, so ``1 - (1 - s^r)^b`` in all: the LSH S-curve, which is
not a step at the threshold ``T``) or by a Bloom false positive. Verification
keeps the flag only where it is earned. Round 1:

    d stays flagged  ⇔  ∃ e kept by the pass, row(e) < row(d), e shares a (band, key) with d,
                        and  J(S_d, S_e) = |S_d ∩ S_e| / |S_d ∪ S_e| >= T_v
                        or   C(S_d, S_e) = |S_d ∩ S_e| / |S_d|        >= T_c  (containment_threshold, if set)
                             and J(S_d, S_e)                           >= J_c  (containment_min_jaccard, if set)

with ``S`` the shingle sets of the contract (the same shingles, n-grams and
normalization as the signatures, all computed by :func:`shingle_set`) and
``T_v = verify_threshold`` (default the threshold). ``C`` is the share of the
later document's shingles found in the earlier one: a truncation, excerpt or
section drop keeping a fraction ``f`` of ``e`` has ``J ≈ f`` but ``C ≈ 1``
(``J <= C <= 1``, ``J = C·|S_d| / |S_d ∪ S_e|``). Candidates still come from
the bands, so containment only rescues pairs the LSH stage proposed (Jaccard
near the banding threshold or above): a tiny document inside a huge one is not
a candidate (docs/algorithm.md §8). ``J`` and ``C`` are exact, not the MinHash estimate: decisions are the
definition's (a user can recompute them from the two texts), as MLlib's
``approxSimilarityJoin`` verifies with the exact distance. Measured on 450
candidate-like pairs of the evaluation streams (2.5 kB documents, defaults): the
estimate from 512 permutations costs 93 µs per pair and decides 1 of 450 pairs
differently at ``T = 0.45``; the exact sets 245 µs (docs/algorithm.md, "verification").

Round 2: a document round 1 unflagged is kept, so it is a candidate for the
later ones: among the round-1-unflagged documents, in processing order, ``d``
is flagged when an earlier one that stays kept shares a (band, key) with it and
verifies it by the same rule. (Without round 2 a permissive candidate stage loses recall: the
first copy of a source, falsely flagged by a collision and then unflagged, was
never inserted, and its later copies could find no kept source.)

Guarantees (tests/test_spark_verify.py, tests/test_spark_verify_containment.py):

- verification never adds a flag (only the pass's flagged rows are examined);
- every document still flagged has an earlier document that is kept in the
  output and verifies it: ``duplicate_of`` names it — of its strongest candidates, the earliest (smallest row
  id, the processing order) verified one among those the pass kept, or if none,
  the earliest verified one among those round 2 kept — ``similarity`` is their
  exact Jaccard when it reaches ``T_v``, else their containment, and
  ``similarity_measure`` says which ("jaccard" or "containment").
- With a kept index that held documents before this run, a flag no document of
  this run verifies is judged against the earlier runs' records (a b-bit MinHash
  sketch and size of each document they kept: :mod:`lshbloom_udf.spark.crossrun`):
  it stays flagged where an earlier document verifies it by the estimated
  similarity (``duplicate_of`` names that document), and is unflagged otherwise.
  Only where an earlier run kept no records (an index from before them) does it
  stay flagged unverified, with ``duplicate_of`` and ``similarity`` null.

Cost: candidates are found without a self-join of every document's keys
(:mod:`lshbloom_udf.spark.verify_sources`). Under the socket stream the driver
pass keeps the flagged documents' keys (``F·b``) and the stream keeps every
document's keys in its spool, so round 1 is one sequential scan of the spool on
the driver, each kept document's ``(band, key)`` pairs looked up natively in the
flagged ones', and round 2 a join of the ``U`` round-1-unflagged documents' keys
in memory: no key is computed twice, no Spark job. Without a spool (the sharded
pass, ``toLocalIterator`` transfer, a reproduced run, a spool too large for its
disk) the keys are computed again on the executors: the flagged documents'
``(band, key)`` pairs go into a Bloom filter (built on the driver, ~12 bits per
pair, 4 probes: ~0.6 % false positives), the kept documents' keys are scanned
through it, and only the pairs that pass are joined with the flagged ones'.
Either way the kept documents' keys are unique per band (a kept document shares
no key with an earlier one, or the pass would have flagged it), so each flagged
pair meets at most one kept document: at most ``b`` round-1 candidates per
flagged document. Round 2's documents may share a key with many (a template
family), so a bucket pairs its members only with its first few, and each round
keeps a document's strongest ``CANDIDATES_PER_DOCUMENT`` candidates
(:mod:`~lshbloom_udf.spark.verify_sources`, "Bounds"). Then only the texts of the documents in a candidate pair are
read, and ``J`` and ``C`` come from one native intersection of the two shingle
sets (exact: shingles compared by their bytes). On the driver
(:func:`lshbloom_udf._native.indexed_overlaps`) the pairs are sorted by the later document, whose set is built once,
and an earlier text in three pairs or more (a template's anchor) is shingled once before them, within the driver's
budget (``DriverMemory.shingle_cache``); on the executors :func:`lshbloom_udf._native.shingle_overlaps` keeps one
side's set over consecutive pairs. Work grows with the flagged documents (at most ``CANDIDATES_PER_DOCUMENT``
similarities per flagged document and round), not with ``N²``; the spool scan reads ``N·b`` keys once.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from lshbloom_udf.spark.keys import is_in
from lshbloom_udf.spark.verify_candidates import PairBloom, pair_hashes
from lshbloom_udf.spark.verify_templates import TemplateRule, Templates

# The measure that verified a pair, by code (Verified.measure, the similarity_measure column); exact: a byte-identical
# copy found before the pass (lshbloom_udf.spark.exact), never computed here.
MEASURES = ("jaccard", "containment", "exact")
JACCARD, CONTAINMENT, EXACT = 0, 1, 2

__all__ = ["MEASURES", "PairBloom", "Shingling", "TemplateRule", "Verified", "VerifyRule", "pair_hashes", "shingle_set",
           "verify_flags"]


def _default(name: str):
    """A setting's declared default (lshbloom_udf.config: one declaration per setting)."""
    from lshbloom_udf.config import DedupConfig

    return DedupConfig.__dataclass_fields__[name].default


@dataclass(frozen=True)
class VerifyRule:
    """When a candidate pair (later ``d``, earlier ``e``) verifies:
    ``J >= jaccard``, or ``C >= containment`` and ``J >= containment_min_jaccard``.

    ``containment`` None: Jaccard only (the rule before containment_threshold).
    ``containment_min_jaccard`` (default: the setting's, 0.3) is the containment branch's Jaccard floor: a
    partial copy keeping a share ``f`` of its source has ``J ≈ f``, while a small templated page inside a larger
    sibling has ``C`` high but ``J`` low; None: no floor. Decided from the three counts alone, so any similarity
    stage that counts ``|S_d ∩ S_e|``, ``|S_d|``, ``|S_e|`` can feed :meth:`judge`. ``template`` (None: off)
    then refuses the Jaccard-only matches of templated siblings (:mod:`lshbloom_udf.spark.verify_templates`).
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
    :attr:`CrossRun.sources <lshbloom_udf.spark.crossrun.CrossRun>`; ``-1`` where it cannot be verified: an
    earlier run that kept no records), ``similarity`` (float64, NaN where ``of_rows`` is -1) and
    ``measure`` (int8: the index in :data:`MEASURES` of the measure that
    verified, -1 where ``of_rows`` is -1) are aligned; ``pass_flagged`` the
    pass's flags, ``candidate_pairs`` the (flagged, earlier kept) pairs whose
    similarity was computed, ``candidates_beyond_bound`` those found but left out (past a document's
    strongest :data:`~lshbloom_udf.spark.verify_sources.CANDIDATES_PER_DOCUMENT`).
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
    unit: str = "words"


def shingle_set(text: Optional[str], shingling: Shingling) -> frozenset:
    """The shingle set ``S`` of a text, by the contract (the signatures' shingles): the reference of the native
    overlaps verification computes (:func:`~lshbloom_udf.spark.verify_similarity.overlaps`, the same sets)."""
    from lshbloom_udf import _native

    return frozenset(_native.shingles(text, shingling.ngram, shingling.normalize_mask, shingling.unit))


# -- the driver's side ------------------------------------------------------------------------


def verify_flags(source, texts_of, flagged_rows, *, shingling: Shingling, rule: VerifyRule,
                 prior_documents: bool, broadcast_limit: int, driver_text_bytes: int,
                 sample_rows: Optional[np.ndarray] = None, exact_rows: Optional[np.ndarray] = None) -> Verified:
    """Verify the pass's flags (see the module's docs).

    ``source``: where the candidate pairs come from
    (:class:`~lshbloom_udf.spark.verify_sources.CandidateSource`; the caller
    closes it); ``texts_of(rows_frame, small)``: a DataFrame (``_lshb_row``,
    ``text``) of the rows of a one-column row-id frame (``small``: it may be
    broadcast), ``texts_of.at_most(n)`` an upper bound of ``n`` texts' UTF-8
    bytes (or None); ``flagged_rows``: the pass's duplicates (int64 row ids);
    ``shingling``: how texts become the shingle sets compared; ``rule``: when a
    candidate pair verifies (Jaccard, or containment too);
    ``prior_documents``: the index held documents before this run; ``driver_text_bytes``: the candidates'
    texts the driver may hold (``verify_driver_bytes``); ``sample_rows``: the template sample's candidates the pass
    noted (their texts then come with round 1's; None: the sample is found by a Spark job when needed);
    ``exact_rows``: the run's exact copies, left out of ``flagged_rows`` (the pass did not see them) but flagged, so
    never in the template sample of kept documents (:mod:`lshbloom_udf.spark.exact`).
    """
    t0 = time.monotonic()
    flagged = np.unique(np.asarray(flagged_rows, dtype=np.int64))
    out = Verified(pass_flagged=len(flagged))
    held: dict = {}  # texts on the driver, for both rounds
    all_flagged = flagged if exact_rows is None else np.union1d(flagged, exact_rows)
    refine, sample = _template_step(out, rule, shingling, texts_of, all_flagged, held, broadcast_limit, sample_rows)
    if not len(flagged):
        out.seconds = time.monotonic() - t0
        return out
    lap = _laps(out.stages, t0)
    from lshbloom_udf.spark.verify_similarity import TextPrefetch, similarities

    similar = functools.partial(similarities, texts_of=texts_of, shingling=shingling, rule=rule,
                                broadcast_limit=broadcast_limit, driver_text_bytes=driver_text_bytes, held=held)
    # Every flagged row's text comes with round 1's (round 2's documents are flagged ones, so it reads none), on
    # another thread while round 1's candidates are found.
    also = np.union1d(flagged, sample)
    prefetch = TextPrefetch(texts_of, also, held, broadcast_limit, driver_text_bytes)
    try:
        # Round 1: against the documents the pass kept (their keys are unique per band: see "Cost").
        cand = source.round1(flagged, lap)
    except BaseException:
        prefetch.join(raise_error=False)  # round 1's error is the one to report
        raise
    prefetch.join()
    out.candidate_pairs = len(cand[0])
    lap("candidates")
    _decide(out, flagged, cand[0], refine(similar(cand, also=also)), prior_documents)
    lap("similarity")
    # Round 2: the documents round 1 unflagged are kept, so candidates for the later ones of them.
    unflagged = flagged[~is_in(flagged, out.rows)]
    if len(unflagged) > 1:
        cand = source.round2(unflagged)
        out.candidate_pairs += len(cand[0])
        _chain(out, refine(similar(cand)))
        lap("round2")
    out.candidates_beyond_bound = source.beyond
    out.seconds = time.monotonic() - t0
    return out


def _template_step(out: Verified, rule: VerifyRule, shingling: Shingling, texts_of, flagged: np.ndarray,
                   held: dict, broadcast_limit: int, sample_rows: Optional[np.ndarray]):
    """``(refine, rows)``: what refines a round's verified pairs, the template rule's :meth:`Templates.refuse` (its
    figures kept in ``out.template``; its sample, documents the pass kept, not ``flagged``), or nothing without one;
    the sample's rows and its top-up's when the pass noted their candidates (round 1 then brings their texts), else
    none."""
    none = np.zeros(0, np.int64)
    if rule.template is None:
        return (lambda pairs: pairs), none
    from lshbloom_udf.spark.verify_similarity import held_texts
    from lshbloom_udf.spark.verify_templates import flagged_sample, kept_sample, top_up_size

    rows = none if sample_rows is None else kept_sample(sample_rows, flagged)
    top_up = none if sample_rows is None else flagged_sample(sample_rows, flagged, top_up_size(rule.template))

    def sample():
        if sample_rows is not None and all(r in held for r in np.union1d(rows, top_up).tolist()):
            # came with round 1's texts (every flagged row's does)
            return [held[r] for r in rows.tolist()], [held[r] for r in top_up.tolist()]
        return texts_of.sample_texts(flagged, top_up_size(rule.template))  # the same rows, found by a scan

    templates = Templates(rule.template, rule, shingling, sample=sample,
                          texts=lambda rows: held_texts(texts_of, rows, held, broadcast_limit))

    def refine(pairs):
        pairs = templates.refuse(pairs)
        out.template = templates.summary()
        return pairs

    out.template = templates.summary()
    return refine, np.union1d(rows, top_up)


def _laps(stages: dict, t0: float):
    last = [t0]

    def lap(name: str) -> None:
        now = time.monotonic()
        stages[name] = round(now - last[0], 3)
        last[0] = now

    return lap


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


def _chain(out: Verified, pairs: VerifiedPairs) -> None:
    """Add to ``out`` the round-1-unflagged documents an earlier one of them verifies, in processing order.

    ``pairs``: (later row, earlier row) among the round-1-unflagged documents
    that the rule verifies. A document is flagged when an earlier one *that
    stays kept* verifies it (the earliest such names it); the others stay kept,
    so candidates for later ones.
    """
    starts = pairs.first_of_each()
    if not len(starts):
        return
    ends = np.r_[starts[1:], len(pairs.f_rows)]
    flagged: dict = {}  # row -> index of the pair that verifies it
    for lo, hi in zip(starts.tolist(), ends.tolist()):
        for j in range(lo, hi):
            if int(pairs.k_rows[j]) not in flagged:
                flagged[int(pairs.f_rows[lo])] = j
                break
    if flagged:
        at = np.fromiter(flagged.values(), np.int64, len(flagged))
        out._set(*(np.concatenate([mine, new[at]]) for mine, new in
                   ((out.rows, pairs.f_rows), (out.of_rows, pairs.k_rows), (out.similarity, pairs.similarity),
                    (out.measure, pairs.measure))))


def _decide(out: Verified, flagged: np.ndarray, cand_f: np.ndarray, pairs: VerifiedPairs,
            prior_documents) -> None:
    """Fill ``out``: each verified flagged row with its earliest verified kept row; those an earlier run's document
    explains (``prior_documents``: :func:`lshbloom_udf.spark.crossrun.prior_sources`)."""
    first = pairs.first_of_each()
    parts = [pairs.f_rows[first], pairs.k_rows[first], pairs.similarity[first], pairs.measure[first]]
    if prior_documents:
        from lshbloom_udf.spark.crossrun import prior_sources

        # Flags no document of this run verifies; "lone": no kept document of this run even shares a key.
        unsourced = flagged[~is_in(flagged, parts[0])]
        lone = unsourced[~is_in(unsourced, np.unique(cand_f))]
        fill = prior_sources(prior_documents, unsourced, lone)
        parts = [np.concatenate([a, c]) for a, c in zip(parts, fill)]
    out._set(*parts)
