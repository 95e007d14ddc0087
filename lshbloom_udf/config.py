"""Default settings of a deduplication run, in one place.

The Spark job (``spark_jobs/dedup.py``), the :func:`~lshbloom_udf.spark.deduplicate`
API, the :class:`~lshbloom_udf.ml.LSHBloomDeduplicator` Transformer and
``conf/default.toml`` all take their defaults from :data:`DEFAULTS` (a test
checks that ``conf/default.toml`` says the same). Change a default here.

A TOML configuration file holds a ``[dedup]`` table whose keys are the names
below; the job's command-line flags override it. ``None`` defaults have no
TOML spelling: leave the key out.
"""

from __future__ import annotations

import tomllib
from types import MappingProxyType
from typing import Any, Mapping

DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        # columns and output
        "text_column": "text",
        "id_column": None,  # None: a deterministic internal row id is used
        "flag_column": "is_duplicate",
        "mode": "flag",  # flag | filter | duplicates
        # MinHash / LSH (decide compatibility with an existing index)
        # threshold/ngram/normalize: chosen by the evaluation study (docs/evaluation.md);
        # the paper's values (0.5, 1, none) are PRESETS["paper"]
        "threshold": 0.45,
        "num_perm": 512,
        "bands": None,  # [b, r] instead of the optimum for the threshold
        "ngram": 4,
        "normalize": "all",  # none | all | comma list of nfkc, lower, punct
        "seed": 1,
        "scheme": "affine32",  # affine32 (datasketch >= 2) | legacy (datasketch < 2, the paper's code)
        # sum (datasketch's band hash) | mix (a 64-bit hash of the band: no sum collisions at scale,
        # docs/algorithm.md §7; not datasketch's)
        "band_key": "sum",
        # index sizing (only used when an index is created)
        "p_effective": 1e-5,
        "bloom": "pybloomfiltermmap3",  # pybloomfiltermmap3 (datasketch-compatible files) | blocked (faster, larger)
        "expected_docs": None,  # None: the number of input documents
        # where and in which order
        "index_dir": None,  # None: a temporary index (in /dev/shm when it fits), removed afterwards
        "order_by": None,  # None: input order (partition by partition)
        "checkpoint": "local",  # local (localCheckpoint) | reliable (DataFrame.checkpoint, needs a checkpoint dir)
        # the spark-submit job only
        "input_format": "json",
        "output_format": "parquet",
        "input_options": {},
        "output_options": {},
    }
)

# Named presets: settings that replace DEFAULTS as a whole group (``--preset paper``,
# ``deduplicate(..., preset="paper")``); explicit settings still override them.
# "paper" is the LSHBloom paper's configuration (conf/paper.toml): unigrams, T = 0.5,
# 256 permutations, no normalization, datasketch < 2 permutations (legacy).
PRESETS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "paper": MappingProxyType(
            {"threshold": 0.5, "num_perm": 256, "ngram": 1, "normalize": "none", "seed": 1, "scheme": "legacy",
             "band_key": "sum", "p_effective": 1e-5}
        ),
    }
)


def preset_settings(name: str) -> dict:
    """The settings of a named preset (see :data:`PRESETS`)."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    return dict(PRESETS[name])


MODES = ("flag", "filter", "duplicates")
CHECKPOINTS = ("local", "reliable")


class ConfigError(ValueError):
    """A configuration file or value that cannot be used."""


def load_config(path: str) -> dict:
    """The ``[dedup]`` table of a TOML file, checked against the known keys."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from None
    table = data.get("dedup")
    if table is None:
        raise ConfigError(f"{path}: no [dedup] table")
    unknown = sorted(set(table) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(DEFAULTS)}")
    extra = sorted(set(data) - {"dedup"})
    if extra:
        raise ConfigError(f"{path}: unknown table(s) {', '.join(extra)}; settings go in [dedup]")
    return dict(table)
