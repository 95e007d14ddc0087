"""The paper's deduplication methods (§3.3, §5.1.2), applied at document level to a stream.

Every method sees the documents in stream order and flags a document as a
duplicate from what it has seen before it ("keep first"); none ever looks ahead.

MinHash methods (decide on band collisions, no Jaccard verification):

``lshbloom``
    this product: :class:`~lshbloom_udf.index.LSHBloomIndex` over the native
    band keys; only non-duplicates are inserted.
``minhashlsh``
    datasketch ``MinHashLSH``, the exact hashmap index: query, and insert the
    document only when no band collides.
``datasketch-lshbloom``
    datasketch ``MinHashLSHBloom`` with the same per-band false-positive rate.

Overlap methods (the document's *duplicated fraction* against a threshold
``T``; every document's units are inserted after it is scored, so the index
holds "everything seen so far", as the original pipelines' filters do):

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
    :func:`dclm_tokens`), n-grams, Bloom filter; duplicated fraction = share of
    n-grams seen.

A document with fewer tokens than ``n`` has one n-gram of all its tokens; a
document without units has fraction 0 and is never flagged. Bloom filters get
the paper's sizing: ``p = 1e-5`` and a capacity estimated from a sample of
1,000 documents (mean units per document × documents).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import random
import re
import shutil
import tempfile
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from lshbloom_udf.index import IndexParams, LSHBloomIndex
from lshbloom_udf.minhash import normalization_mask, permutations, text_band_keys

BLOOM_P = 1e-5
CAPACITY_SAMPLE = 1000


def scratch_dir() -> str:
    """A directory for temporary indexes: /dev/shm when present (as the paper does), else the system temp."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()


@dataclass
class RunResult:
    """One method's decisions on one stream."""

    duplicate: np.ndarray
    seconds: float
    index_bytes: int
    extra: dict = field(default_factory=dict)


# --------------------------------------------------------------------------
# MinHash methods


def reference_shingles(text: Optional[str], ngram: int = 1, normalize="none") -> set[bytes]:
    """The product's shingling contract in plain Python (DESIGN §2), for datasketch."""
    if text is None:
        return set()
    mask = normalization_mask(normalize)
    if mask & 1:
        text = unicodedata.normalize("NFKC", text)
    if mask & 2:
        text = text.lower()
    if mask & 4:
        text = "".join(" " if unicodedata.category(c).startswith("P") else c for c in text)
    tokens = text.split()
    if not tokens:
        return set()
    if len(tokens) < ngram:
        return {" ".join(tokens).encode("utf-8")}
    return {" ".join(tokens[i : i + ngram]).encode("utf-8") for i in range(len(tokens) - ngram + 1)}


def datasketch_minhashes(
    texts: Sequence[Optional[str]], num_perm: int, ngram: int = 1, normalize="none", seed: int = 1, scheme: str = "affine32"
) -> list:
    """datasketch ``MinHash`` objects computed by datasketch itself (``None`` for documents without shingles)."""
    from datasketch import MinHash

    proto = MinHash(num_perm=num_perm, seed=seed, scheme=scheme)
    out = []
    for text in texts:
        shingles = reference_shingles(text, ngram, normalize)
        if not shingles:
            out.append(None)
            continue
        m = MinHash(num_perm=num_perm, seed=seed, scheme=scheme, permutations=proto.permutations)
        m.update_batch(sorted(shingles))
        out.append(m)
    return out


def minhashes_from_signatures(sigs: np.ndarray, has_shingles: np.ndarray, seed: int = 1, scheme: str = "affine32") -> list:
    """datasketch ``MinHash`` objects holding signatures the product computed (bit-identical, tests prove it)."""
    from datasketch import MinHash

    num_perm = sigs.shape[1]
    a, b = permutations(num_perm, seed, scheme)
    perms = (a, b)
    return [
        MinHash(num_perm=num_perm, seed=seed, scheme=scheme, hashvalues=sig, permutations=perms) if has else None
        for sig, has in zip(sigs, has_shingles)
    ]


def lshbloom_decisions(keys: np.ndarray, has_shingles: np.ndarray, params: IndexParams) -> RunResult:
    """This product's keep-first decisions with a fresh on-disk index (in /dev/shm)."""
    path = tempfile.mkdtemp(prefix="lshbloom-eval-", dir=scratch_dir())
    try:
        start = time.perf_counter()
        with LSHBloomIndex.create(os.path.join(path, "index"), params) as index:
            dup = index.query_insert(keys, active=has_shingles)
            stats = index.stats()
        seconds = time.perf_counter() - start
        return RunResult(dup, seconds, stats["bytes_on_disk"], {"b": params.b, "r": params.r})
    finally:
        shutil.rmtree(path, ignore_errors=True)


def datasketch_lsh_decisions(minhashes: Sequence, threshold: float, num_perm: int, bands=None) -> RunResult:
    """datasketch ``MinHashLSH`` (exact hashmap index), keep-first: insert only non-duplicates."""
    from datasketch import MinHashLSH

    start = time.perf_counter()
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm, params=tuple(bands) if bands else None)
    dup = np.zeros(len(minhashes), dtype=bool)
    for i, m in enumerate(minhashes):
        if m is None:
            continue
        if lsh.query(m):
            dup[i] = True
        else:
            lsh.insert(i, m, check_duplication=False)
    seconds = time.perf_counter() - start
    size = len(pickle.dumps(lsh, protocol=pickle.HIGHEST_PROTOCOL))
    return RunResult(dup, seconds, size, {"b": lsh.b, "r": lsh.r})


def datasketch_lshbloom_decisions(
    minhashes: Sequence, threshold: float, num_perm: int, capacity: int, p_band: float, bands=None
) -> RunResult:
    """datasketch ``MinHashLSHBloom`` with per-band rate ``p_band``, keep-first."""
    from datasketch import MinHashLSHBloom

    path = tempfile.mkdtemp(prefix="datasketch-bloom-", dir=scratch_dir())
    try:
        start = time.perf_counter()
        lsh = MinHashLSHBloom(
            threshold=threshold, num_perm=num_perm, n=capacity, fp=p_band, save_dir=path,
            params=tuple(bands) if bands else None,
        )
        dup = np.zeros(len(minhashes), dtype=bool)
        for i, m in enumerate(minhashes):
            if m is None:
                continue
            if lsh.query(m):
                dup[i] = True
            else:
                lsh.insert(m)
        lsh.sync()
        seconds = time.perf_counter() - start
        size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
        return RunResult(dup, seconds, size, {"b": lsh.b, "r": lsh.r})
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run_lshbloom(
    texts: Sequence[Optional[str]],
    threshold: float = 0.5,
    num_perm: int = 256,
    ngram: int = 1,
    normalize="none",
    scheme: str = "affine32",
    seed: int = 1,
    p_effective: float = 1e-5,
    bands=None,
    capacity: Optional[int] = None,
) -> RunResult:
    """End to end: band keys then the index. ``seconds`` includes the MinHash work."""
    params = IndexParams.for_threshold(
        capacity or max(1, len(texts)), threshold, num_perm, bands=bands, ngram=ngram, normalize=normalize,
        scheme=scheme, seed=seed, p_effective=p_effective,
    )
    start = time.perf_counter()
    keys, has = text_band_keys(list(texts), **params.signature_kwargs())
    key_seconds = time.perf_counter() - start
    res = lshbloom_decisions(keys, has, params)
    res.seconds += key_seconds
    return res


# --------------------------------------------------------------------------
# overlap methods

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


# --------------------------------------------------------------------------
# the overlap methods' fractions in bulk (the study's grid)


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


def overlap_method(name: str, ngram: Optional[int] = None) -> OverlapMethod:
    if name not in OVERLAP_METHODS:
        raise ValueError(f"unknown method {name!r}; choose from {sorted(OVERLAP_METHODS)}")
    cls = OVERLAP_METHODS[name]
    if issubclass(cls, NgramOverlap):
        return cls(ngram if ngram is not None else 5)
    return cls()
