"""The settings of a deduplication run: each declared once, as a field of :class:`DedupConfig`.

A field says everything about its setting: name (also its TOML key and the
keyword of :func:`~lshbloom_udf.spark.deduplicate`), type, default, check,
help, command-line flag and ``pyspark.ml`` Param name. Everything else is
derived from the fields:

- :data:`DEFAULTS` (``conf/default.toml`` says the same; a test checks it);
- the job's flags (:func:`lshbloom_udf.job.cli.build_parser`);
- the check of a TOML file's ``[dedup]`` table (:func:`load_config`);
- ``deduplicate(df, config, **overrides)``;
- the Params, getters and setters of
  :class:`~lshbloom_udf.ml.LSHBloomDeduplicator`.

A :class:`DedupConfig` is immutable and always valid: every field is checked
(and put in its canonical form) when it is built, then the settings are
checked together (:meth:`DedupConfig._check_together`). :meth:`DedupConfig.replace`
returns a new, checked config and remembers which settings were given
explicitly (the sizing settings only resize a *new* index; an existing one
keeps its own unless they are given).

Adding a setting: one ``setting(...)`` field here, its use where it acts, and
a test (docs/architecture.md shows it with ``band_key``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterator, Mapping, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 (pyproject.toml's requires-python): the same parser, from PyPI
    import tomli as tomllib

from lshbloom_udf.compat import COMPAT_DEFAULTS
from lshbloom_udf.errors import ConfigError
from lshbloom_udf.index import BLOOMS, GROWTH_MODES
from lshbloom_udf.lsh import validate_bands
from lshbloom_udf.minhash import BAND_KEYS, SCHEMES, SHINGLE_UNITS
from lshbloom_udf.paragraphs import MODES as PARAGRAPH_MODES
from lshbloom_udf.paragraphs import SEPARATORS as PARAGRAPH_SEPARATORS

# The checks keep their short private names here so that each declaration below reads as before.
from lshbloom_udf.setting import Setting, setting  # noqa: F401  (Setting: importable from here)
from lshbloom_udf.setting import bands as _bands
from lshbloom_udf.setting import boolean as _boolean
from lshbloom_udf.setting import choice as _choice
from lshbloom_udf.setting import column as _column
from lshbloom_udf.setting import data_format as _format
from lshbloom_udf.setting import index_dir as _index_dir
from lshbloom_udf.setting import integer as _integer
from lshbloom_udf.setting import is_uri as _is_uri
from lshbloom_udf.setting import memory as _memory
from lshbloom_udf.setting import normalize as _normalize
from lshbloom_udf.setting import open_unit as _open_unit
from lshbloom_udf.setting import optional as _optional
from lshbloom_udf.setting import options as _options
from lshbloom_udf.setting import order_by as _order_by
from lshbloom_udf.setting import seed as _seed
from lshbloom_udf.setting import threshold as _threshold

MODES = ("flag", "filter", "duplicates")
INSERT_RULES = ("first", "all")
# The passes (pass_mode, --pass): each is the module lshbloom_udf/spark/passes/<name>.py; register one here.
PASSES = ("driver", "sharded")
CHECKPOINTS = ("local", "reliable")
KEY_TRANSFERS = ("auto", "socket", "spark")
# The template rule's fixed values (the study's, docs/evaluation.md §0.8; template_max_df sets only its max_df): a
# Jaccard-only match below TEMPLATE_BELOW must reach TEMPLATE_MIN_JACCARD without the template's shingles. Declared
# here, the layer under both the rule (lshbloom_udf.spark.verify.rule.TemplateRule) and this module's help text.
TEMPLATE_BELOW = 0.6
TEMPLATE_MIN_JACCARD = 0.3


def _similarity(default: Optional[float], help: str) -> Any:
    """A verification setting: a similarity in [0, 1], or None (not asked for); a float on the command line."""
    return setting(default, help, _optional(_threshold), "verify", cli={"type": float})


def _max_df(name: str, value: Any) -> int:
    """A document count of at least 2, or 0 (off): at 1 every sampled document's own shingles would be a template's."""
    value = _integer(0)(name, value)
    if value == 1:
        raise ConfigError(f"{name} must be 0 (off) or at least 2: at 1 every shingle of a sampled document would "
                          "count as a template's")
    return value


@dataclass(frozen=True)
class DedupConfig:
    """Every setting of a deduplication run, checked; build with :meth:`replace` or :meth:`from_settings`."""

    # -- columns and output
    text_column: str = setting("text", "string column with the documents", _column, "columns",
                               param="inputCol", aliases=("text_col",))
    id_column: Optional[str] = setting(None, "unique id column to join decisions on (default: internal row ids)",
                                       _optional(_column), "columns", param="idCol", aliases=("id_col",))
    flag_column: str = setting("is_duplicate", "name of the flag column", _column, "columns",
                               param="outputCol", aliases=("flag_col",))
    mode: str = setting("flag", "flag (every row + a flag column) | filter (the rows kept) | duplicates (the rows "
                        "removed)", _choice(*MODES), "columns")
    order_by: Optional[tuple] = setting(None, "process documents in this order instead of input order: the first of "
                                        "near-duplicates is kept, ties broken by id_column (else the input "
                                        "position). SQL sort expressions as in ORDER BY ('score DESC, "
                                        "length(text) DESC'), or Spark Columns (F.col('ts').desc()). Across runs of "
                                        "a kept index an earlier run's kept document stays kept",
                                        _optional(_order_by), "columns", cli={"type": str})
    # -- MinHash / LSH: they decide compatibility with an existing index. The defaults of these and of the
    # verification were chosen by the multilingual + crawl-noise study (docs/evaluation.md §0): mixed 11-grams,
    # permissive bands (T 0.3, 64 x 4: the study picked T 0.25 at 128, 42 x 3, whose pass flags a share of
    # documents that grows with N, benchmarks/log.md "The study's defaults at
    # scale") and verification by Jaccard or containment; the paper's values are PRESETS["paper"].
    threshold: float = setting(0.3, "Jaccard similarity the bands are tuned for (b, r): a pair at this similarity "
                               "becomes a candidate with probability ~1/2; with verify, the decision is then "
                               "verify_threshold / containment_threshold; without verify, unless given, the bands "
                               "are for verify_threshold's value (docs/algorithm.md section 3b)", _threshold, "minhash",
                               cli={"type": float})
    num_perm: int = setting(256, "MinHash permutations", _integer(2), "minhash", cli={"type": int})
    bands: Optional[tuple[int, int]] = setting(
        None, "explicit bands x rows (b, r) instead of the optimum for the threshold", _optional(_bands), "minhash",
        cli={"type": int, "nargs": 2, "metavar": ("B", "R")})
    ngram: int = setting(11, "n-gram size of the shingles, in the shingle unit (words, code points, or weight)",
                         _integer(1), "minhash", cli={"type": int})
    shingle: str = setting("mixed", "shingle unit: words (word n-grams), chars (code point n-grams of the text "
                           "without whitespace: for every script and noisy text) or mixed (as chars, Han/kana/Hangul "
                           "weigh 3), docs/algorithm.md", _choice(*SHINGLE_UNITS), "minhash")
    normalize: str = setting("dehyphen,nfkc,lower,punct", "normalize text first: none, all (NFKC, lowercase, "
                             "punctuation to space), or a comma list of dehyphen,nfkc,lower,punct (dehyphen joins "
                             "words hyphenated across a line break); a bare flag means all", _normalize, "minhash",
                             cli={"nargs": "?", "const": "all"})
    seed: int = setting(1, "seed of the MinHash permutations", _seed, "minhash", cli={"type": int})
    scheme: str = setting("poisson", "permutation scheme: affine32 (datasketch >= 2), legacy (datasketch < 2, "
                          "the paper's code) or poisson (xxh3 shingle hashes, independent rows in O(shingles + "
                          "k log k), not datasketch's: docs/algorithm.md section 2.1)", _choice(*SCHEMES), "minhash")
    band_key: str = setting("mix", "how a band's values become its key: mix (a 64-bit hash of the band: no false "
                            "matches between distinct documents at any scale) or sum (datasketch's: identical index "
                            "files, but distinct documents collide at scale, docs/algorithm.md section 7)",
                            _choice(*BAND_KEYS), "minhash")
    # -- the index
    p_effective: Optional[float] = setting(
        None, "effective Bloom false-positive rate of a new index (default: 1e-5 where a false positive is a final "
        "flag, without verification or with insert first; 1e-2 where verification checks every flag, "
        "docs/algorithm.md section 6c)", _optional(_open_unit), "index", cli={"type": float}, sizes="p_effective")
    expected_docs: Optional[int] = setting(None, "capacity of a new index (default: the number of input documents)",
                                           _optional(_integer(1)), "index", cli={"type": int}, sizes="capacity")
    bloom: Optional[str] = setting(None, "Bloom filter backend: cuckoo (fingerprints in two cache lines per key per "
                                   "band: ~1.05x a classic Bloom filter's bits at 1e-5, ~1.16x at 1e-2), blocked (one "
                                   "cache line per key per band, ~1.5x classic) or pybloomfiltermmap3 (datasketch's "
                                   "files). Default: an existing index keeps its own; a new one is cuckoo with the mix "
                                   "band key (datasketch cannot use mix keys anyway) and pybloomfiltermmap3 with sum",
                                   _optional(_choice(*BLOOMS)), "index")
    growth: str = setting("grow", "when a kept index would pass its capacity: grow (add a generation of filters, "
                          "the whole staying within p_effective) or fixed (fail with IndexFullError); an existing "
                          "index keeps its own unless given", _choice(*GROWTH_MODES), "index", sizes="growth")
    index_dir: Optional[str] = setting(None, "keep the index in this directory (reused if it exists): a local path, "
                                       "or with the sharded pass any Hadoop filesystem URI; default: a temporary "
                                       "index", _optional(_index_dir), "index")
    force_new_ingest: bool = setting(False, "ingest the input even if a committed run of this index already ingested "
                                     "the same documents (they will all be flagged as duplicates of themselves); "
                                     "default: reproduce that run's result", _boolean, "index",
                                     cli={"action": "store_true"})
    verify_index: bool = setting(False, "before the run, check every file of a kept index against the checksums its "
                                 "manifest recorded at commit: besides the band files (always checked when the index "
                                 "opens), the runs' duplicate records, and every filter part of a sharded index",
                                 _boolean, "index", cli={"action": "store_true"})
    # -- verification (lshbloom_udf/spark/verify/)
    verify: bool = setting(True, "after the pass, keep a document flagged only if an earlier document the pass kept "
                           "shares a band key with it and has exact Jaccard similarity >= verify_threshold with it "
                           "(or containment >= containment_threshold)",
                           _boolean, "verify", cli={"action": argparse.BooleanOptionalAction})
    verify_threshold: Optional[float] = _similarity(0.4, "the similarity verification asks for (none: threshold); "
                                                    "a lower threshold with this one makes candidates permissive")
    containment_threshold: Optional[float] = _similarity(
        0.7, "with verify, also keep a flag when the flagged document's shingles are contained in an earlier kept "
        "candidate's at least this much: |S_d & S_e| / |S_d| >= containment_threshold (J <= C <= 1). A truncation, "
        "excerpt or section drop keeping a fraction f of a document has Jaccard ~f but containment ~1. Candidates "
        "still come from the bands (Jaccard near threshold or above), and containment_min_jaccard asks for a "
        "Jaccard floor, so a small document inside a much larger one is not removed (docs/algorithm.md section 8). "
        "None: Jaccard only")
    containment_min_jaccard: Optional[float] = _similarity(
        0.3, "with containment_threshold, containment verifies a pair only if its Jaccard is at least this too: "
        "|S_d & S_e| >= containment_min_jaccard * |S_d | S_e|, so the later document keeps at least this share of "
        "the earlier one's shingles (a partial copy keeping a fraction f has J ~ f). It refuses a small templated "
        "page inside a larger sibling (on the English tune corpus 8 of the 11 distinct pairs containment alone "
        "verified had J < 0.3; docs/evaluation.md section 0). None: no floor")
    template_max_df: int = setting(
        5, f"with verify, a match by Jaccard alone below {TEMPLATE_BELOW} must also reach Jaccard "
        f"{TEMPLATE_MIN_JACCARD} without the template shingles: those held by at least this many of a sample of "
        "1024 of the documents the pass kept (all of them when fewer; ~0.5 % of them at scale). It refuses pages "
        "made from one template (a man page family, a site's product pages) whose shared shingles are the "
        "template's; a noisy copy shares its source's own (docs/algorithm.md section 8, templated siblings). 0: off",
        _max_df, "verify", cli={"type": int})
    verify_driver_bytes: Optional[int] = setting(
        None, "with verify, the memory the candidate pairs' texts may take on the driver (as Python strings) for it "
        "to compute their similarities itself, every core of it; past this they are joined with the pairs on the "
        "executors instead, a shuffle of two texts per candidate pair, several times slower. Default: a quarter of "
        "the memory the driver's Python process has available (cgroup limit included) when verification starts; a "
        "value given is capped at half of it, with a warning (docs/reliability.md, Memory; also 512m, 4g)",
        _optional(_integer(0)), "verify", cli={"type": _memory, "metavar": "BYTES"})
    duplicate_of: bool = setting(False, "add columns duplicate_of (the id, or row_id, of the earliest verified kept "
                                 "document), similarity (the value of the measure that verified it) and "
                                 "similarity_measure (jaccard, containment, or exact for a byte-identical copy) "
                                 "(needs verify; flag and duplicates modes)",
                                 _boolean, "verify", cli={"action": "store_true"})
    duplicate_count: bool = setting(False, "add a column duplicate_count to the kept rows: how many documents of this "
                                    "run were removed as their duplicates (duplicate_of would name them; null on the "
                                    "rows removed). Earlier runs' kept documents are not rewritten: docs/summary.md "
                                    "(needs verify; flag and filter modes)", _boolean, "verify",
                                    cli={"action": "store_true"})
    exact_copies: bool = setting(True, "before the pass, find the documents whose text is byte-identical to an "
                                 "earlier one's (a 128-bit hash of the text, one Spark aggregation): they are flagged "
                                 "as copies of it (similarity_measure exact) without being shingled, keyed or verified "
                                 "(docs/algorithm.md, exact copies)", _boolean, "decision",
                                 cli={"action": argparse.BooleanOptionalAction})
    # -- paragraphs (lshbloom_udf.paragraphs)
    paragraphs: str = setting("off", "paragraph-level dedup of the documents kept, keep-first against a Bloom filter "
                              "kept beside the bands: off, annotate (a column removed_paragraphs of the removed "
                              "paragraphs' [start, end) code point spans) or remove (the text without them); both add "
                              "paragraphs_removed, and a kept document left without text is flagged",
                              _choice(*PARAGRAPH_MODES), "paragraphs")
    paragraph_separator: str = setting("newline", "where paragraphs end: newline (every line, Dolma's) or blank (runs "
                                       "of blank lines)", _choice(*PARAGRAPH_SEPARATORS), "paragraphs")
    paragraph_min_chars: int = setting(1, "paragraphs whose normalized text is shorter (code points) are never "
                                       "removed", _integer(1), "paragraphs", cli={"type": int})
    paragraph_ngram: int = setting(0, "0: a paragraph is removed when its normalized text was seen (exact); N: when "
                                   "paragraph_overlap of its word N-grams were (bff's --min-ngram-size)", _integer(0),
                                   "paragraphs", cli={"type": int})
    paragraph_overlap: float = setting(0.8, "with paragraph_ngram: the share of a paragraph's n-grams seen before "
                                       "that removes it (bff's --filtering-threshold)", _open_unit, "paragraphs",
                                       cli={"type": float})
    checkpoint: str = setting("local", "how the input rows are pinned: local (localCheckpoint) or reliable "
                              "(needs spark.checkpoint.dir)", _choice(*CHECKPOINTS), "index")
    # -- the decision
    insert: str = setting("first", "which documents' keys enter the index: first (keep-first: only documents kept; a "
                          "duplicate has a kept near-duplicate earlier) or all (any-earlier: every document; flagged "
                          "when any band key was seen earlier, docs/algorithm.md). The sharded pass implies all, "
                          "and so does verify unless insert is given: verification then decides keep-first over "
                          "the pass's candidates",
                          _choice(*INSERT_RULES), "decision")
    pass_mode: str = setting("driver", "where the Bloom filters are tested and set: driver (one ordered pass in the "
                             "driver, the whole index in one process) or sharded (band-key shards on the executors, "
                             "any-earlier; for indexes no single machine holds, docs/architecture.md)",
                             _choice(*PASSES), "decision", flag="--pass", aliases=("pass",))
    shard_memory: int = setting(128 << 20, "sharded pass: bytes of Bloom filter one task holds at a time (one shard); "
                                "the shard count follows from it and the capacity (on the command line also 64m, 1g)",
                                _integer(1 << 12), "decision", cli={"type": _memory, "metavar": "BYTES"})
    # -- how the run goes
    progress: bool = setting(True, "log each step of the run and the driver pass's progress (docs/s, ETA) to the "
                             "lshbloom_udf logger, and let Spark's console progress bar show the run's jobs; false: "
                             "only warnings", _boolean, "run", flag="--quiet",
                             cli={"action": "store_false", "help": "only warnings on stderr: no step or progress "
                                  "lines, no Spark console progress bar"})
    key_transfer: str = setting("auto", "how the band keys reach the driver pass: socket (executors stream them to "
                                "the driver while they compute them), spark (toLocalIterator, one partition at a "
                                "time: for executors that cannot open a connection to the driver), or auto (socket; "
                                "spark under Spark Connect)", _choice(*KEY_TRANSFERS), "run")
    chunk_rows: int = setting(100_000, "documents per chunk of keys sent to the driver pass", _integer(1), "run",
                              flag=None, param=None)
    broadcast_limit: int = setting(2_000_000, "up to this many duplicates the join broadcasts them (and keeps the "
                                   "input's order)", _integer(0), "run", flag=None, param=None)
    # -- the spark-submit job only
    input_format: str = setting("json", "Spark data source of the input", _format, "io", scope="job", param=None)
    output_format: str = setting("parquet", "Spark data source of the output", _format, "io", scope="job", param=None)
    input_options: dict = setting({}, "reader option KEY=VALUE, repeatable (e.g. header=true for csv)", _options, "io",
                                  scope="job", param=None, flag="--input-option",
                                  cli={"action": "append", "metavar": "KEY=VALUE"})
    output_options: dict = setting({}, "writer option KEY=VALUE, repeatable (e.g. compression=gzip)", _options, "io",
                                   scope="job", param=None, flag="--output-option",
                                   cli={"action": "append", "metavar": "KEY=VALUE"})

    # which settings were given explicitly (not a setting)
    given: frozenset = field(default=frozenset(), compare=False, repr=False)

    def __post_init__(self) -> None:
        for f, spec in settings():
            object.__setattr__(self, f.name, spec.check(f.name, getattr(self, f.name)))
        self._check_together()

    def _check_paragraphs(self) -> None:
        """The paragraph settings with the others."""
        if self.paragraphs == "off":  # the paragraph_* settings then act on nothing (a config file may set them)
            return
        if self.mode == "duplicates":
            raise ConfigError("paragraphs has nothing to do in mode 'duplicates' (only removed documents are output; "
                              "their paragraphs are not decided); use mode 'flag' or 'filter'")
        if self.pass_mode == "sharded":
            raise ConfigError("paragraphs needs pass_mode 'driver': the paragraph filter is decided in the driver, "
                              "in the documents' order")
        if self.duplicate_of:
            raise ConfigError("paragraphs does not combine with duplicate_of yet: run them as two jobs")

    def _check_together(self) -> None:
        """The checks that involve more than one setting."""
        if self.duplicate_of and not self.verify:
            raise ConfigError("duplicate_of needs verify=True (--verify): verification finds the kept document")
        if self.duplicate_of and self.mode == "filter":
            raise ConfigError("duplicate_of has nothing to show in mode 'filter' (only kept rows are output); "
                              "use mode 'flag' or 'duplicates'")
        if self.duplicate_count and not self.verify:
            raise ConfigError("duplicate_count needs verify=True (--verify): verification finds the kept document")
        if self.duplicate_count and self.mode == "duplicates":
            raise ConfigError("duplicate_count has nothing to show in mode 'duplicates' (only removed rows are "
                              "output); use mode 'flag' or 'filter'")
        if self.verify_threshold is not None and not self.verify and self.is_given("verify_threshold"):
            raise ConfigError("verify_threshold needs verify=True (--verify)")
        if self.containment_threshold is not None and not self.verify and self.is_given("containment_threshold"):
            raise ConfigError("containment_threshold needs verify=True (--verify): containment is checked on the "
                              "candidate pairs verification examines; add verify or drop containment_threshold")
        if self.is_given("template_max_df") and self.template_max_df and not self.verify:
            raise ConfigError("template_max_df needs verify=True (--verify): it refuses some of the matches "
                              "verification makes; add verify or set template_max_df 0")
        if self.is_given("containment_min_jaccard") and self.containment_min_jaccard is not None and (
                self.containment_threshold is None or not self.verify):
            raise ConfigError("containment_min_jaccard bounds the containment branch of verification: it needs "
                              "verify and containment_threshold")
        self._check_paragraphs()
        if self.bands is not None:
            try:
                validate_bands(*self.bands, self.num_perm)
            except ValueError as e:
                raise ConfigError(str(e)) from None
        if self.pass_mode == "sharded" and self.insert == "first" and "insert" in self.given:
            raise ConfigError("pass_mode 'sharded' decides any-earlier only (insert 'all': its shards see one band "
                              "each, so none can know whether a document was kept); drop insert 'first' or use "
                              "pass_mode 'driver'")
        if self.index_dir is not None and _is_uri(self.index_dir) and self.pass_mode != "sharded":
            raise ConfigError(f"index_dir {self.index_dir!r}: the driver pass memory-maps its index, so it must be a "
                              "local path on the driver; a Hadoop filesystem URI needs pass_mode 'sharded'")

    @property
    def insert_rule(self) -> str:
        """The pass's rule: ``insert``, except any-earlier (``all``) on the sharded pass, and with verification unless
        ``insert`` is given. Verification decides keep-first itself (its second round lets the documents it
        unflagged verify later ones); a pass that inserts only what it kept would hide the copies of a document it
        flagged wrongly, and permissive bands flag many (the recall this costs: docs/algorithm.md §8)."""
        if self.pass_mode == "sharded" or (self.verify and not self.is_given("insert")):
            return "all"
        return self.insert

    # -- building -----------------------------------------------------------------

    @classmethod
    def from_settings(cls, values: Mapping[str, Any], base: Optional["DedupConfig"] = None) -> "DedupConfig":
        """``base`` (default: the defaults) with ``values`` (names or their aliases) given."""
        return (base or cls()).replace(**values)

    @classmethod
    def from_preset(cls, name: str) -> "DedupConfig":
        """The defaults with a named preset's settings (:data:`PRESETS`) in their place, as defaults (not given)."""
        return dataclasses.replace(cls(), **preset_settings(name))

    def replace(self, **changes: Any) -> "DedupConfig":
        """A new config with ``changes`` given (names or aliases); unknown names and bad values raise ConfigError."""
        canonical = {}
        for key, value in changes.items():
            name = _ALIASES.get(key)
            if name is None:
                raise ConfigError(f"unknown setting {key!r}; known: {', '.join(sorted(_ALIASES))}")
            if name in canonical:
                raise ConfigError(f"setting {name!r} given twice (as {key!r} too)")
            canonical[name] = value
        return dataclasses.replace(self, **canonical, given=self.given | frozenset(canonical))

    # -- reading ------------------------------------------------------------------

    def to_dict(self) -> dict:
        """The settings by name (what the summary and a TOML file hold)."""
        return {f.name: getattr(self, f.name) for f, _ in settings()}

    def is_given(self, name: str) -> bool:
        return name in self.given

    @property
    def sizing_given(self) -> frozenset:
        """The sizing fields of the index (``capacity``, ``p_effective``) the settings give: an existing index
        must have them; it keeps its own for the others."""
        return frozenset(spec.sizes for f, spec in settings() if spec.sizes and f.name in self.given)

    @property
    def new_index_bloom(self) -> str:
        """The backend of a new index: ``bloom`` if given, else cuckoo with the mix key, datasketch's files with sum."""
        return self.bloom or ("cuckoo" if self.band_key == "mix" else "pybloomfiltermmap3")

    @property
    def new_index_p_effective(self) -> float:
        """The rate a new index is sized for: ``p_effective`` if given; else the rate verification absorbs when it
        checks every flag the pass makes (verification on, the pass inserting every document), and the final-flag
        rate otherwise (:mod:`lshbloom_udf.index.params`)."""
        from lshbloom_udf.index.params import default_p_effective

        if self.p_effective is not None:
            return self.p_effective
        return default_p_effective(self.verify and self.insert_rule == "all")

    @property
    def bands_for(self):
        """The threshold the bands serve and why (:mod:`lshbloom_udf.bands`): ``threshold``, except without
        verification when it was not given (nor set by a preset): then ``verify_threshold``."""
        from lshbloom_udf.bands import bands_for

        return bands_for(self)

    def index_params(self, capacity: Optional[int] = None):
        """The :class:`~lshbloom_udf.index.IndexParams` these settings imply (capacity: ``expected_docs`` or 1), banded
        for :attr:`bands_for`'s threshold."""
        from lshbloom_udf.index import IndexParams

        if capacity is None:
            capacity = self.expected_docs or 1
        try:
            return IndexParams.for_threshold(
                capacity, self.bands_for.threshold, self.num_perm, bands=self.bands, scheme=self.scheme, seed=self.seed,
                ngram=self.ngram, normalize=self.normalize, p_effective=self.new_index_p_effective,
                band_key=self.band_key, growth=self.growth, shingle=self.shingle,
            )
        except ValueError as e:
            raise ConfigError(str(e)) from None

    @property
    def paragraph_spec(self):
        """The :class:`~lshbloom_udf.paragraphs.ParagraphSpec` of the paragraph settings (None: ``paragraphs`` off)."""
        from lshbloom_udf.paragraphs import ParagraphSpec

        if self.paragraphs == "off":
            return None
        return ParagraphSpec(self.paragraph_separator, self.paragraph_min_chars, self.paragraph_ngram,
                             self.paragraph_overlap, self.normalize, self.seed)


def settings(scope: Optional[str] = None) -> Iterator[tuple[dataclasses.Field, Setting]]:
    """The settings' fields and declarations, in declaration order (only ``scope``'s if given)."""
    for f in dataclasses.fields(DedupConfig):
        spec = f.metadata.get("setting")
        if spec is not None and (scope is None or spec.scope == scope):
            yield f, spec


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is dataclasses.MISSING:
        raise TypeError(f"setting {f.name} declares no default")
    return f.default_factory()


# name or alias -> name
_ALIASES: Mapping[str, str] = MappingProxyType(
    {**{f.name: f.name for f, _ in settings()}, **{a: f.name for f, s in settings() for a in s.aliases}}
)

DEFAULTS: Mapping[str, Any] = MappingProxyType({f.name: _default(f) for f, _ in settings()})

# Named presets: settings that replace DEFAULTS as a whole group (``--preset paper``,
# ``deduplicate(..., preset="paper")``); explicit settings still override them.
# "paper" is the LSHBloom paper's configuration (conf/paper.toml): the low-level API's defaults
# (COMPAT_DEFAULTS: unigrams, T = 0.5, 256 permutations, no normalization, the sum band key, a fixed
# index), declared once there, with the permutations of datasketch < 2 (legacy) that the paper's code
# ran on, and no verification (the paper has none).
PRESETS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {"paper": MappingProxyType({**COMPAT_DEFAULTS, "scheme": "legacy", "verify": False})}
)


def preset_settings(name: str) -> dict:
    """The settings of a named preset (see :data:`PRESETS`)."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    return dict(PRESETS[name])


def load_config(path: str) -> dict:
    """The ``[dedup]`` table of a TOML file, checked against the known settings."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from None
    table = data.get("dedup")
    if table is None:
        raise ConfigError(f"{path}: no [dedup] table")
    unknown = sorted(set(table) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(DEFAULTS)}")
    extra = sorted(set(data) - {"dedup"})
    if extra:
        raise ConfigError(f"{path}: unknown table(s) {', '.join(extra)}; settings go in [dedup]")
    return dict(table)

