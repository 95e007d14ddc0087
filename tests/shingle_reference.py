"""The shingling rules in plain Python, written from their definitions (docs/algorithm.md), for tests.

Normalization: ``dehyphen`` (8), then NFKC (1), lowercase (2), punctuation to
space (4). Units: ``words`` (``str.split()`` n-grams joined by one space),
``chars`` (windows of ``n`` code points of the text without ``str.isspace()``
characters), ``mixed`` (as chars; dense-script code points weigh 3, a shingle
is the shortest run of weight >= n).
"""

from __future__ import annotations

import unicodedata

DEHYPHEN, NFKC, LOWER, PUNCT = 8, 1, 2, 4
HYPHENS = "-\u00ad\u2010"
DENSE = [
    (0x2E80, 0x2FDF), (0x3005, 0x3007), (0x3021, 0x3029), (0x3038, 0x303B), (0x3040, 0x309F), (0x30A0, 0x30FF),
    (0x3100, 0x312F), (0x31A0, 0x31BF), (0x31F0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF), (0xFF66, 0xFF9D), (0x1B000, 0x1B16F), (0x20000, 0x3134F),
]


def is_alphabetic(c: str) -> bool:
    """Rust's ``char::is_alphabetic`` (Unicode Alphabetic) on the characters tests use: letters and letter numbers.

    (Alphabetic also holds Other_Alphabetic combining marks, which the tests' alphabets avoid.)
    """
    return c.isalpha() or unicodedata.category(c) == "Nl"


def dehyphen(text: str) -> str:
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c in HYPHENS and i > 0 and is_alphabetic(text[i - 1]):
            j = i + 1
            while j < n and text[j] in " \t":
                j += 1
            if text.startswith("\r\n", j):
                j += 2
            elif j < n and text[j] in "\r\n":
                j += 1
            else:
                out.append(c)
                i += 1
                continue
            while j < n and text[j] in " \t":
                j += 1
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


def normalize(text: str, flags: int) -> str:
    if flags & DEHYPHEN:
        text = dehyphen(text)
    if flags & NFKC:
        text = unicodedata.normalize("NFKC", text)
    if flags & LOWER:
        text = text.lower()
    if flags & PUNCT:
        text = "".join(" " if unicodedata.category(c).startswith("P") else c for c in text)
    return text


def weight(c: str) -> int:
    cp = ord(c)
    return 3 if any(lo <= cp <= hi for lo, hi in DENSE) else 1


def word_shingles(text: str, n: int) -> list[str]:
    tokens = text.split()
    if not tokens:
        return []
    if len(tokens) < n:
        return [" ".join(tokens)]
    return [" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def char_shingles(text: str, n: int) -> list[str]:
    s = "".join(c for c in text if not c.isspace())
    if not s:
        return []
    if len(s) < n:
        return [s]
    return [s[i : i + n] for i in range(len(s) - n + 1)]


def mixed_shingles(text: str, n: int) -> list[str]:
    s = "".join(c for c in text if not c.isspace())
    out = []
    for i in range(len(s)):
        total, j = 0, i
        while j < len(s) and total < n:
            total += weight(s[j])
            j += 1
        if total < n:
            continue  # this run passes the end of the text
        out.append(s[i:j])
    if not out and s:
        out = [s]
    return out


UNITS = {"words": word_shingles, "chars": char_shingles, "mixed": mixed_shingles}


def shingles(text, n: int, flags: int = 0, unit: str = "words") -> set[bytes]:
    """The distinct shingles of ``text`` as UTF-8 bytes."""
    if text is None:
        return set()
    return {s.encode("utf-8") for s in UNITS[unit](normalize(text, flags), n)}
