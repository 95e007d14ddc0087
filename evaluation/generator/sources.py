"""Source pools: reading JSONL, a stable id split, and the cleaning that keeps labels true.

Source pools are cleaned first (:func:`prepare_sources`): documents too short
to survive noise are dropped, as are sources that are themselves
near-copies of an earlier source (symlinked man pages, per-architecture copies
of one file, templated pages such as towlower/towupper: normalized word 5-gram
Jaccard >= ``NEAR_COPY_JACCARD`` = 0.3), since they would be labelled distinct
documents while being near-duplicates by any definition.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from evaluation.generator.variants import strip_markup

# Two sources whose normalized word 5-gram sets have Jaccard >= this are near-copies
# (templated man pages such as towlower/towupper): only the first is kept, since the
# label "distinct source = not a duplicate" would be wrong for the second.
NEAR_COPY_JACCARD = 0.3


@dataclass
class Source:
    id: str
    text: str


def read_jsonl(path: str, text_field: str = "text", id_field: str = "id") -> list[Source]:
    """Documents of a JSONL file (``.gz`` allowed) with an id and a text field."""
    opener = gzip.open if path.endswith(".gz") else open
    out = []
    with opener(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not JSON ({e})") from None
            text = doc.get(text_field)
            if not isinstance(text, str):
                raise ValueError(f"{path}:{lineno}: field {text_field!r} missing or not a string")
            doc_id = doc.get(id_field, f"{os.path.basename(path)}:{lineno}")
            out.append(Source(str(doc_id), text))
    return out


def id_split(doc_id: str, salt: str = "lshbloom-eval") -> float:
    """A stable number in [0, 1) from an id: ``id_split(i) < 0.5`` puts half the ids in one split."""
    h = hashlib.sha1(f"{salt}:{doc_id}".encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def _five_grams(text: str) -> set[int]:
    tokens = re.sub(r"[^\w\s]", " ", text.lower()).split()
    if len(tokens) < 5:
        return {zlib.crc32(" ".join(tokens).encode("utf-8"))}
    return {zlib.crc32(" ".join(tokens[i : i + 5]).encode("utf-8")) for i in range(len(tokens) - 4)}


def char_five_grams(text: str) -> set[int]:
    """Lowercased, whitespace- and punctuation-free character 5-grams: near-copies in scripts without spaces."""
    s = re.sub(r"[^\w]", "", text.lower())
    if len(s) < 5:
        return {zlib.crc32(s.encode("utf-8"))}
    return {zlib.crc32(s[i : i + 5].encode("utf-8")) for i in range(len(s) - 4)}


def near_copy_groups(sources: Sequence[Source], jaccard: float = 0.3, num_perm: int = 128,
                     shingle=_five_grams) -> list[int]:
    """For each source, the index of the first earlier source it nearly copies, or -1.

    Similarity is the exact Jaccard index of lowercased, punctuation-free word
    5-gram sets (or of the sets ``shingle`` gives, e.g. :func:`char_five_grams`); candidates come from an exact (in-memory) LSH at a lower
    threshold so no pair above ``jaccard`` is missed in practice.
    """
    import numpy as np

    shingles = [shingle(s.text) for s in sources]
    # A plain numpy MinHash over the CRC-32 shingle hashes (only to find candidates).
    rng = np.random.RandomState(12345)
    a = rng.randint(1, 2**31 - 1, num_perm).astype(np.uint64) * 2 + 1
    bb = rng.randint(0, 2**31 - 1, num_perm).astype(np.uint64)
    sigs = np.empty((len(sources), num_perm), dtype=np.uint64)
    for i, sh in enumerate(shingles):
        h = np.fromiter(sh, dtype=np.uint64, count=len(sh))
        sigs[i] = ((np.outer(h, a) + bb) & np.uint64(0xFFFFFFFF)).min(axis=0)
    # bands for a low threshold: candidates at ~0.5 * jaccard and above
    r = 2
    b = num_perm // r
    owner = [-1] * len(sources)
    buckets: list[dict] = [dict() for _ in range(b)]
    for i in range(len(sources)):
        cands = set()
        for band in range(b):
            key = sigs[i, band * r : (band + 1) * r].tobytes()
            lst = buckets[band].setdefault(key, [])
            cands.update(lst)
            lst.append(i)
        best = -1
        for j in sorted(cands):
            if owner[j] != -1:
                continue
            inter = len(shingles[i] & shingles[j])
            if inter and inter / (len(shingles[i]) + len(shingles[j]) - inter) >= jaccard:
                best = j
                break
        owner[i] = best
    return owner


def prepare_sources(
    sources: Sequence[Source],
    min_words: int = 50,
    max_words: int = 20000,
    near_copy_jaccard: Optional[float] = NEAR_COPY_JACCARD,
    max_markup: Optional[float] = 0.2,
) -> tuple[list[Source], dict]:
    """The usable source pool: length-filtered, with near-copies of earlier sources removed.

    Sources whose markup is more than ``max_markup`` of their words (toctree
    indexes, files of ``kernel-doc`` directives) are dropped too: their
    rendered form is mostly text that is not in the source.

    Returns the kept sources (input order) and a report of what was dropped.
    """
    seen_text: set[str] = set()
    kept: list[Source] = []
    report = Counter()
    for s in sources:
        n = len(s.text.split())
        if n < min_words:
            report["too_short"] += 1
        elif n > max_words:
            report["too_long"] += 1
        elif max_markup is not None and 1 - len(strip_markup(s.text).split()) / n > max_markup:
            report["mostly_markup"] += 1
        elif s.text in seen_text:
            report["exact_copy"] += 1
        else:
            seen_text.add(s.text)
            kept.append(s)
    if near_copy_jaccard is not None and kept:
        owner = near_copy_groups(kept, near_copy_jaccard)
        report["near_copy"] = sum(o >= 0 for o in owner)
        kept = [s for s, o in zip(kept, owner) if o < 0]
    report["kept"] = len(kept)
    report["input"] = len(sources)
    return kept, dict(report)
