"""Labelled benchmark streams of near-duplicate documents (paper §5.1.4, rebuilt).

The paper builds its fidelity datasets from scientific articles that exist in
two forms, HTML and PDF, the PDF parsed by one of three tools (PyMuPDF, Nougat,
Tesseract OCR); duplicates are other parses of the same article and/or randomly
truncated versions of it, balanced between the two kinds, at duplication
levels from 10 % to 90 %. We have no such parallel corpus, so this module
*simulates the extraction paths* on any JSONL of source documents:

``html``
    the text as an HTML-to-text extractor gives it: markup lost (reST/man
    under- and overlines, inline markup, directives, running man headers),
    paragraphs reflowed onto one line, whitespace collapsed, smart quotes and
    dashes as Sphinx renders them.
``pdf``
    a born-digital PDF through a text extractor: markup lost, the text set at a
    fixed line width with hyphenated line breaks (``docu-\\nment``), typographic
    ligatures kept as code points (ﬁ ﬂ ﬀ ﬃ ﬄ), a running header and a page
    number every page.
``ocr``
    a scanned PDF through OCR: as ``pdf`` without ligatures, plus character
    confusions (rn→m, m→rn, l→1, I→l, O→0, 0→O, cl→d, e→c, ...), the odd space
    lost or added, and a few misread header lines.
``truncate``
    a parse that stopped early: a prefix of 60-95 % of the text, cut anywhere.
``drop``
    a parse that skipped parts: 1-3 runs of lines removed, 5-30 % of the text
    in total.

Duplicates alternate between the *extraction* family (html, pdf, ocr) and the
*loss* family (truncate, drop), so the two are balanced as in the paper; a
fraction ``mixed`` of loss duplicates is also passed through an extraction
path (the paper's "and/or"). Every stream is a shuffle of ``num_docs``
documents: ``round(num_docs * (1 - level))`` distinct sources, each once as
its source text, plus variants of them. **Label**: a document is a duplicate
iff an earlier document in the stream comes from the same source. The number
of duplicates is exactly ``num_docs - distinct sources`` whatever the order.

Everything is deterministic given the seed. A variant's text depends only on
``(seed, source id, variant number)``, so the streams of different levels
share documents and the study can cache their signatures.

Source pools are cleaned first (:func:`prepare_sources`): documents too short
to survive noise are dropped, as are sources that are themselves
near-copies of an earlier source (symlinked man pages, per-architecture copies
of one file, templated pages such as towlower/towupper: normalized word 5-gram
Jaccard >= ``NEAR_COPY_JACCARD`` = 0.3), since they would be labelled distinct
documents while being near-duplicates by any definition.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import random
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Optional

EXTRACTION_KINDS = ("html", "pdf", "ocr")
LOSS_KINDS = ("truncate", "drop")
KINDS = EXTRACTION_KINDS + LOSS_KINDS
ORIGINAL = "original"
DEFAULT_LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
# Two sources whose normalized word 5-gram sets have Jaccard >= this are near-copies
# (templated man pages such as towlower/towupper): only the first is kept, since the
# label "distinct source = not a duplicate" would be wrong for the second.
NEAR_COPY_JACCARD = 0.3


@dataclass(frozen=True)
class NoiseConfig:
    """How hard the duplicates are. The defaults are the benchmark's documented setting."""

    truncate_keep: tuple[float, float] = (0.6, 0.95)  # fraction of characters a truncated parse keeps
    drop_fraction: tuple[float, float] = (0.05, 0.3)  # fraction of text a skipping parse loses
    drop_runs: tuple[int, int] = (1, 3)
    mixed: float = 0.25  # loss duplicates also passed through an extraction path
    line_width: tuple[int, int] = (60, 95)  # pdf/ocr column width, characters
    lines_per_page: tuple[int, int] = (40, 60)
    hyphenate: float = 0.5  # chance a word crossing the margin is hyphenated rather than moved
    ligature: float = 0.9  # chance a ligature-able letter pair is set as a ligature (pdf)
    ocr_confusion: float = 0.01  # chance each confusable character sequence is misread
    ocr_space: float = 0.004  # chance per word of a lost or extra space
    smart_quotes: float = 1.0  # html: share of documents rendered with smart quotes/dashes

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Source:
    id: str
    text: str


# --------------------------------------------------------------------------
# reading and cleaning source pools


def read_jsonl(path: str, text_field: str = "text", id_field: str = "id") -> list[Source]:
    """Documents of a JSONL file (``.gz`` allowed) with an id and a text field."""
    opener = gzip.open if path.endswith(".gz") else open
    out = []
    with opener(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not JSON ({e})") from None
            text = doc.get(text_field)
            if not isinstance(text, str):
                raise ValueError(f"{path}:{lineno}: field {text_field!r} missing or not a string")
            doc_id = doc.get(id_field, f"{os.path.basename(path)}:{lineno}")
            out.append(Source(str(doc_id), text))
    return out


def id_split(doc_id: str, salt: str = "lshbloom-eval") -> float:
    """A stable number in [0, 1) from an id: ``id_split(i) < 0.5`` puts half the ids in one split."""
    h = hashlib.sha1(f"{salt}:{doc_id}".encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def _five_grams(text: str) -> set[int]:
    tokens = re.sub(r"[^\w\s]", " ", text.lower()).split()
    if len(tokens) < 5:
        return {zlib.crc32(" ".join(tokens).encode("utf-8"))}
    return {zlib.crc32(" ".join(tokens[i : i + 5]).encode("utf-8")) for i in range(len(tokens) - 4)}


def near_copy_groups(sources: Sequence[Source], jaccard: float = 0.3, num_perm: int = 128) -> list[int]:
    """For each source, the index of the first earlier source it nearly copies, or -1.

    Similarity is the exact Jaccard index of lowercased, punctuation-free word
    5-gram sets; candidates come from an exact (in-memory) LSH at a lower
    threshold so no pair above ``jaccard`` is missed in practice.
    """
    import numpy as np

    shingles = [_five_grams(s.text) for s in sources]
    # A plain numpy MinHash over the CRC-32 shingle hashes (only to find candidates).
    rng = np.random.RandomState(12345)
    a = rng.randint(1, 2**31 - 1, num_perm).astype(np.uint64) * 2 + 1
    bb = rng.randint(0, 2**31 - 1, num_perm).astype(np.uint64)
    sigs = np.empty((len(sources), num_perm), dtype=np.uint64)
    for i, sh in enumerate(shingles):
        h = np.fromiter(sh, dtype=np.uint64, count=len(sh))
        sigs[i] = ((np.outer(h, a) + bb) & np.uint64(0xFFFFFFFF)).min(axis=0)
    # bands for a low threshold: candidates at ~0.5 * jaccard and above
    r = 2
    b = num_perm // r
    owner = [-1] * len(sources)
    buckets: list[dict] = [dict() for _ in range(b)]
    for i in range(len(sources)):
        cands = set()
        for band in range(b):
            key = sigs[i, band * r : (band + 1) * r].tobytes()
            lst = buckets[band].setdefault(key, [])
            cands.update(lst)
            lst.append(i)
        best = -1
        for j in sorted(cands):
            if owner[j] != -1:
                continue
            inter = len(shingles[i] & shingles[j])
            if inter and inter / (len(shingles[i]) + len(shingles[j]) - inter) >= jaccard:
                best = j
                break
        owner[i] = best
    return owner


def prepare_sources(
    sources: Sequence[Source],
    min_words: int = 50,
    max_words: int = 20000,
    near_copy_jaccard: Optional[float] = NEAR_COPY_JACCARD,
    max_markup: Optional[float] = 0.2,
) -> tuple[list[Source], dict]:
    """The usable source pool: length-filtered, with near-copies of earlier sources removed.

    Sources whose markup is more than ``max_markup`` of their words (toctree
    indexes, files of ``kernel-doc`` directives) are dropped too: their
    rendered form is mostly text that is not in the source.

    Returns the kept sources (input order) and a report of what was dropped.
    """
    seen_text: set[str] = set()
    kept: list[Source] = []
    report = Counter()
    for s in sources:
        n = len(s.text.split())
        if n < min_words:
            report["too_short"] += 1
        elif n > max_words:
            report["too_long"] += 1
        elif max_markup is not None and 1 - len(strip_markup(s.text).split()) / n > max_markup:
            report["mostly_markup"] += 1
        elif s.text in seen_text:
            report["exact_copy"] += 1
        else:
            seen_text.add(s.text)
            kept.append(s)
    if near_copy_jaccard is not None and kept:
        owner = near_copy_groups(kept, near_copy_jaccard)
        report["near_copy"] = sum(o >= 0 for o in owner)
        kept = [s for s, o in zip(kept, owner) if o < 0]
    report["kept"] = len(kept)
    report["input"] = len(sources)
    return kept, dict(report)


# --------------------------------------------------------------------------
# extraction paths


_UNDERLINE = re.compile(r"^\s*([=\-~^\"'`#*+_.:])\1{2,}\s*$")
_DIRECTIVE = re.compile(r"^\s*\.\.\s+(\S+::.*|_[^:]+:.*|\|.*|\[.*|$)")
_ROLE = re.compile(r":[\w:+-]+:`([^`<]*?)(?:\s*<[^`>]*>)?`")
_LINK = re.compile(r"`([^`<]+?)(?:\s*<[^`>]*>)?`_{1,2}")
_LITERAL = re.compile(r"``([^`]+)``")
_EMPH = re.compile(r"(\*\*|\*)(\S(?:.*?\S)?)\1")
_MAN_HEADER = re.compile(r"^\S+\(\w+\)\s{3,}.*\s{3,}\S+\(\w+\)\s*$")
_TABLE_BORDER = re.compile(r"^\s*[+|][-=+|]+\s*$")


def strip_markup(text: str) -> str:
    """Lose the source markup an HTML or PDF rendering would not show."""
    out = []
    for line in text.split("\n"):
        if _UNDERLINE.match(line) or _TABLE_BORDER.match(line) or _MAN_HEADER.match(line):
            continue
        if _DIRECTIVE.match(line):
            # keep the argument of visible directives (e.g. a note's text) but not the syntax
            m = re.match(r"^\s*\.\.\s+\S+::\s*(.*)$", line)
            if m and m.group(1).strip():
                out.append(m.group(1))
            continue
        line = _ROLE.sub(r"\1", line)
        line = _LINK.sub(r"\1", line)
        line = _LITERAL.sub(r"\1", line)
        line = _EMPH.sub(r"\2", line)
        line = re.sub(r"(?<=\S)::\s*$", ":", line)
        line = re.sub(r"^\s*::\s*$", "", line)
        out.append(line)
    return "\n".join(out)


def paragraphs(text: str) -> list[str]:
    """Blank-line separated blocks, each with its whitespace collapsed to single spaces.

    A flush-left line directly above indented lines (a man page's section
    heading) is a block of its own, as a rendering would show it.
    """
    out = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line for line in block.split("\n") if line.strip()]
        current: list[str] = []
        for i, line in enumerate(lines):
            heading = (
                not line[:1].isspace()
                and i + 1 < len(lines)
                and lines[i + 1][:1].isspace()
                and len(line.split()) <= 6
            )
            if heading:
                if current:
                    out.append(" ".join(" ".join(current).split()))
                out.append(" ".join(line.split()))
                current = []
            else:
                current.append(line)
        if current:
            out.append(" ".join(" ".join(current).split()))
    return out


def _smart_quotes(text: str) -> str:
    text = re.sub(r"(^|[\s(\[{])\"", "\\1\u201c", text)
    text = text.replace('"', "\u201d")
    text = re.sub(r"(^|[\s(\[{])'", "\\1\u2018", text)
    text = text.replace("'", "\u2019")
    text = text.replace("---", "\u2014").replace("--", "\u2013")
    return text


def render_html(text: str, rng: random.Random, noise: NoiseConfig) -> str:
    paras = paragraphs(strip_markup(text))
    out = "\n\n".join(paras) if rng.random() < 0.5 else "\n".join(paras)
    if rng.random() < noise.smart_quotes:
        out = _smart_quotes(out)
    return out


_LIGATURES = (("ffi", "\ufb03"), ("ffl", "\ufb04"), ("ff", "\ufb00"), ("fi", "\ufb01"), ("fl", "\ufb02"))
_LIGATURE_RE = re.compile("ffi|ffl|ff|fi|fl")


def _ligatures(text: str, rng: random.Random, p: float) -> str:
    table = dict(_LIGATURES)
    return _LIGATURE_RE.sub(lambda m: table[m.group(0)] if rng.random() < p else m.group(0), text)


def _set_lines(paras: list[str], rng: random.Random, noise: NoiseConfig) -> list[str]:
    """Set paragraphs at a fixed width, hyphenating some words that cross the margin."""
    width = rng.randint(*noise.line_width)
    lines: list[str] = []
    for para in paras:
        line = ""
        for word in para.split(" "):
            if not line:
                line = word
            elif len(line) + 1 + len(word) <= width:
                line += " " + word
            else:
                room = width - len(line) - 2  # space and hyphen
                if len(word) >= 6 and room >= 3 and word.isalpha() and rng.random() < noise.hyphenate:
                    cut = rng.randint(3, min(room, len(word) - 3))
                    lines.append(f"{line} {word[:cut]}-")
                    line = word[cut:]
                else:
                    lines.append(line)
                    line = word
        if line:
            lines.append(line)
        lines.append("")
    return lines


def _title(text: str) -> str:
    for line in text.split("\n"):
        words = line.split()
        if len(words) >= 1 and not _UNDERLINE.match(line) and not line.lstrip().startswith(".."):
            return " ".join(words[:8])
    return "Document"


def _paginate(lines: list[str], title: str, rng: random.Random, noise: NoiseConfig) -> list[str]:
    per_page = rng.randint(*noise.lines_per_page)
    style = rng.randrange(3)
    out: list[str] = []
    pages = max(1, math.ceil(len(lines) / per_page))
    for p in range(pages):
        chunk = lines[p * per_page : (p + 1) * per_page]
        if p > 0:
            out.append(title if style != 2 else title.upper())
        out.extend(chunk)
        if style == 0:
            out.append(str(p + 1))
        elif style == 1:
            out.append(f"Page {p + 1} of {pages}")
        else:
            out.append(f"- {p + 1} -")
    return out


def render_pdf(text: str, rng: random.Random, noise: NoiseConfig, ligatures: bool = True) -> str:
    title = _title(text)
    paras = paragraphs(strip_markup(text))
    lines = _paginate(_set_lines(paras, rng, noise), title, rng, noise)
    out = "\n".join(lines)
    if ligatures:
        out = _ligatures(out, rng, noise.ligature)
    return out


_OCR_CONFUSIONS = (
    ("rn", "m"), ("m", "rn"), ("cl", "d"), ("l", "1"), ("I", "l"), ("O", "0"), ("0", "O"),
    ("e", "c"), ("S", "5"), ("B", "8"), ("vv", "w"), ("h", "li"), ("t", "f"), (".", ","),
)
_OCR_RE = re.compile("|".join(re.escape(a) for a, _ in sorted(_OCR_CONFUSIONS, key=lambda x: -len(x[0]))))


def _ocr_noise(text: str, rng: random.Random, noise: NoiseConfig) -> str:
    table = dict(_OCR_CONFUSIONS)
    text = _OCR_RE.sub(lambda m: table[m.group(0)] if rng.random() < noise.ocr_confusion else m.group(0), text)
    # lost and extra spaces
    words = text.split(" ")
    out = []
    for w in words:
        u = rng.random()
        if u < noise.ocr_space / 2 and out:
            out[-1] += w
        elif u < noise.ocr_space and len(w) > 3:
            k = rng.randint(1, len(w) - 1)
            out.append(w[:k] + " " + w[k:])
        else:
            out.append(w)
    return " ".join(out)


def render_ocr(text: str, rng: random.Random, noise: NoiseConfig) -> str:
    return _ocr_noise(render_pdf(text, rng, noise, ligatures=False), rng, noise)


def truncate(text: str, rng: random.Random, noise: NoiseConfig) -> str:
    keep = rng.uniform(*noise.truncate_keep)
    return text[: max(1, int(len(text) * keep))]


def drop_sections(text: str, rng: random.Random, noise: NoiseConfig) -> str:
    """Remove 1-3 runs of whole lines (skipped sections or pages), ``drop_fraction`` of the characters in total."""
    lines = text.split("\n")
    if len(lines) < 4:  # a one-paragraph text: skip runs of words instead
        units, sep = text.split(" "), " "
    else:
        units, sep = lines, "\n"
    sizes = [len(u) + 1 for u in units]
    total = sum(sizes)
    target = rng.uniform(*noise.drop_fraction) * total
    runs = rng.randint(*noise.drop_runs)
    dropped = [False] * len(units)
    removed = 0.0
    for r in range(runs):
        budget = (target - removed) / (runs - r)
        i = rng.randrange(len(units))
        got = 0
        while i < len(units) and got + sizes[i] / 2 < budget:
            if not dropped[i]:
                dropped[i] = True
                got += sizes[i]
            i += 1
        removed += got
    if all(dropped):
        dropped[0] = False
    return sep.join(u for u, d in zip(units, dropped) if not d)


RENDER = {"html": render_html, "pdf": render_pdf, "ocr": render_ocr, "truncate": truncate, "drop": drop_sections}


def variant(text: str, kind: str, rng: random.Random, noise: NoiseConfig = NoiseConfig()) -> tuple[str, str]:
    """A duplicate of ``text`` of the given kind. Returns ``(text, kind_label)``.

    A loss variant is, with probability ``noise.mixed``, also rendered through
    a random extraction path; its label is then e.g. ``"truncate+ocr"``.
    """
    if kind not in RENDER:
        raise ValueError(f"unknown duplicate kind {kind!r}; choose from {KINDS}")
    out = RENDER[kind](text, rng, noise)
    label = kind
    if kind in LOSS_KINDS and rng.random() < noise.mixed:
        path = rng.choice(EXTRACTION_KINDS)
        out = RENDER[path](out, rng, noise)
        label = f"{kind}+{path}"
    return out, label


# --------------------------------------------------------------------------
# streams


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
