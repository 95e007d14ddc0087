"""Labelled streams: sources and their variants, shuffled, at one duplication level.

Duplicates alternate between the *extraction* family (html, pdf, ocr) and the
*loss* family (truncate, drop), so the two are balanced as in the paper
(:func:`variant_kind`). Every stream is a shuffle of ``num_docs``
documents: ``round(num_docs * (1 - level))`` distinct sources, each once as
its source text, plus variants of them. **Label**: a document is a duplicate
iff an earlier document in the stream comes from the same source. The number
of duplicates is exactly ``num_docs - distinct sources`` whatever the order.

Everything is deterministic given the seed. A variant's text depends only on
``(seed, source id, variant number)``, so the streams of different levels
share documents and the study can cache their signatures.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Optional

from evaluation.generator.sources import Source
from evaluation.generator.variants import EXTRACTION_KINDS, LOSS_KINDS, NoiseConfig, variant

ORIGINAL = "original"
DEFAULT_LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass
class StreamDoc:
    id: str
    text: str
    source: str
    kind: str  # "original", a duplicate kind, or "loss+extraction"
    variant: int  # 0 for the source text, 1.. for the source's variants
    is_duplicate: bool = False

    @property
    def key(self) -> tuple[str, int]:
        """Identifies the text: the same (source, variant) has the same text in every stream of a seed."""
        return (self.source, self.variant)


@dataclass
class Stream:
    docs: list[StreamDoc]
    level: float
    seed: int
    name: str = ""
    noise: NoiseConfig = field(default_factory=NoiseConfig)

    @property
    def labels(self) -> list[bool]:
        return [d.is_duplicate for d in self.docs]

    @property
    def texts(self) -> list[str]:
        return [d.text for d in self.docs]

    def kind_counts(self) -> dict:
        return dict(Counter(d.kind.split("+")[0] for d in self.docs if d.is_duplicate or d.kind != ORIGINAL))

    def to_records(self) -> Iterator[dict]:
        for d in self.docs:
            yield {
                "id": d.id,
                "text": d.text,
                "source": d.source,
                "kind": d.kind,
                "variant": d.variant,
                "is_duplicate": d.is_duplicate,
                "level": self.level,
            }


def _rng(*parts) -> random.Random:
    h = hashlib.sha256(":".join(str(p) for p in parts).encode("utf-8")).digest()
    return random.Random(int.from_bytes(h[:16], "big"))


def label_stream(docs: Sequence[StreamDoc]) -> None:
    """Set ``is_duplicate``: True iff an earlier document comes from the same source."""
    seen: set[str] = set()
    for d in docs:
        d.is_duplicate = d.source in seen
        seen.add(d.source)


def variant_kind(seed: int, source_id: str, v: int) -> str:
    """The duplicate kind of variant ``v >= 1`` of a source.

    Variants alternate families (extraction, loss) from a per-source random
    start, and within a family rotate through its kinds from a per-source
    random offset, so every kind is equally likely for every ``v`` and the
    kinds of one source's variants are spread as evenly as possible.
    """
    if v < 1:
        raise ValueError(f"variant numbers of duplicates start at 1, got {v}")
    offsets = _rng("offset", seed, source_id)
    start = offsets.randrange(2)
    ext_offset = offsets.randrange(len(EXTRACTION_KINDS))
    loss_offset = offsets.randrange(len(LOSS_KINDS))
    rank = (v - 1) // 2  # how many earlier variants of this variant's family the source has
    if (v - 1 + start) % 2 == 0:
        return EXTRACTION_KINDS[(rank + ext_offset) % len(EXTRACTION_KINDS)]
    return LOSS_KINDS[(rank + loss_offset) % len(LOSS_KINDS)]


class VariantCache:
    """Texts of ``(source, variant)`` pairs; variant ``v``'s kind and text depend only on seed, source and ``v``."""

    def __init__(self, sources: Sequence[Source], seed: int, noise: NoiseConfig):
        self.by_id = {s.id: s for s in sources}
        self.seed = seed
        self.noise = noise
        self._cache: dict[tuple[str, int], tuple[str, str]] = {}

    def get(self, source_id: str, v: int) -> tuple[str, str]:
        key = (source_id, v)
        if key not in self._cache:
            src = self.by_id[source_id].text
            if v == 0:
                self._cache[key] = (src, ORIGINAL)
            else:
                # Variant numbers alternate families: odd = extraction, even = loss,
                # and the kind within a family rotates from a per-source offset.
                rng = _rng("variant", self.seed, source_id, v)
                self._cache[key] = variant(src, variant_kind(self.seed, source_id, v), rng, self.noise)
        return self._cache[key]


def make_stream(
    sources: Sequence[Source],
    num_docs: int,
    level: float,
    seed: int = 0,
    noise: NoiseConfig = NoiseConfig(),
    cache: Optional[VariantCache] = None,
    name: str = "",
) -> Stream:
    """A shuffled stream of ``num_docs`` documents of which a fraction ``level`` are duplicates.

    ``round(num_docs * (1 - level))`` sources are drawn (a seed-determined
    order of the pool, so lower levels use a superset of the sources of higher
    ones); each appears once as its source text and the remaining documents
    are variants, spread over the drawn sources as evenly as possible
    (a source gets ``v = 1, 2, ...``). Then the stream is shuffled and labelled.
    """
    if not 0.0 <= level < 1.0:
        raise ValueError(f"duplication level must be in [0, 1), got {level!r}")
    if num_docs < 1:
        raise ValueError(f"num_docs must be >= 1, got {num_docs!r}")
    n_sources = max(1, round(num_docs * (1.0 - level)))
    if n_sources > len(sources):
        raise ValueError(
            f"a stream of {num_docs} documents at level {level:.0%} needs {n_sources} sources, the pool has {len(sources)}"
        )
    cache = cache or VariantCache(sources, seed, noise)
    order = sorted(range(len(sources)), key=lambda i: _rng("pool", seed, sources[i].id).random())
    chosen = [sources[i].id for i in order[:n_sources]]
    n_dups = num_docs - n_sources
    per, extra = divmod(n_dups, n_sources)
    # which sources get one more variant: a level-specific random subset
    rng = _rng("stream", seed, level, num_docs)
    more = set(rng.sample(range(n_sources), extra))
    docs = []
    for i, sid in enumerate(chosen):
        for v in range(per + (i in more) + 1):
            text, kind = cache.get(sid, v)
            docs.append(StreamDoc(id="", text=text, source=sid, kind=kind, variant=v))
    rng.shuffle(docs)
    for i, d in enumerate(docs):
        d.id = f"{name or 'stream'}-{int(round(level * 100)):02d}-{i:06d}"
    label_stream(docs)
    return Stream(docs=docs, level=level, seed=seed, name=name, noise=noise)


def make_streams(
    sources: Sequence[Source],
    num_docs: int,
    levels: Iterable[float] = DEFAULT_LEVELS,
    seed: int = 0,
    noise: NoiseConfig = NoiseConfig(),
    name: str = "",
) -> list[Stream]:
    """Streams at several duplication levels sharing one variant cache."""
    cache = VariantCache(sources, seed, noise)
    return [make_stream(sources, num_docs, lvl, seed, noise, cache, name) for lvl in levels]


def write_stream(stream: Stream, path: str) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:
        for rec in stream.to_records():
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return path


def read_stream(path: str) -> Stream:
    """Read a stream written by :func:`write_stream` (labels are re-derived from the order and checked)."""
    opener = gzip.open if path.endswith(".gz") else open
    docs, level = [], 0.0
    stored = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            docs.append(StreamDoc(r["id"], r["text"], r["source"], r.get("kind", ""), r.get("variant", 0)))
            stored.append(bool(r.get("is_duplicate")))
            level = r.get("level", level)
    label_stream(docs)
    if [d.is_duplicate for d in docs] != stored:
        raise ValueError(f"{path}: stored is_duplicate labels disagree with the stream order")
    return Stream(docs=docs, level=level, seed=-1, name=os.path.basename(path))
