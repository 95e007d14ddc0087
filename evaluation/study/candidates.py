"""The product's insert rule over any shingling, fast enough for a grid (the multilingual study).

For one split's distinct texts and one :class:`~evaluation.shingling.Shingling`:

* :func:`shingle_split` computes the shingle sets (plain Python,
  :mod:`evaluation.shingling`), their MinHash signatures at the largest
  ``num_perm`` (smaller ones are prefixes: a MinHash of the first k
  permutations), and keeps each set as sorted 64-bit hashes for exact
  Jaccard/containment. The signatures come from the native MinHash run over the
  shingles written as whitespace-separated tokens (``ngram=1``, no
  normalization), so each shingle is hashed and permuted exactly as a word is.
* :func:`split_band_keys` gives each text's (band, key) in every band
  (``lshbloom_udf._native.band_keys``, ``mix``), one id per (band, key).
* :func:`pass_decisions` is keep-first LSHBloom with an exact set in place of
  the Bloom filters: a document is flagged iff an earlier document the pass
  kept shares a (band, key) with it; flagged documents insert nothing.
* :func:`verify` is the job's verification (``lshbloom_udf.spark.verify``)
  plus containment: a flag stays iff an earlier kept document sharing a
  (band, key) has exact Jaccard ``>= tj`` **or** ``|S_later ∩ S_earlier| / |S_later| >= tc`` (with, given
  ``floor``, Jaccard ``>= floor``: ``containment_min_jaccard``), in the job's two rounds
  (:func:`decide`): round 1 against the documents the pass kept, round 2 (in processing
  order) against the flagged documents round 1 unflagged that stay kept. By default each
  round looks only at the candidates the job's bounds choose (:class:`Bounds`, the product's
  ``lshbloom_udf.spark.verify.sources``); ``bounds=None`` is the unbounded rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from evaluation.shingling import Shingling, shingles
from lshbloom_udf.minhash import band_keys, signatures
from lshbloom_udf.spark.verify.sources import ANCHORS_PER_BUCKET, CANDIDATES_PER_DOCUMENT

_WORD_JOIN = "\u2581"  # joins a word n-gram's words so the shingle is one whitespace-free token


@dataclass
class ShingledSplit:
    shingling: Shingling
    sigs: np.ndarray  # (texts, max num_perm) uint32
    has: np.ndarray  # texts with at least one shingle
    sets: list[np.ndarray]  # sorted distinct int64 hashes per text
    sizes: np.ndarray

    def __post_init__(self):
        self._inter: dict[tuple[int, int], int] = {}

    def intersection(self, i: int, j: int) -> int:
        key = (i, j) if i < j else (j, i)
        got = self._inter.get(key)
        if got is None:
            got = len(np.intersect1d(self.sets[i], self.sets[j], assume_unique=True))
            self._inter[key] = got
        return got


def shingle_split(texts: Sequence[str], shingling: Shingling, num_perm: int = 512, batch: int = 256,
                  scheme: str = "affine32") -> ShingledSplit:
    sigs = np.empty((len(texts), num_perm), dtype=np.uint32)
    sets = []
    for lo in range(0, len(texts), batch):
        tokens = []
        for t in texts[lo : lo + batch]:
            sh = shingles(t, shingling)
            if shingling.unit == "words":
                sh = {s.replace(" ", _WORD_JOIN) for s in sh}
            sets.append(np.unique(np.fromiter((hash(s) for s in sh), dtype=np.int64, count=len(sh))))
            tokens.append(" ".join(sh))
        sigs[lo : lo + len(tokens)] = signatures(tokens, num_perm=num_perm, ngram=1, normalize=False, scheme=scheme)
    sizes = np.array([len(s) for s in sets], dtype=np.int64)
    return ShingledSplit(shingling, sigs, sizes > 0, sets, sizes)


# spreads a band's keys by an odd multiple of its number: one id per (band, key), the bands' ids apart
_BAND_SPREAD = np.uint64(0x9E3779B97F4A7C15)


def bucket_ids(keys: np.ndarray) -> np.ndarray:
    """``keys`` ((documents, b) band keys) as one uint64 id per (band, key): equal ids are one bucket."""
    keys = np.asarray(keys, dtype=np.uint64)
    return keys ^ (np.arange(keys.shape[1], dtype=np.uint64) * _BAND_SPREAD)


def split_band_keys(split: ShingledSplit, num_perm: int, b: int, r: int) -> np.ndarray:
    """Each text's (band, key) in every band as :func:`bucket_ids` ((texts, b) uint64); texts without shingles
    (``split.has`` false) share none (:func:`pass_decisions` leaves them out)."""
    return bucket_ids(band_keys(np.ascontiguousarray(split.sigs[:, :num_perm]), b, r, "mix"))


def shares_bucket(keys: np.ndarray, has: np.ndarray, a: int, b: int) -> bool:
    """Whether texts ``a`` and ``b`` (rows of :func:`split_band_keys`) share a (band, key)."""
    return bool(has[a] and has[b] and np.any(keys[a] == keys[b]))


@dataclass(frozen=True)
class Bounds:
    """The candidates the job's verification looks at (``lshbloom_udf.spark.verify.sources``, "Bounds";
    docs/algorithm.md §8, "Bounded candidates"), with the product's constants by default.

    Round 1: a flagged document's candidates are the earlier documents the pass kept that share a (band, key)
    with it. Round 2: among the round-1-unflagged documents, a bucket (band, key) offers only its first
    ``anchors`` holders (in processing order) to its later holders. Each round then keeps a document's
    ``per_document`` strongest candidates (:meth:`strongest`), and verification takes them in processing order.
    """

    anchors: int = ANCHORS_PER_BUCKET
    per_document: int = CANDIDATES_PER_DOCUMENT

    def strongest(self, evidence: dict[int, tuple[int, int]]) -> list[int]:
        """Of ``{candidate: (bands shared, smallest bucket shared in)}`` the ``per_document`` with the most bands,
        then the smallest bucket, then the earliest (``verify.sources.strongest``), in processing order."""
        ranked = sorted(evidence, key=lambda c: (-evidence[c][0], evidence[c][1], c))
        return sorted(ranked[:self.per_document])


BOUNDED = Bounds()


@dataclass
class PassResult:
    """A stream's pass and what verification needs of it, by stream position."""

    flags: np.ndarray  # the pass's decisions, stream order
    earlier: dict[int, list[int]]  # flagged position -> earlier positions sharing a (band, key)
    buckets: np.ndarray  # (positions, b) uint64: each document's (band, key) ids (:func:`bucket_ids`)
    active: np.ndarray  # documents with shingles (the others share no bucket)

    def __post_init__(self):
        self._round1: dict = {}

    @classmethod
    def of(cls, flags: np.ndarray, buckets: np.ndarray, active: np.ndarray) -> "PassResult":
        """The pass's ``flags`` with each flagged document's earlier active documents sharing a bucket."""
        owners: dict[int, list[int]] = {}
        earlier: dict[int, list[int]] = {}
        for p in np.flatnonzero(active).tolist():
            mine = buckets[p].tolist()
            if flags[p]:
                earlier[p] = sorted({q for x in mine for q in owners.get(x, ())})
            for x in mine:
                owners.setdefault(x, []).append(p)
        return cls(np.asarray(flags, dtype=bool), earlier, buckets, np.asarray(active, dtype=bool))

    def round1(self, bounds: Optional[Bounds]) -> dict[int, list[int]]:
        """Flagged position -> its round-1 candidates (earlier, kept by the pass, sharing a bucket; with
        ``bounds`` the strongest, each sharing its bucket with nothing else the pass kept: size 1), ascending."""
        if bounds not in self._round1:
            pools = {}
            for p, before in self.earlier.items():
                kept = [q for q in before if not self.flags[q]]
                if bounds is not None and len(kept) > bounds.per_document:
                    row = self.buckets[p]
                    kept = bounds.strongest({q: (int(np.count_nonzero(self.buckets[q] == row)), 1) for q in kept})
                pools[p] = kept
            self._round1[bounds] = pools
        return self._round1[bounds]


def pass_decisions(idx: np.ndarray, keys: np.ndarray, has: np.ndarray) -> PassResult:
    """Keep-first LSHBloom on one stream (rows ``idx`` into the split's texts, in stream order; ``keys``: the
    texts' :func:`split_band_keys`)."""
    buckets, active = keys[idx], has[idx]
    flags = np.zeros(len(idx), dtype=bool)
    seen: set = set()
    for p in np.flatnonzero(active).tolist():
        mine = buckets[p].tolist()
        if seen.isdisjoint(mine):
            seen.update(mine)
        else:
            flags[p] = True
    return PassResult.of(flags, buckets, active)


def decide(result: PassResult, verifies, bounds: Optional[Bounds] = BOUNDED, chained: bool = True,
           stats: Optional[dict] = None) -> np.ndarray:
    """The flags verification keeps, in the job's two rounds; ``verifies(p, q, kept)`` decides the pair (flagged
    position ``p``, earlier position ``q``), ``kept`` being the positions kept at that point.

    Round 1: a flag stays when one of its :meth:`PassResult.round1` candidates verifies. Round 2 (``chained``), in
    processing order over the round-1-unflagged documents ``U``: one stays when an earlier document of ``U`` that
    stays kept, sharing a bucket, verifies; else it is kept. With ``bounds`` only a bucket's first
    ``bounds.anchors`` holders in ``U`` are candidates, ranked by the buckets shared and the smallest of their
    sizes (counted in ``U``), cut to ``bounds.per_document`` before the kept ones are taken. ``stats``, given,
    counts the documents whose candidates the bounds cut in each round (``round1_cut``, ``round2_cut``)."""
    kept = ~result.flags
    out = np.zeros(len(result.flags), dtype=bool)
    for p, pool in sorted(result.round1(bounds).items()):
        out[p] = any(verifies(p, q, kept) for q in pool)
    if stats is not None:
        everyone = result.round1(None)
        stats["round1_cut"] = stats.get("round1_cut", 0) + sum(
            len(pool) < len(everyone[p]) for p, pool in result.round1(bounds).items())
    if not chained:
        return out
    unflagged = [p for p in sorted(result.earlier) if not out[p]]
    holders: dict[int, list[int]] = {}
    for u in unflagged:
        for x in result.buckets[u].tolist():
            holders.setdefault(x, []).append(u)
    kept = kept.copy()
    for p in unflagged:
        pool = _round2_pool(p, result.buckets[p].tolist(), holders, bounds, stats)
        if any(kept[q] and verifies(p, q, kept) for q in pool):
            out[p] = True
        else:
            kept[p] = True  # verification unflagged it: it is kept, and verifies later documents
    return out


def _round2_pool(p: int, buckets: list[int], holders: dict[int, list[int]], bounds: Optional[Bounds],
                 stats: Optional[dict]) -> list[int]:
    """Round 2's candidates of ``p`` (its buckets' earlier holders among ``U``, as :func:`decide` says)."""
    evidence: dict[int, tuple[int, int]] = {}
    for x in buckets:
        bucket = holders[x]
        for q in bucket if bounds is None else bucket[:bounds.anchors]:
            if q >= p:
                break
            bands, smallest = evidence.get(q, (0, len(bucket)))
            evidence[q] = (bands + 1, min(smallest, len(bucket)))
    pool = sorted(evidence) if bounds is None else bounds.strongest(evidence)
    if stats is not None and bounds is not None:
        everyone = {q for x in buckets for q in holders[x] if q < p}
        stats["round2_cut"] = stats.get("round2_cut", 0) + (len(pool) < len(everyone))
    return pool


def verify(idx: np.ndarray, result: PassResult, split: ShingledSplit, tj: float, tc: Optional[float],
           floor: Optional[float] = None, template_max_df: Optional[int] = None,
           bounds: Optional[Bounds] = BOUNDED, stats: Optional[dict] = None) -> np.ndarray:
    """The pass's flags an earlier kept document verifies (Jaccard >= ``tj``, or containment >= ``tc`` with
    Jaccard >= ``floor``: the product's containment_min_jaccard), and with ``template_max_df`` the product's
    template rule (:func:`evaluation.study.template_df.verify_df`, frequencies over the stream's kept documents);
    among the candidates ``bounds`` chooses (None: all of them; ``stats``: :func:`decide`'s)."""
    if template_max_df:
        from evaluation.study.template_df import counted_df, shipped_rule, verify_df

        return verify_df(idx, result, split, counted_df(split, idx, result, "kept"), _Thresholds(tj, tc, floor),
                         shipped_rule(template_max_df), bounds, stats)

    def accepts(p, later, earlier, inter, union, kept) -> bool:
        return inter >= tj * union or (tc is not None and inter >= tc * split.sizes[later]
                                       and (floor is None or inter >= floor * union))

    return verify_with(idx, result, split, accepts, bounds, stats)


@dataclass(frozen=True)
class _Thresholds:
    """What :func:`evaluation.study.template_df.verify_df` reads of a candidate."""

    tj: float
    tc: Optional[float]
    floor: Optional[float]


def verify_with(idx: np.ndarray, result: PassResult, split: ShingledSplit, accepts,
                bounds: Optional[Bounds] = BOUNDED, stats: Optional[dict] = None) -> np.ndarray:
    """The pass's flags verified as the product does (:func:`decide`): ``accepts(p, later, earlier, inter, union,
    kept)`` decides a (flagged, earlier kept) pair from ``|S_d ∩ S_e|`` and ``|S_d ∪ S_e|``; a flag no kept
    candidate verifies is unflagged, so kept, and verifies later documents (round 2)."""

    def verifies(p: int, q: int, kept: np.ndarray) -> bool:
        later, earlier = int(idx[p]), int(idx[q])
        inter = split.intersection(later, earlier)
        return accepts(p, later, earlier, inter, split.sizes[later] + split.sizes[earlier] - inter, kept)

    return decide(result, verifies, bounds, stats=stats)
