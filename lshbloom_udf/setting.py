"""How a setting of :class:`~lshbloom_udf.config.DedupConfig` is declared (:func:`setting`) and checked.

A check is ``(name, value) -> canonical value``, or :class:`ConfigError`
naming the setting. The declarations themselves are in
:mod:`lshbloom_udf.config`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping, Optional

import numpy as np

from lshbloom_udf.errors import ConfigError
from lshbloom_udf.minhash import normalization_name

# ---------------------------------------------------------------------------
# checks: (name, value) -> canonical value, or ConfigError naming the setting


def integer(minimum: int) -> Callable[[str, Any], int]:
    def check(name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
        return int(value)

    return check


def optional(check: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    def optional_check(name: str, value: Any) -> Any:
        return None if value is None else check(name, value)

    # An optional choice keeps its choices: a flag lists them (None is the flag left out, not a choice).
    if hasattr(check, "choices"):
        optional_check.choices = check.choices  # type: ignore[attr-defined]  # a function's own attribute
    return optional_check


def choice(*choices: str) -> Callable[[str, Any], str]:
    def check(name: str, value: Any) -> str:
        if value not in choices:
            raise ConfigError(f"{name} must be one of {choices}, got {value!r}")
        return value

    check.choices = choices  # type: ignore[attr-defined]  # a function's own attribute, read by the flags
    return check


def column(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{name} must be a column name, got {value!r}")
    return value


def boolean(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ConfigError(f"{name} must be true or false, got {value!r}")
    return bool(value)


def threshold(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not 0.0 < float(value) <= 1.0:
        raise ConfigError(f"{name} must be a number in (0, 1], got {value!r}")
    return float(value)


def open_unit(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not 0.0 < float(value) < 1.0:
        raise ConfigError(f"{name} must be in (0, 1), got {value!r}")
    return float(value)


def seed(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < 2**32:
        raise ConfigError(f"{name} must be an integer in [0, 2**32), got {value!r}")
    return int(value)


def normalize(name: str, value: Any) -> str:
    try:
        return normalization_name(value)
    except (ValueError, TypeError, AttributeError) as e:
        raise ConfigError(f"{name}: {e}") from None


def bands(name: str, value: Any) -> tuple[int, int]:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
        raise ConfigError(f"{name} must be a pair (b, r), got {value!r}")
    return (integer(1)(f"{name} b", value[0]), integer(1)(f"{name} r", value[1]))


def order_by(name: str, value: Any) -> tuple:
    """The processing order: SQL sort expressions (``'score DESC, length(text) DESC'``, as Spark's
    ``ORDER BY`` takes them; a string may hold several, split at its top-level commas) or Spark Columns."""
    columns = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    out: list = []
    for c in columns:
        if not isinstance(c, str):
            out.append(c)
            continue
        items = split_sort_list(c)
        if not items or any(not i for i in items):
            raise ConfigError(f"{name}: empty sort expression in {c!r}")
        out.extend(items)
    return tuple(out)


def split_sort_list(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses, quotes and backticks, each part stripped;
    a :class:`ConfigError` for unbalanced parentheses or an unclosed quote."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise ConfigError(f"order_by: unbalanced ')' in {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if quote or depth:
        raise ConfigError(f"order_by: unclosed {quote or '('} in {text!r}")
    parts.append(text[start:].strip())
    return parts


def is_uri(path: str) -> bool:
    return "://" in path or path.startswith(("dbfs:", "file:"))


def index_dir(name: str, value: Any) -> str:
    """A directory: a local path (either pass), or any Hadoop filesystem URI (the sharded pass; checked together)."""
    import os

    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise ConfigError(f"{name} must be a directory path, got {value!r}")
    return os.fspath(value)


def options(name: str, value: Any) -> Mapping[str, str]:
    if isinstance(value, (list, tuple)):  # repeated --input-option KEY=VALUE
        value = dict(value)
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name} must be a table of reader/writer options, got {value!r}")
    return MappingProxyType({str(k): str(v) for k, v in value.items()})


def memory(text: str) -> int:
    """A command-line memory size (``128m``, ``1g``, ``65536``) as bytes."""
    import argparse

    from lshbloom_udf.sizing import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def data_format(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{name} must be a Spark data source name, got {value!r}")
    return value


# ---------------------------------------------------------------------------
# the declaration


@dataclass(frozen=True)
class Setting:
    """What one field of :class:`DedupConfig` declares beyond its name and default."""

    help: str
    check: Callable[[str, Any], Any]
    group: str
    # the job's flag: "" = "--name-with-dashes", None = no flag; cli = argparse extras
    flag: Optional[str] = ""
    cli: Mapping[str, Any] = field(default_factory=dict)
    # the Transformer's Param name: "" = camelCase of the name, None = no Param
    param: Optional[str] = ""
    # other keywords deduplicate() accepts for it (the API's historical names)
    aliases: tuple[str, ...] = ()
    # "run": a setting of every run; "job": only the spark-submit job reads it
    scope: str = "run"
    # sizes a new index only (the IndexParams field it sets): an existing index keeps its own unless given
    sizes: Optional[str] = None


def setting(default: Any, help: str, check: Callable[[str, Any], Any], group: str, **spec: Any) -> Any:
    """One setting: a dataclass field of :class:`DedupConfig` carrying its :class:`Setting`."""
    meta = {"setting": Setting(help=help, check=check, group=group, **spec)}
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)
