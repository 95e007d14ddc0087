"""lshbloom-spark: near-duplicate removal with LSHBloom (MinHash + LSH + a Bloom filter per band).

The public API:

- :func:`signatures`, :func:`band_keys`, :func:`optimal_params` — datasketch-compatible maths;
- :class:`LSHBloomIndex`, :class:`IndexParams` — the persistent per-band Bloom index;
- :func:`plan` — size an index before a run;
- :class:`DedupConfig` and :data:`DEFAULTS` — every setting of a run, declared once
  (:mod:`lshbloom_udf.config`);
- the errors, all :class:`LSHBloomError` (:mod:`lshbloom_udf.errors`): :class:`ConfigError`,
  :class:`DedupInputError`, and about the index :class:`IndexMismatchError`,
  :class:`IndexLockedError`, :class:`IndexFullError`, :class:`IndexRecoveryNeededError`,
  :class:`IndexCorruptError`, :class:`AlreadyIngestedError`; the warning :class:`CapacityWarning`
  (docs/reliability.md);
- :func:`deduplicate` — deduplicate a Spark DataFrame (:mod:`lshbloom_udf.spark`), and the
  ``pyspark.ml`` Transformer :class:`lshbloom_udf.ml.LSHBloomDeduplicator`.
"""

from lshbloom_udf.config import DEFAULTS, DedupConfig
from lshbloom_udf.errors import (
    AlreadyIngestedError,
    CapacityWarning,
    ConfigError,
    DedupInputError,
    IndexCorruptError,
    IndexFullError,
    IndexLockedError,
    IndexMismatchError,
    IndexRecoveryNeededError,
    LSHBloomError,
)
from lshbloom_udf.index import IndexParams, LSHBloomIndex
from lshbloom_udf.lsh import optimal_params
from lshbloom_udf.minhash import KeySpec, arrow_band_keys, band_keys, signatures, text_band_keys
from lshbloom_udf.sizing import plan


def __getattr__(name):
    # Spark is imported only when the Spark API is used.
    if name in ("deduplicate", "DedupResult"):
        from lshbloom_udf import spark

        return getattr(spark, name)
    if name == "LSHBloomDeduplicator":
        from lshbloom_udf.ml import LSHBloomDeduplicator

        return LSHBloomDeduplicator
    raise AttributeError(f"module 'lshbloom_udf' has no attribute {name!r}")

__version__ = "0.1.0"

__all__ = [
    "AlreadyIngestedError",
    "CapacityWarning",
    "ConfigError",
    "DEFAULTS",
    "DedupConfig",
    "DedupInputError",
    "IndexCorruptError",
    "LSHBloomError",
    "DedupResult",
    "IndexFullError",
    "IndexLockedError",
    "IndexMismatchError",
    "IndexRecoveryNeededError",
    "LSHBloomDeduplicator",
    "IndexParams",
    "KeySpec",
    "LSHBloomIndex",
    "arrow_band_keys",
    "band_keys",
    "deduplicate",
    "optimal_params",
    "plan",
    "signatures",
    "text_band_keys",
]
