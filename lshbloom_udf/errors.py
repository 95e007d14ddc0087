"""The errors lshbloom raises, in one family.

Every error derives from :class:`LSHBloomError` and *also* from the builtin
class it used to be (``ValueError``, ``RuntimeError``, ``FileNotFoundError``),
so ``except ValueError`` in a caller's code keeps working. Three families
decide what a user has to do, and so the job's exit status
(:data:`EXIT_CODES`, used by ``lshbloom dedup``):

- :class:`UsageError` — a setting, a configuration file or the input cannot be
  used as asked: fix the command (exit 2);
- :class:`IndexDirectoryError` — the index directory refuses the run
  (another run holds it, other parameters, full, damaged, already ingested):
  the message says which and what to do (exit 2);
- anything else is a failure of the run itself (exit 1, with its traceback):
  :class:`InternalError` (a bug), :class:`OutputCommitError`, and any builtin
  error that escapes.

A warning, not an error: :class:`CapacityWarning`.
"""

from __future__ import annotations


class LSHBloomError(Exception):
    """Base of every error lshbloom raises on purpose."""


# ---------------------------------------------------------------------------
# settings and input


class UsageError(LSHBloomError, ValueError):
    """A setting, configuration or input that cannot be used as asked."""


class DedupInputError(UsageError):
    """The input DataFrame or the settings cannot be deduplicated as asked."""


class ConfigError(DedupInputError):
    """A configuration file or a setting's value that cannot be used."""


# ---------------------------------------------------------------------------
# the index directory


class IndexDirectoryError(LSHBloomError):
    """The index directory refuses the run ."""


class IndexMismatchError(IndexDirectoryError, ValueError):
    """An existing index was built with parameters other than the ones asked for."""


class IndexLockedError(IndexDirectoryError, RuntimeError):
    """Another process has the index open for writing."""


class IndexFullError(IndexDirectoryError, RuntimeError):
    """Inserting more documents would exceed the capacity the filters were sized for."""


class IndexRecoveryNeededError(IndexDirectoryError, RuntimeError):
    """A crashed run left a commit half done; a writer must finish it before the index is read."""


class IndexCorruptError(IndexDirectoryError, ValueError):
    """An index file (manifest, band file, run record) is damaged or not what its manifest says."""


class IndexFilesMissingError(IndexDirectoryError, FileNotFoundError):
    """An index directory lacks its manifest or some of its band files."""


class AlreadyIngestedError(IndexDirectoryError, ValueError):
    """The input was already ingested into this index by a committed run and that result cannot be reproduced."""


class IndexStorageError(IndexDirectoryError, OSError):
    """The index's storage refuses a write: full disk, quota, read-only file system, no permission."""


# ---------------------------------------------------------------------------
# the job and the run itself


class JobError(UsageError):
    """The job cannot run as asked (input, output, flags): one ``error:`` line, exit 2."""


class InternalError(LSHBloomError, RuntimeError):
    """A broken invariant inside lshbloom (a bug, not a usage error): exit 1 with its traceback."""


class OutputCommitError(LSHBloomError, RuntimeError):
    """The job's output could not be moved into place (exit 1)."""


class TransactionStateError(LSHBloomError, RuntimeError):
    """A transaction's methods called out of order (stage twice, record before staging)."""


class SparkSessionRequiredError(UsageError, RuntimeError):
    """An operation needs an active Spark session and none is running."""


class DriverMemoryError(UsageError, MemoryError):
    """The run cannot proceed within the driver's memory (:mod:`lshbloom_udf.memory`): said at the start, naming
    the setting to change (exit 2)."""


class CapacityWarning(UserWarning):
    """The index is close to its capacity: its false-positive rate is about to rise past the promise."""


# Exit status of the job for each family, most specific first; anything else exits 1.
EXIT_CODES: tuple[tuple[type, int], ...] = ((UsageError, 2), (IndexDirectoryError, 2))


def exit_code(error: BaseException) -> int:
    """The job's exit status for ``error`` (see :data:`EXIT_CODES`)."""
    for family, code in EXIT_CODES:
        if isinstance(error, family):
            return code
    return 1


__all__ = [
    "AlreadyIngestedError",
    "CapacityWarning",
    "ConfigError",
    "DedupInputError",
    "DriverMemoryError",
    "EXIT_CODES",
    "IndexCorruptError",
    "IndexDirectoryError",
    "IndexFilesMissingError",
    "IndexFullError",
    "IndexLockedError",
    "IndexMismatchError",
    "IndexRecoveryNeededError",
    "IndexStorageError",
    "InternalError",
    "JobError",
    "LSHBloomError",
    "OutputCommitError",
    "SparkSessionRequiredError",
    "TransactionStateError",
    "UsageError",
    "exit_code",
]
