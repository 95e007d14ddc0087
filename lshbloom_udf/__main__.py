"""Command line: ``lshbloom {dedup,plan,sample,check-index,clean,report} ...`` (also ``python -m lshbloom_udf ...``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Optional

from lshbloom_udf import sample
from lshbloom_udf.advice import advice_text, advise, measured_costs
from lshbloom_udf.config import DEFAULTS, DedupConfig
from lshbloom_udf.index.fs import human_bytes
from lshbloom_udf.job.cli import add_setting_flag
from lshbloom_udf.memory import run_needs, run_needs_text
from lshbloom_udf.projection import ClusterProjection, executors_for, project, projection_text
from lshbloom_udf.sizing import parse_bytes, plan, sharded_plan, sharded_text

# The job's settings that plan sizes or shows: their flags, types, choices and help are the config's declarations.
PLAN_SETTINGS = ("threshold", "num_perm", "p_effective", "ngram", "bands", "bloom", "growth", "pass_mode",
                 "shard_memory")


def plan_defaults() -> dict:
    """What ``lshbloom plan`` sizes with no flags: the job's defaults (what a run with its defaults would build)."""
    # bloom's setting defaults to None ("an existing index keeps its own"): plan sizes a new index.
    return {**{name: DEFAULTS[name] for name in PLAN_SETTINGS}, "bloom": DedupConfig().new_index_bloom}


# ``lshbloom plan``'s own flags (beside the settings, declared once in config.py): what to project and on what.
PLAN_OPTIONS: tuple[tuple[str, dict], ...] = (
    ("--generations", dict(type=int, default=5, help="generations of a growing index to show (default %(default)s)")),
    ("--executors", dict(type=int, default=None,
                         help="executors computing the keys (both passes) and the shards (default: the fewest that "
                              "finish the whole job within --hours)")),
    ("--hours", dict(type=float, default=4.0,
                     help="the whole job's target time when --executors is not given (default %(default)s)")),
    ("--executor-cores", dict(type=int, default=4, help="cores per executor (default %(default)s)")),
    ("--executor-memory", dict(default="8g", help="sharded: memory per executor (default %(default)s)")),
    ("--driver-memory", dict(default=None,
                             help="the driver's memory for the pass advice, e.g. 64g (default: this machine's RAM)")),
    ("--flagged-share", dict(type=float, default=None,
                             help="the share of documents the pass flags: the driver's memory, verification's hours "
                                  "(default: the measured job's, lshbloom_udf/measured/)")),
    ("--text-bytes", dict(type=float, default=2400,
                          help="driver memory: the documents' mean UTF-8 bytes (default %(default)s)")),
    ("--paragraph-keys", dict(type=float, default=None,
                              help="size a kept paragraph filter too (--paragraphs): its keys per document, the "
                                   "paragraphs of --paragraph-min-chars or more (their word n-grams with "
                                   "--paragraph-ngram)")),
)


def plan_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lshbloom_udf plan", description="Size an LSHBloom index before a run (paper §4.3-4.5).",
        epilog="Defaults are the job's (lshbloom_udf.config.DEFAULTS): the index a run with its defaults builds.",
    )
    parser.add_argument("--docs", type=float, required=True, help="expected documents, e.g. 1e10")
    for name, default in plan_defaults().items():
        add_setting_flag(parser, name, default=default)
    add_setting_flag(parser, "verify", default=DEFAULTS["verify"])  # which threshold the bands serve (below)
    for name in ("paragraph_separator", "paragraph_min_chars", "paragraph_ngram"):  # with --paragraph-keys
        add_setting_flag(parser, name, default=DEFAULTS[name])
    for flag, options in PLAN_OPTIONS:
        parser.add_argument(flag, **options)
    parser.add_argument("--json", action="store_true", help="print JSON")
    return parser


def _plan(argv: list[str]) -> None:
    parser = plan_parser()
    args = parser.parse_args(argv)
    if args.docs != int(args.docs):
        parser.error(f"--docs must be a whole number, got {args.docs}")
    if args.flagged_share is None:
        args.flagged_share = measured_costs()["job"]["flagged_share"]
    try:
        result = plan(
            int(args.docs),
            threshold=_bands_threshold(argv),
            num_perm=args.num_perm,
            p_effective=_p_effective(args),
            ngram=args.ngram,
            bands=tuple(args.bands) if args.bands else None,
            bloom=args.bloom,
            growth=args.growth,
            generations=args.generations,
        )
        cluster = _cluster(args, result)
        sharded = _sharded(args, result, cluster.executors) if args.pass_mode == "sharded" else None
        driver_memory = parse_bytes(args.driver_memory) if args.driver_memory else result.ram_bytes
        advice = advise(result, driver_memory, cluster.executors, args.executor_cores)
        needs = run_needs(result.docs, args.flagged_share, args.text_bytes, result.b)
        paragraphs = _paragraph_filter(args, result.docs)
    except ValueError as e:
        parser.error(str(e))
    if args.json:
        print(json.dumps({**result.to_dict(), **advice, **({"sharded": sharded} if sharded else {}),
                          "driver_needs": needs, "cluster": cluster.to_dict(),
                          **({"paragraph_filter": paragraphs} if paragraphs else {})}, indent=2))
    else:
        sized = "\n" + sharded_text(sharded, cluster.executors, args.executor_cores) if sharded else ""
        print(result.to_text() + sized + "\n" + advice_text(advice) + "\n" + run_needs_text(needs) + "\n"
              + projection_text(cluster, None if args.executors is not None else args.hours,
                                parse_bytes(args.executor_memory), driver_memory)
              + (_paragraph_text(paragraphs, result.docs) if paragraphs else ""))


def _paragraph_filter(args, docs: int) -> Optional[dict]:
    """The kept paragraph filter of ``--paragraph-keys`` keys per document (None: not asked)."""
    from lshbloom_udf.paragraphs import PARAGRAPH_P_EFFECTIVE, ParagraphSpec

    if args.paragraph_keys is None:
        return None
    if args.paragraph_keys <= 0:
        raise ValueError(f"--paragraph-keys must be > 0, got {args.paragraph_keys}")
    spec = ParagraphSpec(args.paragraph_separator, args.paragraph_min_chars, args.paragraph_ngram)
    return {"unit": spec.unit, "keys": int(docs * args.paragraph_keys), "p_effective": PARAGRAPH_P_EFFECTIVE,
            "bytes": spec.filter_bytes(docs, args.paragraph_keys)}


def _paragraph_text(p: dict, docs: int) -> str:
    return (f"\nparagraph filter         {human_bytes(p['bytes'])} ({p['bytes'] / max(docs, 1):.1f} bytes per "
            f"document): {p['keys']:,} keys ({p['unit']}) at {p['p_effective']:.0e} each, final"
            "\n  = a false positive removes a paragraph no earlier document held; it grows by generations past them")


def _bands_threshold(argv: list[str]) -> float:
    """The threshold the bands of a run with these flags serve (lshbloom_udf/bands.py: without verification,
    verify_threshold's unless --threshold is given), from the flags given only."""
    given = argparse.ArgumentParser(add_help=False)
    for name in ("threshold", "verify"):
        add_setting_flag(given, name)  # left out of the namespace when not given
    known, _ = given.parse_known_args(argv)
    return DedupConfig().replace(**vars(known)).bands_for.threshold


def _p_effective(args) -> float:
    """The rate a run with these flags sizes a new index for (``--p-effective``, else the one its verification
    absorbs, or the final-flag rate with ``--no-verify``: :attr:`DedupConfig.new_index_p_effective`)."""
    return DedupConfig().replace(p_effective=args.p_effective, verify=args.verify).new_index_p_effective


def _sharded(args, result, executors: int) -> dict:
    return sharded_plan(_index_params(result), args.shard_memory, executors, args.executor_cores,
                        parse_bytes(args.executor_memory), bloom=args.bloom)


def _cluster(args, result) -> ClusterProjection:
    """The whole job on ``--executors`` (or the fewest that finish within ``--hours``) with the sharded pass."""
    params = _index_params(result)
    task = sharded_plan(params, args.shard_memory, 1, 1, 0, bloom=args.bloom)["python_bytes_per_task"]

    def on(executors: int) -> ClusterProjection:
        return project(result.docs, result.b, result.index_bytes, result.records_bytes, executors,
                       args.executor_cores, args.text_bytes, args.flagged_share, task, measured_costs())

    return on(args.executors if args.executors is not None else executors_for(args.hours, on, args.executor_cores))


def _index_params(result):
    from lshbloom_udf.index import IndexParams

    return IndexParams(b=result.b, r=result.r, capacity=result.docs, num_perm=result.num_perm,
                       p_effective=result.p_effective, growth=result.growth)


def default_worker_python() -> None:
    """Python workers run this interpreter, unless told otherwise, when this process starts Spark itself.

    PySpark's default is ``python3`` from ``PATH``: not the venv the package is
    installed in, unless that venv is activated, so ``env/bin/lshbloom dedup``
    would fail in its workers with "No module named 'lshbloom_udf'". Left
    alone: an explicit ``PYSPARK_PYTHON``, ``PYSPARK_SUBMIT_ARGS`` (it may name
    a cluster master, whose nodes need their own Python), and a process that
    ``spark-submit`` started (``PYSPARK_GATEWAY_PORT``).
    """
    if not {"PYSPARK_PYTHON", "PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT"} & set(os.environ):
        os.environ["PYSPARK_PYTHON"] = sys.executable


def _dedup(argv: list[str]) -> None:
    from lshbloom_udf.job import main as dedup_main

    default_worker_python()
    dedup_main(argv, prog="lshbloom dedup")


def _check_index(argv: list[str]) -> None:
    """``lshbloom check-index DIR``: the full check of a kept index (exit 0: whole; 2: the damaged file named)."""
    from lshbloom_udf.errors import LSHBloomError, exit_code
    from lshbloom_udf.index.lock import waiting_for_lock
    from lshbloom_udf.spark.passes.check import check_index

    parser = argparse.ArgumentParser(
        prog="lshbloom check-index",
        description="Check every file of a kept index against the checksums its manifest recorded at commit.")
    parser.add_argument("index_dir", help="the --index-dir of earlier runs (a sharded index's starts Spark locally)")
    parser.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                        help="while a run holds the index (a stream's micro-batch), wait up to SECONDS for it")
    args = parser.parse_args(argv)
    try:
        print(waiting_for_lock(lambda: check_index(args.index_dir), args.wait))
    except (LSHBloomError, OSError) as e:
        print(f"error: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}", file=sys.stderr)
        sys.exit(exit_code(e) if isinstance(e, LSHBloomError) else 2)


def _clean(argv: list[str]) -> None:
    """``lshbloom clean``: remove the temporary files of dead lshbloom processes on this host."""
    from lshbloom_udf.litter import remove_dead_owners

    doc = _clean.__doc__ or ""  # None under python -OO
    argparse.ArgumentParser(prog="lshbloom clean", description=doc.split(": ", 1)[-1]).parse_args(argv)
    removed = remove_dead_owners()
    print(f"removed {len(removed)} temporary path(s) of dead lshbloom processes" +
          "".join(f"\n  {p}" for p in removed))


def _report(argv: list[str]) -> None:
    from lshbloom_udf.report.cli import main as report_main

    report_main(argv)


COMMANDS = {"dedup": _dedup, "plan": _plan, "sample": sample.main, "check-index": _check_index, "clean": _clean,
            "report": _report}


def main(argv: Optional[list[str]] = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        names = ", ".join(COMMANDS)
        print(f"usage: lshbloom {{{names}}} [options]", file=sys.stderr)
        sys.exit(2)
    COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    main()
