"""Defaults live in lshbloom_udf.config.DEFAULTS; conf/*.toml and the job agree with them."""

from __future__ import annotations

import os

import pytest

from lshbloom_udf.config import DEFAULTS, ConfigError, load_config

from spark_support import ROOT


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


def test_every_setting_reaches_every_entry_point():
    """One declaration per setting: the job's flags, the TOML keys, deduplicate's keywords and the Params follow it."""
    from lshbloom_udf.config import DedupConfig, settings
    from lshbloom_udf.job import build_parser
    from lshbloom_udf.ml import LSHBloomDeduplicator

    parser = build_parser()
    dests = {a.dest for a in parser._actions}
    t = LSHBloomDeduplicator()
    for f, spec in settings():
        assert f.name in DEFAULTS
        assert (f.name in dests) == (spec.flag is not None), f.name
        DedupConfig().replace(**{f.name: DEFAULTS[f.name]})  # a keyword of deduplicate() and a TOML key
        if spec.scope == "run" and spec.param is not None:
            param = spec.param or f.name.split("_")[0] + "".join(w.capitalize() for w in f.name.split("_")[1:])
            assert t.hasParam(param), (f.name, param)
    # A bad value fails the same way everywhere, naming the setting.
    with pytest.raises(ConfigError, match="num_perm must be an integer >= 2"):
        DedupConfig().replace(num_perm=1)
    with pytest.raises(ValueError, match="num_perm must be an integer >= 2"):
        LSHBloomDeduplicator(numPerm=1)


def test_the_job_runs_from_the_package_entry_point():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "lshbloom_udf", "dedup", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--band-key" in out.stdout and "--input" in out.stdout
    assert out.stdout.startswith("usage: lshbloom dedup")
