"""Paragraph-level dedup: keep-first over the paragraphs of the documents kept (docs/algorithm.md §10).

A document is cut into paragraphs at a separator (``newline``: every line;
``blank``: runs of blank lines), each a span ``[start, end)`` in code points
of the original text, the separator excluded. A paragraph's *canonical form*
is its text normalized as the run normalizes documents, split as
``str.split()`` does and joined by one space; one shorter than ``min_chars``
code points has no keys and is never removed. Its keys: a 64-bit hash of the
canonical form (``ngram`` 0, Dolma's exact paragraphs), or of each of its word
``ngram``-grams (a paragraph of fewer words: one key of them all), as DCLM's
``bff`` keys n-grams.

In the documents' keep order, paragraph by paragraph, each key is looked up
in a Bloom filter and then inserted. A paragraph is *removed* when at least
``overlap`` of its keys were there before it (exact: its one key): its first
occurrence is kept, as Dolma keeps it. Only kept documents' paragraphs are
decided and inserted: a duplicate document is removed whole, so its
paragraphs neither decide nor are removed.

Removing paragraph ``j`` of paragraphs ``0..m-1`` (all of them, those without
keys included) deletes ``[start_j, start_{j+1})`` (it and the separator after
it), or for the last one ``[end_{j-1}, end_j)`` (the separator before it), or
for an only paragraph ``[start_j, end_j)``.

The false-positive rate of the filter removes paragraphs that were never seen:
each is a lost paragraph, so the filter is sized for
:data:`PARAGRAPH_P_EFFECTIVE` per key, final (nothing verifies a paragraph).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from lshbloom_udf import _native
from lshbloom_udf.index.params import PARAGRAPHS_UNIT, IndexParams
from lshbloom_udf.minhash import normalization_mask

MODES = ("off", "annotate", "remove")
SEPARATORS = tuple(_native.PARAGRAPH_SEPARATORS)
# The rate a paragraph filter is sized for: a false positive removes a paragraph no earlier document held.
PARAGRAPH_P_EFFECTIVE = 1e-6
# The most paragraphs a document may have (a paragraph's index in its document is an int32).
MAX_PARAGRAPHS = (1 << 31) - 1


@dataclass(frozen=True)
class ParagraphSpec:
    """How paragraphs are cut, keyed and decided (the paragraph settings of a run)."""

    separator: str = "newline"
    min_chars: int = 1
    ngram: int = 0
    overlap: float = 1.0
    normalize: str = "all"
    seed: int = 1

    def __post_init__(self) -> None:
        if self.separator not in SEPARATORS:
            raise ValueError(f"paragraph separator must be one of {SEPARATORS}, got {self.separator!r}")
        if isinstance(self.min_chars, bool) or not isinstance(self.min_chars, int) or self.min_chars < 1:
            raise ValueError(f"paragraph min_chars must be an integer >= 1, got {self.min_chars!r}")
        if isinstance(self.ngram, bool) or not isinstance(self.ngram, int) or self.ngram < 0:
            raise ValueError(f"paragraph ngram must be an integer >= 0 (0: exact), got {self.ngram!r}")
        if not isinstance(self.overlap, (int, float)) or not 0.0 < self.overlap <= 1.0:
            raise ValueError(f"paragraph overlap must be in (0, 1], got {self.overlap!r}")

    @property
    def unit(self) -> str:
        """What one key of the paragraph index stands for (its :attr:`IndexParams.unit`): runs that key paragraphs
        otherwise cannot share an index."""
        keyed = "exact" if self.ngram == 0 else f"ngram{self.ngram}"
        return f"{PARAGRAPHS_UNIT}{self.separator}/min{self.min_chars}/{keyed}"

    def index_params(self, capacity: int, p_effective: float = PARAGRAPH_P_EFFECTIVE) -> IndexParams:
        """The paragraph index's parameters: one band of one key (the MinHash fields are unused), growing."""
        return IndexParams(b=1, r=1, num_perm=2, capacity=max(int(capacity), 1), seed=self.seed,
                           ngram=max(self.ngram, 1), normalize=self.normalize, p_effective=p_effective,
                           band_key="mix", growth="grow", shingle="words", unit=self.unit)

    def filter_bytes(self, documents: int, keys_per_document: float) -> int:
        """The bytes of a kept paragraph filter sized for ``documents`` of ``keys_per_document`` keys each
        (paragraphs, or their n-grams), in its first generation (lshbloom_udf.index.paragraph_filter)."""
        from lshbloom_udf.index.backends import backend
        from lshbloom_udf.index.paragraph_filter import PARAGRAPH_BLOOM

        params = self.index_params(max(int(documents * keys_per_document), 1))
        return backend(PARAGRAPH_BLOOM).index_bytes(params.capacity, params.p_band, params.b)

    def paragraphs(self, texts) -> "Paragraphs":
        """The paragraphs of ``texts`` (a sequence of ``str``/``None``, or ``_native.ArrowTexts``)."""
        out = _native.paragraph_keys_of(texts, self.separator, self.min_chars, self.ngram,
                                        normalization_mask(self.normalize), self.seed)
        return Paragraphs(*out)


@dataclass(frozen=True)
class Paragraphs:
    """Many documents' paragraphs, flat (:func:`_native.paragraph_keys_of`): document ``d`` holds ``counts[d]``
    paragraphs, paragraph ``p`` the span ``[starts[p], ends[p])`` and ``nkeys[p]`` keys of ``keys``, in order."""

    counts: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    nkeys: np.ndarray
    keys: np.ndarray

    @property
    def first(self) -> np.ndarray:
        """Each document's first paragraph (and one past the last paragraph at the end)."""
        return np.concatenate([[0], np.cumsum(self.counts, dtype=np.int64)])

    @property
    def keyed(self) -> int:
        """Paragraphs with keys (the ones decided)."""
        return int(np.count_nonzero(self.nkeys))

    def removed(self, seen: np.ndarray, overlap: float) -> np.ndarray:
        """Which paragraphs are removed, given ``seen``: for each key, was it in the filter before it."""
        n = len(self.nkeys)
        if n == 0:
            return np.zeros(0, dtype=bool)
        key_first = np.concatenate([[0], np.cumsum(self.nkeys, dtype=np.int64)[:-1]])
        hits = np.add.reduceat(np.concatenate([seen.astype(np.int64), [0]]), np.minimum(key_first, len(seen)))
        has = self.nkeys > 0
        hits = np.where(has, hits, 0)
        # hits / nkeys >= overlap, exactly in integers (overlap a float in (0, 1]).
        return has & (hits >= np.ceil(overlap * self.nkeys.astype(np.float64) - 1e-9))


def deletions(starts: Sequence[int], ends: Sequence[int], removed: Sequence[bool]) -> list[tuple[int, int]]:
    """The ranges of a document's text its removed paragraphs delete (the module's rule), merged, in order."""
    m = len(starts)
    out: list[tuple[int, int]] = []
    for j in range(m):
        if not removed[j]:
            continue
        if j + 1 < m:
            a, b = starts[j], starts[j + 1]
        elif j > 0:
            a, b = ends[j - 1], ends[j]
        else:
            a, b = starts[j], ends[j]
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def remove_paragraphs(text: str, ranges: Sequence[tuple[int, int]]) -> str:
    """``text`` without ``ranges`` (code points, merged and in order: :func:`deletions`)."""
    if not ranges:
        return text
    parts, at = [], 0
    for a, b in ranges:
        parts.append(text[at:a])
        at = b
    parts.append(text[at:])
    return "".join(parts)


def check_paragraph_count(counts: np.ndarray, where: Optional[str] = None) -> None:
    """Refuse a document of more paragraphs than an id can name (:data:`PARAGRAPH_BITS`)."""
    if len(counts) and int(counts.max()) > MAX_PARAGRAPHS:
        from lshbloom_udf.errors import DedupInputError

        raise DedupInputError(f"{where or 'a document'} has {int(counts.max()):,} paragraphs, more than the "
                              f"{MAX_PARAGRAPHS:,} a document may have; use --paragraph-separator blank "
                              "or clean the input")
