"""The position signals of evaluation.study.coverage: exact references on small texts."""

import numpy as np
import pytest

from evaluation.shingling import Shingling, shingle_hashes, shingles
from evaluation.study.coverage import (
    PositionRule, chunk_containments, ordered_shingles, scattered, uncovered_runs,
)

MIXED11 = Shingling("mixed", 11, ("dehyphen", "nfkc", "lower", "punct"))
TEXT = ("The wcschr() function is the wide-character equivalent of the strchr(3) function. It searches the first "
        "occurrence of wc in the wide-character string pointed to by wcs. It returns a pointer or NULL. ")


@pytest.mark.parametrize("shingling", [MIXED11, Shingling("chars", 5), Shingling("mixed", 7),
                                       Shingling("words", 3)])
@pytest.mark.parametrize("text", [TEXT, "这是一个测试文档，用于检查 the noise 模型。", "short", ""])
def test_ordered_shingles_are_the_shingle_set_in_order(shingling, text):
    got = ordered_shingles(text, shingling)
    want = shingles(text, shingling)
    if shingling.unit == "words":
        want = {s.replace(" ", "\u2581") for s in want}
    assert set(got) == want


def test_a_copy_covers_every_chunk_and_leaves_nothing_uncovered():
    other = shingle_hashes(TEXT, MIXED11)
    assert chunk_containments(TEXT, other, MIXED11, 8).tolist() == [1.0] * 8
    runs, positions = uncovered_runs(TEXT, other, MIXED11)
    assert len(runs) == 0 and positions == len(ordered_shingles(TEXT, MIXED11))


def test_a_character_edit_leaves_one_position_and_a_sentence_its_length():
    i = TEXT.index("equivalent") + 3
    edited = TEXT[:i] + "q" + TEXT[i + 1:]  # one substituted letter
    runs, _ = uncovered_runs(edited, shingle_hashes(TEXT, MIXED11), MIXED11)
    assert runs.tolist() == [1]
    sentence = "Its second sentence differs between the two pages."
    text = f"A first sentence both pages share verbatim. {sentence} The third sentence is shared as well, to the end."
    other = text.replace(sentence, "Nothing here matches the other text at all, whatever it says.")
    runs, positions = uncovered_runs(text, shingle_hashes(other, MIXED11), MIXED11)
    squeezed = len("".join(sentence.replace(".", "").replace("-", "").lower().split()))
    assert len(runs) == 1 and squeezed - 2 <= runs[0] <= squeezed + 2
    assert scattered((runs, positions), runs[0] + 1) == pytest.approx(runs[0] / positions)
    assert scattered((runs, positions), runs[0]) == 0.0


def test_a_truncation_misses_the_tail_chunks():
    half = TEXT[: len(TEXT) // 2]
    chunks = chunk_containments(TEXT, shingle_hashes(half, MIXED11), MIXED11, 4)
    assert chunks[0] == 1.0 and chunks[-1] == 0.0
    assert np.all(np.diff(chunks) <= 0)


def test_rule_labels_name_their_parameters():
    assert PositionRule("scattered", 0.12, max_run=40).label() == "scattered(L 40) < 0.12 (J < 0.6)"
    assert PositionRule("coverage", 1.0, 8, 0.2).label() == "coverage k 8 floor 0.2 >= 1 (J < 0.6)"


def test_rare_shingles_are_those_fewer_documents_hold():
    from evaluation.study.template_df import document_frequencies, rare

    template = "Library Functions Manual. Standard C library, see attributes(7) and the conforming standards. "
    pages = [template + f"The {name} function does its own particular thing {name} {name}." for name in
             ("alpha", "bravo", "charlie")]
    df = document_frequencies(pages, MIXED11)
    own = shingle_hashes(pages[0], MIXED11)
    shared = np.intersect1d(own, shingle_hashes(pages[1], MIXED11))
    kept = rare(own, df, 3)  # held by fewer than 3 of the pages: the first page's own text
    assert len(np.intersect1d(kept, shared)) == 0 and len(kept) == len(own) - len(shared)
    assert len(rare(own, df, 4)) == len(own)  # nothing is held by 4 pages
    absent = np.array([12345], dtype=np.int64)
    assert rare(absent, df, 1).tolist() == [12345]  # not in the corpus: df 0
