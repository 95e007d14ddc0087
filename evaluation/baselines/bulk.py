"""The overlap methods' duplicated fractions in bulk: many streams of the same texts at once (the study's grid)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Optional

import numpy as np

from evaluation.baselines.overlap_methods import NgramOverlap, OverlapMethod


class TokenTable:
    """The tokens of a set of distinct texts as dense ids, and the ids of their m-grams (cached per m).

    Equal token sequences get equal ids. An m-gram's id is built exactly from
    smaller ones: the 2^j-grams by pairing two halves, any other n-gram as the
    pair of the two overlapping 2^j-grams (2^j < n) that cover it. Ids of grams
    running across the end of a text are computed but never used.
    """

    def __init__(self, tokenizer: Callable[[str], list[str]], texts: Sequence[Optional[str]]):
        vocab: dict = {}
        tok: list[int] = []
        self.lengths = np.zeros(len(texts), dtype=np.int64)
        for i, text in enumerate(texts):
            if text:
                tokens = tokenizer(text)
                self.lengths[i] = len(tokens)
                tok.extend(vocab.setdefault(t, len(vocab)) for t in tokens)
        self.tokens = np.asarray(tok, dtype=np.int64)
        self.starts = np.concatenate(([0], np.cumsum(self.lengths)[:-1])).astype(np.int64)
        self._grams: dict[int, np.ndarray] = {1: self.tokens}

    def grams(self, n: int) -> np.ndarray:
        """Id of the n-gram starting at each token position (``len(tokens) - n + 1`` of them)."""
        if n not in self._grams:
            m = 1 << (n - 1).bit_length() - 1  # the largest power of two below n
            left = self.grams(m)
            step = n - m
            if len(left) <= step:
                self._grams[n] = left[:0]
            else:
                pair = (left[:-step] << 32) | left[step:]  # ids < 2^32: fewer than 2^32 tokens
                self._grams[n] = np.unique(pair, return_inverse=True)[1].reshape(-1).astype(np.int64)
        return self._grams[n]


class UnitTable:
    """Every unit of a set of distinct texts as a dense integer id, computed once.

    The study scores each overlap method on nine streams drawn from the same
    distinct texts, at several thresholds and n-gram sizes. Instead of
    re-tokenizing every stream and asking a Bloom filter about each unit in
    Python, the units of every distinct text are numbered once (equal units,
    equal ids; n-gram ids come from a :class:`TokenTable`) and :meth:`fractions`
    computes a stream's duplicated fractions with numpy. The result is exactly
    what :meth:`OverlapMethod.fractions` computes with an exact set in place of
    the Bloom filter; the Bloom filter (p = 1e-5) can only add a rare false
    "seen" to it. The study runs each selected method through its real Bloom
    filter too, and records the difference (``pareto.csv``).
    """

    def __init__(self, method: OverlapMethod, texts: Sequence[Optional[str]], tokens: Optional[TokenTable] = None):
        self.method = method
        self.num_texts = len(texts)
        if isinstance(method, NgramOverlap):
            self.ids, self.offsets = self._ngram_ids(method.n, tokens or TokenTable(method.tokenizer, texts))
            self.weights = None
        else:
            self.ids, self.offsets, self.weights = self._unit_ids(method, texts)

    @staticmethod
    def _unit_ids(method: OverlapMethod, texts) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
        vocab: dict = {}
        ids: list[int] = []
        weights: list[float] = []
        offsets = [0]
        weighted = False
        for text in texts:
            if text:
                keys, w = method.units(text)
                ids.extend(vocab.setdefault(k, len(vocab)) for k in keys)
                if w is not None:
                    weighted = True
                    weights.extend(w)
                else:
                    weights.extend([1.0] * len(keys))
            offsets.append(len(ids))
        return (np.asarray(ids, dtype=np.int64), np.asarray(offsets, dtype=np.int64),
                np.asarray(weights, dtype=np.float64) if weighted else None)

    @staticmethod
    def _ngram_ids(n: int, table: TokenTable) -> tuple[np.ndarray, np.ndarray]:
        lengths, starts = table.lengths, table.starts
        grams = table.grams(n)
        num_gram_ids = int(grams.max()) + 1 if len(grams) else 0
        # per text: the n-grams at positions start .. start + len - n, or one unit of all tokens when shorter
        full = lengths >= n
        counts = np.where(full, lengths - n + 1, np.minimum(lengths, 1))
        offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        ids = np.empty(int(offsets[-1]), dtype=np.int64)
        if full.any():
            c = counts[full]
            pos = np.repeat(starts[full] - (np.cumsum(c) - c), c) + np.arange(int(c.sum()))
            ids[np.repeat(full, counts)] = grams[pos]
        short: dict = {}
        for i in np.flatnonzero(~full & (lengths > 0)):
            seq = tuple(table.tokens[starts[i] : starts[i] + lengths[i]].tolist())
            ids[offsets[i]] = num_gram_ids + short.setdefault(seq, len(short))
        return ids, offsets

    def _units_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(document of each unit, unit id, position in the table) for the documents ``texts[rows]``."""
        counts = self.offsets[rows + 1] - self.offsets[rows]
        total = int(counts.sum())
        doc = np.repeat(np.arange(len(rows)), counts)
        pos = np.repeat(self.offsets[rows] - (np.cumsum(counts) - counts), counts) + np.arange(total)
        return doc, self.ids[pos], pos

    def distinct_units(self, rows: np.ndarray) -> int:
        """How many distinct units the documents ``texts[rows]`` hold."""
        return int(np.unique(self._units_of(np.asarray(rows, dtype=np.int64))[1]).size)

    def fractions(self, rows: np.ndarray) -> np.ndarray:
        """Duplicated fraction of each document of a stream whose documents are ``texts[rows]``, in order."""
        rows = np.asarray(rows, dtype=np.int64)
        frac = np.zeros(len(rows), dtype=np.float64)
        doc, ids, pos = self._units_of(rows)
        total = len(ids)
        if total == 0:
            return frac
        first = np.empty(int(ids.max()) + 1, dtype=np.int64)
        first[ids[::-1]] = doc[::-1]  # the first document holding each unit
        seen = first[ids] < doc
        w = self.weights[pos] if self.weights is not None else np.ones(total)
        num = np.bincount(doc, weights=w * seen, minlength=len(rows))
        den = np.bincount(doc, weights=w, minlength=len(rows))
        np.divide(num, den, out=frac, where=den > 0)
        return frac
