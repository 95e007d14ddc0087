"""Scale-benchmark documents: N distinct documents plus planted near-duplicates, as Parquet.

Method (all numpy-vectorised, no Python loop per word or per document):

- The shared corpora (``benchmarks/corpus.py``; the stdlib sample when absent)
  are normalized as the product's defaults do (NFKC, lowercase, punctuation to
  space) and split with ``str.split()`` into one token stream (7.5 M tokens,
  121 k distinct words for the two shared corpora), so that the corpus's own
  repetition is measured in the shingle space of the defaults.
- **Windows**: a start is usable when at most ``max_repeated`` (10 %) of the
  word 4-grams of the ``max_words`` words from it occur more than once in the
  whole corpus (9 % of the starts of the shared corpora). The corpora repeat
  themselves (boilerplate, option lists, tables: 38 % of their 4-grams occur
  twice or more), and windows over repeated text are near-duplicates of each
  other even after 30 % of their words are replaced (measured with the first
  version of this generator, which drew from every start: at 10^6 documents,
  all 343 distinct documents that the defaults flagged had an earlier document
  with an identical band, at Jaccard 0.05-0.44).
- **Distinct document** ``d`` (d = 0 .. N_distinct - 1) is a window of ``L_d``
  consecutive tokens (``L_d`` uniform in [min_words, max_words]) at a random
  usable start, in which every word is replaced, with probability
  ``replace`` (30 %), by the word at a random position of the stream (so
  replacements follow the corpus's word frequencies). Two distinct documents
  share at most the words of overlapping windows that neither replaced: even
  the same window twice keeps only 0.7^8 ≈ 6 % of its word 4-grams in both
  (Jaccard ≈ 0.03). Windows overlap once N_distinct passes the usable
  starts (at 10^7, ~14 documents per start): ``replace`` = 1 then draws every
  word independently from the corpus's word frequencies, documents that share
  no text, only the language.
- **Planted duplicate** ``j`` (``dup_fraction`` of N) copies a distinct source
  document and replaces ``max(1, round(edit * L))`` of its words (positions
  and words drawn at random): with ``edit`` = 5 % and 4-grams, Jaccard ≈ 0.65
  to its source. It is placed after its source, uniformly in the rest of the
  stream, so keep-first must flag it and keep the source.
- Every random choice is a hash (splitmix64) of (seed, stream, document, word
  position), so a document's words do not depend on the chunk that generates
  it, and the same parameters always give the same file.

Output, cached under ``cache_dir`` keyed by the parameters: ``docs.parquet``
(``id`` int64 = position in the file = processing order, ``text``), and
``truth.npz`` (per id: ``planted`` bool, ``source`` id of a planted
duplicate's source or -1, ``words``).
"""

from __future__ import annotations

import hashlib
import json
import os
import time

import numpy as np

import corpus

VERSION = 2
MAX_WORDS = 4095
MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)
# hash streams
LENGTH, START, REPLACE, REPLACE_WORD, EDIT_RANK, EDIT_WORD, PLACE = range(7)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, element-wise on uint64 (wrapping)."""
    x = x.astype(np.uint64, copy=True)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def draw(seed: int, stream: int, doc: np.ndarray, pos=0, pos_bits: int = 8) -> np.ndarray:
    """A uint64 hash of (seed, stream, document, word position): the generator's only randomness."""
    salt = mix64(np.array([(seed * 16 + stream) & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))[0]
    key = (np.asarray(doc, dtype=np.uint64) << np.uint64(pos_bits)) | np.asarray(pos, dtype=np.uint64)
    return mix64(key ^ salt)


def uniform(h: np.ndarray) -> np.ndarray:
    return (h >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def normalized_words(texts: list[str]) -> list[str]:
    """``str.split()`` words of the texts after NFKC, lowercase and punctuation to space (normalize "all")."""
    import unicodedata

    text = unicodedata.normalize("NFKC", " ".join(texts)).lower()
    return text.translate({ord(c): " " for c in set(text) if unicodedata.category(c).startswith("P")}).split()


def repeated_4grams(codes: np.ndarray) -> np.ndarray:
    """Per position: does the 4-gram of word ids starting there occur more than once in the stream?"""
    c = codes.astype(np.uint64)
    grams = mix64(c[:-3] ^ mix64(c[1:-2] ^ mix64(c[2:-1] ^ mix64(c[3:]))))
    _, inverse, counts = np.unique(grams, return_inverse=True, return_counts=True)
    return counts[inverse] > 1


def token_stream(cache_dir: str) -> dict:
    """The normalized corpora as word ids (``codes``), the words as one blob (each followed by a space), repeats (cached)."""
    # keyed by the corpus directory too: a checkout without the shared corpora (a worktree, a clone) falls back to
    # the stdlib sample, which must not stand in later for the corpora under the same name
    where = hashlib.sha256(corpus.CORPUS_DIR.encode() + str(os.path.isdir(corpus.CORPUS_DIR)).encode()).hexdigest()[:8]
    path = os.path.join(cache_dir, f"tokens-v{VERSION}-{where}.npz")
    if os.path.exists(path):
        with np.load(path) as z:
            return {k: z[k] for k in z.files} | {"names": str(z["names"])}
    import pandas as pd

    texts, names = corpus.load_originals()
    codes, vocab = pd.factorize(np.array(normalized_words(texts), dtype=object))
    encoded = [w.encode("utf-8") + b" " for w in vocab]
    lengths = np.fromiter((len(w) for w in encoded), dtype=np.int64, count=len(encoded))
    out = {
        "codes": codes.astype(np.int32),
        "blob": np.frombuffer(b"".join(encoded), dtype=np.uint8),
        "offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32),
        "repeated": repeated_4grams(codes),
        "names": f"{', '.join(names)} ({len(texts)} documents, normalized: {len(codes):,} words, {len(vocab):,} distinct)",
    }
    os.makedirs(cache_dir, exist_ok=True)
    np.savez(path + ".tmp.npz", **out)
    os.replace(path + ".tmp.npz", path)
    return out


def usable_starts(repeated: np.ndarray, width: int, max_repeated: float) -> np.ndarray:
    """Starts of the ``width``-word windows in which at most ``max_repeated`` of the 4-grams are repeated ones."""
    cum = np.concatenate([[0], np.cumsum(repeated, dtype=np.int64)])
    grams = width - 3
    share = (cum[grams:] - cum[:-grams]) / grams
    return np.flatnonzero(share <= max_repeated)


def plan(n: int, p: dict, repeated: np.ndarray) -> dict:
    """Which document stands at each id: its distinct document (``ref``; a duplicate's source) and duplicate number."""
    if not 1 <= p["min_words"] <= p["max_words"] <= MAX_WORDS:
        raise ValueError(f"document lengths must be within 1..{MAX_WORDS} words (the word position's bits in the hash key)")
    n_dup = int(round(p["dup_fraction"] * n))
    n_dist = n - n_dup
    seed = p["seed"]
    dist = np.arange(n_dist, dtype=np.int64)
    span = p["max_words"] - p["min_words"] + 1
    length = p["min_words"] + (draw(seed, LENGTH, dist) % np.uint64(span)).astype(np.int64)
    starts = usable_starts(repeated, p["max_words"], p["max_repeated"])
    start = starts[(draw(seed, START, dist) % np.uint64(len(starts))).astype(np.int64)]
    # Sources: n_dup distinct documents without repetition, chosen by sorting on a hash.
    sources = np.sort(np.argsort(draw(seed, PLACE, dist), kind="stable")[:n_dup]) if n_dup else dist[:0]
    u = uniform(draw(seed, PLACE, np.arange(n_dup, dtype=np.int64), 1))
    # Keys: distinct d at d; duplicate j uniformly after its source, before the end.
    keys = np.concatenate([dist.astype(np.float64), sources + 0.5 + u * (n_dist - 1 - sources)])
    order = np.argsort(keys, kind="stable")
    ref = np.concatenate([dist, sources])[order]
    dupno = np.concatenate([np.full(n_dist, -1, np.int64), np.arange(n_dup, dtype=np.int64)])[order]
    id_of_distinct = np.empty(n_dist, dtype=np.int64)
    id_of_distinct[order[order < n_dist]] = np.flatnonzero(order < n_dist)
    planted = dupno >= 0
    source = np.where(planted, id_of_distinct[ref], -1)
    return {"ref": ref, "dupno": dupno, "length": length, "start": start, "planted": planted, "source": source}


def position_bits(max_words: int) -> int:
    """Bits of the word position in the hash key: 8 (the data every earlier figure was measured on) up to 255
    words, 12 beyond (longer documents, e.g. the peers benchmark's ~2.4 kB)."""
    return 8 if max_words <= 255 else 12


def chunk_words(pl: dict, lo: int, hi: int, tokens: np.ndarray, p: dict) -> tuple[np.ndarray, np.ndarray]:
    """Word ids of the documents at ids [lo, hi) (flat) and their word counts."""
    seed, T = p["seed"], np.uint64(len(tokens))
    bits = position_bits(p["max_words"])
    ref, dupno = pl["ref"][lo:hi], pl["dupno"][lo:hi]
    lens = pl["length"][ref]
    doc = np.repeat(ref, lens)
    first = np.cumsum(lens) - lens
    pos = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(first, lens)
    words = tokens[np.repeat(pl["start"][ref], lens) + pos]
    replace = uniform(draw(seed, REPLACE, doc, pos, bits)) < p["replace"]
    words[replace] = tokens[(draw(seed, REPLACE_WORD, doc[replace], pos[replace], bits) % T).astype(np.int64)]
    # Planted duplicates: in each, replace the k words of smallest rank hash.
    dup = dupno >= 0
    is_dup = np.repeat(dup, lens)
    if is_dup.any():
        dlens = lens[dup]
        j, jpos = np.repeat(dupno[dup], dlens), pos[is_dup]
        local = np.repeat(np.arange(len(dlens)), dlens)  # the duplicate's place in this chunk
        order = np.lexsort((draw(seed, EDIT_RANK, j, jpos, bits), local))
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order)) - np.repeat(np.cumsum(dlens) - dlens, dlens)
        edit = rank < np.repeat(np.maximum(1, np.round(p["edit"] * dlens)).astype(np.int64), dlens)
        dup_words = words[is_dup]
        dup_words[edit] = tokens[(draw(seed, EDIT_WORD, j[edit], jpos[edit], bits) % T).astype(np.int64)]
        words[is_dup] = dup_words
    return words, lens


def to_arrow(words: np.ndarray, lens: np.ndarray, blob: np.ndarray, offsets: np.ndarray):
    """A ``large_string`` Arrow array: each document's words joined by one space (one byte gather)."""
    import pyarrow as pa

    wlen = (offsets[1:] - offsets[:-1])[words]  # word + its space
    ends = np.cumsum(wlen, dtype=np.int64)
    if ends[-1] >= 2**31:
        raise ValueError("chunk too large for 32-bit byte offsets")
    ends = ends.astype(np.int32)
    src = np.repeat(offsets[words] - (ends - wlen), wlen) + np.arange(int(ends[-1]), dtype=np.int32)
    data = blob[src]
    doc_end = ends[np.cumsum(lens) - 1]  # one past each document's trailing space
    data = np.delete(data, doc_end - 1)
    bounds = np.concatenate([[0], doc_end - np.arange(1, len(lens) + 1)]).astype(np.int64)
    return pa.LargeStringArray.from_buffers(len(lens), pa.py_buffer(bounds), pa.py_buffer(data))


def generate(n: int, params: dict, cache_dir: str, chunk: int = 131_072, row_group: int = 16_384) -> dict:
    """The cached data set of ``n`` documents: paths of the Parquet file and the truth, and a description."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = {"corpus_dir": corpus.CORPUS_DIR, "found": os.path.isdir(corpus.CORPUS_DIR)}  # see token_stream
    key = hashlib.sha256(json.dumps({"n": n, "v": VERSION, **params, **source}, sort_keys=True).encode()).hexdigest()[:12]
    out = os.path.join(cache_dir, f"scale-{n}-{key}")
    meta_path = os.path.join(out, "meta.json")
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            return json.load(f)
    t0 = time.perf_counter()
    tok = token_stream(cache_dir)
    pl = plan(n, params, tok["repeated"])
    os.makedirs(out, exist_ok=True)
    docs = os.path.join(out, "docs.parquet")
    schema = pa.schema([("id", pa.int64()), ("text", pa.large_string())])
    words_per_doc = np.empty(n, dtype=np.int32)
    text_bytes = 0
    with pq.ParquetWriter(docs + ".tmp", schema) as writer:
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            words, lens = chunk_words(pl, lo, hi, tok["codes"], params)
            text = to_arrow(words, lens, tok["blob"], tok["offsets"])
            words_per_doc[lo:hi] = lens
            text_bytes += text.buffers()[2].size
            ids = pa.array(np.arange(lo, hi, dtype=np.int64))
            writer.write_table(pa.table([ids, text], schema=schema), row_group_size=row_group)
    os.replace(docs + ".tmp", docs)
    truth = os.path.join(out, "truth.npz")
    np.savez(truth, planted=pl["planted"], source=pl["source"], words=words_per_doc)
    meta = {
        "docs": docs, "truth": truth, "n": n, "params": params, "corpus": tok["names"],
        "planted": int(pl["planted"].sum()), "distinct": int(n - pl["planted"].sum()),
        "usable_starts": len(usable_starts(tok["repeated"], params["max_words"], params["max_repeated"])),
        "mean_words": float(words_per_doc.mean()), "mean_bytes": text_bytes / n,
        "parquet_bytes": os.path.getsize(docs), "generation_seconds": round(time.perf_counter() - t0, 1),
    }
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=2)
    return meta
