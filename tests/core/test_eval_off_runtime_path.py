"""The research code (the top-level ``evaluation`` package) and pybloomfilter stay out of the product.

The evaluation lives at the repository root, not inside ``lshbloom_udf``: no runtime
module imports it, and the wheel does not contain it.
"""

import importlib.util
import json
import os
import subprocess
import sys
import zipfile

import pytest

from spark_support import ROOT as REPO

# Imports the modules named on the command line (or, given --all, every module of the
# package) and prints which research modules got loaded.
SCRIPT = """
import importlib, json, pkgutil, sys

def walk(package):
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        module = importlib.import_module(info.name)
        yield info.name
        if info.ispkg:
            yield from walk(module)

names = sys.argv[1:]
if names == ["--all"]:
    names = list(walk(importlib.import_module("lshbloom_udf")))
for name in names:
    importlib.import_module(name)
research = sorted(m for m in sys.modules if m.split(".")[0] in ("evaluation", "pybloomfilter"))
print(json.dumps({"imported": names, "research": research}))
"""


def _fresh_import(*args: str) -> dict:
    """Run SCRIPT in a fresh interpreter (this session may have imported the evaluation already), repo on the path."""
    path = os.pathsep.join([REPO] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    child = subprocess.run([sys.executable, "-c", SCRIPT, *args], cwd=REPO, env=dict(os.environ, PYTHONPATH=path),
                           capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout.strip().splitlines()[-1])


def test_the_evaluation_is_not_a_subpackage_of_the_product():
    assert importlib.util.find_spec("lshbloom_udf.evaluation") is None
    assert not os.path.exists(os.path.join(REPO, "lshbloom_udf", "evaluation"))
    assert os.path.isfile(os.path.join(REPO, "evaluation", "__init__.py"))


def test_the_public_api_imports_neither_evaluation_nor_pybloomfilter():
    out = _fresh_import("lshbloom_udf", "lshbloom_udf.spark", "lshbloom_udf.ml")
    assert out["research"] == []


def test_no_runtime_module_imports_evaluation_or_pybloomfilter():
    out = _fresh_import("--all")
    assert {"lshbloom_udf.config", "lshbloom_udf.ml", "lshbloom_udf.spark"} <= set(out["imported"])
    assert out["research"] == []


def test_the_wheel_ships_no_research_code():
    """The built wheel (``make test`` sets LSHBLOOM_WHEEL_DIR) holds lshbloom_udf and its metadata only."""
    wheel_dir = os.environ.get("LSHBLOOM_WHEEL_DIR")
    wheels = [f for f in os.listdir(wheel_dir) if f.endswith(".whl")] if wheel_dir and os.path.isdir(wheel_dir) else []
    if len(wheels) != 1:
        pytest.skip("no wheel in LSHBLOOM_WHEEL_DIR (make test builds one)")
    with zipfile.ZipFile(os.path.join(wheel_dir, wheels[0])) as wheel:
        tops = {name.split("/")[0] for name in wheel.namelist()}
    assert "lshbloom_udf" in tops
    assert {t for t in tops if t != "lshbloom_udf" and not t.endswith((".dist-info", ".data"))} == set()
