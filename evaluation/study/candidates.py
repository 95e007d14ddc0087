"""The product's insert rule over any shingling, fast enough for a grid (the multilingual study).

For one split's distinct texts and one :class:`~evaluation.shingling.Shingling`:

* :func:`shingle_split` computes the shingle sets (plain Python,
  :mod:`evaluation.shingling`), their MinHash signatures at the largest
  ``num_perm`` (smaller ones are prefixes: a MinHash of the first k
  permutations), and keeps each set as sorted 64-bit hashes for exact
  Jaccard/containment. The signatures come from the native MinHash run over the
  shingles written as whitespace-separated tokens (``ngram=1``, no
  normalization), so each shingle is hashed and permuted exactly as a word is.
* :func:`colliding_pairs` lists the text pairs that share a (band, key)
  (``lshbloom_udf._native.band_keys``, ``mix``).
* :func:`pass_decisions` is keep-first LSHBloom with an exact set in place of
  the Bloom filters: a document is flagged iff an earlier document the pass
  kept shares a (band, key) with it; flagged documents insert nothing.
* :func:`verify` is the job's verification (``lshbloom_udf.spark.verify``)
  plus containment: a flag stays iff an earlier kept document (kept by the
  pass, or unflagged by verification before it) sharing a (band, key) has
  exact Jaccard ``>= tj`` **or** ``|S_later ∩ S_earlier| / |S_later| >= tc`` (with, given ``floor``,
  Jaccard ``>= floor``: ``containment_min_jaccard``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from evaluation.shingling import Shingling, shingles
from lshbloom_udf.minhash import band_keys, signatures

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


def colliding_pairs(split: ShingledSplit, num_perm: int, b: int, r: int) -> dict[int, set[int]]:
    """For each text, the other texts sharing a (band, key) with it (texts without shingles share none)."""
    keys = band_keys(np.ascontiguousarray(split.sigs[:, :num_perm]), b, r, "mix")
    # one key space for all bands: a band's keys are spread by an odd multiplier of its number
    flat = (keys ^ (np.arange(b, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)))[split.has]
    rows = np.flatnonzero(split.has)
    flat_keys = flat.ravel()
    order = np.argsort(flat_keys, kind="stable")
    sorted_keys = flat_keys[order]
    same = np.flatnonzero(sorted_keys[1:] == sorted_keys[:-1])
    nbrs: dict[int, set[int]] = {}
    if not len(same):
        return nbrs
    # runs of equal keys: start where the previous pair was not equal
    starts = same[np.r_[True, np.diff(same) > 1]]
    for s in starts.tolist():
        e = s + 1
        while e < len(sorted_keys) and sorted_keys[e] == sorted_keys[s]:
            e += 1
        docs = sorted({int(rows[k // b]) for k in order[s:e].tolist()})
        for x in docs:
            nbrs.setdefault(x, set()).update(d for d in docs if d != x)
    return nbrs


@dataclass
class PassResult:
    flags: np.ndarray  # the pass's decisions, stream order
    earlier: dict[int, list[int]]  # flagged position -> earlier positions sharing a (band, key)


def pass_decisions(idx: np.ndarray, nbrs: dict[int, set[int]], has: np.ndarray) -> PassResult:
    """Keep-first LSHBloom on one stream (rows ``idx`` into the split's texts, in stream order)."""
    pos = {int(t): p for p, t in enumerate(idx.tolist())}
    flags = np.zeros(len(idx), dtype=bool)
    kept = np.zeros(len(idx), dtype=bool)
    earlier: dict[int, list[int]] = {}
    for p, t in enumerate(idx.tolist()):
        if not has[t]:
            continue
        before = sorted(q for q in (pos.get(o) for o in nbrs.get(t, ())) if q is not None and q < p)
        if any(kept[q] for q in before):
            flags[p] = True
            earlier[p] = before
        else:
            kept[p] = True
    return PassResult(flags, earlier)


def verify(idx: np.ndarray, result: PassResult, split: ShingledSplit, tj: float, tc: Optional[float],
           floor: Optional[float] = None, template_max_df: Optional[int] = None) -> np.ndarray:
    """The pass's flags an earlier kept document verifies (Jaccard >= ``tj``, or containment >= ``tc`` with
    Jaccard >= ``floor``: the product's containment_min_jaccard), and with ``template_max_df`` the product's
    template rule (:func:`evaluation.study.template_df.verify_df`, frequencies over the stream's kept documents)."""
    if template_max_df:
        from evaluation.study.template_df import counted_df, verify_df

        rule = (template_max_df, 0.3, 0.6)
        return verify_df(idx, result, split, counted_df(split, idx, result, "kept"), _Thresholds(tj, tc, floor), rule)

    def accepts(p, later, earlier, inter, union, kept) -> bool:
        return inter >= tj * union or (tc is not None and inter >= tc * split.sizes[later]
                                       and (floor is None or inter >= floor * union))

    return verify_with(idx, result, split, accepts)


@dataclass(frozen=True)
class _Thresholds:
    """What :func:`evaluation.study.template_df.verify_df` reads of a candidate."""

    tj: float
    tc: Optional[float]
    floor: Optional[float]


def verify_with(idx: np.ndarray, result: PassResult, split: ShingledSplit, accepts) -> np.ndarray:
    """The pass's flags verified in processing order, as the product does: ``accepts(p, later, earlier, inter,
    union, kept)`` decides a (flagged, earlier kept) pair from ``|S_d ∩ S_e|`` and ``|S_d ∪ S_e|``; a flag no
    kept candidate verifies is unflagged, so kept, and verifies later documents."""
    kept = ~result.flags
    out = np.zeros(len(idx), dtype=bool)
    for p in sorted(result.earlier):
        later = int(idx[p])
        for q in result.earlier[p]:
            if not kept[q]:
                continue
            earlier = int(idx[q])
            inter = split.intersection(later, earlier)
            union = split.sizes[later] + split.sizes[earlier] - inter
            if accepts(p, later, earlier, inter, union, kept):
                out[p] = True
                break
        if not out[p]:
            kept[p] = True  # verification unflagged it: it is kept, and verifies later documents
    return out
