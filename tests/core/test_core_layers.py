"""The package's layers (docs/architecture.md): each calls only the ones below it, checked on every import statement.

From the top: the entry points (``job/``, ``__main__``, ``tasks``: the CLI and spark-submit job), the Spark layer
(``spark/``, ``ml.py``), the index (``index/``). Imports inside functions count too: a lazy import is still a
dependency, and hiding one is how a cycle between layers starts. Within the layers, no module imports itself through
others (no import cycle), lazily or not. An import under ``if TYPE_CHECKING:`` (for annotations only: it never runs)
makes no cycle, but still counts as a dependency between the layers.
"""

from __future__ import annotations

import ast
import pathlib

import lshbloom_udf

PACKAGE = pathlib.Path(lshbloom_udf.__file__).parent
ENTRY_POINTS = ("job", "__main__", "tasks")
SPARK = ("spark", "ml")
INDEX = ("index",)


def _module(path: pathlib.Path, package: pathlib.Path = PACKAGE) -> str:
    parts = (package.name,) + path.relative_to(package).with_suffix("").parts
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


def _type_checking(test: ast.expr) -> bool:
    """Whether an ``if``'s test is ``TYPE_CHECKING`` (or ``typing.TYPE_CHECKING``): true for type checkers only."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
            or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_time_nodes(tree: ast.AST):
    """Every node of ``tree`` but the body of an ``if TYPE_CHECKING:`` (its ``else`` is kept): the statements that can
    run."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and _type_checking(node.test):
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))


def _dependencies(path: pathlib.Path, importer: str, modules: set) -> set:
    """The ``modules`` one file (the module ``importer``) imports when it runs, anywhere in it (not under ``if
    TYPE_CHECKING:``: an import for annotations never runs, so it makes no cycle). ``from m import x`` imports the
    module ``m.x`` when there is one (a submodule), else ``m`` (for a package, its ``__init__``: the names it exports);
    a relative import is resolved from ``importer``."""
    package = importer.split(".") if path.name == "__init__.py" else importer.split(".")[:-1]
    out = set()
    for node in _run_time_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
            out.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m in modules and m != importer}


def _graph(package: pathlib.Path = PACKAGE) -> dict:
    """Each module of ``package`` -> the package's modules it imports (the native extension, named by its stub, is one
    that imports none)."""
    files = {_module(p, package): p for p in sorted(package.rglob("*.py"))}
    modules = set(files) | {f"{package.name}.{p.stem}" for p in package.glob("*.pyi")}
    return {m: _dependencies(p, m, modules) for m, p in files.items()}


def _reachable(graph: dict, start: str) -> set:
    seen, todo = set(), list(graph[start])
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(graph.get(m, ()))
    return seen


def _cycles(graph: dict, within: str = "") -> list:
    """The import cycles among the modules of ``graph`` whose name starts with ``within``: each the sorted modules that
    import one another, directly or through others (a strongly connected component of two or more)."""
    inside = {m: {t for t in ts if t.startswith(within)} for m, ts in graph.items() if m.startswith(within)}
    reach = {m: _reachable(inside, m) for m in inside}
    return sorted({tuple(sorted(n for n in reach[m] if m in reach.get(n, ()))) for m in inside if m in reach[m]})


def test_verification_has_no_import_cycle():
    """spark/verify/'s modules import each other one way: its plain types (rule) and candidate sources at the bottom,
    the rounds (the entry point) at the top."""
    assert _cycles(_graph(), "lshbloom_udf.spark.verify") == []


def test_the_package_has_no_import_cycle():
    assert _cycles(_graph()) == []


def test_the_cycle_check_sees_lazy_imports_of_submodules(tmp_path):
    """A cycle through a function-level import is found; ``from a import b`` of a submodule depends on ``a.b``, not
    on ``a``'s ``__init__`` (which may import its submodules without making a cycle)."""
    pkg = tmp_path / "pkg"
    (pkg / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("from pkg.a.low import x\n")
    (pkg / "a" / "low.py").write_text("x = 1\n")
    (pkg / "a" / "high.py").write_text("from pkg.a import low\n\ndef f():\n    from pkg import b\n")
    (pkg / "b.py").write_text("def g():\n    from .a.high import f\n")
    graph = _graph(pkg)
    assert graph["pkg.a.high"] == {"pkg.a.low", "pkg.b"} and graph["pkg.b"] == {"pkg.a.high"}
    assert _cycles(graph) == [("pkg.a.high", "pkg.b")]
    assert _cycles(graph, "pkg.a") == []


def test_the_cycle_check_skips_imports_for_type_checkers_only(tmp_path):
    """An import under ``if TYPE_CHECKING:`` (a type in an annotation) makes no cycle; one in its ``else``, or under
    another ``if``, does. The layer contract still sees it (a lower layer naming an upper one's type depends on it)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "config.py").write_text("def f():\n    from pkg.bands import g\n")
    (pkg / "bands.py").write_text(
        "from typing import TYPE_CHECKING\nimport typing\n\nif TYPE_CHECKING:\n    from pkg.config import f\n"
        "if typing.TYPE_CHECKING:\n    import pkg.config\n\ndef g(config: 'f') -> None: ...\n")
    graph = _graph(pkg)
    assert graph["pkg.bands"] == set() and _cycles(graph) == []
    probe = tmp_path / "probe.py"
    probe.write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                     "    from lshbloom_udf.spark.api import run\n")
    assert "lshbloom_udf.spark.api" in _imports(probe)
    (pkg / "bands.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    pass\n"
                                  "else:\n    from pkg.config import f\n")
    assert _cycles(_graph(pkg)) == [("pkg.bands", "pkg.config")]
    (pkg / "bands.py").write_text("import sys\n\nif sys.version_info >= (3, 11):\n    from pkg.config import f\n")
    assert _cycles(_graph(pkg)) == [("pkg.bands", "pkg.config")]
