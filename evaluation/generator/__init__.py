"""Labelled benchmark streams of near-duplicate documents (paper §5.1.4, rebuilt).

The paper builds its fidelity datasets from scientific articles that exist in
two forms, HTML and PDF, the PDF parsed by one of three tools (PyMuPDF, Nougat,
Tesseract OCR); duplicates are other parses of the same article and/or randomly
truncated versions of it, balanced between the two kinds, at duplication
levels from 10 % to 90 %. We have no such parallel corpus, so this package
*simulates the extraction paths* on any JSONL of source documents, in three
steps, one module each:

:mod:`~evaluation.generator.sources`
    read a pool of source documents and clean it (too short, mostly markup,
    near-copies of an earlier source).
:mod:`~evaluation.generator.variants`
    the duplicate kinds: three extraction paths (html, pdf, ocr) and two
    losses (truncate, drop), and how hard each is (:class:`NoiseConfig`).
:mod:`~evaluation.generator.streams`
    shuffled streams of sources and variants at a duplication level, their
    labels, and their JSONL files.

Every public name of the three is importable from here
(``from evaluation import generator as G; G.make_stream(...)``).
"""

from evaluation.generator.sources import (
    NEAR_COPY_JACCARD, Source, id_split, near_copy_groups, prepare_sources, read_jsonl,
)
from evaluation.generator.streams import (
    DEFAULT_LEVELS, ORIGINAL, Stream, StreamDoc, VariantCache, label_stream, make_stream, make_streams,
    read_stream, variant_kind, write_stream,
)
from evaluation.generator.variants import (
    EXTRACTION_KINDS, KINDS, LOSS_KINDS, RENDER, NoiseConfig, drop_sections, paragraphs, render_html,
    render_ocr, render_pdf, strip_markup, truncate, variant,
)

__all__ = [
    "DEFAULT_LEVELS", "EXTRACTION_KINDS", "KINDS", "LOSS_KINDS", "NEAR_COPY_JACCARD", "ORIGINAL", "RENDER",
    "NoiseConfig", "Source", "Stream", "StreamDoc", "VariantCache",
    "drop_sections", "id_split", "label_stream", "make_stream", "make_streams", "near_copy_groups", "paragraphs",
    "prepare_sources", "read_jsonl", "read_stream", "render_html", "render_ocr", "render_pdf", "strip_markup",
    "truncate", "variant", "variant_kind", "write_stream",
]
