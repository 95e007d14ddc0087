"""Crawl and extraction noise for any script: the kinds of copy of the multilingual study (docs/evaluation.md).

``ocr_chars``
    character-level OCR edits at 1-4 % of the non-space characters: a
    substitution (a confusable glyph where one is known, else a random
    character of the same script drawn from the document's own characters),
    a deletion or an insertion.
``glued``
    the text set at a fixed line width and the line breaks then lost, most of
    them without a space (words glued across the break).
``hyphen``
    the text set at a fixed line width with words crossing the margin
    hyphenated (``docu-\\nment``); dense-script lines break anywhere.
``cjk_space``
    a space inserted between adjacent Han/kana/Hangul characters (30-100 % of
    the boundaries, as some PDF extractors do); only for texts of such scripts.
``boilerplate``
    header, navigation and footer lines of a site template added.
``truncate``
    a prefix of 40-95 % of the text.
``drop``
    1-3 runs of lines (sections) removed, 5-30 % of the text.
``composed``
    2-3 of the above applied in turn (its label names them: ``composed:truncate+ocr_chars``).

Every variant records its kind, so precision and recall can be reported per kind
of copy (:func:`crawl_variant`).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from evaluation.generator.variants import NoiseConfig, drop_sections, paragraphs, render_html, render_pdf

CRAWL_KINDS = ("html", "pdf", "ocr_chars", "glued", "hyphen", "cjk_space", "boilerplate", "truncate", "drop",
               "composed")
_COMPOSABLE = (("truncate", "drop"), ("ocr_chars",), ("glued", "hyphen", "cjk_space"), ("boilerplate", "html"))


@dataclass(frozen=True)
class CrawlNoise:
    """How hard the crawl/extraction copies are."""

    ocr_rate: tuple[float, float] = (0.01, 0.04)  # share of non-space characters edited
    glue: tuple[float, float] = (0.5, 1.0)  # share of line breaks whose space is lost
    cjk_space: tuple[float, float] = (0.3, 1.0)  # share of dense-script boundaries given a space
    boilerplate_lines: tuple[int, int] = (3, 8)
    truncate_keep: tuple[float, float] = (0.4, 0.95)
    drop_fraction: tuple[float, float] = (0.05, 0.3)
    line_width: tuple[int, int] = (60, 95)  # characters; dense scripts: a third of it

    def extraction(self) -> NoiseConfig:
        return NoiseConfig(drop_fraction=self.drop_fraction, line_width=self.line_width)


_DENSE = re.compile("[\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3038-\u303b\u3040-\u30ff\u3100-\u312f"
                    "\u31a0-\u31bf\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9d"
                    "\U0001b000-\U0001b16f\U00020000-\U0003134f]")
_CONFUSABLE = {"rn": "m", "m": "rn", "cl": "d", "l": "1", "I": "l", "O": "0", "0": "O", "e": "c", "c": "e",
               "S": "5", "B": "8", "h": "b", "t": "f", "u": "v", "n": "h", "i": "í", "a": "á", "o": "ó",
               "é": "e", "è": "e", "ü": "u", "ö": "o", "ä": "a", "ç": "c", "ã": "a",
               "日": "曰", "未": "末", "土": "士", "己": "已", "人": "入", "大": "太", "天": "夫", "ー": "一",
               "口": "ロ", "力": "カ", "工": "エ", "夕": "タ", "へ": "ヘ", "ソ": "ン", "シ": "ツ"}
_CONFUSABLE_RE = re.compile("|".join(re.escape(k) for k in sorted(_CONFUSABLE, key=len, reverse=True)))


def is_dense_text(text: str, share: float = 0.1) -> bool:
    """Whether a tenth (``share``) or more of the non-space characters are of a dense script."""
    chars = [c for c in text if not c.isspace()]
    return bool(chars) and len(_DENSE.findall(text)) >= share * len(chars)


def _script_pools(text: str) -> tuple[list[str], list[str]]:
    """The document's own letters: dense-script ones and the others (substitutes of the same script)."""
    letters = sorted({c for c in text if c.isalpha()})
    dense = [c for c in letters if _DENSE.match(c)]
    other = [c for c in letters if not _DENSE.match(c)]
    return dense or other or ["x"], other or dense or ["x"]


def ocr_chars(text: str, rng: random.Random, noise: CrawlNoise) -> str:
    rate = rng.uniform(*noise.ocr_rate)
    dense, other = _script_pools(text)
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c.isspace() or rng.random() >= rate:
            out.append(c)
            i += 1
            continue
        pool = dense if _DENSE.match(c) else other
        u = rng.random()
        if u < 0.6:  # substitution: a confusable glyph if one starts here, else the same script
            m = _CONFUSABLE_RE.match(text, i)
            if m and rng.random() < 0.5:
                out.append(_CONFUSABLE[m.group(0)])
                i = m.end()
                continue
            out.append(rng.choice(pool))
        elif u < 0.8:  # insertion before the character
            out.append(rng.choice(pool))
            out.append(c)
        # else deletion
        i += 1
    return "".join(out)


def _wrap(text: str, rng: random.Random, noise: CrawlNoise, hyphenate: float) -> list[str]:
    """Lines of a fixed width; words over the margin hyphenated with probability ``hyphenate``."""
    dense = is_dense_text(text)
    width = rng.randint(*noise.line_width) // (3 if dense else 1)
    lines: list[str] = []
    for para in paragraphs(text):
        line = ""
        for word in para.split(" "):
            if len(word) > width:  # a run without spaces (a dense-script sentence) breaks anywhere
                if line:
                    lines.append(line)
                while len(word) > width:
                    lines.append(word[:width])
                    word = word[width:]
                line = word
                continue
            if not line:
                line = word
            elif len(line) + 1 + len(word) <= width:
                line += " " + word
            else:
                room = width - len(line) - 2
                if len(word) >= 6 and room >= 3 and word.isalpha() and rng.random() < hyphenate:
                    cut = rng.randint(3, min(room, len(word) - 3))
                    lines.append(f"{line} {word[:cut]}-")
                    line = word[cut:]
                else:
                    lines.append(line)
                    line = word
        if line:
            lines.append(line)
    return lines


def glued(text: str, rng: random.Random, noise: CrawlNoise) -> str:
    lost = rng.uniform(*noise.glue)
    lines = _wrap(text, rng, noise, hyphenate=0.0)
    out = lines[:1]
    for line in lines[1:]:
        if rng.random() < lost:
            out[-1] += line
        else:
            out.append(line)
    return "\n".join(out)


def hyphen(text: str, rng: random.Random, noise: CrawlNoise) -> str:
    return "\n".join(_wrap(text, rng, noise, hyphenate=0.8))


def cjk_space(text: str, rng: random.Random, noise: CrawlNoise) -> str:
    p = rng.uniform(*noise.cjk_space)
    out = [text[:1]]
    for prev, c in zip(text, text[1:]):
        if _DENSE.match(prev) and _DENSE.match(c) and rng.random() < p:
            out.append(" ")
        out.append(c)
    return "".join(out)


_SITES = (
    (["Home | Docs | Download | Community | Search", "You are here: Home > Documentation > Manual"],
     ["© 2024 The Project Authors. All rights reserved.", "Privacy Policy · Terms of Use · Contact",
      "This page was last edited on 12 March 2024."]),
    (["Skip to main content", "Menu ▾  Products  Solutions  Pricing  Blog", "Sign in / Register"],
     ["Was this page helpful? Yes No", "Share: Twitter Facebook LinkedIn Email", "Cookie settings | Accept all"]),
    (["首页 | 文档 | 下载 | 社区 | 搜索", "当前位置：首页 > 文档 > 手册"],
     ["版权所有 © 2024 保留所有权利", "隐私政策 · 使用条款 · 联系我们", "本页面最后修改于2024年3月12日"]),
    (["ホーム | ドキュメント | ダウンロード | コミュニティ", "現在位置：ホーム > ドキュメント"],
     ["Copyright © 2024 All Rights Reserved.", "プライバシーポリシー | 利用規約 | お問い合わせ"]),
    (["Startseite | Dokumentation | Herunterladen | Gemeinschaft", "Sie sind hier: Startseite > Handbuch"],
     ["© 2024 Alle Rechte vorbehalten.", "Datenschutz · Impressum · Kontakt"]),
    (["Accueil | Documentation | Télécharger | Communauté", "Vous êtes ici : Accueil > Manuel"],
     ["© 2024 Tous droits réservés.", "Politique de confidentialité · Mentions légales · Contact"]),
    (["Inicio | Documentación | Descargas | Comunidad", "Usted está aquí: Inicio > Manual"],
     ["© 2024 Todos los derechos reservados.", "Política de privacidad · Términos de uso · Contacto"]),
)


def boilerplate(text: str, rng: random.Random, noise: CrawlNoise) -> str:
    head, foot = rng.choice(_SITES)
    want = rng.randint(*noise.boilerplate_lines)
    n_head = min(len(head), rng.randint(1, want))
    lines = head[:n_head] + [text] + foot[: max(1, min(len(foot), want - n_head))]
    return "\n".join(lines)


def truncate(text: str, rng: random.Random, noise: CrawlNoise) -> str:
    keep = rng.uniform(*noise.truncate_keep)
    return text[: max(1, int(len(text) * keep))]


def drop(text: str, rng: random.Random, noise: CrawlNoise) -> str:
    return drop_sections(text, rng, noise.extraction())


def html(text: str, rng: random.Random, noise: CrawlNoise) -> str:
    return render_html(text, rng, noise.extraction())


def pdf(text: str, rng: random.Random, noise: CrawlNoise) -> str:
    return render_pdf(text, rng, noise.extraction())


CRAWL_RENDER = {"html": html, "pdf": pdf, "ocr_chars": ocr_chars, "glued": glued, "hyphen": hyphen,
                "cjk_space": cjk_space, "boilerplate": boilerplate, "truncate": truncate, "drop": drop}


def kinds_for(text: str) -> tuple[str, ...]:
    """The kinds a source can have: ``cjk_space`` only for dense-script texts."""
    return CRAWL_KINDS if is_dense_text(text) else tuple(k for k in CRAWL_KINDS if k != "cjk_space")


def crawl_variant(text: str, kind: str, rng: random.Random, noise: CrawlNoise = CrawlNoise()) -> tuple[str, str]:
    """A copy of ``text`` of ``kind`` (:data:`CRAWL_KINDS`); returns ``(text, label)``."""
    if kind == "composed":
        dense = is_dense_text(text)
        groups = [g for g in _COMPOSABLE]
        picked = rng.sample(groups, rng.randint(2, 3))
        steps = []
        for g in picked:
            options = [k for k in g if dense or k != "cjk_space"]
            steps.append(rng.choice(options))
        # losses first (a parse that stopped early), then extraction noise, then the template
        order = {"truncate": 0, "drop": 0, "html": 1, "glued": 2, "hyphen": 2, "cjk_space": 2, "ocr_chars": 3,
                 "boilerplate": 4}
        steps.sort(key=order.__getitem__)
        for s in steps:
            text = CRAWL_RENDER[s](text, rng, noise)
        return text, "composed:" + "+".join(steps)
    if kind not in CRAWL_RENDER:
        raise ValueError(f"unknown kind of copy {kind!r}; choose from {CRAWL_KINDS}")
    return CRAWL_RENDER[kind](text, rng, noise), kind
