"""Exact set-based references for verification with Jaccard or containment (tests/spark/verify/test_spark_verify_containment.py).

Everything here is plain Python over sets, written from the contract
(docs/algorithm.md §1, §4b, §8), not from the product's code: the shingles, the
two insert rules of the pass over the band keys, and verification's two
rounds. Only the band keys come from ``lshbloom_udf.minhash.text_band_keys``
(the MinHash contract that other tests check against datasketch).
"""

from __future__ import annotations

import random
import unicodedata
from dataclasses import dataclass
from typing import Optional

import numpy as np

from lshbloom_udf.config import TEMPLATE_BELOW, TEMPLATE_MIN_JACCARD
from lshbloom_udf.minhash import text_band_keys


def shingles(text: Optional[str], ngram: int, normalize: str) -> set[bytes]:
    """The distinct word n-grams of ``text`` after the normalization steps named in ``normalize``, as UTF-8."""
    if text is None:
        return set()
    steps = {"nfkc", "lower", "punct"} if normalize == "all" else set(normalize.split(",")) - {"none", ""}
    if "nfkc" in steps:
        text = unicodedata.normalize("NFKC", text)
    if "lower" in steps:
        text = text.lower()
    if "punct" in steps:
        text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)
    words = text.split()
    if not words:
        return set()
    if len(words) < ngram:
        return {" ".join(words).encode()}
    return {" ".join(words[i:i + ngram]).encode() for i in range(len(words) - ngram + 1)}


def jaccard(d: set, e: set) -> float:
    return len(d & e) / len(d | e) if d | e else 0.0


def containment(d: set, e: set) -> float:
    """C(d, e): the share of ``d``'s shingles that are in ``e``."""
    return len(d & e) / len(d) if d else 0.0


def band_keys(texts: list[str], config) -> tuple[list[set], np.ndarray]:
    """Each document's set of (band, key) pairs, and whether it has shingles."""
    keys, active = text_band_keys(texts, **config.index_params().signature_kwargs())
    return [{(band, int(k)) for band, k in enumerate(row)} for row in keys], active


def pass_flags(pairs: list[set], active: np.ndarray, insert: str) -> list[bool]:
    """The pass's flags with exact sets for Bloom filters: ``first`` inserts the kept documents' pairs, ``all``
    every document's; a document is flagged when one of its pairs is already in."""
    seen: set = set()
    flags = []
    for mine, has in zip(pairs, active):
        flagged = bool(has) and not seen.isdisjoint(mine)
        flags.append(flagged)
        if has and (insert == "all" or not flagged):
            seen |= mine
    return flags


@dataclass(frozen=True)
class Verdict:
    """Why a flag stays: the earlier kept document, the similarity reported, its measure, and the round."""

    of: int
    similarity: float
    measure: str
    round: int


def judge(d: set, e: set, t_jaccard: float, t_containment: Optional[float],
          t_floor: Optional[float] = None) -> Optional[tuple[float, str]]:
    """(similarity, measure) when the pair verifies: Jaccard first (it is reported when both pass); containment
    only where the Jaccard also reaches ``t_floor`` (containment_min_jaccard), when given."""
    j = jaccard(d, e)
    if j >= t_jaccard:
        return j, "jaccard"
    c = containment(d, e)
    if t_containment is not None and c >= t_containment and (t_floor is None or j >= t_floor):
        return c, "containment"
    return None


@dataclass(frozen=True)
class Template:
    """The template rule (template_max_df): a Jaccard-only verdict with J < ``below`` also needs the Jaccard of the
    two sets without the shingles ``max_df`` documents the pass kept hold to reach ``min_jaccard``."""

    max_df: int
    below: float = TEMPLATE_BELOW
    min_jaccard: float = TEMPLATE_MIN_JACCARD


def template_shingles(sets: list[set], flags: list[bool], max_df: int) -> set:
    """The shingles held by at least ``max_df`` of the documents the pass kept."""
    counts: dict = {}
    for s, flagged in zip(sets, flags):
        if not flagged:
            for x in s:
                counts[x] = counts.get(x, 0) + 1
    return {x for x, n in counts.items() if n >= max_df}


def reference_verify(sets: list[set], pairs: list[set], flags: list[bool], t_jaccard: float,
                     t_containment: Optional[float], t_floor: Optional[float] = None,
                     template: Optional[Template] = None, bounds: Optional["Bounds"] = None) -> dict[int, Verdict]:
    """Position of each flag verification keeps -> its :class:`Verdict`.

    Round 1: the earliest earlier document the pass kept that shares a (band,
    key) and verifies. Else (round 2), in processing order: the earliest earlier
    document verification unflagged and that stays kept, sharing a pair, that verifies.
    With ``bounds`` (the product's, by default), each round looks only at the
    candidates :class:`Bounds` chooses.
    """
    bounds = bounds or Bounds()
    common = template_shingles(sets, flags, template.max_df) if template else set()

    def verdict(d: set, e: set):
        v = judge(d, e, t_jaccard, t_containment, t_floor)
        if v is None or template is None or v[1] != "jaccard" or v[0] >= template.below:
            return v
        if judge(d, e, 2.0, t_containment, t_floor) is not None:  # containment verifies it too: exempt
            return v
        return v if jaccard(d - common, e - common) >= template.min_jaccard else None

    def first_verified(i: int, pool: list[int]):
        return next(((c, v) for c in pool if (v := verdict(sets[i], sets[c]))), None)

    kept_by_pass = [i for i, f in enumerate(flags) if not f]
    verdicts: dict[int, Verdict] = {}
    for i in (i for i, f in enumerate(flags) if f):
        got = first_verified(i, bounds.round1(i, pairs, kept_by_pass))
        if got is not None:
            verdicts[i] = Verdict(got[0], got[1][0], got[1][1], 1)
    round1_unflagged = [i for i, f in enumerate(flags) if f and i not in verdicts]
    kept: set = set()  # round 2: the round-1-unflagged documents that stay kept
    for i in round1_unflagged:
        pool = [c for c in bounds.round2(i, pairs, round1_unflagged) if c in kept]
        got = first_verified(i, pool)
        if got is not None:
            verdicts[i] = Verdict(got[0], got[1][0], got[1][1], 2)
        else:
            kept.add(i)
    return verdicts


@dataclass(frozen=True)
class Bounds:
    """The candidates verification looks at (docs/algorithm.md §8, "Bounded candidates"), from the definition: a
    round-2 bucket (band, key) offers only its first ``anchors`` holders; each document keeps its ``per_document``
    candidates with the most shared bands, then the smallest shared bucket, then the earliest; the pool is then
    taken in processing order. Defaults: the product's constants."""

    anchors: Optional[int] = None
    per_document: Optional[int] = None

    def _limits(self) -> tuple[int, int]:
        from lshbloom_udf.spark.verify.sources import ANCHORS_PER_BUCKET, CANDIDATES_PER_DOCUMENT

        return self.anchors or ANCHORS_PER_BUCKET, self.per_document or CANDIDATES_PER_DOCUMENT

    def round1(self, i: int, pairs: list[set], kept: list[int]) -> list[int]:
        evidence = {c: (len(pairs[i] & pairs[c]), 1) for c in kept if c < i and not pairs[i].isdisjoint(pairs[c])}
        return self._strongest(evidence)

    def round2(self, i: int, pairs: list[set], among: list[int]) -> list[int]:
        anchors, _ = self._limits()
        evidence: dict = {}
        for p in pairs[i]:
            holders = [u for u in among if p in pairs[u]]
            for c in holders[:anchors]:
                if c < i:
                    bands, smallest = evidence.get(c, (0, len(among) + 1))
                    evidence[c] = (bands + 1, min(smallest, len(holders)))
        return self._strongest(evidence)

    def _strongest(self, evidence: dict) -> list[int]:
        _, per_document = self._limits()
        ranked = sorted(evidence, key=lambda c: (-evidence[c][0], evidence[c][1], c))
        return sorted(ranked[:per_document])


# -- a stream of partial copies, built from generated word sequences ----------------------------


def partial_copy_stream(sources: int, seed: int) -> list[tuple[str, str]]:
    """(text, kind) documents: each source, then some of: a truncation, an excerpt or a section drop keeping
    40-90 % of it, a near-exact copy (2 words replaced); sometimes a partial copy comes *before* its source (so
    round 2 has work); and unrelated documents between."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(4000)] + ["Alpha,", "beta.", "GAMMA", "Ünïcode", "ﬁne"]
    docs: list[tuple[str, str]] = []
    for _ in range(sources):
        words = [rng.choice(vocab) for _ in range(rng.randint(60, 140))]
        n = len(words)
        keep = int(round(n * rng.uniform(0.4, 0.9)))
        start = rng.randint(0, n - keep)
        cut = rng.randint(1, keep - 1)
        variants = {
            "truncation": words[:keep],
            "excerpt": words[start:start + keep],
            "section_drop": words[:cut] + words[cut + n - keep:],
            "near_copy": [w if rng.random() > 2 / n else "zz" for w in words],
        }
        chosen = [(" ".join(v), k) for k, v in variants.items() if rng.random() < 0.6]
        original = (" ".join(words), "source")
        if chosen and rng.random() < 0.2:
            docs += [chosen[0], original, *chosen[1:]]
        else:
            docs += [original, *chosen]
        docs.append((" ".join(rng.choice(vocab) for _ in range(rng.randint(30, 90))), "unrelated"))
    return docs


def template_family(pages: int, planted: int, seed: int, frame: int = 60,
                    body: tuple[int, int] = (100, 140)) -> list[tuple[str, str]]:
    """(text, kind): ``pages`` pages of one template (a ``frame``-word header and footer around ``body`` words of
    their own), then ``planted`` near-copies of random pages (two words in a hundred replaced), with an unrelated
    document every tenth page."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(20000)]

    def words(n: int) -> list[str]:
        return [rng.choice(vocab) for _ in range(n)]

    head, foot = " ".join(words(frame)), " ".join(words(frame))
    bodies = [words(rng.randint(*body)) for _ in range(pages)]
    docs = []
    for i, own in enumerate(bodies):
        docs.append((f"{head}\n{' '.join(own)}\n{foot}", "page"))
        if i % 10 == 9:
            docs.append((" ".join(words(150)), "unrelated"))
    for i in rng.sample(range(pages), planted):
        own = [w if rng.random() > 0.02 else rng.choice(vocab) for w in bodies[i]]
        docs.append((f"{head}\n{' '.join(own)}\n{foot}", "copy"))
    return docs
