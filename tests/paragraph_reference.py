"""Paragraph dedup in plain Python, written from its definition (lshbloom_udf/paragraphs.py), for tests.

Exact sets of canonical forms (no hashing, no Bloom filter), keep-first in document order.
"""

from __future__ import annotations

import random

from shingle_reference import normalize

from lshbloom_udf.sample import docstring_documents



def spans(text: str, separator: str) -> list[tuple[int, int]]:
    """The paragraphs' ``[start, end)`` (code points): lines, or runs of lines that are not blank."""
    lines, at = [], 0
    for line in text.split("\n"):
        lines.append((at, at + len(line)))
        at += len(line) + 1
    if separator == "newline":
        return lines
    out: list[tuple[int, int]] = []
    open_ = None
    for s, e in lines:
        blank = text[s:e].strip() == "" and all(c.isspace() for c in text[s:e])
        if blank:
            if open_ is not None:
                out.append(open_)
                open_ = None
        elif open_ is None:
            open_ = (s, e)
        else:
            open_ = (open_[0], e)
    if open_ is not None:
        out.append(open_)
    return out


def units(paragraph: str, flags: int, min_chars: int, ngram: int) -> list[str]:
    """A paragraph's keys as strings: its canonical form, or its word n-grams (none when too short)."""
    tokens = normalize(paragraph, flags).split()
    canonical = " ".join(tokens)
    if not canonical or len(canonical) < min_chars:
        return []
    if ngram == 0 or len(tokens) <= ngram:
        return [canonical]
    return [" ".join(tokens[i:i + ngram]) for i in range(len(tokens) - ngram + 1)]


def decide(texts: list[str], separator: str = "newline", flags: int = 0, min_chars: int = 1, ngram: int = 0,
           overlap: float = 0.8) -> list[list[int]]:
    """For each text, the indices of its removed paragraphs, keep-first over all of them in order."""
    seen: set[str] = set()
    out = []
    for text in texts:
        removed = []
        for j, (s, e) in enumerate(spans(text, separator)):
            keys = units(text[s:e], flags, min_chars, ngram)
            hits = 0
            for k in keys:
                hits += k in seen
                seen.add(k)
            if keys and hits >= overlap * len(keys) - 1e-9:
                removed.append(j)
        out.append(removed)
    return out


def removed_text(text: str, separator: str, removed: list[int]) -> str:
    """``text`` without its removed paragraphs, each with the separator after it (the last: before it)."""
    sp = spans(text, separator)
    gone = [False] * len(text)
    for j in removed:
        if j + 1 < len(sp):
            a, b = sp[j][0], sp[j + 1][0]
        elif j > 0:
            a, b = sp[j - 1][1], sp[j][1]
        else:
            a, b = sp[j]
        for i in range(a, b):
            gone[i] = True
    return "".join(c for c, g in zip(text, gone) if not g)


BOILERPLATE = ["Accept all cookies", "© 2024 Example Corp. All rights reserved.", "Home | About | Contact",
               "Share this page:", "Licensed under the Apache License, Version 2.0"]
EDGES = ["", "\n", "\n\n\n", "one line", "trailing\n", "é a\n\n日本\n", " \t\n\u3000\nx\u2028y\n\n\nz",
         "Hello, World!\nhello   world\nHELLO WORLD?!", "a\r\nb\r\n\r\nc", "\u00a0\n\u0085\nwords here"]


def corpus(n: int = 300, seed: int = 5) -> list[str]:
    """Standard-library docstrings with planted boilerplate lines, repeated paragraphs of earlier documents and
    near-copies of them (case, punctuation, spacing changed)."""
    rng = random.Random(seed)
    docs = docstring_documents(["json", "csv", "textwrap", "argparse", "collections", "statistics"], 10)[:n]
    out: list[str] = []
    for text in docs:
        lines = text.split("\n")
        if rng.random() < 0.3:
            lines.insert(rng.randrange(len(lines) + 1), rng.choice(BOILERPLATE))
        if out and rng.random() < 0.2:
            earlier = rng.choice(out).split("\n\n")
            copied = rng.choice(earlier)
            if rng.random() < 0.5:
                copied = copied.upper().replace(".", " . ")
            lines.append("\n" + copied)
        out.append("\n".join(lines))
    return out + EDGES
