"""Near-duplicate removal with LSHBloom as a Spark batch job.

    spark-submit spark_jobs/dedup.py --input docs.jsonl --output out/ [options]

Reads ``--input`` with any Spark data source (``--input-format``, default json),
decides keep-first near-duplicates over ``--text-column`` and writes, by
``--mode``:

- ``flag`` (default): every input row once, plus a boolean ``is_duplicate``;
- ``filter``: the rows kept; ``duplicates``: the rows removed.

Output is Parquet by default (``--output-format``, any Spark source). A summary
(documents, duplicates, rate, index size, seconds per stage) is printed and
written as JSON to ``<output>.summary.json`` (``--summary-path`` to change),
next to the output directory, on the output's file system.

Settings come from, in rising priority: ``lshbloom_udf.config.DEFAULTS``
(same as ``conf/default.toml``), ``--config FILE.toml`` (a ``[dedup]`` table),
and the flags below. With ``--index-dir`` the index is kept; running again
with it deduplicates new input against everything kept before.

Exit status: 0 on success, 2 on bad input or parameters (one ``error:`` line
on stderr, no traceback), 1 on other failures.

Reliability (docs/reliability.md): the output is written to
``<output>.lshbloom-tmp`` and renamed into place; with ``--index-dir`` the
job holds the index's lock for its whole run (a second job on the same index
fails at start), works on a staging copy of the index, and commits the output
and the index together (journal + renames). A job killed at any moment and
run again with the same command gives the output and index of an
uninterrupted run. Running again a job that completed reproduces its result
without ingesting the documents a second time (``--force-new-ingest`` to
ingest them anyway).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from lshbloom_udf.config import CHECKPOINTS, DEFAULTS, MODES, ConfigError, load_config
from lshbloom_udf.index import BLOOM_BACKENDS
from lshbloom_udf.minhash import BAND_KEYS


def _key_value(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    k, v = text.split("=", 1)
    return k, v


def build_parser() -> argparse.ArgumentParser:
    d = DEFAULTS
    p = argparse.ArgumentParser(
        prog="spark-submit spark_jobs/dedup.py",
        description="Remove near-duplicate documents with LSHBloom (MinHash + LSH + one Bloom filter per band).",
        epilog="Defaults shown are lshbloom_udf.config.DEFAULTS; --config and then flags override them.",
    )
    S = argparse.SUPPRESS  # unset flags stay absent, so that --config can supply them
    io = p.add_argument_group("input and output")
    io.add_argument("--input", required=True, help="input path(s), comma separated, globs allowed")
    io.add_argument("--input-format", default=S, help=f"Spark data source of the input (default {d['input_format']})")
    io.add_argument("--input-option", dest="input_options", action="append", type=_key_value, default=S,
                    metavar="KEY=VALUE", help="reader option, repeatable (e.g. header=true for csv)")
    io.add_argument("--output", required=True, help="output directory")
    io.add_argument("--output-format", default=S, help=f"Spark data source of the output (default {d['output_format']})")
    io.add_argument("--output-option", dest="output_options", action="append", type=_key_value, default=S,
                    metavar="KEY=VALUE", help="writer option, repeatable (e.g. compression=gzip)")
    io.add_argument("--overwrite", action="store_true", help="replace an existing output")
    io.add_argument("--summary-path", help="where to write the JSON summary (default <output>.summary.json)")
    io.add_argument("--config", help="TOML file with a [dedup] table of settings (see conf/default.toml)")
    io.add_argument("--quiet", action="store_true", help="no progress lines on stderr")

    cols = p.add_argument_group("columns and mode")
    cols.add_argument("--mode", choices=MODES, default=S, help=f"default {d['mode']}")
    cols.add_argument("--text-column", default=S, help=f"string column with the documents (default {d['text_column']})")
    cols.add_argument("--id-column", default=S, help="unique id column to join decisions on (default: internal row ids)")
    cols.add_argument("--flag-column", default=S, help=f"name of the flag column (default {d['flag_column']})")
    cols.add_argument("--order-by", default=S, help="process documents in this column's order (comma list) instead of input order")

    mh = p.add_argument_group("MinHash / LSH (must match an existing index)")
    mh.add_argument("--threshold", type=float, default=S, help=f"Jaccard threshold (default {d['threshold']})")
    mh.add_argument("--num-perm", type=int, default=S, help=f"permutations (default {d['num_perm']})")
    mh.add_argument("--bands", type=int, nargs=2, metavar=("B", "R"), default=S, help="explicit bands x rows instead of the optimum")
    mh.add_argument("--ngram", type=int, default=S, help=f"word n-gram size (default {d['ngram']})")
    mh.add_argument("--normalize", nargs="?", const="all", default=S,
                    help="normalize text first: bare flag = all (NFKC, lowercase, punctuation); or a comma list of nfkc,lower,punct; "
                         f"default {d['normalize']}")
    mh.add_argument("--seed", type=int, default=S, help=f"permutation seed (default {d['seed']})")
    mh.add_argument("--scheme", choices=("affine32", "legacy"), default=S, help=f"default {d['scheme']}")
    mh.add_argument("--band-key", choices=BAND_KEYS, default=S,
                    help="how a band's values become its key: sum (datasketch's) or mix (a 64-bit hash: no band-sum "
                         f"collisions between distinct documents at scale, docs/algorithm.md section 7); default {d['band_key']}")

    ix = p.add_argument_group("index")
    ix.add_argument("--p-effective", type=float, default=S, help=f"effective Bloom false-positive rate of a new index (default {d['p_effective']})")
    ix.add_argument("--expected-docs", type=int, default=S, help="capacity of a new index (default: the number of input documents)")
    ix.add_argument("--index-dir", default=S, help="keep the index here (reused if it exists); default: a temporary index")
    ix.add_argument("--force-new-ingest", action="store_true",
                    help="ingest the input even if a committed run of this index already ingested the same documents "
                         "(they will all be flagged as duplicates of themselves); default: reproduce that run's result")
    ix.add_argument("--checkpoint", choices=CHECKPOINTS, default=S,
                    help="how the keyed rows are pinned: local (localCheckpoint) or reliable (needs spark.checkpoint.dir)")
    ix.add_argument("--bloom", choices=BLOOM_BACKENDS, default=S,
                    help="Bloom filter backend of a new index: pybloomfiltermmap3 (datasketch-compatible files) or "
                         "blocked (one cache line per key per band: faster, larger, not readable by datasketch); "
                         f"an existing --index-dir must have this backend; default {d['bloom']}")
    from lshbloom_udf.config import PRESETS

    p.add_argument("--preset", choices=tuple(PRESETS), default=None,
                   help="start from a named preset instead of the defaults; 'paper' = the LSHBloom paper's settings "
                        "(unigrams, T=0.5, 256 permutations, no normalization, legacy scheme; conf/paper.toml)")
    return p


def settings_from(args: argparse.Namespace) -> dict:
    """DEFAULTS, overridden by --preset, by --config, then by the flags given."""
    settings = dict(DEFAULTS)
    if getattr(args, "preset", None):
        from lshbloom_udf.config import preset_settings

        settings.update(preset_settings(args.preset))
    if args.config:
        settings.update(load_config(args.config))
    given = {k: v for k, v in vars(args).items() if k in DEFAULTS}
    for k in ("input_options", "output_options"):
        if k in given:
            given[k] = {**settings.get(k, {}), **dict(given[k])}
    settings.update(given)
    if isinstance(settings.get("order_by"), str):
        settings["order_by"] = [c.strip() for c in settings["order_by"].split(",") if c.strip()]
    return settings


def _write_text(spark, path: str, text: str) -> None:
    """Write a small text file on any Hadoop file system (local paths included)."""
    if "://" not in path and not path.startswith("file:"):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return
    jvm = spark.sparkContext._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    out = fs.create(hpath, True)
    try:
        out.write(bytearray(text.encode("utf-8")))
    finally:
        out.close()


class UserError(Exception):
    pass


def run(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from(args)
    except ConfigError as e:
        raise UserError(str(e)) from None

    from pyspark.errors import AnalysisException
    from pyspark.sql import SparkSession

    from lshbloom_udf import hooks
    from lshbloom_udf.index import (
        AlreadyIngestedError,
        IndexFullError,
        IndexLockedError,
        IndexMismatchError,
        IndexRecoveryNeededError,
        IndexTransaction,
    )
    from lshbloom_udf.spark import DedupInputError, deduplicate, format_summary

    import time

    t0 = time.monotonic()
    # The index's lock is taken before Spark starts and held until the commit:
    # a second job on the same index fails here, at once.
    txn = None
    if settings["index_dir"] is not None:
        try:
            txn = IndexTransaction(os.fspath(settings["index_dir"]))
        except (IndexLockedError, IndexRecoveryNeededError, OSError) as e:
            raise UserError(f"--index-dir {settings['index_dir']}: {_first_line(e)}") from None
        done = txn.recovered
        if done["rolled_forward"]:
            print(f"lshbloom: finished the commit of run {done['rolled_forward']} that a crashed job left half done", file=sys.stderr)
        if done["discarded"]:
            print(f"lshbloom: discarded {len(done['discarded'])} staging copie(s) of crashed run(s)", file=sys.stderr)
    # A session that already exists (a notebook, a test) is used and left running.
    existing = SparkSession.getActiveSession()
    result = None
    try:
        spark = existing or SparkSession.builder.appName("lshbloom-dedup").getOrCreate()
        output = _Output(spark, args.output)
        try:
            committed = {run.get("output") for run in txn.runs()} if txn is not None else set()
        except ValueError as e:  # a corrupt manifest, named by the message
            raise UserError(_first_line(e)) from None
        if output.exists() and not args.overwrite and output.qualified not in committed:
            raise UserError(f"cannot write --output {args.output}: it already exists (use --overwrite to replace it)")
        inputs = [s for s in args.input.split(",") if s]
        reader = spark.read.format(settings["input_format"]).options(**{k: str(v) for k, v in settings["input_options"].items()})
        try:
            df = reader.load(inputs if len(inputs) > 1 else inputs[0])
            df.schema  # resolve now: a missing path fails here
        except AnalysisException as e:
            raise UserError(f"cannot read --input {args.input} as {settings['input_format']}: {_first_line(e)}") from None
        _check_malformed(df, args.input, settings["input_format"])
        t_read = time.monotonic()
        try:
            result = deduplicate(
                df,
                text_col=settings["text_column"],
                id_col=settings["id_column"],
                mode=settings["mode"],
                threshold=settings["threshold"],
                num_perm=settings["num_perm"],
                ngram=settings["ngram"],
                normalize=settings["normalize"],
                seed=settings["seed"],
                scheme=settings["scheme"],
                band_key=settings["band_key"],
                p_effective=settings["p_effective"] if ("p_effective" in vars(args) or _in_config(args, "p_effective")) else None,
                expected_docs=settings["expected_docs"],
                index_dir=settings["index_dir"],
                order_by=settings["order_by"],
                bands=settings["bands"],
                flag_col=settings["flag_column"],
                checkpoint=settings["checkpoint"],
                bloom=settings["bloom"],
                progress=not args.quiet,
                return_summary=True,
                force_new_ingest=args.force_new_ingest,
                transaction=txn,
                defer_commit=txn is not None,
                run_info={"input": args.input, "output": output.qualified, "output_format": settings["output_format"]},
            )
        except (DedupInputError, IndexMismatchError, AlreadyIngestedError, IndexFullError, AnalysisException) as e:
            raise UserError(_first_line(e)) from None
        except (ValueError, OSError) as e:  # a damaged or unwritable index, named by the message
            raise UserError(_first_line(e)) from None
        t_dedup = time.monotonic()
        index_info = result.summary["index"]
        reproduced = index_info.get("reproduced", False)
        prior_output = None
        if reproduced:
            prior = next(r for r in txn.runs() if r["run_id"] == index_info["reproduced_from"])
            prior_output = prior.get("output")
        if reproduced and prior_output == output.qualified and output.exists():
            # The run completed before (perhaps it was killed after its commit): its output is the result.
            print(
                f"lshbloom: this input was already ingested by run {index_info['reproduced_from']}, whose output "
                f"{args.output} is in place: nothing to do (--force-new-ingest to ingest it again)",
                file=sys.stderr,
            )
            result.close()
        else:
            if output.exists() and not args.overwrite:
                raise UserError(f"cannot write --output {args.output}: it already exists (use --overwrite to replace it)")
            writer = result.df.write.format(settings["output_format"]).options(
                **{k: str(v) for k, v in settings["output_options"].items()}
            )
            output.prepare_temporary(txn)
            hooks.fire("output-write", path=output.local_tmp)
            try:
                writer.save(output.tmp)
            except AnalysisException as e:
                raise UserError(f"cannot write --output {args.output}: {_first_line(e)}") from None
            finally:
                hooks.fire("output-written")
            if output.local_tmp:
                if txn is not None:
                    result.commit(outputs=[(output.local_tmp, output.local)])
                else:
                    output.commit_local()
            else:
                output.commit_hadoop()
                if txn is not None:
                    result.commit()
        hooks.fire("after-commit")
        t_write = time.monotonic()
        summary = result.summary
        summary["input"] = args.input
        summary["output"] = args.output
        summary["output_format"] = settings["output_format"]
        summary["seconds"]["read_schema"] = round(t_read - t0, 3)
        summary["seconds"]["write"] = round(t_write - t_dedup, 3)
        summary["seconds"]["job_total"] = round(t_write - t0, 3)
        summary["docs_per_second"] = summary["documents"] / max(t_write - t0, 1e-9)
        summary_path = args.summary_path or args.output.rstrip("/") + ".summary.json"
        summary["summary_path"] = summary_path
        _write_text(spark, summary_path, json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n")
        print(format_summary(summary))
        print(f"output             {args.output} ({settings['output_format']}, mode {settings['mode']})")
        print(f"summary            {summary_path}")
    finally:
        try:
            if result is not None:
                result.close()
            if txn is not None:
                txn.close()
        finally:
            if existing is None and SparkSession.getActiveSession() is not None:
                SparkSession.getActiveSession().stop()
    return 0


class _Output:
    """The job's output: written to ``<output>.lshbloom-tmp``, then renamed into place.

    On the local file system the rename is part of the index's commit (one
    journal, see :class:`~lshbloom_udf.index.IndexTransaction`); on another
    Hadoop file system it is a Hadoop rename just before the index commit.
    """

    SUFFIX = ".lshbloom-tmp"

    def __init__(self, spark, path: str):
        jvm = spark.sparkContext._jvm
        self._jvm = jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        hpath = jvm.org.apache.hadoop.fs.Path(path.rstrip("/") or "/")
        self._fs = hpath.getFileSystem(conf)
        self._hpath = self._fs.makeQualified(hpath)
        self.qualified = self._hpath.toString()
        self.tmp = self.qualified + self.SUFFIX
        self._htmp = jvm.org.apache.hadoop.fs.Path(self.tmp)
        local = self._fs.getScheme() == "file"
        self.local = self._hpath.toUri().getPath() if local else None
        self.local_tmp = self.local + self.SUFFIX if local else None

    def exists(self) -> bool:
        return bool(self._fs.exists(self._hpath))

    def prepare_temporary(self, txn) -> None:
        """Remove a temporary output a crashed run left, and register this one with the index's run."""
        if self._fs.exists(self._htmp):
            self._fs.delete(self._htmp, True)
        if txn is not None and self.local_tmp:
            txn.add_output(self.local_tmp)

    def commit_local(self) -> None:
        from lshbloom_udf.index import _fsync_tree, _roll_forward

        _fsync_tree(self.local_tmp)
        _roll_forward("/", {"run_id": None, "ops": [[self.local_tmp, self.local]]})

    def commit_hadoop(self) -> None:
        if self._fs.exists(self._hpath):
            self._fs.delete(self._hpath, True)
        if not self._fs.rename(self._htmp, self._hpath):
            raise RuntimeError(f"cannot rename {self.tmp} to {self.qualified}")


def _check_malformed(df, input_path: str, input_format: str) -> None:
    """Refuse input records the reader could not parse (PERMISSIVE mode turns them into rows of nulls).

    Such a row would go through with null text and come out as a kept
    document whose text is gone: a silent loss. The user can drop them
    knowingly with ``--input-option mode=DROPMALFORMED``.
    """
    from pyspark.sql import functions as F

    corrupt = "_corrupt_record"
    if corrupt not in df.columns:
        return
    others = [c for c in df.columns if c != corrupt]
    if not others:
        raise UserError(f"--input {input_path}: no record can be parsed as {input_format}")
    # Spark refuses queries of raw JSON/CSV that need the corrupt-record column alone: count another one too.
    row = df.where(F.col(corrupt).isNotNull()).agg(
        F.count(F.lit(1)).alias("n"), F.count(F.col(f"`{others[0]}`")).alias("m"), F.first(F.col(corrupt)).alias("first")
    ).collect()[0]
    if row["n"]:
        raise UserError(
            f"--input {input_path}: {row['n']:,} record(s) cannot be parsed as {input_format} (first: "
            f"{str(row['first'])[:80]!r}); fix them, or drop them knowingly with --input-option mode=DROPMALFORMED"
        )


def _in_config(args, key: str) -> bool:
    if not args.config:
        return False
    try:
        return key in load_config(args.config)
    except ConfigError:
        return False


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def main(argv=None) -> None:
    try:
        code = run(argv)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
