"""The research code (lshbloom_udf.evaluation) and pybloomfilter stay off the runtime import path."""

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Imports the modules named on the command line (or, given --all, every module of the
# package but the evaluation package) and prints which research modules got loaded.
SCRIPT = """
import importlib, json, pkgutil, sys

def walk(package):
    # pkgutil.walk_packages would import lshbloom_udf.evaluation itself to look inside it
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if info.name == "lshbloom_udf.evaluation":
            continue
        module = importlib.import_module(info.name)
        yield info.name
        if info.ispkg:
            yield from walk(module)

names = sys.argv[1:]
if names == ["--all"]:
    names = list(walk(importlib.import_module("lshbloom_udf")))
for name in names:
    importlib.import_module(name)
research = sorted(m for m in sys.modules
                  if m.split(".")[:2] == ["lshbloom_udf", "evaluation"] or m.split(".")[0] == "pybloomfilter")
print(json.dumps({"imported": names, "research": research}))
"""


def _fresh_import(*args: str) -> dict:
    """Run SCRIPT in a fresh interpreter: this session has imported the evaluation package already."""
    path = os.pathsep.join([REPO] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    child = subprocess.run([sys.executable, "-c", SCRIPT, *args], cwd=REPO, env=dict(os.environ, PYTHONPATH=path),
                           capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout.strip().splitlines()[-1])


def test_the_public_api_imports_neither_evaluation_nor_pybloomfilter():
    out = _fresh_import("lshbloom_udf", "lshbloom_udf.spark", "lshbloom_udf.ml")
    assert out["research"] == []


def test_no_runtime_module_imports_evaluation_or_pybloomfilter():
    out = _fresh_import("--all")
    assert {"lshbloom_udf.config", "lshbloom_udf.ml", "lshbloom_udf.spark"} <= set(out["imported"])
    assert out["research"] == []
