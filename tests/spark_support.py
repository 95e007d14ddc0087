"""Helpers of the Spark tests (every folder of tests/): sample data and the datasketch reference."""

from __future__ import annotations

import functools
import os
import tempfile

from lshbloom_udf.index import IndexParams
from lshbloom_udf.sample import build_sample
from spark_classes import archive_options

TESTS = os.path.dirname(os.path.abspath(__file__))  # the support modules' folder; the tests are below it
ROOT = os.path.dirname(TESTS)  # the checkout
NUM_PERM = 256
THRESHOLD = 0.5
# The reference configuration: datasketch's own defaults (unigram str.split() shingles,
# no normalization, affine32), T = 0.5, 256 permutations. It is the helpers' default.
# The product's defaults differ since the evaluation study (docs/evaluation.md): tests
# pin this configuration on the product side too (REFERENCE / REFERENCE_FLAGS), or pass
# ``config=`` to compare another configuration.
# datasketch's shingling and hashing, decided by the pass alone (the product's defaults verify: a datasketch
# pipeline does not)
REFERENCE = {"threshold": THRESHOLD, "num_perm": NUM_PERM, "ngram": 1, "normalize": "none", "scheme": "affine32", "seed": 1,
             "band_key": "sum", "shingle": "words", "verify": False}
REFERENCE_FLAGS = ["--threshold", "0.5", "--num-perm", "256", "--ngram", "1", "--normalize", "none", "--scheme", "affine32",
                   "--band-key", "sum", "--shingle", "words", "--no-verify"]
# The JVMs of the tests (the session's, every spark-submit's, and through JDK_JAVA_OPTIONS in conftest.py
# every other child JVM): the suite's jobs are small, so C2
# compilation and parallel GC threads mostly compete for the machine's cores with the job itself; and Spark's
# classes come ready-made from the suite's class archive where make test built it (tests/spark_classes.py).
JVM_OPTIONS_WITHOUT_ARCHIVE = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
JVM_OPTIONS = f"{JVM_OPTIONS_WITHOUT_ARCHIVE} {archive_options()}".strip()
_KEYS = ("threshold", "num_perm", "ngram", "normalize", "scheme", "seed", "shingle")


def _config(config=None) -> dict:
    """The MinHash settings of the reference: REFERENCE unless ``config`` says otherwise."""
    c = dict(REFERENCE)
    c.update({k: v for k, v in (config or {}).items() if k in _KEYS})
    return c


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
def _minhash(text: str, num_perm: int, ngram: int, normalize: str, scheme: str, seed: int, shingle: str = "words"):
    """datasketch's MinHash over the shingles of the contract (plain Python shingling of the unit,
    tests/shingle_reference.py); None without shingles."""
    from datasketch import MinHash
    from shingle_reference import shingles as reference_shingles

    from lshbloom_udf.minhash import normalization_mask

    shingles = reference_shingles(text, ngram, normalization_mask(normalize), shingle)
    if not shingles:
        return None
    m = MinHash(num_perm=num_perm, seed=seed, scheme=scheme)
    m.update_batch(sorted(shingles))
    return m


def p_band(capacity: int = 1000, config=None) -> float:
    c = _config(config)
    return IndexParams.for_threshold(capacity, c["threshold"], c["num_perm"]).p_band


def datasketch_flags(texts, n: int | None = None, lsh=None, config=None) -> list:
    """Keep-first decisions of a datasketch MinHashLSHBloom query-then-insert loop (the reference).

    ``config`` (threshold, num_perm, ngram, normalize, scheme, seed) defaults to
    REFERENCE (pass ``lshbloom_udf.config.DEFAULTS`` to check the product's defaults). Documents without shingles are skipped and flagged False.
    Pass ``lsh`` to go on with an index.
    """
    from datasketch import MinHashLSHBloom

    c = _config(config)
    texts = list(texts)
    if lsh is None:
        lsh = MinHashLSHBloom(
            threshold=c["threshold"], num_perm=c["num_perm"], n=n or max(len(texts), 1), fp=p_band(config=c),
            save_dir=tempfile.mkdtemp(),
        )
    flags = []
    for text in texts:
        m = _minhash(text, c["num_perm"], c["ngram"], c["normalize"], c["scheme"], c["seed"], c["shingle"]) if text else None
        if m is None:
            flags.append(False)
            continue
        dup = bool(lsh.query(m))
        if not dup:
            lsh.insert(m)
        flags.append(dup)
    return flags


def new_reference_index(n: int, config=None):
    from datasketch import MinHashLSHBloom

    c = _config(config)
    return MinHashLSHBloom(threshold=c["threshold"], num_perm=c["num_perm"], n=n, fp=p_band(config=c), save_dir=tempfile.mkdtemp())


def jobs(spark) -> dict:
    """Every job the application ran: id -> description (None without one), from Spark's status store."""
    sc = spark.sparkContext
    sc._jsc.sc().listenerBus().waitUntilEmpty(30_000)
    listed = sc._jsc.sc().statusStore().jobsList(None)
    out = {}
    for i in range(listed.size()):
        job = listed.apply(i)
        described = job.description()
        out[job.jobId()] = described.get() if described.isDefined() else None
    return out
