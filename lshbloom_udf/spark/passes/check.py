"""``lshbloom check-index DIR``: the full check of a kept index, of whichever pass's store, without running a job.

Each pass (:data:`lshbloom_udf.spark.passes.PASSES`) says whether a directory holds its store's index
(``holds_index``) and checks it (``check_index``); a directory none of them claims (empty, or not there) is
the default pass's to report, and one two of them claim is refused rather than guessed.
"""

from __future__ import annotations


def check_index(path: str) -> str:
    """Check every file of the index at ``path``; a one-line report, or the error naming the damaged file."""
    from lshbloom_udf.config import DEFAULTS
    from lshbloom_udf.errors import IndexMismatchError
    from lshbloom_udf.spark.passes import PASSES

    owners = [p for p in PASSES.values() if p.holds_index(path)]
    if len(owners) > 1:
        raise IndexMismatchError(f"{path}: holds the files of more than one kind of index ("
                                 f"{', '.join(p.name for p in owners)} pass); check-index checks one kind: "
                                 "move one away")
    return (owners or [PASSES[DEFAULTS["pass_mode"]]])[0].check_index(path)
