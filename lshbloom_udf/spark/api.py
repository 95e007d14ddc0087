"""``deduplicate(df, config, **settings)``: LSHBloom over a Spark DataFrame, and :func:`run`, what the job calls."""

from __future__ import annotations

import os
import time
from typing import Optional

from lshbloom_udf.bands import check_kept_bands, check_kept_rate
from lshbloom_udf.config import DEFAULTS, DedupConfig
from lshbloom_udf.errors import DedupInputError
from lshbloom_udf.index import IndexTransaction
from lshbloom_udf.spark.join import COUNT_COL
from lshbloom_udf.spark.keys import INTERNAL_COLS
from lshbloom_udf.spark.pipeline import DedupRun
from lshbloom_udf.spark.result import DedupResult


def deduplicate(df, config: Optional[DedupConfig] = None, *, return_summary: bool = False, **settings):
    """Near-duplicate detection with LSHBloom over the string column ``text_col`` (default ``{text_column}``) of ``df``.

    ``config`` (a :class:`~lshbloom_udf.config.DedupConfig`, default the
    product's defaults) and keyword ``settings`` on top of it: any setting of
    :data:`~lshbloom_udf.config.DEFAULTS` by name (``threshold=0.8``,
    ``index_dir=...``), plus the short names ``text_col``, ``id_col`` and
    ``flag_col``. A bad value raises :class:`DedupInputError` naming it.

    Decisions follow input order (partition by partition, row by row) or
    ``order_by`` (SQL sort expressions or Columns: ``"score DESC"`` keeps the
    highest-scoring of near-duplicates, ``F.length("text").desc()`` the
    longest; ties by ``id_col``, then input position). Under
    keep-first (``insert="first"``) a document is a duplicate when one of its
    ``b`` band keys was seen in an earlier kept document (or in the index at
    ``index_dir``); under any-earlier (``insert="all"``) in any earlier
    document, kept or not. ``pass_mode="sharded"`` decides any-earlier on the
    executors, band-key shard by shard, with no index on the driver; its
    ``index_dir`` may be any Hadoop filesystem URI (docs/architecture.md).

    Modes: ``"flag"`` returns every row of ``df`` once with a boolean column
    ``flag_col`` (default ``is_duplicate``); ``"filter"`` returns the rows kept;
    ``"duplicates"`` returns the rows removed. Rows with null or empty text are
    never duplicates.

    ``id_col``: a unique, non-null column to join the decisions back on (checked;
    duplicated ids are an error). Either way the input's rows are pinned
    (checkpointed) with a deterministic internal row id, and the decisions are
    joined back on it.

    Defaults (:data:`~lshbloom_udf.config.DEFAULTS`): threshold {threshold},
    num_perm {num_perm}, ngram {ngram}, normalize {normalize!r}, band_key
    {band_key!r}, mode {mode!r}, insert {insert!r}, pass_mode {pass_mode!r}.
    ``bloom``: a new index is {new_bloom!r} with the default band key (cuckoo
    filters: ~1.05x a classic Bloom filter's bits, not readable by
    datasketch); with ``band_key="sum"`` it is {sum_bloom!r},
    datasketch's file format; an existing index keeps its own. ``p_effective`` and ``expected_docs`` size a *new* index
    (defaults {p_verified:g} with verification, {p_final:g} without, and the number of input rows); an existing
    index at
    ``index_dir`` keeps its own sizing unless they are given (then they must match). Every other index setting must
    match an existing index (:class:`~lshbloom_udf.errors.IndexMismatchError` otherwise).

    The driver pass runs when this function is called; the returned DataFrame
    is lazy only in its final join. With ``return_summary=True`` returns a
    :class:`DedupResult` ``(df, summary)``.

    Reliability (docs/reliability.md): with ``index_dir`` the run holds the
    index's exclusive lock from its start to its commit, works on a staging
    copy of the index and commits it (with a record of the run in the
    manifest's ``runs``) only at the end: an exception or a crash leaves the
    index as it was. If a committed run already ingested the same documents
    (same content fingerprint and parameters), the run does not insert them
    again: when the processing order is the same too it reproduces that run's
    flags from the index's ``runs/`` folder, otherwise it raises
    :class:`~lshbloom_udf.errors.AlreadyIngestedError`;
    ``force_new_ingest=True`` ingests them anyway (then they are all flagged
    as duplicates of themselves).
    """
    config = (config or DedupConfig()).replace(**settings)
    result = run(df, config)
    return result if return_summary else result.df


# The defaults in the docstring are read from the settings' declarations, never retyped (none under python -OO).
if deduplicate.__doc__:
    deduplicate.__doc__ = deduplicate.__doc__.format(**DEFAULTS, new_bloom=DedupConfig().new_index_bloom,
                                                      sum_bloom=DedupConfig(band_key="sum").new_index_bloom,
                                                      p_verified=DedupConfig().new_index_p_effective,
                                                      p_final=DedupConfig(verify=False).new_index_p_effective)


def with_settings(func):
    """``func`` (taking ``**settings``) shown with every setting of a run as a keyword-only parameter and its default
    (``help()``, ``inspect.signature``, notebooks' completion), and listed at the end of its docstring.

    The defaults shown are :data:`~lshbloom_udf.config.DEFAULTS` (a ``config`` given replaces them); the column
    settings show their short names (``text_col``, ...), and every other name of a setting stays accepted through
    ``**aliases``.
    """
    import inspect

    from lshbloom_udf.config import settings as declared

    # (name shown, setting, declaration): the column settings under their short names, as the docstring uses them.
    shown = [(next((a for a in spec.aliases if a.endswith("_col")), f.name), f, spec)
             for f, spec in declared() if spec.scope != "job"]
    head = [p for p in inspect.signature(func).parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    keywords = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=DEFAULTS[f.name], annotation=f.type)
                for name, f, _ in shown]
    tail = inspect.Parameter("aliases", inspect.Parameter.VAR_KEYWORD)
    func.__signature__ = inspect.Signature([*head, *keywords, tail])
    if func.__doc__:
        lines = "\n".join(f"    ``{name}`` = ``{DEFAULTS[f.name]!r}``: {spec.help.replace('%%', '%')}"
                           for name, f, spec in shown)
        func.__doc__ += f"\n\n    Settings (default):\n\n{lines}\n"
    return func


with_settings(deduplicate)


def run(df, config: DedupConfig, *, transaction: Optional[IndexTransaction] = None, defer_commit: bool = False,
        run_info: Optional[dict] = None) -> DedupResult:
    """Deduplicate ``df`` as ``config`` says; the job's entry, with what only the job needs.

    ``transaction``: an :class:`~lshbloom_udf.index.IndexTransaction` the
    caller opened on the index directory (and keeps). ``defer_commit``: leave
    the commit to :meth:`DedupResult.commit`, so that an output can be
    committed with the index. ``run_info``: extra fields for the run record
    (e.g. the input and output paths).
    """
    t_start = time.monotonic()
    index_dir = config.index_dir
    if transaction is not None:
        if index_dir is not None and os.path.abspath(index_dir) != os.path.abspath(transaction.path):
            raise DedupInputError(f"index_dir {index_dir!r} is not the transaction's directory {transaction.path!r}")
        index_dir = transaction.path
    if defer_commit and index_dir is None:
        raise DedupInputError("defer_commit needs an index_dir")
    params = config.index_params()
    check_columns(df, config)
    # The index's lock is held from here to the commit; an incompatible index fails before any Spark work.
    txn = transaction if transaction is not None else (open_index(index_dir, config, df.sparkSession)
                                                       if index_dir is not None else None)
    try:
        if txn is not None:
            kept = txn.manifest()
            kept_params = kept.params if kept is not None else None
            check_kept_bands(txn.path, kept_params, config, params)  # says which threshold each set of bands is for
            check_kept_rate(txn.path, kept_params, config)  # a final flag at the rate verification absorbs: refused
            txn.check_compatible(params, config.sizing_given, config.bloom)
        result = DedupRun(df, config, params, txn, run_info, t_start).execute()
        result.transaction, result._owns_transaction = txn, transaction is None
        if txn is not None and not defer_commit:
            result.commit()
    except BaseException:
        _release(txn, owned=transaction is None)
        raise
    return result


def open_index(index_dir: str, config: DedupConfig, spark=None):
    """The run's transaction on ``index_dir``, in the store of the pass ``pass_mode`` names
    (:meth:`~lshbloom_udf.spark.passes.Pass.open_index`)."""
    from lshbloom_udf.spark.passes import PASSES

    return PASSES[config.pass_mode].open_index(index_dir, config, spark)


def _release(txn: Optional[IndexTransaction], owned: bool) -> None:
    """Drop what a transaction did not commit; close it (releasing the lock) if this run opened it."""
    if txn is None:
        return
    if owned:
        txn.close()
    else:
        txn.abort()


def check_columns(df, config: DedupConfig) -> None:
    """The input has the columns the settings name, of the right types, and none of the run's own."""
    from pyspark.sql import types as T

    names = df.columns
    text_col = config.text_column
    if text_col not in names:
        raise DedupInputError(f"text column {text_col!r} not found; the input has columns {names}")
    dtype = df.schema[text_col].dataType
    if not isinstance(dtype, T.StringType):
        raise DedupInputError(
            f"text column {text_col!r} has type {dtype.simpleString()}, not string; "
            "cast it or pick another column with text_col / --text-column"
        )
    if config.id_column is not None and config.id_column not in names:
        raise DedupInputError(f"id column {config.id_column!r} not found; the input has columns {names}")
    clash = [c for c in names if c in INTERNAL_COLS]
    if clash:
        raise DedupInputError(f"input columns {clash} clash with lshbloom's internal column names")
    if config.flag_column in names:
        raise DedupInputError(f"the input already has a column {config.flag_column!r}; choose another flag column name")
    if config.duplicate_count and COUNT_COL in names:
        raise DedupInputError(f"the input already has a column {COUNT_COL!r}, which duplicate_count adds; rename it")
    if config.duplicate_of:
        from lshbloom_udf.spark.join import ROW_ID_COL, SOURCE_COLS

        taken = [c for c in (*SOURCE_COLS, *([ROW_ID_COL] if config.id_column is None else [])) if c in names]
        if taken:
            raise DedupInputError(f"the input already has column(s) {taken}, which duplicate_of adds; rename them")
    from lshbloom_udf.spark.order import check_order

    check_order(df, config.order_by)
