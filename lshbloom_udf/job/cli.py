"""The job's command line: one flag per setting of :class:`~lshbloom_udf.config.DedupConfig`, plus the job's own.

Settings come from, in rising priority: the defaults (or ``--preset``),
``--config FILE.toml`` (a ``[dedup]`` table), then the flags given. A flag
left out stays absent (``argparse.SUPPRESS``) so that the file can supply it.
"""

from __future__ import annotations

import argparse

from lshbloom_udf.config import DEFAULTS, PRESETS, DedupConfig, load_config, settings

PROG = "lshbloom dedup"
GROUPS = {
    "io": "input and output",
    "columns": "columns and mode",
    "minhash": "MinHash / LSH (must match an existing index)",
    "index": "index",
    "decision": "insert rule and pass",
    "verify": "verification of the pass's flags (docs/algorithm.md, verification)",
    "paragraphs": "paragraph-level dedup of the documents kept (docs/algorithm.md §10)",
    "run": "run",
}


def _key_value(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    k, v = text.split("=", 1)
    return k, v


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Remove near-duplicate documents with LSHBloom (MinHash + LSH + one Bloom filter per band).",
        epilog="Defaults shown are lshbloom_udf.config.DEFAULTS; --preset, --config and then flags override them.",
    )
    groups = {key: p.add_argument_group(title) for key, title in GROUPS.items()}
    io = groups["io"]
    io.add_argument("--input", required=True, help="input path(s), comma separated, globs allowed")
    io.add_argument("--output", required=True, help="output directory")
    io.add_argument("--overwrite", action="store_true", help="replace an existing output")
    io.add_argument("--summary-path", help="where to write the JSON summary (default <output>.summary.json)")
    io.add_argument("--config", help="TOML file with a [dedup] table of settings (see conf/default.toml)")
    io.add_argument("--report", action="store_true",
                    help="also write the run report, one self-contained HTML file (<output>.report.html; needs plotly; "
                         "similarities and pairs need --duplicate-of)")
    io.add_argument("--report-path", help="where --report writes the report (default <output>.report.html)")
    io.add_argument("--report-by", help="with --report, a column to give the duplicate rate by, e.g. lang")
    p.add_argument("--preset", choices=tuple(PRESETS), default=None,
                   help="start from a named preset instead of the defaults; 'paper' = the LSHBloom paper's settings "
                        "(unigrams, T=0.5, 256 permutations, no normalization, legacy scheme; conf/paper.toml)")
    p.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"), type=str.upper, default=None,
                   help="level of lshbloom's log lines on stderr: INFO shows each step and the driver pass's progress, "
                        "WARNING only warnings (default INFO, WARNING with --quiet)")
    for f, spec in settings():
        if spec.flag is not None:
            add_setting_flag(groups[spec.group], f.name)
    add_stream_flags(p.add_argument_group("stream (docs/deployment.md, streams)"))
    return p


def add_stream_flags(group) -> None:
    """The flags of ``--stream``: the job reads the files arriving in ``--input`` as a Structured Streaming query."""
    group.add_argument("--stream", action="store_true",
                       help="read --input (a directory) as a stream of arriving files; each micro-batch is "
                            "deduplicated against --index-dir and written to <output>/batch=<n>, exactly once")
    group.add_argument("--checkpoint-location",
                       help="the stream's checkpoint directory (restart with the same one to resume)")
    group.add_argument("--trigger", default="available-now",
                       help="available-now (process what has arrived, then stop) or an interval, e.g. '30 seconds' "
                            "(run until stopped: SIGTERM or Ctrl-C stops it between batches) (default available-now)")
    group.add_argument("--max-files-per-trigger", type=int, help="at most this many new files per micro-batch")
    group.add_argument("--stream-schema", help="the input's schema as DDL, e.g. 'id string, text string' (default: "
                                               "inferred from the files already in --input)")


def add_setting_flag(parser, name: str, default=argparse.SUPPRESS) -> None:
    """Add the flag of setting ``name`` (its declaration's flag, type, choices and help) to ``parser``.

    ``default``: the job leaves a flag out of its namespace when not given (its
    default comes from the config); another command (``lshbloom plan``) passes a value.
    The help states the setting's default (DEFAULTS), or ``default`` when one is given.
    """
    f = DedupConfig.__dataclass_fields__[name]
    spec = f.metadata["setting"]
    flag = spec.flag or "--" + name.replace("_", "-")
    kwargs = dict(spec.cli)
    kwargs.setdefault("help", _help(spec.help, DEFAULTS[name] if default is argparse.SUPPRESS else default))
    if getattr(spec.check, "choices", None):
        kwargs["choices"] = spec.check.choices
    if kwargs.get("action") == "append":
        kwargs["type"] = _key_value
    parser.add_argument(flag, dest=name, default=default, **kwargs)


def _help(text: str, default) -> str:
    if default is None or default == {}:
        return text
    return f"{text} (default {default})".replace("%", "%%")


def config_from(args: argparse.Namespace) -> DedupConfig:
    """The run's settings: the defaults or ``--preset``, then ``--config``, then the flags given."""
    config = DedupConfig.from_preset(args.preset) if args.preset else DedupConfig()
    if args.config:
        table = load_config(args.config)
        config = config.replace(**table)
    flags = {f.name: getattr(args, f.name) for f, _ in settings() if hasattr(args, f.name)}
    for name in ("input_options", "output_options"):
        if name in flags:
            flags[name] = {**getattr(config, name), **dict(flags[name])}
    return config.replace(**flags)
