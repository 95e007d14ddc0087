"""Each default is declared once: the layers that share a default read it from its one declaration.

Two sets: the job's (:data:`lshbloom_udf.config.DEFAULTS`, what ``lshbloom plan`` sizes with no flags) and the
low-level API's (:data:`lshbloom_udf.compat.COMPAT_DEFAULTS`: IndexParams, the minhash functions, ``plan()``,
and the paper's preset with its own permutations). A default re-declared by hand that drifts fails here.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import subprocess
import sys

from lshbloom_udf import minhash
from lshbloom_udf.__main__ import PLAN_SETTINGS, plan_parser
from lshbloom_udf.compat import COMPAT_DEFAULTS
from lshbloom_udf.config import DEFAULTS, PRESETS, DedupConfig, load_config
from lshbloom_udf.index import DEFAULT_BLOOM, IndexParams, LSHBloomIndex
from lshbloom_udf.sizing import Plan, plan

from spark_support import ROOT


def _keyword_defaults(function) -> dict:
    return {name: p.default for name, p in inspect.signature(function).parameters.items()
            if p.default is not inspect.Parameter.empty}


def test_plan_cli_flags_are_the_settings_with_the_jobs_defaults():
    parser = plan_parser()
    actions = {a.dest: a for a in parser._actions}
    expected = {**{name: DEFAULTS[name] for name in PLAN_SETTINGS}, "bloom": DedupConfig().new_index_bloom}
    assert {name: actions[name].default for name in PLAN_SETTINGS} == expected
    for name in PLAN_SETTINGS:
        spec = DedupConfig.__dataclass_fields__[name].metadata["setting"]
        action = actions[name]
        assert spec.help.replace("%", "%%") in action.help, name
        assert action.option_strings == [spec.flag or "--" + name.replace("_", "-")], name
        choices = getattr(spec.check, "choices", None)
        assert (tuple(action.choices) if action.choices else None) == choices, name


def test_plan_cli_with_no_flags_sizes_what_a_default_run_builds():
    out = subprocess.run([sys.executable, "-m", "lshbloom_udf", "plan", "--docs", "1000", "--json"], check=True,
                         capture_output=True, text=True).stdout
    got = json.loads(out)
    params = DedupConfig().index_params(1000)
    assert (got["b"], got["r"], got["threshold"], got["num_perm"], got["ngram"], got["p_effective"], got["growth"]) \
        == (params.b, params.r, params.threshold, params.num_perm, params.ngram, params.p_effective, params.growth)
    assert got["bloom"] == DedupConfig().new_index_bloom


def test_low_level_layers_default_to_the_compat_set():
    # unit (what one key stands for: documents, or a paragraph index's unit) is no setting of the compat set
    index_fields = {f.name: f.default for f in dataclasses.fields(IndexParams)
                    if f.default is not dataclasses.MISSING and f.name not in ("threshold", "unit")}
    assert index_fields == {k: v for k, v in COMPAT_DEFAULTS.items() if k != "threshold"}
    assert _keyword_defaults(IndexParams.for_threshold) | {"bands": None} == {
        "threshold": COMPAT_DEFAULTS["threshold"], "num_perm": COMPAT_DEFAULTS["num_perm"], "bands": None}
    planned = _keyword_defaults(plan)
    assert planned.pop("bloom") == DEFAULT_BLOOM
    assert planned.pop("generations") > 0 and planned.pop("bands") is None
    assert planned == {k: COMPAT_DEFAULTS[k] for k in planned}
    assert {f.name: f.default for f in dataclasses.fields(Plan)}["growth"] == COMPAT_DEFAULTS["growth"]
    assert _keyword_defaults(LSHBloomIndex.create)["bloom"] == DEFAULT_BLOOM
    for function in (minhash.signatures, minhash.text_band_keys, minhash.arrow_band_keys, minhash.band_keys,
                     minhash.permutations):
        shared = {k: v for k, v in _keyword_defaults(function).items() if k in COMPAT_DEFAULTS}
        assert shared and shared == {k: COMPAT_DEFAULTS[k] for k in shared}, function.__name__


def test_compat_defaults_build_the_index_plan_sizes(tmp_path):
    # The low-level defaults agree with each other: plan() sizes exactly the index IndexParams' defaults build.
    params = IndexParams.for_threshold(5000)
    with LSHBloomIndex.create(str(tmp_path / "ix"), params) as index:
        assert plan(5000).index_bytes == index.stats()["bytes_on_disk"]
    assert dataclasses.replace(params, capacity=1) == IndexParams.for_threshold(1)


def test_paper_preset_is_the_compat_set_with_the_papers_permutations():
    paper = dict(PRESETS["paper"])
    assert paper.pop("scheme") == "legacy" and paper.pop("verify") is False
    assert paper == {k: COMPAT_DEFAULTS[k] for k in COMPAT_DEFAULTS if k != "scheme"}
    conf = load_config(os.path.join(ROOT, "conf", "paper.toml"))
    assert {k: conf[k] for k in PRESETS["paper"]} == dict(PRESETS["paper"])
