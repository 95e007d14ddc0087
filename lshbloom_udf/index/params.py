"""The parameters of an index: what makes two runs' band keys comparable, and how the filters are sized.

:class:`IndexParams` holds both. The *sizing* fields (:data:`SIZING_FIELDS`:
capacity, p_effective, growth) only size new filters — an existing index keeps its own — so two questions
need the parameters without them, and :func:`without_sizing` answers both:
which parameters an existing index must match when the caller gave no sizing
(:func:`expected_params`), and which a committed run is matched on
(:func:`run_params`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any, Collection, Optional, Union

from lshbloom_udf.compat import COMPAT_DEFAULTS as _D
from lshbloom_udf.index import growth as growth_rules
from lshbloom_udf.lsh import optimal_params, validate_bands, validate_num_perm, validate_threshold
from lshbloom_udf.minhash import (
    KeySpec,
    normalization_name,
    validate_band_key,
    validate_ngram,
    validate_scheme,
    validate_seed,
    validate_shingle,
)


def validate_p_effective(p_effective: float) -> None:
    if not isinstance(p_effective, (int, float)) or not 0.0 < p_effective < 1.0:
        raise ValueError(f"p_effective must be in (0, 1), got {p_effective!r}")


# A new index's rate when verification checks every flag the pass makes: a Bloom false positive then costs one
# flag's verification (no candidate shares its key, so no similarity is computed) and is unflagged, so the filters
# are sized for the work verification absorbs, 1 % of the documents, not for a final decision (docs/algorithm.md
# section 6c: measured, and why). Where a false positive is final the rate is COMPAT_DEFAULTS' 1e-5.
P_VERIFIED = 1e-2


def default_p_effective(verified: bool) -> float:
    """A new index's ``p_effective`` when none is given: :data:`P_VERIFIED` if every flag is verified, else the
    final-flag rate (:data:`~lshbloom_udf.compat.COMPAT_DEFAULTS`)."""
    return P_VERIFIED if verified else _D["p_effective"]


# IndexParams.unit of a document index; a paragraph index's unit starts with PARAGRAPHS_UNIT.
DOCUMENTS = "documents"
PARAGRAPHS_UNIT = "paragraphs/"


def validate_unit(unit: str) -> None:
    if not isinstance(unit, str) or not (unit == DOCUMENTS or unit.startswith(PARAGRAPHS_UNIT)):
        raise ValueError(f"unit must be {DOCUMENTS!r} or a paragraph unit ({PARAGRAPHS_UNIT}...), got {unit!r}")


def validate_capacity(capacity: int) -> None:
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
        raise ValueError(f"expected documents (capacity) must be a positive integer, got {capacity!r}")


def per_band_p(p_effective: float, b: int) -> float:
    """Per-band Bloom false-positive rate giving an effective rate ``p_effective`` over ``b`` bands."""
    validate_p_effective(p_effective)
    return -math.expm1(math.log1p(-p_effective) / b)


def effective_p(p_band: float, b: int) -> float:
    """The effective (any band) rate of ``b`` bands at per-band rate ``p_band``: the inverse of :func:`per_band_p`."""
    return -math.expm1(b * math.log1p(-p_band)) if p_band < 1 else 1.0


@dataclass(frozen=True)
class IndexParams:
    """Everything that makes two runs' decisions comparable, and the index's sizing.

    Build one with :meth:`for_threshold` (``(b, r)`` from the threshold, as
    datasketch chooses them) or give ``b`` and ``r`` directly. The other
    fields default to :data:`~lshbloom_udf.compat.COMPAT_DEFAULTS`.
    """

    # The defaults are the low-level API's (COMPAT_DEFAULTS: datasketch's formats), not the job's; see
    # lshbloom_udf.compat.
    b: int
    r: int
    capacity: int
    num_perm: int = _D["num_perm"]
    threshold: Optional[float] = None
    scheme: str = _D["scheme"]
    seed: int = _D["seed"]
    ngram: int = _D["ngram"]
    normalize: str = _D["normalize"]
    p_effective: float = _D["p_effective"]
    # "sum" (datasketch's band hash) or "mix" (see minhash.band_keys)
    band_key: str = _D["band_key"]
    # "fixed" (IndexFullError at capacity) or "grow" (filter generations, see index.growth)
    growth: str = _D["growth"]
    # the shingle unit: "words", "chars" or "mixed" (see minhash); a manifest without it is "words"
    shingle: str = _D["shingle"]
    # what one key stands for: DOCUMENTS (b band keys a document), or a paragraph unit
    # (lshbloom_udf.paragraphs.ParagraphSpec.unit: one key a paragraph or n-gram); a manifest without it: documents
    unit: str = DOCUMENTS

    @classmethod
    def for_threshold(
        cls,
        capacity: int,
        threshold: float = _D["threshold"],
        num_perm: int = _D["num_perm"],
        *,
        bands: Optional[tuple[int, int]] = None,
        **kwargs: Any,
    ) -> "IndexParams":
        validate_threshold(threshold)
        b, r = bands if bands is not None else optimal_params(threshold, num_perm)
        return cls(b=b, r=r, capacity=capacity, num_perm=num_perm, threshold=threshold, **kwargs)

    def __post_init__(self) -> None:
        validate_num_perm(self.num_perm)
        validate_bands(self.b, self.r, self.num_perm)
        validate_capacity(self.capacity)
        if self.threshold is not None:
            validate_threshold(self.threshold)
        validate_scheme(self.scheme)
        validate_seed(self.seed)
        validate_ngram(self.ngram)
        validate_p_effective(self.p_effective)
        validate_band_key(self.band_key)
        growth_rules.validate_growth(self.growth)
        validate_shingle(self.shingle)
        validate_unit(self.unit)
        object.__setattr__(self, "normalize", normalization_name(self.normalize))

    @property
    def p_band(self) -> float:
        """The per-band rate of the first (for a fixed index, the only) generation of filters."""
        return self.generation_p_band(0)

    def generation_p_band(self, generation: int) -> float:
        """The per-band rate of generation ``generation``'s filters (see :mod:`~lshbloom_udf.index.growth`)."""
        return per_band_p(growth_rules.generation_rate(self.p_effective, self.growth, generation), self.b)

    def generation_capacity(self, generation: int) -> int:
        """The documents generation ``generation`` holds."""
        return growth_rules.generation_capacity(self.capacity, generation)

    @property
    def key_spec(self) -> KeySpec:
        """How these parameters key a document (the executors' keying settings)."""
        return KeySpec(self.b, self.r, self.num_perm, self.ngram, self.seed, self.scheme, self.normalize,
                       self.band_key, self.shingle)

    def signature_kwargs(self) -> dict:
        """:attr:`key_spec` as the keyword arguments of :func:`~lshbloom_udf.minhash.text_band_keys`."""
        return asdict(self.key_spec)


# Fields that only size new filters: an existing index keeps its own.
SIZING_FIELDS = ("capacity", "p_effective", "growth")

# Which sizing fields a caller gave: all (True), none (False), or their names.
SizingGiven = Union[bool, Collection[str]]


def as_recorded(params: IndexParams) -> dict:
    """``params`` as a manifest and a run record store them: a document index's ``unit`` is implied, not written
    (so that what was recorded before the field existed still matches)."""
    d = asdict(params)
    if d["unit"] == DOCUMENTS:
        del d["unit"]
    return d


def without_sizing(params: IndexParams, keep: Collection[str] = ()) -> dict:
    """``params`` as a dict without the sizing fields, except those named in ``keep``."""
    d = as_recorded(params)
    for name in SIZING_FIELDS:
        if name not in keep:
            d.pop(name)
    return d


def expected_params(params: IndexParams, sizing_given: SizingGiven = True) -> dict:
    """The parameters an existing index must have: all of ``params`` but the sizing fields the caller did not give."""
    keep: tuple[str, ...]
    if isinstance(sizing_given, bool):
        keep = SIZING_FIELDS if sizing_given else ()
    else:
        unknown = set(sizing_given) - set(SIZING_FIELDS)
        if unknown:
            raise ValueError(
                f"not sizing parameters: {', '.join(sorted(unknown))} (sizing: {', '.join(SIZING_FIELDS)})")
        keep = tuple(sizing_given)
    return without_sizing(params, keep)


def run_params(params: IndexParams) -> dict:
    """The parameters a committed run is matched on: all but the sizing ones (as stored in JSON)."""
    return json.loads(json.dumps(without_sizing(params)))
