"""Helpers of the Spark tests (tests/test_spark_*.py): sample data and the datasketch reference."""

from __future__ import annotations

import functools
import tempfile

from lshbloom_udf.index import IndexParams
from lshbloom_udf.sample import build_sample

NUM_PERM = 256
THRESHOLD = 0.5


@functools.lru_cache(maxsize=4)
def sample_docs(num_docs: int = 500, seed: int = 11) -> tuple:
    """Stdlib-docstring documents with near-duplicates, plus rows with null, empty and blank text."""
    docs = [dict(d) for d in build_sample(num_docs=num_docs, duplicate_fraction=0.25, seed=seed)]
    docs += [
        {"id": "zz-null", "text": None, "source": -1},
        {"id": "zz-empty", "text": "", "source": -2},
        {"id": "zz-blank", "text": " \n\t ", "source": -3},
    ]
    return tuple(docs)


@functools.lru_cache(maxsize=None)
def _minhash(text: str):
    from datasketch import MinHash

    m = MinHash(num_perm=NUM_PERM, seed=1)
    m.update_batch([s.encode("utf-8") for s in set(text.split())])
    return m


def p_band(capacity: int = 1000) -> float:
    return IndexParams.for_threshold(capacity, THRESHOLD, NUM_PERM).p_band


def datasketch_flags(texts, n: int | None = None, lsh=None) -> list:
    """Keep-first decisions of a datasketch MinHashLSHBloom query-then-insert loop (the reference).

    Null/empty documents are skipped and flagged False. Pass ``lsh`` to go on with an index.
    """
    from datasketch import MinHashLSHBloom

    texts = list(texts)
    if lsh is None:
        lsh = MinHashLSHBloom(
            threshold=THRESHOLD, num_perm=NUM_PERM, n=n or max(len(texts), 1), fp=p_band(), save_dir=tempfile.mkdtemp()
        )
    flags = []
    for text in texts:
        if not text or not text.split():
            flags.append(False)
            continue
        m = _minhash(text)
        dup = bool(lsh.query(m))
        if not dup:
            lsh.insert(m)
        flags.append(dup)
    return flags


def new_reference_index(n: int):
    from datasketch import MinHashLSHBloom

    return MinHashLSHBloom(threshold=THRESHOLD, num_perm=NUM_PERM, n=n, fp=p_band(), save_dir=tempfile.mkdtemp())
