"""The overlap methods: a document's *duplicated fraction* against a threshold ``T``.

Every document's units are inserted after it is scored, so the index holds
"everything seen so far", as the original pipelines' filters do:

``ccnet``
    Wenzek et al.: lines, normalized for dedup as CCNet does (strip, lowercase,
    digits → 0, CCNet's Unicode punctuation and non-printing characters
    removed), hashed with SHA-1 (first 8 bytes) into an exact hash set;
    duplicated fraction = share of non-empty lines seen before.
``dolma``
    Dolma paragraph dedup: paragraphs are newline-separated lines (as Dolma
    splits them), exact text, in a pybloomfiltermmap3 Bloom filter;
    duplicated fraction = share of the document's characters in paragraphs
    seen before ("percentage of document text duplicated").
``dolma-ngram``
    Dolma's n-gram mode: whitespace tokens (``str.split``), word n-grams
    (stride 1), Bloom filter; duplicated fraction = share of n-grams seen.
``dclm``
    DataComp-LM's BFF, document level: Unicode word segmentation (see
    :func:`~evaluation.baselines.units.dclm_tokens`), n-grams,
    Bloom filter; duplicated fraction = share of n-grams seen.

A document without units has fraction 0 and is never flagged. Bloom filters get
the paper's sizing: ``p = 1e-5`` and a capacity estimated from a sample of
1,000 documents (mean units per document × documents).
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Optional

import numpy as np

from evaluation.baselines.common import RunResult, scratch_dir
from evaluation.baselines.units import ccnet_normalize, dclm_tokens, ngrams

BLOOM_P = 1e-5
CAPACITY_SAMPLE = 1000


class OverlapMethod:
    """A document's duplicated fraction against an index of every unit seen before it."""

    name = "overlap"
    uses_bloom = True

    def units(self, text: str) -> tuple[list, Optional[list[float]]]:
        """The document's units (hashable keys) and optional weights (``None``: each counts 1)."""
        raise NotImplementedError

    def params(self) -> dict:
        return {}

    def fractions(self, texts: Sequence[Optional[str]], capacity: Optional[int] = None, seed: int = 0) -> RunResult:
        """Duplicated fraction of each document; ``RunResult.extra['fractions']`` holds them.

        Decisions for a threshold are ``fractions >= T`` (see :meth:`decide`);
        because every document's units are inserted whatever its decision, one
        pass serves every threshold.
        """
        start = time.perf_counter()
        texts = list(texts)
        if capacity is None:
            capacity = self.estimate_capacity(texts, seed=seed)
        index, cleanup, size_of = self._new_index(capacity)
        try:
            frac = np.zeros(len(texts), dtype=np.float64)
            for i, text in enumerate(texts):
                if not text:
                    continue
                keys, weights = self.units(text)
                if not keys:
                    continue
                seen = [k in index for k in keys]
                if weights is None:
                    frac[i] = sum(seen) / len(keys)
                else:
                    total = sum(weights)
                    frac[i] = sum(w for s, w in zip(seen, weights) if s) / total if total else 0.0
                index.update(keys)
            seconds = time.perf_counter() - start
            nbytes = size_of(index)
        finally:
            cleanup(index)
        return RunResult(frac > 0, seconds, nbytes, {"fractions": frac, "capacity": capacity})

    @staticmethod
    def decide(fractions: np.ndarray, threshold: float) -> np.ndarray:
        return (fractions >= threshold) & (fractions > 0)

    def run(self, texts: Sequence[Optional[str]], threshold: float, capacity: Optional[int] = None) -> RunResult:
        res = self.fractions(texts, capacity)
        res.duplicate = self.decide(res.extra["fractions"], threshold)
        return res

    def estimate_capacity(self, texts: Sequence[Optional[str]], sample: int = CAPACITY_SAMPLE, seed: int = 0) -> int:
        """The paper's estimate: mean units of ``sample`` random documents × number of documents."""
        if not texts:
            return 1
        idx = random.Random(seed).sample(range(len(texts)), min(sample, len(texts)))
        mean = sum(len(self.units(texts[i])[0]) if texts[i] else 0 for i in idx) / len(idx)
        return max(1, int(round(mean * len(texts))))

    def _new_index(self, capacity: int):
        if self.uses_bloom:
            import pybloomfilter

            path = tempfile.mkdtemp(prefix=f"{self.name}-", dir=scratch_dir())
            bf = pybloomfilter.BloomFilter(capacity, BLOOM_P, os.path.join(path, "filter.bloom"))

            def cleanup(index):
                index.close()
                shutil.rmtree(path, ignore_errors=True)

            return bf, cleanup, lambda index: os.path.getsize(os.path.join(path, "filter.bloom"))

        return set(), (lambda index: None), (lambda index: 8 * len(index))


class CCNet(OverlapMethod):
    """CCNet line dedup applied at document level (exact SHA-1 hash set, share of lines)."""

    name = "ccnet"
    uses_bloom = False

    def units(self, text):
        keys = []
        for line in text.split("\n"):
            norm = ccnet_normalize(line)
            if norm:
                keys.append(hashlib.sha1(norm.encode("utf-8")).digest()[:8])
        return keys, None


class Dolma(OverlapMethod):
    """Dolma paragraph dedup at document level: share of characters in paragraphs seen before."""

    name = "dolma"

    def units(self, text):
        keys, weights = [], []
        for para in text.split("\n"):
            para = para.strip()
            if para:
                keys.append(para)
                weights.append(float(len(para)))
        return keys, weights


class NgramOverlap(OverlapMethod):
    def __init__(self, n: int, tokenizer: Callable[[str], list[str]]):
        if n < 1:
            raise ValueError(f"n-gram size must be >= 1, got {n}")
        self.n = n
        self.tokenizer = tokenizer

    def units(self, text):
        return ngrams(self.tokenizer(text), self.n), None

    def params(self) -> dict:
        return {"ngram": self.n}


class DolmaNgram(NgramOverlap):
    """Dolma's n-gram mode at document level: whitespace tokens."""

    name = "dolma-ngram"

    def __init__(self, n: int = 5):
        super().__init__(n, str.split)


class DCLM(NgramOverlap):
    """DCLM BFF at document level: Unicode word segments."""

    name = "dclm"

    def __init__(self, n: int = 5, segmenter: str = "regex"):
        super().__init__(n, lambda text: dclm_tokens(text, segmenter))
        self.segmenter = segmenter

    def params(self) -> dict:
        return {"ngram": self.n, "segmenter": self.segmenter}


OVERLAP_METHODS = {"ccnet": CCNet, "dolma": Dolma, "dolma-ngram": DolmaNgram, "dclm": DCLM}


def overlap_method(name: str, ngram: Optional[int] = None) -> OverlapMethod:
    if name not in OVERLAP_METHODS:
        raise ValueError(f"unknown method {name!r}; choose from {sorted(OVERLAP_METHODS)}")
    cls = OVERLAP_METHODS[name]
    if issubclass(cls, NgramOverlap):
        return cls(ngram if ngram is not None else 5)
    return cls()
