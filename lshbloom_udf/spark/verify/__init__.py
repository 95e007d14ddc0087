"""Verification of the pass's flags, and the kept document each removed one duplicates (``verify=True``).

The pass flags a document ``d`` when one of its ``b`` band keys is in its
band's Bloom filter. That happens when an earlier kept document ``e`` shares
the band (``sig_d[i·r:(i+1)·r] = sig_e[i·r:(i+1)·r]``, probability ``s^r`` per
band at Jaccard ``s``, so ``1 - (1 - s^r)^b`` in all: the LSH S-curve, which is
not a step at the threshold ``T``) or by a Bloom false positive. Verification
keeps the flag only where it is earned. Round 1:

    d stays flagged  ⇔  ∃ e kept by the pass, row(e) < row(d), e shares a (band, key) with d,
                        and  J(S_d, S_e) = |S_d ∩ S_e| / |S_d ∪ S_e| >= T_v
                        or   C(S_d, S_e) = |S_d ∩ S_e| / |S_d|        >= T_c  (containment_threshold, if set)
                             and J(S_d, S_e)                           >= J_c  (containment_min_jaccard, if set)

with ``S`` the shingle sets of the contract (the same shingles, n-grams and
normalization as the signatures, all computed by :func:`shingle_set`) and
``T_v = verify_threshold`` (default the threshold). ``C`` is the share of the
later document's shingles found in the earlier one: a truncation, excerpt or
section drop keeping a fraction ``f`` of ``e`` has ``J ≈ f`` but ``C ≈ 1``
(``J <= C <= 1``, ``J = C·|S_d| / |S_d ∪ S_e|``). Candidates still come from
the bands, so containment only rescues pairs the LSH stage proposed (Jaccard
near the banding threshold or above): a tiny document inside a huge one is not
a candidate (docs/algorithm.md §8). ``J`` and ``C`` are exact, not the MinHash estimate: decisions are the
definition's (a user can recompute them from the two texts), as MLlib's
``approxSimilarityJoin`` verifies with the exact distance. An estimate from
fresh signatures is cheaper per pair but decides some pairs near ``T``
differently (docs/algorithm.md, "verification").

Round 2: a document round 1 unflagged is kept, so it is a candidate for the
later ones: among the round-1-unflagged documents, in processing order, ``d``
is flagged when an earlier one that stays kept shares a (band, key) with it and
verifies it by the same rule. (Without round 2 a permissive candidate stage loses recall: the
first copy of a source, falsely flagged by a collision and then unflagged, was
never inserted, and its later copies could find no kept source.)

Guarantees (tests/spark/verify/test_spark_verify.py, tests/spark/verify/test_spark_verify_containment.py):

- verification never adds a flag (only the pass's flagged rows are examined);
- every document still flagged has an earlier document that is kept in the
  output and verifies it: ``duplicate_of`` names it — of its strongest candidates, the earliest (smallest row
  id, the processing order) verified one among those the pass kept, or if none,
  the earliest verified one among those round 2 kept — ``similarity`` is their
  exact Jaccard when it reaches ``T_v``, else their containment, and
  ``similarity_measure`` says which ("jaccard" or "containment").
- With a kept index that held documents before this run, a flag no document of
  this run verifies is judged against the earlier runs' records (a b-bit MinHash
  sketch and size of each document they kept: :mod:`lshbloom_udf.spark.verify.crossrun`):
  it stays flagged where an earlier document verifies it by the estimated
  similarity (``duplicate_of`` names that document), and is unflagged otherwise.
  Only where an earlier run kept no records (an index from before them) does it
  stay flagged unverified, with ``duplicate_of`` and ``similarity`` null.

Cost: candidates are found without a self-join of every document's keys
(:mod:`lshbloom_udf.spark.verify.sources`). Under the socket stream the driver
pass keeps the flagged documents' keys (``F·b``) and the stream keeps every
document's keys in its spool, so round 1 is one sequential scan of the spool on
the driver, each kept document's ``(band, key)`` pairs looked up natively in the
flagged ones', and round 2 a join of the ``U`` round-1-unflagged documents' keys
in memory: no key is computed twice, no Spark job. Without a spool (the sharded
pass, ``toLocalIterator`` transfer, a reproduced run, a spool too large for its
disk) the keys are computed again on the executors: the flagged documents'
``(band, key)`` pairs go into a Bloom filter (built on the driver, ~12 bits per
pair, 4 probes: ~0.6 % false positives), the kept documents' keys are scanned
through it, and only the pairs that pass are joined with the flagged ones'.
Either way the kept documents' keys are unique per band (a kept document shares
no key with an earlier one, or the pass would have flagged it), so each flagged
pair meets at most one kept document: at most ``b`` round-1 candidates per
flagged document. Round 2's documents may share a key with many (a template
family), so a bucket pairs its members only with its first few, and each round
keeps a document's strongest ``CANDIDATES_PER_DOCUMENT`` candidates
(:mod:`~lshbloom_udf.spark.verify.sources`, "Bounds"). Then only the texts of the documents in a candidate pair are
read, and ``J`` and ``C`` come from one native intersection of the two shingle
sets (exact: shingles compared by their bytes). On the driver
(:func:`lshbloom_udf._native.indexed_overlaps`) the pairs are sorted by the later document, whose set is built once,
and an earlier text in three pairs or more (a template's anchor) is shingled once before them, within the driver's
budget (``DriverMemory.shingle_cache``); on the executors :func:`lshbloom_udf._native.shingle_overlaps` keeps one
side's set over consecutive pairs. Work grows with the flagged documents (at most ``CANDIDATES_PER_DOCUMENT``
similarities per flagged document and round), not with ``N²``; the spool scan reads ``N·b`` keys once.

The modules, each importing only those listed before it (tests/core/test_core_layers.py checks there is no cycle):

- :mod:`~lshbloom_udf.spark.verify.rule` — the plain types: the rule, the measures, the shingling, the results;
- :mod:`~lshbloom_udf.spark.verify.sources` — the candidate sources' interface, their bounds, the spool's source;
- :mod:`~lshbloom_udf.spark.verify.spark_source` — the candidate source by Spark joins, where no spool exists;
- :mod:`~lshbloom_udf.spark.verify.templates` — the template rule (``template_max_df``);
- :mod:`~lshbloom_udf.spark.verify.texts` — the candidates' texts: read, held on the driver within its budget;
- :mod:`~lshbloom_udf.spark.verify.similarity` — the candidate pairs' exact similarities (driver or executors);
- :mod:`~lshbloom_udf.spark.verify.crossrun` — flags judged against the earlier runs' records;
- :mod:`~lshbloom_udf.spark.verify.rounds` — rounds 1 and 2: :func:`verify_flags`, the entry point.
"""

from lshbloom_udf.spark.verify.crossrun import UNVERIFIABLE, crossrun_for
from lshbloom_udf.spark.verify.rounds import verify_flags
from lshbloom_udf.spark.verify.rule import Shingling, TemplateRule, VerifyRule
from lshbloom_udf.spark.verify.spark_source import SparkCandidates
from lshbloom_udf.spark.verify.texts import TextsSource

__all__ = ["UNVERIFIABLE", "Shingling", "SparkCandidates", "TemplateRule", "TextsSource", "VerifyRule", "crossrun_for",
           "verify_flags"]
