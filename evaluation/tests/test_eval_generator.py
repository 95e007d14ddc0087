"""The benchmark generator: labels by construction, levels, balance, determinism, and what each extraction path does."""

import collections
import gzip
import json
import random
import re

import pytest

from evaluation import generator as G
from evaluation.__main__ import main as eval_main
from evaluation.synthetic import synthetic_sources, write_sources


@pytest.fixture(scope="module")
def pool():
    sources, report = G.prepare_sources(synthetic_sources(220, seed=3), min_words=50)
    assert report["kept"] == len(sources) >= 150
    return sources


def independent_labels(docs):
    """Duplicate iff some earlier document shares the source (quadratic, on purpose)."""
    return [any(docs[j].source == docs[i].source for j in range(i)) for i in range(len(docs))]


@pytest.mark.parametrize("level", [0.1, 0.3, 0.5, 0.7, 0.9])
def test_labels_follow_the_definition_and_the_level(pool, level):
    st = G.make_stream(pool, 150, level, seed=5)
    assert len(st.docs) == 150
    assert st.labels == independent_labels(st.docs)
    n_sources = len({d.source for d in st.docs})
    assert n_sources == round(150 * (1 - level))
    assert sum(st.labels) == 150 - n_sources  # exactly one non-duplicate per source, whatever the order
    # every source appears once as its own text
    originals = collections.Counter(d.source for d in st.docs if d.kind == G.ORIGINAL)
    assert set(originals.values()) == {1} and len(originals) == n_sources
    assert len({d.id for d in st.docs}) == 150


def test_streams_are_deterministic_for_a_seed(pool):
    a = G.make_stream(pool, 120, 0.5, seed=11)
    b = G.make_stream(pool, 120, 0.5, seed=11)
    c = G.make_stream(pool, 120, 0.5, seed=12)
    assert [(d.id, d.text, d.source, d.kind) for d in a.docs] == [(d.id, d.text, d.source, d.kind) for d in b.docs]
    assert [d.text for d in a.docs] != [d.text for d in c.docs]


def test_levels_share_variant_texts(pool):
    streams = G.make_streams(pool, 100, (0.2, 0.6), seed=2)
    texts = {}
    for st in streams:
        for d in st.docs:
            assert texts.setdefault(d.key, d.text) == d.text


def test_duplicate_kinds_are_balanced_between_families():
    kinds = collections.Counter(G.variant_kind(0, f"s{i}", v) for i in range(2000) for v in (1, 2, 3, 4))
    extraction = sum(kinds[k] for k in G.EXTRACTION_KINDS)
    loss = sum(kinds[k] for k in G.LOSS_KINDS)
    assert extraction == loss  # two consecutive variants of a source are one of each family
    for k in G.EXTRACTION_KINDS:
        assert abs(kinds[k] - extraction / 3) < 0.1 * extraction
    for k in G.LOSS_KINDS:
        assert abs(kinds[k] - loss / 2) < 0.1 * loss


def test_a_stream_holds_every_kind(pool):
    st = G.make_stream(pool, 200, 0.5, seed=1)
    kinds = collections.Counter(d.kind.split("+")[0] for d in st.docs if d.variant > 0)
    assert set(kinds) == set(G.KINDS)
    assert any("+" in d.kind for d in st.docs)  # some loss duplicates also went through an extraction path


def test_bad_levels_and_sizes_are_errors(pool):
    with pytest.raises(ValueError, match="level"):
        G.make_stream(pool, 100, 1.0)
    with pytest.raises(ValueError, match="num_docs"):
        G.make_stream(pool, 0, 0.5)
    with pytest.raises(ValueError, match="needs"):
        G.make_stream(pool, 10 * len(pool), 0.1)


SOURCE = """Memory management
=================

The kernel allocates memory in pages. Each page is four kilobytes and the
allocator keeps free lists of different orders, so that a request for a
contiguous block of memory can be served quickly and efficiently without
fragmenting the physical address space. See :c:func:`alloc_pages` and the
``GFP_KERNEL`` flag for details; the official documentation describes the
different zones and their fallback lists in great detail for each
architecture that the kernel supports.

Reclaim runs when free memory falls below a watermark. It scans the least
recently used lists, writes back dirty pages and frees clean ones. The
difficult part is balancing file pages against anonymous pages, which is
why there are two separate lists and a swappiness knob that affects the
ratio between them.
"""


def test_html_path_loses_markup_and_reflows():
    out = G.render_html(SOURCE, random.Random(0), G.NoiseConfig())
    assert "=====" not in out and ":c:func:" not in out and "``" not in out
    assert "alloc_pages" in out and "GFP_KERNEL" in out
    # a paragraph is one line
    assert any(len(line.split()) > 40 for line in out.split("\n"))


def test_pdf_path_sets_lines_with_hyphens_ligatures_and_page_furniture():
    noise = G.NoiseConfig(line_width=(40, 40), lines_per_page=(6, 6), hyphenate=1.0, ligature=1.0)
    out = G.render_pdf(SOURCE, random.Random(1), noise)
    lines = out.split("\n")
    assert max(len(line) for line in lines) <= 41
    assert any(re.search(r"\w-$", line) for line in lines)  # hyphenated line breaks
    assert any(c in out for c in "\ufb00\ufb01\ufb02\ufb03\ufb04")  # ligatures
    assert sum(1 for line in lines if line.strip() in {"1", "2", "- 1 -", "- 2 -"} or line.startswith("Page ")) >= 2
    assert lines.count("Memory management") + lines.count("MEMORY MANAGEMENT") >= 1  # running header


def test_ocr_path_confuses_characters_but_keeps_most_words():
    noise = G.NoiseConfig(ocr_confusion=0.2)
    clean = G.render_pdf(SOURCE, random.Random(2), noise, ligatures=False)
    out = G.render_ocr(SOURCE, random.Random(2), noise)
    assert not any(c in out for c in "\ufb00\ufb01\ufb02\ufb03\ufb04")
    a, b = set(clean.split()), set(out.split())
    assert a != b
    assert len(a & b) / len(a | b) > 0.3


def test_truncate_keeps_a_prefix_in_range():
    noise = G.NoiseConfig()
    for seed in range(20):
        out = G.truncate(SOURCE, random.Random(seed), noise)
        assert SOURCE.startswith(out)
        assert noise.truncate_keep[0] - 0.01 <= len(out) / len(SOURCE) <= noise.truncate_keep[1] + 0.01


def test_drop_removes_whole_lines_in_range():
    noise = G.NoiseConfig()
    for seed in range(20):
        out = G.drop_sections(SOURCE, random.Random(seed), noise)
        src_lines, out_lines = SOURCE.split("\n"), out.split("\n")
        # a subsequence of the source's lines
        it = iter(src_lines)
        assert all(any(line == s for s in it) for line in out_lines)
        removed = 1 - len(out) / len(SOURCE)
        assert 0 < removed < noise.drop_fraction[1] + 0.15


def test_variant_rejects_unknown_kinds():
    with pytest.raises(ValueError, match="unknown duplicate kind"):
        G.variant(SOURCE, "scan", random.Random(0))


def test_prepare_sources_drops_short_copies_and_near_copies():
    base = synthetic_sources(6, seed=9)
    near = G.Source("near", base[0].text.replace("the", "a", 1) + "\nOne more line.")
    short = G.Source("short", "too short")
    kept, report = G.prepare_sources(base + [near, short, G.Source("copy", base[1].text)], min_words=20)
    ids = [s.id for s in kept]
    assert ids == [s.id for s in base]
    assert report["too_short"] == 1 and report["exact_copy"] == 1 and report["near_copy"] == 1


def test_write_and_read_round_trip_and_label_check(pool, tmp_path):
    st = G.make_stream(pool, 60, 0.4, seed=4)
    path = G.write_stream(st, str(tmp_path / "s.jsonl.gz"))
    back = G.read_stream(path)
    assert back.labels == st.labels and back.texts == st.texts and back.level == st.level
    # a tampered label is caught
    with gzip.open(path, "rt", encoding="utf-8") as f:
        recs = [json.loads(line) for line in f]
    recs[0]["is_duplicate"] = not recs[0]["is_duplicate"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    with pytest.raises(ValueError, match="disagree"):
        G.read_stream(str(bad))


def test_generate_command_writes_streams_and_manifest(tmp_path, capsys):
    src = write_sources(synthetic_sources(120, seed=1), str(tmp_path / "src.jsonl"))
    out = tmp_path / "streams"
    rc = eval_main(["generate", "--input", src, "--output-dir", str(out), "--docs", "50", "--levels", "0.2,0.8", "--seed", "3"])
    assert rc == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert [s["duplicates"] for s in manifest["streams"]] == [10, 40]
    for s in manifest["streams"]:
        st = G.read_stream(str(out / s["path"]))
        assert len(st.docs) == 50 and st.labels == independent_labels(st.docs)
    # same seed, same bytes
    out2 = tmp_path / "again"
    eval_main(["generate", "--input", src, "--output-dir", str(out2), "--docs", "50", "--levels", "0.2,0.8", "--seed", "3"])
    for s in manifest["streams"]:
        assert gzip.open(out / s["path"]).read() == gzip.open(out2 / s["path"]).read()


def test_generate_command_rejects_bad_levels(tmp_path):
    with pytest.raises(SystemExit):
        eval_main(["generate", "--input", "x.jsonl", "--output-dir", str(tmp_path), "--levels", "0.5,1.5"])


def test_docstring_corpus_of_installed_packages(tmp_path):
    """`corpus` writes every distinct docstring of 50+ words of a package and its submodules, tests excluded."""
    from lshbloom_udf.sample import docstring_documents, package_modules

    out = tmp_path / "new-dir" / "docstrings.jsonl.gz"
    assert eval_main(["corpus", "--packages", "json,email,no_such_package_here", "--output", str(out)]) == 0
    with gzip.open(out, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    modules = package_modules(["json", "email"])
    assert "json.decoder" in modules and "email.mime.text" in modules
    numpy_modules = package_modules(["numpy"])
    assert "numpy.linalg" in numpy_modules
    assert not any(part in ("tests", "testing") for m in numpy_modules for part in m.split("."))
    texts = [r["text"] for r in rows]
    assert texts == docstring_documents(modules, 50)
    assert len(set(texts)) == len(texts) > 10 and all(len(t.split()) >= 50 for t in texts)
    assert len({r["id"] for r in rows}) == len(rows)
    # It is a source corpus like any other: the generator takes it.
    pool, report = G.prepare_sources(G.read_jsonl(str(out), "text", "id"), min_words=50)
    assert report and len(pool) > 0
    assert eval_main(["corpus", "--packages", "no_such_package_here", "--output", str(tmp_path / "none.jsonl.gz")]) == 2
