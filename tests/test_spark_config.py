"""Defaults live in lshbloom_udf.config.DEFAULTS; conf/*.toml and the job agree with them."""

from __future__ import annotations

import os

import pytest

from lshbloom_udf.config import DEFAULTS, ConfigError, load_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_default_toml_says_what_defaults_say():
    conf = load_config(os.path.join(ROOT, "conf", "default.toml"))
    for key, value in DEFAULTS.items():
        if value is None:
            assert key not in conf, f"{key} defaults to None and has no TOML spelling"
        else:
            assert conf.get(key) == value, f"conf/default.toml {key} = {conf.get(key)!r}, DEFAULTS says {value!r}"


def test_paper_toml_is_the_paper_setup():
    conf = load_config(os.path.join(ROOT, "conf", "paper.toml"))
    assert conf["scheme"] == "legacy"
    assert (conf["threshold"], conf["num_perm"], conf["ngram"], conf["p_effective"]) == (0.5, 256, 1, 1e-5)


def test_bad_config_files(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[dedup]\nthreshhold = 0.7\n')
    with pytest.raises(ConfigError, match="unknown setting.*threshhold"):
        load_config(str(bad))
    bad.write_text('threshold = 0.7\n')
    with pytest.raises(ConfigError, match=r"no \[dedup\] table"):
        load_config(str(bad))
    bad.write_text('[dedup\n')
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(str(bad))
    with pytest.raises(ConfigError, match="not found"):
        load_config(str(tmp_path / "missing.toml"))
