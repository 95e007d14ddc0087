"""What a run returns: :class:`DedupResult` (the DataFrame, the summary, the commit still to do) and the summary text."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from lshbloom_udf.sizing import human_bytes


@dataclass
class DedupResult:
    """A run's DataFrame and summary; with ``defer_commit`` also its open index transaction.

    Iterates as ``(df, summary)``. The summary is a JSON-ready dict:
    documents, empty_documents, duplicates, kept, duplicate_rate, mode,
    columns, params, index (path, backend, bytes, inserted, run_id, …),
    seconds per stage and docs_per_second; :meth:`summary_text` formats it.
    """

    df: Any
    summary: dict = field(default_factory=dict)
    # With defer_commit=True: the open IndexTransaction and what commit() records.
    transaction: Any = field(default=None, repr=False)
    _run: Optional[dict] = field(default=None, repr=False)
    _duplicates: Any = field(default=None, repr=False)
    _owns_transaction: bool = field(default=False, repr=False)

    def __iter__(self):
        return iter((self.df, self.summary))

    def commit(self, outputs: Sequence[tuple] = ()) -> Optional[dict]:
        """Commit a ``defer_commit=True`` run: the staged index, its run record and ``outputs`` (tmp, final) together.

        Returns the run record (``None`` for a reproduced run, which changes
        no index). Releases the index lock if the run took it.
        """
        if self.transaction is None:
            raise ValueError("nothing to commit: the run was not made with defer_commit=True and an index_dir")
        try:
            return self._commit(outputs)
        finally:
            self.close()

    def _commit(self, outputs: Sequence[tuple] = ()) -> Optional[dict]:
        record = self.transaction.commit(self._run, self._duplicates, outputs)
        if record is not None:
            self.summary["index"]["run_id"] = record["run_id"]
        return record

    def close(self) -> None:
        """Abort what was not committed (the staged index, registered temporary outputs)."""
        if self.transaction is not None:
            if self._owns_transaction:
                self.transaction.close()
            else:
                self.transaction.abort()
            self.transaction = None

    def summary_text(self) -> str:
        return format_summary(self.summary)


def build_summary(config, params, documents: int, duplicates: int, empty: int, index_info: dict, seconds: dict) -> dict:
    order_by = [str(c) for c in config.order_by] if config.order_by else None
    return {
        "documents": documents,
        "empty_documents": empty,
        "duplicates": duplicates,
        "kept": documents - duplicates,
        "duplicate_rate": duplicates / documents if documents else 0.0,
        "mode": config.mode,
        "text_column": config.text_column,
        "id_column": config.id_column,
        "order_by": order_by,
        "params": {
            "threshold": params.threshold,
            "num_perm": params.num_perm,
            "b": params.b,
            "r": params.r,
            "ngram": params.ngram,
            "shingle": params.shingle,
            "normalize": params.normalize,
            "seed": params.seed,
            "scheme": params.scheme,
            "band_key": params.band_key,
        },
        "index": index_info,
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "docs_per_second": documents / max(seconds["total"], 1e-9),
    }


def format_summary(summary: dict) -> str:
    """The summary of a run as text."""
    idx = summary.get("index", {})
    s = summary.get("seconds", {})
    p = summary.get("params", {})
    where = idx.get("path") or f"temporary ({idx.get('location', '-')}, removed)"
    lines = [
        f"documents          {summary['documents']:,}  (empty/null text: {summary['empty_documents']:,})",
        f"duplicates         {summary['duplicates']:,}  ({100 * summary['duplicate_rate']:.2f}%)",
        f"kept               {summary['kept']:,}",
        f"parameters         threshold {p.get('threshold')}, num_perm {p.get('num_perm')}, b x r {p.get('b')} x {p.get('r')}, "
        f"ngram {p.get('ngram')} {p.get('shingle', 'words')}, normalize {p.get('normalize')}, seed {p.get('seed')}, scheme {p.get('scheme')}, band key {p.get('band_key', 'sum')}",
        f"index              {where}: {human_bytes(idx.get('bytes_on_disk', 0))} of {idx.get('backend', 'pybloomfiltermmap3')} filters, "
        f"{idx.get('inserted_total', 0):,} documents inserted in all"
        + (f" ({idx['inserted_before']:,} before this run)" if idx.get("inserted_before") else ""),
        "seconds            " + ", ".join(f"{k} {v:.2f}" for k, v in s.items()),
        f"rate               {summary['docs_per_second']:,.0f} docs/s",
    ]
    if math.isfinite(idx.get("expected_false_positive", 0.0) or 0.0) and idx.get("expected_false_positive"):
        lines.insert(5, f"index FP rate now  {idx['expected_false_positive']:.3g} (sized for p_effective {idx.get('p_effective'):.3g})")
    v = summary.get("verify")
    if v:
        lines.insert(2, f"verified           {v['kept_flagged']:,} of the pass's {v['pass_flagged']:,} flags at Jaccard >= "
                        f"{v['threshold']} ({v['unflagged']:,} unflagged, {v['unverifiable']:,} from earlier runs)")
    return "\n".join(lines)
