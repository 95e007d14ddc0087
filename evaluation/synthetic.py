"""Small source pools without any corpus: documentation-like texts built from the standard library's docstrings.

For tests and smoke runs of the generator and the study. Each source has a
title with a reST underline, a few paragraphs of docstring text and an
indented literal block, so every extraction path has something to change.
"""

from __future__ import annotations

import json
import random
from typing import Optional

from evaluation.generator import Source


def synthetic_sources(n: int = 200, seed: int = 0, paragraphs: tuple[int, int] = (3, 5), min_words: int = 40) -> list[Source]:
    """``n`` distinct documents (fewer if the docstrings run out), deterministic for a seed and a Python version."""
    from lshbloom_udf.sample import stdlib_documents

    docs = [" ".join(d.split()) for d in stdlib_documents(min_words)]
    rng = random.Random(seed)
    rng.shuffle(docs)
    out: list[Source] = []
    pos = 0
    while len(out) < n:
        k = rng.randint(*paragraphs)
        if pos + k > len(docs):
            break
        paras = docs[pos : pos + k]
        pos += k
        title = " ".join(paras[0].split()[:5]).rstrip(".,:;")
        lines = [title, "=" * len(title), ""]
        for i, para in enumerate(paras):
            words = para.split()
            # wrap at ~72 columns like a source file
            line: list[str] = []
            for w in words:
                if sum(len(x) + 1 for x in line) + len(w) > 72:
                    lines.append(" ".join(line))
                    line = []
                line.append(w)
            if line:
                lines.append(" ".join(line))
            lines.append("")
            if i == 0:
                lines += ["::", "", f"    example_{len(out)}(value=1)  # literal block", ""]
        out.append(Source(f"src-{len(out):05d}", "\n".join(lines)))
    return out


def write_sources(sources: list[Source], path: str) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for s in sources:
            f.write(json.dumps({"id": s.id, "text": s.text}, ensure_ascii=False) + "\n")
    return path


def synthetic_jsonl(path: str, n: int = 200, seed: int = 0, paragraphs: Optional[tuple[int, int]] = None) -> str:
    return write_sources(synthetic_sources(n, seed, paragraphs or (3, 5)), path)
