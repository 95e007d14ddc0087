"""The keep order (``order_by``): the user's sort, then a tie-break, so that the same documents keep the same
copies in any partitioning and row order.

Keep-first keeps the earliest of each group of near-duplicates, so the order
decides which copy survives. ``order_by`` entries are SQL sort expressions as
Spark's ``ORDER BY`` takes them (``score DESC``, ``length(text) DESC NULLS
LAST``; ASC puts nulls first and DESC last, as in Spark) or Spark Columns.
Rows equal on all of them are ordered by ``id_column`` and then by their
position in the input: with a unique id the output does not depend on how the
input is partitioned or ordered; without one, it does for the tied rows only.
"""

from __future__ import annotations

import re

from lshbloom_udf.common import col
from lshbloom_udf.errors import DedupInputError

_SORT = re.compile(r"^(?P<expr>.*?)(?:\s+(?P<dir>ASC|DESC))?(?:\s+NULLS\s+(?P<nulls>FIRST|LAST))?$",
                   re.IGNORECASE | re.DOTALL)
POSITION_COL = "_lshb_position"


def sort_column(item):
    """The Spark sort Column of one ``order_by`` entry (a Column is returned as it is)."""
    from pyspark.sql import functions as F

    if not isinstance(item, str):
        return item
    parts = _SORT.match(item.strip())
    assert parts is not None  # the pattern matches every string
    descending = (parts["dir"] or "").upper() == "DESC"
    nulls = (parts["nulls"] or ("last" if descending else "first")).lower()
    return getattr(F.expr(parts["expr"]), f"{'desc' if descending else 'asc'}_nulls_{nulls}")()


def ordered(df, order_by, id_column):
    """``df`` sorted by ``order_by``, ties by ``id_column`` then by input position (``df`` itself without an order)."""
    from pyspark.sql import functions as F

    if not order_by:
        return df
    ties = [col(id_column).asc_nulls_last()] if id_column is not None else []
    positioned = df.withColumn(POSITION_COL, F.monotonically_increasing_id())
    return positioned.orderBy(*(sort_column(c) for c in order_by), *ties, POSITION_COL).drop(POSITION_COL)


def check_order(df, order_by) -> None:
    """Each ``order_by`` expression resolves against ``df``'s columns, else a :class:`DedupInputError` naming it."""
    from pyspark.sql import functions as F

    for item in order_by or ():
        if not isinstance(item, str):
            continue
        expr = _SORT.match(item.strip())["expr"]  # type: ignore[index]  # the pattern matches every string
        try:
            df.select(F.expr(expr)).schema  # analysis: eager here, lazy under Spark Connect without .schema
        except Exception as e:  # AnalysisException or ParseException, by Spark version
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            hint = " ('-name' negates a number; 'name DESC' sorts descending)" if item.lstrip()[:1] == "-" else ""
            raise DedupInputError(f"order-by expression {item!r} does not resolve against the input{hint}: "
                                  f"{first[:300]}; the input has columns {df.columns}") from None
