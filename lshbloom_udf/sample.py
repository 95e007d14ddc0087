"""A bundled sample corpus, built at run time from the standard library's docstrings.

Every Python install has the same kind of text in its docstrings, so the demo
and the tests need no third-party data. :func:`build_sample` collects distinct
docstrings of at least ``min_words`` words and appends near-duplicate variants
of some of them (words dropped or swapped, whitespace reflowed, case changed,
a line added), each labelled with the document it copies.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import random
import sys
import warnings
from collections.abc import Iterator
from typing import Any, Optional

# Standard-library modules not imported for docstrings: ones with side effects
# on import (a browser, a GUI, a printed poem), platform-specific ones, tests.
_SKIPPED_MODULES = frozenset(
    "antigravity this idlelib tkinter turtle turtledemo test lib2to3 pydoc_data ensurepip venv msilib "
    "winreg winsound nt msvcrt webbrowser curses readline crypt nis spwd ossaudiodev dbm".split()
)


def sample_modules() -> list[str]:
    return sorted(n for n in sys.stdlib_module_names if not n.startswith("_") and n not in _SKIPPED_MODULES)


def _docstrings(module_name: str) -> Iterator[str]:
    try:
        module = importlib.import_module(module_name)
    except Exception:  # a module that cannot be imported here simply contributes nothing
        return
    yield inspect.getdoc(module) or ""
    for name, obj in sorted(vars(module).items()):
        # A submodule is a member only once something imported it: it is read as a module of its own.
        if name.startswith("_") or inspect.ismodule(obj):
            continue
        yield inspect.getdoc(obj) or ""
        if inspect.isclass(obj):
            for attr_name, attr in sorted(vars(obj).items()):
                if not attr_name.startswith("_"):
                    yield inspect.getdoc(attr) or ""


def package_modules(packages: list[str]) -> list[str]:
    """``packages`` and all their submodules that are importable, except tests, in a stable order."""
    import pkgutil

    names = []
    for package in packages:
        try:
            root = importlib.import_module(package)
        except Exception:  # not installed here: contributes nothing
            continue
        names.append(package)
        paths = getattr(root, "__path__", None)
        if paths is None:
            continue
        for info in pkgutil.walk_packages(paths, prefix=f"{package}.", onerror=lambda name: None):
            parts = info.name.split(".")
            if any(p.startswith("_") or p in ("tests", "test", "testing", "conftest") for p in parts[1:]):
                continue
            names.append(info.name)
    return sorted(set(names))


def stdlib_documents(min_words: int = 25) -> list[str]:
    """Distinct standard-library docstrings of at least ``min_words`` words, in a stable order."""
    return docstring_documents(sample_modules(), min_words)


def docstring_documents(module_names: list[str], min_words: int = 25) -> list[str]:
    """Distinct docstrings of the modules ``module_names`` (and their public members) of at least ``min_words``
    words."""
    seen: set[str] = set()
    docs = []
    with warnings.catch_warnings():
        # Importing and reading deprecated modules warns; the text is still fine.
        warnings.simplefilter("ignore")
        for module_name in module_names:
            for doc in _docstrings(module_name):
                if len(doc.split()) >= min_words and doc not in seen:
                    seen.add(doc)
                    docs.append(doc)
    return docs


def near_duplicate(text: str, rng: random.Random) -> str:
    """A light edit of ``text`` that keeps most of its words (Jaccard well above 0.5)."""
    words = text.split()
    kind = rng.choice(("drop", "swap", "reflow", "case", "append"))
    if kind == "drop":
        drop = set(rng.sample(range(len(words)), max(1, len(words) // 20)))
        return " ".join(w for i, w in enumerate(words) if i not in drop)
    if kind == "swap":
        for _ in range(max(1, len(words) // 25)):
            i = rng.randrange(len(words) - 1)
            words[i], words[i + 1] = words[i + 1], words[i]
        return " ".join(words)
    if kind == "reflow":
        out, line = [], []
        for w in words:
            line.append(w)
            if len(line) >= rng.randint(6, 12):
                out.append(" ".join(line))
                line = []
        return "\n".join(out + [" ".join(line)])
    if kind == "case":
        i = rng.randrange(len(words))
        words[i] = words[i].upper()
        return "  ".join(words)
    return text + "\n\nSee also: the library reference."


def build_sample(
    num_docs: int = 2000, duplicate_fraction: float = 0.2, seed: int = 7, min_words: int = 25
) -> list[dict]:
    """Documents ``{"id", "text", "source"}``: originals plus near-duplicate variants, shuffled.

    ``source`` numbers the original a document derives from. ``num_docs`` is
    exact; originals are never repeated, so a sample needs
    ``num_docs x (1 - duplicate_fraction)`` distinct standard-library docstrings
    (some 1,600 of 25+ words): more raises :class:`ValueError` saying the most there can be.
    """
    rng = random.Random(seed)
    originals = stdlib_documents(min_words)
    if not originals:
        raise RuntimeError("no standard-library docstrings found to build a sample from")
    if num_docs < 1 or not 0.0 <= duplicate_fraction < 1.0:
        raise ValueError(f"need --docs >= 1 and a duplicate fraction in [0, 1), got {num_docs}, {duplicate_fraction}")
    num_dups = int(num_docs * duplicate_fraction)
    num_orig = num_docs - num_dups
    if num_orig > len(originals):
        most = int(len(originals) / (1.0 - duplicate_fraction))
        raise ValueError(
            f"this Python's standard library has {len(originals):,} distinct docstrings of {min_words}+ words: with "
            f"--duplicate-fraction {duplicate_fraction} the sample holds at most {most:,} documents, not {num_docs:,}; "
            "ask for fewer, or a larger --duplicate-fraction"
        )
    docs: list[dict[str, Any]] = [{"text": originals[i], "source": i} for i in range(num_orig)]
    for _ in range(num_dups):
        src = rng.randrange(num_orig)
        docs.append({"text": near_duplicate(docs[src]["text"], rng), "source": src})
    rng.shuffle(docs)
    for i, doc in enumerate(docs):
        doc["id"] = f"doc-{i:06d}"
    return [{"id": d["id"], "text": d["text"], "source": d["source"]} for d in docs]


def write_jsonl(docs: list[dict], path: str) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for doc in docs:
            f.write(json.dumps(doc, ensure_ascii=False) + "\n")
    return path


def main(argv: Optional[list[str]] = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m lshbloom_udf sample", description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="JSONL file to write (fields id, text, source)")
    parser.add_argument("--docs", type=int, default=2000,
                        help="documents to write, exactly (default %(default)s; the standard library's docstrings "
                             "bound it: the command fails saying how many it can make)")
    parser.add_argument("--duplicate-fraction", type=float, default=0.2,
                        help="share of the documents that are near-duplicate variants of an original "
                             "(default %(default)s)")
    parser.add_argument("--seed", type=int, default=7,
                        help="random seed of the variants and the order (default %(default)s)")
    args = parser.parse_args(argv)
    try:
        docs = build_sample(args.docs, args.duplicate_fraction, args.seed)
    except ValueError as e:
        parser.error(str(e))
    write_jsonl(docs, args.output)
    print(f"wrote {len(docs):,} documents to {args.output}")
