"""The README's settings table, generated from the settings' declarations (lshbloom_udf/config.py).

``python tools/readme.py`` rewrites the table between the README's ``settings:start`` and
``settings:end`` markers (``make readme``); ``tests/core/test_core_readme.py`` fails when the
README's table is not what this script would write.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lshbloom_udf.config import DEFAULTS, settings
from lshbloom_udf.job.cli import build_parser

README = Path(__file__).resolve().parent.parent / "README.md"
START, END = "<!-- settings:start -->", "<!-- settings:end -->"


def _flags() -> dict[str, str]:
    """Each setting's flags in the job, e.g. ``--verify/--no-verify``, by setting name."""
    parser = build_parser()
    return {a.dest: "/".join(a.option_strings) for a in parser._actions if a.option_strings}


def _default(name: str) -> str:
    value = DEFAULTS[name]
    if value is None:
        return "none"
    if value == {}:
        return "none"
    return f"`{value!r}`" if isinstance(value, str) else f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def settings_table() -> str:
    """The markdown table of every setting: name, job flag, default and help, in declaration order."""
    flags = _flags()
    rows = ["| setting | job flag | default | what it does |", "| --- | --- | --- | --- |"]
    for f, spec in settings():
        flag = f"`{flags[f.name]}`" if f.name in flags else "(API only)"
        scope = "job only: " if spec.scope == "job" else ""
        rows.append(f"| `{f.name}` | {flag} | {_default(f.name)} | {scope}{_cell(spec.help)} |")
    return "\n".join(rows)


def with_table(readme: str) -> str:
    """``readme`` with the table between the markers replaced by :func:`settings_table`."""
    head, sep, rest = readme.partition(START)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"the README has no {START} ... {END} block")
    return f"{head}{START}\n{settings_table()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the README's table is out of date")
    args = parser.parse_args(argv)
    current = README.read_text()
    wanted = with_table(current)
    if args.check:
        return 0 if wanted == current else 1
    README.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
