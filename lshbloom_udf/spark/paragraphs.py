"""The paragraph stage of a run (``paragraphs`` annotate or remove; the rule: :mod:`lshbloom_udf.paragraphs`).

1. The executors cut and key the pinned rows' paragraphs (:func:`paragraph_packer`), one packed row per Arrow
   batch; the driver reads them partition after partition, in row order (the keep order), and decides the
   paragraphs of the documents kept against the paragraph filter (:func:`decide_paragraphs`).
2. The removed paragraphs' ids (:func:`~lshbloom_udf.paragraphs.encode`) go back to the executors, which cut the
   same paragraphs again and write the output columns (:func:`paragraph_output`): ``paragraphs_removed``, and
   ``removed_paragraphs`` (annotate) or the text without them (remove).

A kept document none of whose paragraphs of ``min_chars`` or more is left is *emptied*: it is flagged with the
duplicates (its every paragraph was an earlier document's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lshbloom_udf import hooks
from lshbloom_udf.common import col, local_rows
from lshbloom_udf.minhash import arrow_texts
from lshbloom_udf.paragraphs import Paragraphs, ParagraphSpec, check_paragraph_count, deletions, remove_paragraphs
from lshbloom_udf.spark.keys import ROW_COL

# A new paragraph filter's keys per document (it grows by generations past them, lshbloom_udf.index.growth).
PARAGRAPH_KEYS_GUESS = 16
PACKED_PARAGRAPHS = "rows binary, counts binary, starts binary, ends binary, nkeys binary, keys binary"
REMOVED_COL = "removed_paragraphs"
COUNT_COL = "paragraphs_removed"
# An emptied document in the recorded (row, paragraph) pairs: its row and this paragraph index.
EMPTIED = -1


@dataclass(frozen=True)
class ParagraphOutcome:
    """What the paragraph stage decided: the removed paragraphs (row ids and their index in the document, sorted
    by both), the emptied rows (sorted) and the counts."""

    removed_rows: np.ndarray
    removed_paragraphs: np.ndarray
    emptied_rows: np.ndarray
    decided: int  # paragraphs with keys of the documents kept
    documents: int  # documents kept whose paragraphs were decided

    def summary(self, spec: ParagraphSpec) -> dict:
        return {"unit": spec.unit, "paragraphs": self.decided, "removed": int(len(self.removed_rows)),
                "documents": self.documents, "emptied_documents": int(len(self.emptied_rows))}

    def record(self, spec: ParagraphSpec) -> dict:
        """What a run record keeps of the stage (its commit adds where the :meth:`recorded` pairs are)."""
        return {**self.summary(spec), "overlap": spec.overlap}

    def recorded(self) -> np.ndarray:
        """The ``(n, 2)`` int64 pairs a run record keeps: ``(row, paragraph)`` removed, then ``(row, EMPTIED)``."""
        removed = np.stack([self.removed_rows, self.removed_paragraphs.astype(np.int64)], axis=1)
        emptied = np.stack([self.emptied_rows, np.full(len(self.emptied_rows), EMPTIED, dtype=np.int64)], axis=1)
        return np.concatenate([removed, emptied]).astype(np.int64)

    @classmethod
    def of_recorded(cls, pairs: np.ndarray, summary: dict) -> "ParagraphOutcome":
        """:meth:`recorded`'s inverse, with the counts the record's summary kept."""
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        emptied = pairs[:, 1] == EMPTIED
        return cls(pairs[~emptied, 0], pairs[~emptied, 1].astype(np.int32), pairs[emptied, 0],
                   int(summary["paragraphs"]), int(summary["documents"]))


def run_paragraph_stage(pinned, config, documents: int, duplicate_rows, txn=None) -> ParagraphOutcome:
    """The paragraph stage of a run of ``config`` over ``documents`` pinned rows, those in ``duplicate_rows``
    removed whole: decided against the kept index's paragraph filter, staged in ``txn`` (its commit makes it live
    with the run), or against a filter of this run's own (one band, blocked, in a temporary directory: in memory
    when it fits there)."""
    import os

    from lshbloom_udf.index import LSHBloomIndex
    from lshbloom_udf.index.fs import rmtree
    from lshbloom_udf.index.paragraph_filter import PARAGRAPH_BLOOM
    from lshbloom_udf.spark.passes.driver.temporary import temporary_index_dir

    spec = config.paragraph_spec
    params = spec.index_params(PARAGRAPH_KEYS_GUESS * max(config.expected_docs or documents, 1))
    if txn is not None:
        return decide_paragraphs(pinned, config.text_column, spec, duplicate_rows, txn.stage_paragraphs(params))
    # In memory when it fits: random writes into a file on a disk are throttled by the kernel's writeback (a
    # paragraph filter of 10^7 documents in /tmp: 15 s per 10^4 keys, in /dev/shm 5 ms; docs/benchmarks.md).
    work = temporary_index_dir(params, PARAGRAPH_BLOOM)
    try:
        with LSHBloomIndex.create(os.path.join(work, "paragraphs"), params, bloom=PARAGRAPH_BLOOM) as index:
            return decide_paragraphs(pinned, config.text_column, spec, duplicate_rows, index)
    finally:
        rmtree(work)


def reproduced_paragraphs(txn, prior, spec: ParagraphSpec) -> ParagraphOutcome:
    """The paragraphs the committed run ``prior`` removed, for a run that reproduces it (the same input again)."""
    from lshbloom_udf.errors import DedupInputError

    recorded = prior.paragraphs
    if recorded is None:
        raise DedupInputError(
            f"{txn.path}: run {prior.run_id} ingested these documents without paragraphs, and a run of the same "
            "input reproduces its decisions: run with paragraphs 'off', or with force_new_ingest to decide their "
            "paragraphs now (against the filter, which then holds the earlier runs' paragraphs)")
    if recorded.get("unit") != spec.unit or recorded.get("overlap") != spec.overlap:
        raise DedupInputError(
            f"{txn.path}: run {prior.run_id} decided these documents' paragraphs as {recorded.get('unit')!r} with "
            f"overlap {recorded.get('overlap')}, this run asks {spec.unit!r} with {spec.overlap}; a run of the same "
            "input reproduces the earlier decisions: use its settings, or force_new_ingest")
    return ParagraphOutcome.of_recorded(txn.load_paragraphs(prior), recorded)


def paragraph_packer(text_col: str, spec: ParagraphSpec):
    """The ``mapInArrow`` function (:data:`PACKED_PARAGRAPHS`): each Arrow batch's rows and paragraphs, packed."""
    task_hook = hooks.task_hook()

    def pack(batches):
        import pyarrow as pa

        from lshbloom_udf.spark.keys import task_start

        task_start(task_hook, "paragraphs")
        for batch in batches:
            rows = batch.column(ROW_COL).to_numpy(zero_copy_only=False).astype("<i8")
            p = spec.paragraphs(arrow_texts(batch.column(text_col)))
            yield pa.RecordBatch.from_pydict({
                name: pa.array([np.ascontiguousarray(a).tobytes()], pa.binary())
                for name, a in (("rows", rows), ("counts", p.counts), ("starts", p.starts), ("ends", p.ends),
                                ("nkeys", p.nkeys), ("keys", p.keys))
            })

    return pack


def unpack(row) -> tuple[np.ndarray, Paragraphs]:
    """A packed row's row ids and paragraphs."""
    rows = np.frombuffer(row["rows"], dtype="<i8")
    counts, starts, ends, nkeys = (np.frombuffer(row[k], dtype="<u4") for k in ("counts", "starts", "ends", "nkeys"))
    return rows, Paragraphs(counts, starts, ends, nkeys, np.frombuffer(row["keys"], dtype="<u8"))


def decide_paragraphs(pinned, text_col: str, spec: ParagraphSpec, duplicate_rows: np.ndarray,
                      index) -> ParagraphOutcome:
    """Keep-first over the paragraphs of the rows not in ``duplicate_rows``, in row order, with ``index`` (a
    one-band :class:`~lshbloom_udf.index.LSHBloomIndex` of paragraph keys)."""
    packed = pinned.select(ROW_COL, col(text_col)).mapInArrow(paragraph_packer(text_col, spec), PACKED_PARAGRAPHS)
    flagged = np.unique(np.asarray(duplicate_rows, dtype=np.int64))
    removed_rows, removed_paragraphs, emptied = [], [], []
    decided = documents = 0
    for row in local_rows(packed):
        rows, p = unpack(row)
        check_paragraph_count(p.counts)
        first = p.first
        kept_docs = ~np.isin(rows, flagged, assume_unique=False)
        doc_of = np.repeat(np.arange(len(rows)), p.counts)
        kept_paras = kept_docs[doc_of]
        key_keep = np.repeat(kept_paras, p.nkeys)
        keys = np.ascontiguousarray(p.keys[key_keep]).reshape(-1, 1)
        seen = index.query_insert(keys) if len(keys) else np.zeros(0, dtype=bool)
        sub = Paragraphs(p.counts[kept_docs], p.starts[kept_paras], p.ends[kept_paras], p.nkeys[kept_paras],
                         p.keys[key_keep])
        gone = np.zeros(len(p.nkeys), dtype=bool)
        gone[kept_paras] = sub.removed(seen, spec.overlap)
        decided += sub.keyed
        documents += int(np.count_nonzero(kept_docs))
        if gone.any():
            at = np.flatnonzero(gone)
            removed_rows.append(rows[doc_of[at]])
            removed_paragraphs.append((at - first[doc_of[at]]).astype(np.int32))
            left = np.bincount(doc_of, weights=((p.nkeys > 0) & ~gone), minlength=len(rows))
            had = np.bincount(doc_of, weights=(p.nkeys > 0), minlength=len(rows))
            emptied.append(rows[kept_docs & (had > 0) & (left == 0)])
        hooks.fire("paragraph-pass", done=documents)
    rows_all = np.concatenate(removed_rows) if removed_rows else np.zeros(0, dtype=np.int64)
    paras_all = np.concatenate(removed_paragraphs) if removed_paragraphs else np.zeros(0, dtype=np.int32)
    order = np.lexsort((paras_all, rows_all))
    return ParagraphOutcome(rows_all[order], paras_all[order],
                            np.sort(np.concatenate(emptied)) if emptied else np.zeros(0, dtype=np.int64),
                            decided, documents)


def paragraph_output(pinned, text_col: str, spec: ParagraphSpec, mode: str, outcome: ParagraphOutcome):
    """``pinned`` with the paragraph stage's columns: ``paragraphs_removed`` and, by ``mode``,
    ``removed_paragraphs`` (annotate: the removed paragraphs' ``[start, end)`` spans in code points) or
    ``text_col`` without them (remove)."""
    from pyspark.sql import types as T

    shipped = pinned.sparkSession.sparkContext.broadcast((outcome.removed_rows, outcome.removed_paragraphs))
    fields = list(pinned.schema.fields)
    if mode == "annotate":
        fields.append(T.StructField(REMOVED_COL, T.ArrayType(T.ArrayType(T.IntegerType()))))
    fields.append(T.StructField(COUNT_COL, T.IntegerType()))
    schema = T.StructType(fields)

    def apply(batches):
        removed_rows, removed_paragraphs = shipped.value
        for batch in batches:
            rows = batch.column(ROW_COL).to_numpy(zero_copy_only=False).astype(np.int64)
            lo = np.searchsorted(removed_rows, rows, side="left")
            hi = np.searchsorted(removed_rows, rows, side="right")
            counts = (hi - lo).astype(np.int32)
            if not counts.any():
                yield _with_columns(batch, mode, text_col, None, counts)
                continue
            texts = batch.column(text_col)
            p = spec.paragraphs(arrow_texts(texts))
            first = p.first
            spans: list = []
            new_texts: list = texts.to_pylist() if mode == "remove" else []
            for i in range(len(rows)):
                which = removed_paragraphs[lo[i]:hi[i]]
                s, e = p.starts[first[i]:first[i + 1]], p.ends[first[i]:first[i + 1]]
                if mode == "annotate":
                    spans.append([[int(s[j]), int(e[j])] for j in which])
                elif len(which):
                    gone = np.zeros(len(s), dtype=bool)
                    gone[which] = True
                    new_texts[i] = remove_paragraphs(new_texts[i], deletions(s.tolist(), e.tolist(), gone.tolist()))
            yield _with_columns(batch, mode, text_col, spans if mode == "annotate" else new_texts, counts)

    def _with_columns(batch, mode, text_col, values, counts):
        import pyarrow as pa

        arrays, names = list(batch.columns), list(batch.schema.names)
        if mode == "annotate":
            listed = values if values is not None else [[] for _ in range(batch.num_rows)]
            arrays.append(pa.array(listed, pa.list_(pa.list_(pa.int32()))))
            names.append(REMOVED_COL)
        elif values is not None:
            at = names.index(text_col)
            arrays[at] = pa.array(values, batch.schema.field(text_col).type)
        arrays.append(pa.array(counts, pa.int32()))
        names.append(COUNT_COL)
        return pa.RecordBatch.from_arrays(arrays, names=names)

    return pinned.mapInArrow(apply, schema)


def without_annotated(df, text_col: str, spec: ParagraphSpec):
    """``df`` with annotate's columns as ``remove`` outputs it: ``text_col`` without the paragraphs its
    ``removed_paragraphs`` spans name, that column dropped (a stream decides in annotate: its stored spans)."""
    from pyspark.sql import types as T

    schema = T.StructType([f for f in df.schema.fields if f.name != REMOVED_COL])

    def strip(batches):
        import pyarrow as pa

        for batch in batches:
            names = [n for n in batch.schema.names if n != REMOVED_COL]
            arrays = [batch.column(n) for n in names]
            spans = batch.column(REMOVED_COL).to_pylist()
            if any(spans):
                texts = batch.column(text_col).to_pylist()
                for i, gone_spans in enumerate(spans):
                    if gone_spans:
                        p = spec.paragraphs([texts[i]])
                        starts, ends, gone = p.starts.tolist(), p.ends.tolist(), {tuple(x) for x in gone_spans}
                        texts[i] = remove_paragraphs(texts[i], deletions(
                            starts, ends, [(a, b) in gone for a, b in zip(starts, ends)]))
                arrays[names.index(text_col)] = pa.array(texts, batch.schema.field(text_col).type)
            yield pa.RecordBatch.from_arrays(arrays, names=names)

    return df.mapInArrow(strip, schema)
