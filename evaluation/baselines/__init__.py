"""The paper's deduplication methods (§3.3, §5.1.2), applied at document level to a stream.

Every method sees the documents in stream order and flags a document as a
duplicate from what it has seen before it ("keep first"); none ever looks ahead.
Each returns a :class:`~evaluation.baselines.common.RunResult`.

:mod:`~evaluation.baselines.minhash_methods`
    ``lshbloom`` (this product), datasketch ``minhashlsh`` and
    ``datasketch-lshbloom``: decide on band collisions.
:mod:`~evaluation.baselines.overlap_methods`
    ``ccnet``, ``dolma``, ``dolma-ngram``, ``dclm``: a document's duplicated
    fraction against a threshold.
:mod:`~evaluation.baselines.units`
    how each method cuts a document into shingles, lines, tokens or n-grams.
:mod:`~evaluation.baselines.bulk`
    the overlap methods' fractions for many streams of the same texts at once
    (the study's grid).

Every public name of these modules is importable from here
(``from evaluation import baselines as B; B.run_lshbloom(...)``).
"""

from evaluation.baselines.bulk import TokenTable, UnitTable
from evaluation.baselines.common import RunResult, scratch_dir
from evaluation.baselines.minhash_methods import (
    datasketch_lsh_decisions, datasketch_lshbloom_decisions, datasketch_minhashes, lshbloom_decisions,
    minhashes_from_signatures, run_lshbloom,
)
from evaluation.baselines.overlap_methods import (
    BLOOM_P, CAPACITY_SAMPLE, DCLM, OVERLAP_METHODS, CCNet, Dolma, DolmaNgram, NgramOverlap,
    OverlapMethod, overlap_method,
)
from evaluation.baselines.units import ccnet_normalize, dclm_tokens, ngrams, reference_shingles

__all__ = [
    "BLOOM_P", "CAPACITY_SAMPLE", "DCLM", "OVERLAP_METHODS",
    "CCNet", "Dolma", "DolmaNgram", "NgramOverlap", "OverlapMethod", "RunResult", "TokenTable", "UnitTable",
    "ccnet_normalize", "datasketch_lsh_decisions", "datasketch_lshbloom_decisions", "datasketch_minhashes",
    "dclm_tokens", "lshbloom_decisions", "minhashes_from_signatures", "ngrams", "overlap_method",
    "reference_shingles", "run_lshbloom", "scratch_dir",
]
