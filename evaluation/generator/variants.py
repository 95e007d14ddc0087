"""The duplicate kinds: how an extraction path, or a parse that lost text, changes a source.

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

html, pdf and ocr are the *extraction* family, truncate and drop the *loss*
family. A fraction ``mixed`` of loss duplicates is also passed through an
extraction path (the paper's "and/or"; :func:`variant`). How hard each kind
is, is a :class:`NoiseConfig`.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import asdict, dataclass

EXTRACTION_KINDS = ("html", "pdf", "ocr")
LOSS_KINDS = ("truncate", "drop")
KINDS = EXTRACTION_KINDS + LOSS_KINDS


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
