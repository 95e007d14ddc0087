"""How each method cuts a document into units: shingles, normalized lines, tokens, n-grams.

A document with fewer tokens than ``n`` has one n-gram of all its tokens
(:func:`ngrams`, and :func:`reference_shingles` for the MinHash shingles).
"""

from __future__ import annotations

import re
from typing import Optional

from evaluation.shingling import Shingling, shingles
from lshbloom_udf.minhash import normalization_mask


def reference_shingles(text: Optional[str], ngram: int = 1, normalize="none") -> set[bytes]:
    """The product's word shingles (docs/algorithm.md §1, §1b) in plain Python, for datasketch: the study's one
    reference (:mod:`evaluation.shingling`, unit ``words``) with the product's normalization mask, dehyphen included."""
    if text is None:
        return set()
    mask = normalization_mask(normalize)
    steps = tuple(step for step, bit in _MASK_BITS if mask & bit)
    return {s.encode("utf-8") for s in shingles(text, Shingling("words", ngram, steps))}


# The native normalization bits (lshbloom_udf.minhash.normalization_mask) and the steps they name.
_MASK_BITS = (("dehyphen", 8), ("nfkc", 1), ("lower", 2), ("punct", 4))


# CCNet's text_normalizer: Unicode punctuation it removes for dedup, and non-printing characters.
_CCNET_PUNCT = "，。、„”“«»１」「《》´∶：？！（）；–—．～’…━〈〉【】％►"
_CCNET_STRIP = re.compile("[" + re.escape(_CCNET_PUNCT) + "".join(map(chr, list(range(0, 32)) + list(range(127, 160)))) + "]")
_DIGITS = re.compile(r"\d")


def ccnet_normalize(line: str) -> str:
    """CCNet's ``normalize_for_dedup``: strip, lowercase, digits to 0, its punctuation and control characters removed."""
    line = line.strip()
    if not line:
        return line
    line = line.lower()
    line = _DIGITS.sub("0", line)
    return _CCNET_STRIP.sub("", line)


# An approximation of Unicode (UAX #29) word boundaries: letters/digits/underscore runs joined by
# MidNumLet (. ' ’), MidLetter ':' between letters, MidNum , ; between digits; every other
# non-space character is a token of its own (as unicode-segmentation's split_word_bounds keeps it).
_UAX29_APPROX = re.compile(
    r"\w+(?:(?:[.'’]|(?<=[^\W\d_]):(?=[^\W\d_])|(?<=\d)[,;](?=\d))\w+)*|[^\w\s]"
)


def dclm_tokens(text: str, segmenter: str = "regex") -> list[str]:
    """DCLM's tokens: Unicode word-boundary segments without the whitespace ones.

    ``segmenter="regex"`` (default) is a regular-expression approximation of
    UAX #29 (99.7 % of tokens equal to ``uniseg``'s on the shared corpora, and
    ~300x faster); ``"uniseg"`` uses the ``uniseg`` package when it is installed.
    """
    if segmenter == "uniseg":
        from uniseg.wordbreak import words  # optional dependency

        return [w for w in words(text) if not w.isspace()]
    if segmenter != "regex":
        raise ValueError(f"segmenter must be 'regex' or 'uniseg', got {segmenter!r}")
    return _UAX29_APPROX.findall(text)


def ngrams(tokens: list[str], n: int) -> list[str]:
    if not tokens:
        return []
    if len(tokens) < n:
        return [" ".join(tokens)]
    return [" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
