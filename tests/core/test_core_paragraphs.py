"""Paragraphs: cut, keyed and decided exactly as the plain-Python reference says (tests/paragraph_reference.py)."""

from __future__ import annotations

import numpy as np
import pytest

import paragraph_reference as ref
from paragraph_reference import corpus
from lshbloom_udf.index import LSHBloomIndex
from lshbloom_udf.minhash import normalization_mask
from lshbloom_udf.paragraphs import ParagraphSpec, deletions, remove_paragraphs

@pytest.mark.parametrize("separator", ["newline", "blank"])
def test_spans_are_the_references_in_code_points(separator):
    texts = corpus()
    p = ParagraphSpec(separator).paragraphs(texts)
    first = p.first
    for d, text in enumerate(texts):
        got = list(zip(p.starts[first[d]:first[d + 1]].tolist(), p.ends[first[d]:first[d + 1]].tolist()))
        assert got == ref.spans(text, separator), repr(text[:80])


def _decide(texts, spec: ParagraphSpec, path) -> list[list[int]]:
    p = spec.paragraphs(texts)
    with LSHBloomIndex.create(str(path), spec.index_params(len(p.keys) + 1), bloom="blocked") as index:
        seen = index.query_insert(p.keys.reshape(-1, 1))
    removed = p.removed(seen, spec.overlap)
    first = p.first
    return [np.flatnonzero(removed[first[d]:first[d + 1]]).tolist() for d in range(len(texts))]


@pytest.mark.parametrize("separator,ngram,overlap,min_chars", [
    ("newline", 0, 0.8, 1), ("blank", 0, 0.8, 1), ("newline", 0, 0.8, 25), ("newline", 3, 0.6, 1),
    ("blank", 5, 0.9, 1),
])
def test_removed_paragraphs_are_the_exact_keep_first_references(tmp_path, separator, ngram, overlap, min_chars):
    texts = corpus()
    spec = ParagraphSpec(separator, min_chars, ngram, overlap, normalize="all")
    want = ref.decide(texts, separator, normalization_mask("all"), min_chars, ngram, overlap)
    got = _decide(texts, spec, tmp_path / "p")
    assert got == want
    removed = sum(map(len, want))
    assert removed >= 20  # the planted repeats are found, not only kept


def test_removed_text_is_the_references(tmp_path):
    texts = corpus()
    spec = ParagraphSpec("newline", normalize="all")
    removed = _decide(texts, spec, tmp_path / "p")
    p = spec.paragraphs(texts)
    first = p.first
    for d, text in enumerate(texts):
        s, e = p.starts[first[d]:first[d + 1]].tolist(), p.ends[first[d]:first[d + 1]].tolist()
        gone = [j in set(removed[d]) for j in range(len(s))]
        assert remove_paragraphs(text, deletions(s, e, gone)) == ref.removed_text(text, "newline", removed[d])


def test_spec_refuses_bad_values_and_names_its_unit():
    assert ParagraphSpec().unit == "paragraphs/newline/min1/exact"
    assert ParagraphSpec("blank", 20, 13).unit == "paragraphs/blank/min20/ngram13"
    for bad in ({"separator": "tab"}, {"min_chars": 0}, {"ngram": -1}, {"overlap": 0.0}, {"overlap": 1.5}):
        with pytest.raises(ValueError):
            ParagraphSpec(**bad)


def test_plan_sizes_the_paragraph_filter_a_run_creates(tmp_path):
    """``plan --paragraph-keys K``: the bytes of the filter a kept index's first paragraph run makes for as many
    keys (its band files on disk)."""
    import json
    import os
    import subprocess
    import sys

    from lshbloom_udf.index.paragraph_filter import PARAGRAPH_BLOOM

    out = subprocess.run([sys.executable, "-m", "lshbloom_udf", "plan", "--docs", "20000", "--paragraph-keys", "4",
                          "--paragraph-separator", "blank", "--json"], check=True, capture_output=True,
                         text=True).stdout
    planned = json.loads(out)["paragraph_filter"]
    spec = ParagraphSpec(separator="blank")
    with LSHBloomIndex.create(str(tmp_path / "p"), spec.index_params(80_000), bloom=PARAGRAPH_BLOOM) as index:
        on_disk = sum(os.path.getsize(p) for p in index.band_paths())
    assert planned["unit"] == spec.unit and planned["keys"] == 80_000
    assert planned["bytes"] == on_disk
