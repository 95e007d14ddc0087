"""The default keys are pinned: a digest of the band keys of the product's default settings on a fixed
mixed-script corpus. Indexes built earlier and the datasketch-equality tests depend on keys staying
bit-identical, so speed work on normalization, shingling or hashing must leave these digests unchanged
(they were taken from the code before it was optimized; the native tests pin every unit and scheme:
``native/src/minhash/pinned.rs``)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from lshbloom_udf.minhash import text_band_keys

# Code points every step of normalization and shingling treats differently.
FRAGMENTS = [
    "The Quick Brown Fox, jumps over the lazy dog!",
    "don't stop\u2014now; (really) \"quoted\" [x] {y} a_b @home #tag 50% & more?",
    "docu-\nment hyphen-\r\nated end-\n  of-line soft\u00ad\nhyphen uni\u2010\ncode",
    "tabs\tand\x0bvertical\x0cfeeds\x1c\x1d\x1e\x1fseps\x85nel\xa0nbsp\u2003em\u3000ideo",
    "\uff21\uff22\uff23\uff01 \ufb01ne \u2460 \u33a1 \u2126 cafe\u0301 \u212bngstrom",
    "\u039f\u0394\u039f\u03a3 \u0130stanbul STRASSE Stra\u00dfe \u1e9e \u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",
    "\u6f22\u5b57\u3068\u304b\u306a\u3001\u30ab\u30bf\u30ab\u30ca\u3002\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\uff0c\u4e2d\u6587\u7ffb\u8bd1",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8 \uff76\uff80\uff76\uff85 \U00020000\U0002a6d6 emoji \U0001f600",
    "MiXeD 123 4.5e6 x+y=z $5 <tag> a|b ~c ^d `e` \u00bfQu\u00e9? \u00abguillemets\u00bb",
    "plain ascii words only for the common case of a document in english with enough text",
]
SEPARATORS = [" ", "\n", "", "\t", "  ", "-\n", "\u3000"]
DEFAULTS = dict(b=64, r=4, num_perm=256, ngram=11, seed=1, scheme="poisson",
                normalize="dehyphen,nfkc,lower,punct", band_key="mix", shingle="mixed")
PINNED = "94d4f76b173844bc"  # taken with the build of ee81437 (before the speed work)


def corpus() -> list:
    state, docs = 12345, []
    for i in range(400):
        parts = []
        for _ in range(1 + (state >> 7) % (3 if i % 4 == 0 else 40)):
            state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
            parts.append(FRAGMENTS[(state >> 33) % len(FRAGMENTS)] + SEPARATORS[(state >> 40) % len(SEPARATORS)])
        docs.append("".join(parts) if i % 50 else None)
    return docs


def digest(keys: np.ndarray, active: np.ndarray) -> str:
    h = hashlib.sha256(np.ascontiguousarray(keys, dtype="<u8").tobytes())
    h.update(np.asarray(active, dtype=np.uint8).tobytes())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("threads", [1, 2])
def test_default_keys_are_pinned(threads):
    keys, active = text_band_keys(corpus(), threads=threads, **DEFAULTS)
    assert keys.shape == (400, 64) and not active[0] and active[1:].sum() == 392
    assert digest(keys, active) == PINNED
