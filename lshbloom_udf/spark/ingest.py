"""What a run checks about its input once it is pinned: whether a kept index already ingested it (and, with
:mod:`lshbloom_udf.spark.ids`, unique ids).

The checks cost one aggregation over the pinned input (:func:`inspect_input`),
no pass of their own; when they are not needed before the pass (no committed
run to compare with, or a forced new ingestion, whose record finds the run it
repeats after the pass), the driver pass's keys stage takes the same sums of the
texts it reads anyway (:class:`InputSums`, native and equal to Spark's hashes)
and the aggregation is left out; the ids' hashes too, even when the sums are
aggregated before the pass. A kept index records each committed run with two fingerprints of its
documents (docs/reliability.md): the *content* fingerprint depends only on the
multiset of texts, the *sequence* fingerprint also on each document's place in
the processing order. The same content with the
same sequence reproduces the earlier run's flags; the same content in another
order cannot be reproduced and is refused (:class:`AlreadyIngestedError`)
unless the user forces a new ingestion.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Optional

from lshbloom_udf.common import col
from lshbloom_udf.errors import AlreadyIngestedError
from lshbloom_udf.index.run_record import RunRecord
from lshbloom_udf.spark.keys import ROW_COL


@dataclass(frozen=True)
class InputFacts:
    """What one aggregation over the pinned input tells: its size, its fingerprints, its ids' health."""

    documents: int
    content_fingerprint: str
    sequence_fingerprint: str
    null_ids: int = 0
    distinct_ids: Optional[int] = None
    # The longest text's and all texts' UTF-8 bytes: they bound what fetching some texts brings (verification).
    max_text_bytes: int = 0
    text_bytes: int = 0


@dataclass(frozen=True)
class InputSums:
    """The sums of the pinned texts that :func:`inspect_input` aggregates in Spark, taken natively on a part of
    the rows (``native/src/input/sums.rs``): the number of rows, Spark's ``xxhash64`` and ``hash`` of each text
    summed exactly (``content``), the same of each (row id, text hash) pair (``sequence``), and the longest and
    all texts' UTF-8 bytes. Sums over disjoint rows add up (``+``)."""

    documents: int = 0
    content: tuple = (0, 0)
    sequence: tuple = (0, 0)
    longest: int = 0
    bytes: int = 0

    @classmethod
    def of_batch(cls, texts, rows) -> "InputSums":
        """The sums of an Arrow string column ``texts`` at the row ids ``rows`` (an Arrow int64 column)."""
        import numpy as np

        from lshbloom_udf import _native
        from lshbloom_udf.minhash import _arrow_buffers

        ids = np.asarray(rows.to_numpy(zero_copy_only=False), dtype=np.int64)
        n, c1, c2, s1, s2, longest, size = _native.input_sums(_native.ArrowTexts(*_arrow_buffers(texts)), ids)
        return cls(n, (c1, c2), (s1, s2), longest, size)

    def __add__(self, other: "InputSums") -> "InputSums":
        return InputSums(self.documents + other.documents, _added(self.content, other.content),
                         _added(self.sequence, other.sequence), max(self.longest, other.longest),
                         self.bytes + other.bytes)

    def to_json(self) -> str:
        return json.dumps(dataclasses.astuple(self))

    @classmethod
    def from_json(cls, text: str) -> "InputSums":
        n, content, sequence, longest, size = json.loads(text)
        return cls(n, tuple(content), tuple(sequence), longest, size)

    def facts(self) -> "InputFacts":
        """The facts :func:`inspect_input` reports for these rows (no ids: the sums are taken without an id column)."""
        content, sequence = _fingerprints(self.documents, *self.content, *self.sequence)
        return InputFacts(self.documents, content, sequence, max_text_bytes=self.longest, text_bytes=self.bytes)


def _added(a: tuple, b: tuple) -> tuple:
    return tuple(x + y for x, y in zip(a, b))


def measured(batches, text_col: str, sums: list):
    """``batches`` (Arrow batches of row id and text) unchanged, each one's :class:`InputSums` appended to ``sums``."""
    for batch in batches:
        names = batch.schema.names
        sums.append(InputSums.of_batch(batch.column(names.index(text_col)), batch.column(names.index(ROW_COL))))
        yield batch


def _fingerprints(documents: int, c1, c2, s1, s2) -> tuple[str, str]:
    """(content, sequence) fingerprints from the sums (None: over no rows, as Spark's sum)."""
    content = hashlib.sha256(f"lshbloom-text-content:{documents}:{c1}:{c2}".encode()).hexdigest()[:32]
    sequence = hashlib.sha256(f"lshbloom-text-sequence:{documents}:{s1}:{s2}:{content}".encode()).hexdigest()[:32]
    return content, sequence


# A signed 64-bit hash is summed exactly as four sums of its 16-bit pieces (the top one signed), each a long:
# Spark sums longs natively, several times faster than decimal(38,0), and a sum of 16-bit pieces cannot overflow
# below 2^47 rows. The pieces recombine into the very integer the decimal sum gave, so recorded fingerprints stay valid.
_PIECES = (48, 32, 16, 0)


def _exact_sum_parts(hashed_col, name: str) -> list:
    """Aggregates whose values :func:`_exact_sum` recombines into the exact sum of ``hashed_col`` (int or long)."""
    from pyspark.sql import functions as F

    x = hashed_col.cast("long")
    top = F.shiftright(x, _PIECES[0])  # arithmetic shift: keeps the sign
    return [F.sum(top).alias(f"{name}_48")] + [
        F.sum(F.shiftright(x, shift).bitwiseAND(0xFFFF)).alias(f"{name}_{shift}") for shift in _PIECES[1:]
    ]


def _exact_sum(row, name: str) -> Optional[int]:
    """The exact sum of :func:`_exact_sum_parts` ``name`` (None over no rows, as Spark's sum)."""
    parts = [row[f"{name}_{shift}"] for shift in _PIECES]
    if parts[0] is None:
        return None
    return sum(int(v) << shift for v, shift in zip(parts, _PIECES))


@dataclass(frozen=True)
class InputCheck:
    """What a run's input check found (:meth:`~lshbloom_udf.spark.pipeline.DedupRun.check_input`): the documents'
    number and, with a kept index, the committed run that already ingested them (if any)."""

    documents: int = 0
    prior: Optional[RunRecord] = None


@dataclass(frozen=True)
class InputMeasure:
    """The input's fingerprints (with a kept index) and text sizes: from the input check's aggregation, or from the
    pass's keys stage (:meth:`~lshbloom_udf.spark.pipeline.DedupRun.check_after_pass`)."""

    fingerprints: Optional[tuple] = None
    # the longest text's and all texts' UTF-8 bytes (None: not measured)
    text_sizes: tuple[Optional[int], Optional[int]] = (None, None)

    @classmethod
    def of(cls, facts: InputFacts, kept_index: bool) -> "InputMeasure":
        fingerprints = (facts.content_fingerprint, facts.sequence_fingerprint) if kept_index else None
        return cls(fingerprints, (facts.max_text_bytes, facts.text_bytes))


def inspect_input(pinned, text_col: str, id_col: Optional[str]) -> InputFacts:
    """Count, fingerprint, measure the texts' bytes and (with ``id_col``) check the ids of the pinned input, in
    one Spark job.

    The *content* fingerprint depends only on the multiset of texts, the
    *sequence* fingerprint also on each text's row id (its place in the
    processing order); two 64-bit hash sums each. With the run's parameters
    (which the run record holds) the texts decide the band keys, so equal
    fingerprints mean the same documents.
    """
    from pyspark.sql import functions as F

    # Each text is hashed twice, once per hash function; the sequence sums hash (row id, text hash) pairs.
    hashed = pinned.select(F.col(ROW_COL).alias("row"), F.xxhash64(col(text_col)).alias("h1"),
                           F.hash(col(text_col)).alias("h2"), F.octet_length(col(text_col)).alias("bytes"),
                           *([col(id_col).alias("id")] if id_col else []))
    h1, h2, row = F.col("h1"), F.col("h2"), F.col("row")
    sums = {"c1": h1, "c2": h2, "s1": F.xxhash64(row, h1), "s2": F.hash(h2, row)}
    aggs = [F.count(F.lit(1)).alias("n"), F.max(F.col("bytes")).alias("longest"), F.sum(F.col("bytes")).alias("bytes")]
    aggs += [a for name, c in sums.items() for a in _exact_sum_parts(c, name)]
    if id_col is not None:
        aggs += [F.count(F.col("id")).alias("ids"), F.count_distinct(F.col("id")).alias("distinct_ids")]
    r = hashed.agg(*aggs).collect()[0]
    content, sequence = _fingerprints(r["n"], *(_exact_sum(r, name) for name in sums))
    sizes = {"max_text_bytes": int(r["longest"] or 0), "text_bytes": int(r["bytes"] or 0)}
    if id_col is None:
        return InputFacts(int(r["n"]), content, sequence, **sizes)
    return InputFacts(int(r["n"]), content, sequence, int(r["n"]) - int(r["ids"]), int(r["distinct_ids"]), **sizes)


def prior_run(txn, facts: InputFacts, params, force_new_ingest: bool,
              insert_rule: str = "first") -> Optional[RunRecord]:
    """The committed run that already ingested these documents, or None.

    Raises :class:`AlreadyIngestedError` when that run's flags cannot be
    reproduced (other order or partitioning, or another ``insert_rule``) and
    ``force_new_ingest`` is off.
    """
    prior = txn.find_run(facts.content_fingerprint, params)
    if prior is not None and not force_new_ingest and prior.insert != insert_rule:
        raise AlreadyIngestedError(
            f"{txn.path}: these {facts.documents:,} documents were already ingested by run {prior.run_id} under the "
            f"insert={prior.insert!r}; its flags are not those of insert={insert_rule!r}, "
            "and ingesting them again would flag every one as a duplicate of itself. Use that run's output, or "
            "force a new ingestion with --force-new-ingest (force_new_ingest=True)."
        )
    if prior is not None and not force_new_ingest and prior.sequence_fingerprint != facts.sequence_fingerprint:
        raise AlreadyIngestedError(
            f"{txn.path}: these {facts.documents:,} documents were already ingested by run {prior.run_id} "
            f"(committed {prior.committed_at or '?'}, output {prior.output}), in another order or "
            "partitioning, so that run's flags cannot be reproduced here and ingesting them again would flag "
            "every one as a duplicate of itself. Use that run's output, or force a new ingestion with "
            "--force-new-ingest (force_new_ingest=True)."
        )
    return prior
