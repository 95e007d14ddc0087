"""The job's files: reading the input (refusing unparsable records), the output's commit, the summary file."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Optional

from lshbloom_udf.errors import JobError
from lshbloom_udf.spark.output import Output

if TYPE_CHECKING:
    from lshbloom_udf.config import DedupConfig


def read_input(spark, config: DedupConfig, input_arg: str):
    """The input DataFrame, resolved now (a missing path fails here) and checked for unparsable records."""
    from pyspark.errors import AnalysisException

    inputs = [s for s in input_arg.split(",") if s]
    options = dict(config.input_options)
    if config.input_format == "json":
        # Jackson's default limit (20 M characters per string) would make a long document an unparsable record.
        options.setdefault("maxStringLen", str(JSON_MAX_STRING_LEN))
    reader = spark.read.format(config.input_format).options(**options)
    try:
        df = reader.load(inputs if len(inputs) > 1 else inputs[0])
        df.schema  # noqa: B018  (resolve now)
    except AnalysisException as e:
        raise JobError(f"cannot read --input {input_arg} as {config.input_format}: {first_line(e)}") from None
    check_malformed(df, input_arg, config.input_format)
    if config.input_format == "csv" and str(options.get("multiLine", "false")).lower() != "true":
        warn_csv_fragments(df, input_arg, config.id_column)
    return df


def warn_csv_fragments(df, input_path: str, id_column: Optional[str]) -> None:
    """Warn when the ids of a CSV input read line by line look like pieces of text.

    Without ``multiLine`` Spark's CSV reader cuts a record at a newline inside
    a quoted field; the pieces become rows of their own, whose first field (the
    id) is a fragment of the text. That is legal CSV to the reader, so only the
    ids' look gives it away: whitespace or a quote inside an id.
    """
    import logging

    from pyspark.sql import functions as F

    if id_column is None or id_column not in df.columns:
        return
    ident = F.col(f"`{id_column}`").cast("string")
    fragments = df.where(ident.rlike(r'[\s"]')).count()
    if fragments:
        logging.getLogger(__name__).warning(
            "--input %s: %d row(s) have an id that looks like a piece of text (whitespace or a quote in id column "
            "%r): CSV records with newlines inside quoted fields are cut into such rows unless read with "
            "--input-option multiLine=true", input_path, fragments, id_column)


# The JSON reader's longest string (Spark's "maxStringLen" option): Java's longest, unless the user sets another.
JSON_MAX_STRING_LEN = 2**31 - 1


def check_malformed(df, input_path: str, input_format: str) -> None:
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
        raise JobError(f"--input {input_path}: no record can be parsed as {input_format}")
    # Spark refuses queries of raw JSON/CSV that need the corrupt-record column alone: count another one too. Every
    # column is used, so the parser reads every field as the job will (a pruned read could skip a field that
    # fails to parse, e.g. a string past the reader's length limit, and see no corrupt record).
    every = F.length(F.to_json(F.struct(*[F.col(f"`{c}`") for c in others])))  # any column type (hash refuses maps)
    row = df.where(F.col(corrupt).isNotNull()).agg(
        F.count(F.lit(1)).alias("n"), F.max(every).alias("m"), F.first(F.col(corrupt)).alias("first")
    ).collect()[0]
    if row["n"]:
        raise JobError(
            f"--input {input_path}: {row['n']:,} record(s) cannot be parsed as {input_format} (first: "
            f"{str(row['first'])[:80]!r}); fix them, or drop them knowingly with --input-option mode=DROPMALFORMED"
        )


# Spark's error classes for an input file it cannot read (corrupt, truncated, or a schema other than the others')
_UNREADABLE = re.compile(r"\[(FAILED_READ_FILE[A-Z_.]*|CANNOT_READ_FILE_FOOTER[A-Z_.]*)\]\s*(?P<what>[^\n]*)")


def unreadable_input_file(error: BaseException) -> Optional[str]:
    """One line naming the input file a Spark job failed to read (its error class says so), or None."""
    text = str(getattr(error, "java_exception", None) or "") + "\n" + str(error)
    found = _UNREADABLE.search(text)
    if found is None:
        return None
    what = re.sub(r"\s*SQLSTATE: \w+\.?\s*$", "", found["what"]).strip()
    if "MALFORMED_RECORD_IN_PARSING" in text:
        return (f"an input file cannot be read: {what} (a record cannot be parsed; fix or remove the file, or drop "
                "such records knowingly with --input-option mode=DROPMALFORMED)")
    return (f"an input file cannot be read: {what} (the file is corrupt or its schema differs from the other "
            "input files'; fix or remove it, or read the good files only)")


def refuse_output_over_input(spark, output: "Output", input_arg: str, extra_outputs=()) -> None:
    """Refuse (:class:`JobError`) an output, its temporary or ``extra_outputs`` (the summary) that equals, contains
    or lies inside an input path — whatever ``--overwrite`` says: replacing it would destroy the input.

    Inputs are resolved as the reader resolves them (globs expanded, ``file://`` URIs and Hadoop paths
    qualified) and, on the local file system, with symlinks resolved.
    """
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    targets = [(output.qualified, "--output"), (output.tmp, "the temporary of --output"), *extra_outputs]
    resolved_targets = [(_resolved(jvm, conf, t), what) for t, what in targets]
    for given in (s for s in input_arg.split(",") if s):
        for source in _input_paths(jvm, conf, given):
            for target, what in resolved_targets:
                if _overlaps(source, target):
                    raise JobError(
                        f"{what} {target} would overwrite the input {given} ({source}): an output must not be, contain "
                        "or lie inside an input path, with or without --overwrite. Write it elsewhere"
                    )


def _input_paths(jvm, conf, given: str) -> list[str]:
    """The qualified, resolved paths an input argument names (its glob's matches, or itself)."""
    from py4j.protocol import Py4JJavaError

    hpath = jvm.org.apache.hadoop.fs.Path(given)
    try:
        fs = hpath.getFileSystem(conf)
        matches = fs.globStatus(hpath)
        paths = [m.getPath().toString() for m in matches] if matches else []
        return [_resolved(jvm, conf, p) for p in paths or [fs.makeQualified(hpath).toString()]]
    except Py4JJavaError:  # a filesystem that cannot be reached: the reader names the problem next
        return [given.rstrip("/")]


def _resolved(jvm, conf, qualified: str) -> str:
    """A qualified path; a local one as ``file:`` + its real path (symlinks resolved)."""
    from py4j.protocol import Py4JJavaError

    hpath = jvm.org.apache.hadoop.fs.Path(qualified)
    try:
        uri = hpath.getFileSystem(conf).makeQualified(hpath).toUri()
    except Py4JJavaError:
        return qualified.rstrip("/")
    if uri.getScheme() == "file":
        return "file:" + os.path.realpath(uri.getPath())
    return str(uri.toString()).rstrip("/")


def _overlaps(a: str, b: str) -> bool:
    """Is one path the other, or inside it?"""
    a, b = a.rstrip("/") or "/", b.rstrip("/") or "/"
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def write_text(spark, path: str, text: str) -> None:
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


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def read_text(spark, path: str) -> str:
    """Read a small text file from any Hadoop file system (local paths included)."""
    if "://" not in path and not path.startswith("file:"):
        with open(path, encoding="utf-8") as f:
            return f.read()
    return spark.read.text(path, wholetext=True).first()[0]
