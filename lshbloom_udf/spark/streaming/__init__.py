"""Near-duplicate removal in Structured Streaming: each micro-batch one run of a kept index, exactly once.

- :class:`~lshbloom_udf.spark.streaming.writer.StreamDedup` — the ``foreachBatch`` writer (the batches' runs,
  their commits, a replayed batch's stored flags);
- :mod:`~lshbloom_udf.spark.streaming.flags` — a batch's flags by row identity, what makes a replay
  order-independent;
- :func:`deduplicate_stream` — start a query with it.
"""

from __future__ import annotations

from typing import Callable, Optional

from lshbloom_udf.spark.streaming.writer import BatchKey, StreamDedup


def deduplicate_stream(stream_df, index_dir: str, output: Optional[str] = None, *, checkpoint_location: str,
                       sink: Optional[Callable] = None, trigger: Optional[dict] = None,
                       query_name: Optional[str] = None, **settings):
    """Start a streaming query that deduplicates ``stream_df`` (a ``spark.readStream`` DataFrame) against the kept
    index at ``index_dir``, writing batch ``n`` to ``<output>/batch=<n>`` (or calling ``sink(df, batch_id)``).

    ``checkpoint_location``: the query's checkpoint (restart from it to resume). ``trigger``: the keyword
    arguments of ``DataStreamWriter.trigger`` (e.g. ``{"availableNow": True}``, ``{"processingTime": "1 minute"}``).
    ``settings``: any setting of :func:`~lshbloom_udf.spark.deduplicate`. Returns the ``StreamingQuery``; to read
    the batches' summaries, make a :class:`StreamDedup` and call its ``start`` instead.
    """
    writer = StreamDedup(index_dir, output, sink=sink, **settings)
    return writer.start(stream_df, checkpoint_location, trigger=trigger, query_name=query_name)


__all__ = ["BatchKey", "StreamDedup", "deduplicate_stream"]
