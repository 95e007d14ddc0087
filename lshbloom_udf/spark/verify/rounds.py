"""Verification's two rounds over the pass's flags (:func:`verify_flags`, the package's entry point): the rule and
the guarantees are :mod:`lshbloom_udf.spark.verify`'s docs."""

from __future__ import annotations

import functools
import time
from typing import Optional

import numpy as np

from lshbloom_udf.spark.keys import is_in
from lshbloom_udf.spark.verify.crossrun import prior_sources
from lshbloom_udf.spark.verify.rule import Shingling, Verified, VerifiedPairs, VerifyRule
from lshbloom_udf.spark.verify.similarity import similarities
from lshbloom_udf.spark.verify.templates import Templates, flagged_sample, kept_sample, top_up_size
from lshbloom_udf.spark.verify.texts import TextPrefetch, TextsSource


def verify_flags(source, texts_of: TextsSource, flagged_rows, *, shingling: Shingling, rule: VerifyRule,
                 prior_documents: bool, sample_rows: Optional[np.ndarray] = None,
                 exact_rows: Optional[np.ndarray] = None) -> Verified:
    """Verify the pass's flags (the package's docs: :mod:`lshbloom_udf.spark.verify`).

    ``source``: where the candidate pairs come from
    (:class:`~lshbloom_udf.spark.verify.sources.CandidateSource`; the caller
    closes it); ``texts_of``: the candidates' texts, what the driver may hold of them and holds for both rounds;
    ``flagged_rows``: the pass's duplicates (int64 row ids); ``shingling``: how texts become the shingle sets
    compared; ``rule``: when a candidate pair verifies (Jaccard, or containment too); ``prior_documents``: the index
    held documents before this run; ``sample_rows``: the template sample's candidates the pass noted (their texts
    then come with round 1's; None: the sample is found by a Spark job when needed); ``exact_rows``: the run's exact
    copies, left out of ``flagged_rows`` (the pass did not see them) but flagged, so never in the template sample of
    kept documents (:mod:`lshbloom_udf.spark.exact`).
    """
    t0 = time.monotonic()
    flagged = np.unique(np.asarray(flagged_rows, dtype=np.int64))
    out = Verified(pass_flagged=len(flagged))
    all_flagged = flagged if exact_rows is None else np.union1d(flagged, exact_rows)
    refine, sample = _template_step(out, rule, shingling, texts_of, all_flagged, sample_rows)
    if not len(flagged):
        out.seconds = time.monotonic() - t0
        return out
    lap = _laps(out.stages, t0)
    similar = functools.partial(similarities, texts_of=texts_of, shingling=shingling, rule=rule)
    # Every flagged row's text comes with round 1's (round 2's documents are flagged ones, so it reads none), on
    # another thread while round 1's candidates are found.
    also = np.union1d(flagged, sample)
    prefetch = TextPrefetch(texts_of, also)
    try:
        # Round 1: against the documents the pass kept (their keys are unique per band: the package's "Cost").
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


def _template_step(out: Verified, rule: VerifyRule, shingling: Shingling, texts_of: TextsSource, flagged: np.ndarray,
                   sample_rows: Optional[np.ndarray]):
    """``(refine, rows)``: what refines a round's verified pairs, the template rule's :meth:`Templates.refuse` (its
    figures kept in ``out.template``; its sample, documents the pass kept, not ``flagged``), or nothing without one;
    the sample's rows and its top-up's when the pass noted their candidates (round 1 then brings their texts), else
    none."""
    none = np.zeros(0, np.int64)
    if rule.template is None:
        return (lambda pairs: pairs), none
    top_n = top_up_size(rule.template)
    rows = none if sample_rows is None else kept_sample(sample_rows, flagged)
    top_up = none if sample_rows is None else flagged_sample(sample_rows, flagged, top_n)

    held = texts_of.held

    def sample():
        if sample_rows is not None and all(r in held for r in np.union1d(rows, top_up).tolist()):
            # came with round 1's texts (every flagged row's does)
            return [held[r] for r in rows.tolist()], [held[r] for r in top_up.tolist()]
        return texts_of.sample_texts(flagged, top_n)  # the same rows, found by a scan

    templates = Templates(rule.template, rule, shingling, sample=sample,
                          texts=texts_of.held_with)

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
    explains (``prior_documents``: :func:`lshbloom_udf.spark.verify.crossrun.prior_sources`)."""
    first = pairs.first_of_each()
    parts = [pairs.f_rows[first], pairs.k_rows[first], pairs.similarity[first], pairs.measure[first]]
    if prior_documents:
        # Flags no document of this run verifies; "lone": no kept document of this run even shares a key.
        unsourced = flagged[~is_in(flagged, parts[0])]
        lone = unsourced[~is_in(unsourced, np.unique(cand_f))]
        fill = prior_sources(prior_documents, unsourced, lone)
        parts = [np.concatenate([a, c]) for a, c in zip(parts, fill)]
    out._set(*parts)
