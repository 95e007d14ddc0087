"""The package's layers (docs/architecture.md): each calls only the ones below it, checked on every import statement.

From the top: the entry points (``job/``, ``__main__``, ``tasks``: the CLI and spark-submit job), the Spark layer
(``spark/``, ``ml.py``), the index (``index/``). Imports inside functions count too: a lazy import is still a
dependency, and hiding one is how a cycle between layers starts.
"""

from __future__ import annotations

import ast
import pathlib

import lshbloom_udf

PACKAGE = pathlib.Path(lshbloom_udf.__file__).parent
ENTRY_POINTS = ("job", "__main__", "tasks")
SPARK = ("spark", "ml")
INDEX = ("index",)


def _module(path: pathlib.Path) -> str:
    parts = ("lshbloom_udf",) + path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: pathlib.Path) -> set:
    """The package modules (and names in them) one file imports, anywhere in it."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("lshbloom_udf"):
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("lshbloom_udf"))
    return out


def _in(module: str, tops: tuple) -> bool:
    parts = module.split(".")
    return len(parts) > 1 and parts[1] in tops


def _crossings(lower: tuple, upper: tuple) -> list:
    """``(importer, imported)`` of every import from a module of ``lower`` into one of ``upper``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = _module(path)
        if _in(importer, lower):
            found += [(importer, t) for t in sorted(_imports(path)) if _in(t, upper)]
    return found


def test_the_index_imports_neither_spark_nor_the_entry_points():
    assert _crossings(INDEX, SPARK + ENTRY_POINTS) == []


def test_the_spark_layer_does_not_import_the_entry_points():
    assert _crossings(SPARK, ENTRY_POINTS) == []


def test_the_contract_sees_lazy_imports(tmp_path):
    """The scan reads imports inside functions, so a hidden crossing would fail the tests above."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from lshbloom_udf.spark.passes import PASSES\n    import lshbloom_udf.job\n")
    assert {"lshbloom_udf.spark.passes", "lshbloom_udf.job"} <= _imports(probe)
