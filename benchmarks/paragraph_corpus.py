"""A corpus for paragraph-level dedup benchmarks: real text split into paragraphs by newline, with planted repeats.

    python benchmarks/paragraph_corpus.py --docs 20000 --output build/paragraphs/corpus.jsonl.gz [--seed 0]

Output: gzipped JSONL, one ``{"id": ..., "text": ...}`` per line, ids ``p0000000``, ``p0000001``, ... in
processing order. A paragraph is one line (``text.split("\\n")``, as ``dolma dedupe`` with ``dedupe.paragraphs``
splits it), so blank lines are empty paragraphs.

Source: the English shared corpora (``linux-docs.jsonl.gz``, ``man-pages.jsonl.gz`` in ``/work/shared/corpus`` or
``../../shared/corpus``; ``multilingual-docs`` is left out), 6,026 documents, read in a fixed order and shuffled
with ``--seed``. Document ``i`` takes source ``order[i % S]`` in round ``r = i // S``:

* its body is a window of whole lines of the source, cut to a target size drawn per document (log-normal,
  median ~2.5 kB, clipped to 0.4-6 kB). Round 0 starts at the source's first line, later rounds at a random line.
  A window that reaches the end of its source keeps the source's trailing newline (which nearly all have).
* in rounds ``r >= 1`` each line of 4 or more words has one word replaced by a word drawn from the vocabulary of
  all sources, so rounds do not copy each other wholesale; short lines (blank lines, headings such as ``NAME``,
  ``}``, rule lines) stay as they are and repeat naturally, as they do in the originals.

Planted repeats, drawn independently per document (so a document can get several kinds):

* boilerplate (``BOILERPLATE_SHARE`` = 30 % of documents): 1-3 of ``BOILERPLATE`` (36 fixed banner, footer,
  licence, cookie and share lines, some with non-ASCII characters) inserted at random line positions.
* a templated site (``TEMPLATE_SHARE`` = 5 %): the same ``TEMPLATE_HEADER`` lines before and ``TEMPLATE_FOOTER``
  lines after the document's own (distinct) body.
* copies (``COPY_SHARE`` = 5 %, from document 1 on): a run of 1-3 consecutive non-empty lines of an earlier
  document's body (uniform over the earlier documents, through a reservoir of ``RESERVOIR`` of them) inserted as a
  block at a random line position.

Deterministic: document ``i`` depends only on ``--seed``, ``i`` and documents ``< i``, so the first 20,000
documents of a 200,000-document corpus are the 20,000-document corpus. Standard library only. The summary (counts
of documents, paragraphs, planted lines) is printed to stderr, or returned by :func:`write_corpus`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS_DIRS = (os.path.normpath(os.path.join(HERE, "..", "..", "shared", "corpus")), "/work/shared/corpus")
ENGLISH = ("linux-docs.jsonl.gz", "man-pages.jsonl.gz")

BOILERPLATE_SHARE = 0.30
TEMPLATE_SHARE = 0.05
COPY_SHARE = 0.05
RESERVOIR = 10_000
SIZE_MEDIAN, SIZE_SIGMA, SIZE_MIN, SIZE_MAX = 2500.0, 0.5, 400, 6000

BOILERPLATE = (
    "Skip to main content",
    "Accept all cookies",
    "We use cookies to improve your experience. By continuing to browse you agree to our use of cookies.",
    "This website uses cookies — see our Cookie Policy for details.",
    "Manage cookie preferences",
    "Reject non-essential cookies",
    "Copyright © 2023 The Authors. All rights reserved.",
    "© 2024 Example Media Group. All rights reserved.",
    "Licensed under the Apache License, Version 2.0 (the \"License\"); "
    "you may not use this file except in compliance with the License.",
    "SPDX-License-Identifier: GPL-2.0-or-later",
    "This document is licensed under CC BY-SA 4.0.",
    "Permission is granted to copy, distribute and/or modify this document "
    "under the terms of the GNU Free Documentation License.",
    "THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.",
    "Share this: Twitter · Facebook · LinkedIn · Email",
    "Subscribe to our newsletter for weekly updates.",
    "Sign up for free and never miss a release!",
    "Advertisement",
    "Sponsored content",
    "Back to top ↑",
    "Print this page",
    "Report a problem with this page",
    "Last updated: 12 March 2024",
    "Related articles",
    "Read more »",
    "Previous | Next",
    "Home › Documentation › Reference",
    "Please enable JavaScript to view the comments.",
    "Comments are closed.",
    "Powered by WordPress | Theme by Themeisle",
    "Follow us on Mastodon and GitHub",
    "Contact us: support@example.org",
    "Terms of Service · Privacy Policy · Imprint",
    "Download PDF (1.2 MB)",
    "Was this article helpful? 👍 👎",
    "Café Résumé — naïve façade: the ‘quoted’ “banner” line",
    "ニュースレターを購読する — Subscribe (日本語)",
)

TEMPLATE_HEADER = (
    "Skip to content",
    "ACME Docs — Home | Guides | API Reference | Blog | Community",
    "English | Français | Deutsch | 日本語",
    "Search the documentation…",
)
TEMPLATE_FOOTER = (
    "Was this page helpful? Yes / No",
    "Edit this page on GitHub",
    "© 2019–2024 ACME Software Foundation · Privacy · Terms · Trademarks",
    "Powered by ACME Docs Engine v3.2",
)


def corpus_dir() -> str:
    for d in CORPUS_DIRS:
        if all(os.path.exists(os.path.join(d, name)) for name in ENGLISH):
            return d
    raise FileNotFoundError(f"none of {CORPUS_DIRS} holds {ENGLISH}")


def load_sources(directory: str | None = None) -> list[str]:
    """The texts of the English shared corpora, in file then line order."""
    directory = directory or corpus_dir()
    texts = []
    for name in ENGLISH:
        with gzip.open(os.path.join(directory, name), "rt", encoding="utf-8") as f:
            for line in f:
                text = json.loads(line)["text"]
                if text.strip():
                    texts.append(text)
    return texts


def _vocabulary(sources: list[str]) -> list[str]:
    words = set()
    for text in sources:
        words.update(text.split())
    return sorted(words)


def _target_size(rng: random.Random) -> int:
    size = math.exp(rng.gauss(math.log(SIZE_MEDIAN), SIZE_SIGMA))
    return int(min(SIZE_MAX, max(SIZE_MIN, size)))


def _window(lines: list[str], start: int, target: int) -> tuple[list[str], bool]:
    """Lines ``start..`` up to about ``target`` characters (at least one line); whether the source's end was reached."""
    out, size, i = [], 0, start
    while i < len(lines) and (not out or size + len(lines[i]) + 1 <= target):
        out.append(lines[i])
        size += len(lines[i]) + 1
        i += 1
    return out, i >= len(lines)


def _vary(line: str, vocab: list[str], rng: random.Random) -> str:
    words = line.split(" ")
    slots = [k for k, w in enumerate(words) if w]
    if len(slots) < 4:
        return line
    words[slots[rng.randrange(len(slots))]] = vocab[rng.randrange(len(vocab))]
    return " ".join(words)


def generate(n_docs: int, seed: int = 0, sources: list[str] | None = None, stats: dict | None = None):
    """Yield ``n_docs`` documents ``{"id", "text"}`` (see the module docstring); fill ``stats`` if given."""
    sources = sources if sources is not None else load_sources()
    order = list(range(len(sources)))
    random.Random(seed).shuffle(order)
    split = [None] * len(sources)  # lines of each source, split on first use
    vocab: list[str] | None = None
    reservoir: list[list[str]] = []  # non-empty body lines of a uniform sample of earlier documents
    st = stats if stats is not None else {}
    for key in ("docs", "paragraphs", "empty_paragraphs", "chars", "boilerplate_docs", "boilerplate_lines",
                "template_docs", "copy_docs", "copied_lines", "trailing_newline_docs"):
        st[key] = 0
    for i in range(n_docs):
        rng = random.Random((seed + 1) * 1_000_003 + i)
        s = order[i % len(order)]
        rnd = i // len(order)
        if split[s] is None:
            text = sources[s]
            split[s] = (text[:-1] if text.endswith("\n") else text).split("\n"), text.endswith("\n")
        lines, trailing = split[s]
        start = 0 if rnd == 0 else rng.randrange(len(lines))
        body, reached_end = _window(lines, start, _target_size(rng))
        if rnd >= 1:
            if vocab is None:
                vocab = _vocabulary(sources)
            body = [_vary(line, vocab, rng) for line in body]
        own = [line for line in body if line.strip()]

        doc = list(body)
        if rng.random() < BOILERPLATE_SHARE:
            k = rng.randint(1, 3)
            for _ in range(k):
                doc.insert(rng.randint(0, len(doc)), BOILERPLATE[rng.randrange(len(BOILERPLATE))])
            st["boilerplate_docs"] += 1
            st["boilerplate_lines"] += k
        if reservoir and rng.random() < COPY_SHARE:
            donor = reservoir[rng.randrange(len(reservoir))]
            k = min(rng.randint(1, 3), len(donor))
            a = rng.randrange(len(donor) - k + 1)
            at = rng.randint(0, len(doc))
            doc[at:at] = donor[a:a + k]
            st["copy_docs"] += 1
            st["copied_lines"] += k
        if rng.random() < TEMPLATE_SHARE:
            doc = list(TEMPLATE_HEADER) + doc + list(TEMPLATE_FOOTER)
            st["template_docs"] += 1
        ends_with_newline = reached_end and trailing
        text = "\n".join(doc) + ("\n" if ends_with_newline else "")

        if own:
            if len(reservoir) < RESERVOIR:
                reservoir.append(own)
            else:
                j = rng.randrange(i + 1)
                if j < RESERVOIR:
                    reservoir[j] = own
        pieces = text.split("\n")
        st["docs"] += 1
        st["paragraphs"] += len(pieces)
        st["empty_paragraphs"] += sum(1 for p in pieces if not p)
        st["chars"] += len(text)
        st["trailing_newline_docs"] += ends_with_newline
        yield {"id": f"p{i:07d}", "text": text}


def write_corpus(output: str, n_docs: int, seed: int = 0, compresslevel: int = 6) -> dict:
    """Write the corpus to ``output`` (gzipped JSONL); return the summary counts."""
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    stats: dict = {}
    tmp = output + ".part"
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=compresslevel) as f:
        for doc in generate(n_docs, seed, stats=stats):
            f.write(json.dumps(doc, ensure_ascii=False))
            f.write("\n")
    os.replace(tmp, output)
    stats["seed"] = seed
    stats["output"] = output
    return stats


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=20_000, help="number of documents (default 20,000)")
    ap.add_argument("--output", required=True, help="gzipped JSONL to write (fields id, text)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    stats = write_corpus(args.output, args.docs, args.seed)
    print(json.dumps(stats, indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
