"""The candidate shingle units of the multilingual study, as plain-Python definitions.

These are the *rules* (issue 20, docs/evaluation.md); the native core implements the same
ones, and must match them exactly:

* **normalization** (each step optional, in this order): ``dehyphen`` (below),
  NFKC, lowercase, punctuation (Unicode category ``P*``) to a space;
* ``dehyphen``: a hyphen (U+002D, U+00AD, U+2010) right after an alphabetic
  character (:func:`is_alphabetic`: the native core's ``char::is_alphabetic``, so
  letters and letter numbers such as ``Ⅻ``, never digits or ``_``) and followed by
  optional spaces/tabs, one line break (``\\n``, ``\\r\\n``, ``\\r``) and optional
  spaces/tabs is removed with that whitespace (``docu-\\n  ment`` → ``document``);
* ``words``: ``str.split`` tokens, word n-grams joined by one space; fewer
  tokens than n (≥ 1) → one shingle of all;
* ``chars``: every ``str.isspace()`` character deleted; all windows of n
  consecutive code points; fewer than n (≥ 1) → one shingle of all;
* ``mixed``: as ``chars``, but code points in the dense ranges
  (:data:`DENSE_RANGES`: Han, kana, Hangul, ...) weigh 3 and others 1; the
  shingle starting at i is the shortest run i..j of total weight ≥ n; runs
  passing the end emit nothing, except that a non-empty text of total weight
  < n gives one shingle of all.

A shingle set is a ``set[str]``; the study hashes them (:func:`shingle_hashes`).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Optional

import numpy as np

UNITS = ("words", "chars", "mixed")
NORMALIZE_STEPS = ("dehyphen", "nfkc", "lower", "punct")

# Inclusive code point ranges whose characters carry about a word's information each.
DENSE_RANGES = (
    (0x2E80, 0x2FDF), (0x3005, 0x3007), (0x3021, 0x3029), (0x3038, 0x303B), (0x3040, 0x309F),
    (0x30A0, 0x30FF), (0x3100, 0x312F), (0x31A0, 0x31BF), (0x31F0, 0x31FF), (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF), (0xAC00, 0xD7AF), (0xF900, 0xFAFF), (0xFF66, 0xFF9D), (0x1B000, 0x1B16F),
    (0x20000, 0x3134F),
)
DENSE_WEIGHT = 3

# A hyphen, then [ \t]*, one line break, [ \t]*; it is removed only after an alphabetic character (checked in
# the replacement, on the original text: a rejected or removed match ends in whitespace, so the character before
# a later hyphen is never part of an earlier match, as in the native left-to-right scan).
_HYPHEN_BREAK = re.compile("[-\u00ad\u2010][ \t]*(?:\r\n|\n|\r)[ \t]*")


@dataclass(frozen=True)
class Shingling:
    """One candidate: a unit, its n, and the normalization steps (a subset of :data:`NORMALIZE_STEPS`)."""

    unit: str = "words"
    ngram: int = 4
    normalize: tuple[str, ...] = ("nfkc", "lower", "punct")

    def __post_init__(self):
        if self.unit not in UNITS:
            raise ValueError(f"unit must be one of {UNITS}, got {self.unit!r}")
        if self.ngram < 1:
            raise ValueError(f"ngram must be >= 1, got {self.ngram!r}")
        unknown = set(self.normalize) - set(NORMALIZE_STEPS)
        if unknown:
            raise ValueError(f"unknown normalization steps {sorted(unknown)}; choose from {NORMALIZE_STEPS}")

    def label(self) -> str:
        norm = ",".join(s for s in NORMALIZE_STEPS if s in self.normalize) or "none"
        return f"{self.unit}{self.ngram} [{norm}]"


def is_alphabetic(c: str) -> bool:
    """Rust's ``char::is_alphabetic`` (Unicode ``Alphabetic``), the product's letter test, as far as Python's
    ``unicodedata`` can say it: letters (``L*``) and letter numbers (``Nl``: ``Ⅻ``). Digits and ``_`` are not.

    ``Alphabetic`` also holds the ``Other_Alphabetic`` marks (e.g. Devanagari vowel signs), which ``unicodedata``
    does not expose: a hyphen right after such a mark is joined by the product and kept here (the same gap as
    ``tests/shingle_reference.py``; the study's corpora have no such hyphenation).
    """
    return c.isalpha() or unicodedata.category(c) == "Nl"


def dehyphenate(text: str) -> str:
    """Join words hyphenated across a line break (the ``dehyphen`` step)."""

    def join(m: re.Match) -> str:
        return "" if m.start() > 0 and is_alphabetic(text[m.start() - 1]) else m.group(0)

    return _HYPHEN_BREAK.sub(join, text)


def normalize(text: str, steps: tuple[str, ...]) -> str:
    if "dehyphen" in steps:
        text = dehyphenate(text)
    if "nfkc" in steps:
        text = unicodedata.normalize("NFKC", text)
    if "lower" in steps:
        text = text.lower()
    if "punct" in steps:
        text = "".join(" " if unicodedata.category(c).startswith("P") else c for c in text)
    return text


def word_shingles(text: str, n: int) -> set[str]:
    tokens = text.split()
    if not tokens:
        return set()
    if len(tokens) < n:
        return {" ".join(tokens)}
    return {" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def _squeeze(text: str) -> str:
    return "".join(c for c in text if not c.isspace())


def char_shingles(text: str, n: int) -> set[str]:
    s = _squeeze(text)
    if not s:
        return set()
    if len(s) < n:
        return {s}
    return {s[i : i + n] for i in range(len(s) - n + 1)}


def is_dense(c: str) -> bool:
    cp = ord(c)
    return any(lo <= cp <= hi for lo, hi in DENSE_RANGES)


def mixed_shingles(text: str, n: int) -> set[str]:
    s = _squeeze(text)
    if not s:
        return set()
    weights = [DENSE_WEIGHT if is_dense(c) else 1 for c in s]
    if sum(weights) < n:
        return {s}
    out = set()
    j, total = 0, 0  # the window s[i:j] and its weight
    for i in range(len(s)):
        while j < len(s) and total < n:
            total += weights[j]
            j += 1
        if total < n:  # the run from i passes the end, as do all later ones
            break
        out.add(s[i:j])
        total -= weights[i]
    return out


def _dense_mask(cps: np.ndarray) -> np.ndarray:
    mask = np.zeros(len(cps), dtype=bool)
    for lo, hi in DENSE_RANGES:
        mask |= (cps >= lo) & (cps <= hi)
    return mask


def mixed_shingles_fast(text: str, n: int) -> set[str]:
    """:func:`mixed_shingles` with numpy window ends (the same set; the study's shingler)."""
    s = _squeeze(text)
    if not s:
        return set()
    cps = np.frombuffer(s.encode("utf-32-le"), dtype=np.uint32)
    cum = np.concatenate(([0], np.cumsum(np.where(_dense_mask(cps), DENSE_WEIGHT, 1))))
    if cum[-1] < n:
        return {s}
    # the shingle at i ends at the first j with cum[j] - cum[i] >= n; none once that passes the end
    ends = np.searchsorted(cum, cum[:-1] + n, side="left")
    starts = np.flatnonzero(ends <= len(s))
    return {s[i:j] for i, j in zip(starts.tolist(), ends[starts].tolist())}


_UNIT_FN = {"words": word_shingles, "chars": char_shingles, "mixed": mixed_shingles_fast}


def shingles(text: Optional[str], shingling: Shingling) -> set[str]:
    """The shingle set of ``text`` under ``shingling`` (empty for None or an empty text)."""
    if text is None:
        return set()
    return _UNIT_FN[shingling.unit](normalize(text, shingling.normalize), shingling.ngram)


def shingle_hashes(text: Optional[str], shingling: Shingling) -> np.ndarray:
    """The shingle set as sorted distinct 64-bit hashes (Python's string hash: stable within one process)."""
    return np.unique(np.fromiter((hash(s) for s in shingles(text, shingling)), dtype=np.int64))
