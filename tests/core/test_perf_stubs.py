"""lshbloom_udf/_native.pyi names exactly what the native module defines (and ships beside it)."""

from __future__ import annotations

import ast
import os

import lshbloom_udf
from lshbloom_udf import _native

STUB = os.path.join(os.path.dirname(lshbloom_udf.__file__), "_native.pyi")
PRIVATE_ALIASES = {"_StrPath", "_Scheme", "_BandKey", "_U64Array", "_U32Array", "_Offsets", "_Texts"}


def stub_names():
    """The stub's public names, and each class's methods with those of its (private) stub bases."""
    tree = ast.parse(open(STUB, encoding="utf-8").read())
    names, classes = set(), {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            classes[node.name] = node
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))

    def with_bases(node):
        inherited = [with_bases(classes[b.id]) for b in node.bases if isinstance(b, ast.Name) and b.id in classes]
        return {n.name for n in node.body if isinstance(n, ast.FunctionDef)}.union(*inherited)

    methods = {name: with_bases(node) for name, node in classes.items()}
    private_bases = {name for name in classes if name.startswith("_")}
    return names - PRIVATE_ALIASES - private_bases, {k: v for k, v in methods.items() if k not in private_bases}


def test_stub_covers_the_module_exactly():
    names, methods = stub_names()
    runtime = {n for n in dir(_native) if not n.startswith("__")} | {"__version__"}
    assert names == runtime
    for cls, meths in methods.items():
        public = {m for m in dir(getattr(_native, cls)) if not m.startswith("_")}
        assert public <= meths, f"{cls}: {sorted(public - meths)} missing from the stub"
