"""--paragraphs annotate|remove through deduplicate(): the kept documents' paragraphs, exactly the reference's."""

from __future__ import annotations

import pytest

import paragraph_reference as ref
from paragraph_reference import corpus
from lshbloom_udf.errors import ConfigError, DedupInputError
from lshbloom_udf.minhash import normalization_mask
from lshbloom_udf.spark import deduplicate


def _frame(spark, texts):
    return spark.createDataFrame(list(enumerate(texts)), "id long, text string").repartition(1).sortWithinPartitions("id")


def _kept_reference(spark, texts, separator="newline"):
    """The document decisions without paragraphs, and the reference's removed paragraphs of the kept ones."""
    plain = {r.id: r.is_duplicate for r in deduplicate(_frame(spark, texts), id_col="id", order_by="id",
                                                         progress=False).collect()}
    kept = [i for i in range(len(texts)) if not plain[i]]
    removed = ref.decide([texts[i] for i in kept], separator, normalization_mask(
        "dehyphen,nfkc,lower,punct"))
    return plain, dict(zip(kept, removed))


def test_annotate_spans_and_remove_text_are_the_references(spark):
    texts = corpus(200)
    plain, removed = _kept_reference(spark, texts)
    assert sum(map(len, removed.values())) >= 20
    annotated = {r.id: r for r in deduplicate(_frame(spark, texts), id_col="id", order_by="id", paragraphs="annotate",
                                              progress=False).collect()}
    out, summary = deduplicate(_frame(spark, texts), id_col="id", order_by="id", paragraphs="remove",
                               progress=False, return_summary=True)
    stripped = {r.id: r for r in out.collect()}
    emptied = 0
    for i, text in enumerate(texts):
        a, s = annotated[i], stripped[i]
        if plain[i]:  # a duplicate document: removed whole, its paragraphs not decided
            assert a.is_duplicate and a.removed_paragraphs == [] and a.paragraphs_removed == 0
            assert s.text == text
            continue
        spans = ref.spans(text, "newline")
        want = [list(spans[j]) for j in removed[i]]
        assert a.removed_paragraphs == want and a.paragraphs_removed == len(want)
        assert [text[x:y] for x, y in a.removed_paragraphs] == [text[x:y] for x, y in want]  # byte-exact spans
        assert s.text == ref.removed_text(text, "newline", removed[i]) and s.paragraphs_removed == len(want)
        keyed = [j for j, (x, y) in enumerate(spans) if ref.units(text[x:y], normalization_mask("dehyphen,nfkc,lower,punct"), 1, 0)]
        gone = bool(keyed) and set(keyed) <= set(removed[i])
        emptied += gone
        assert a.is_duplicate == gone and s.is_duplicate == gone
    assert emptied >= 1
    part = summary["paragraphs"]
    assert part["removed"] == sum(map(len, removed.values())) and part["emptied_documents"] == emptied
    assert part["documents"] == len(removed) and summary["duplicates"] == sum(plain.values()) + emptied


def test_filter_mode_drops_the_emptied_documents(spark):
    texts = ["Intro line one\nBody alpha beta gamma", "Intro line one\nBody alpha beta gamma delta epsilon zeta eta",
             "Intro line one", "Something new entirely\nIntro line one"]
    rows = deduplicate(_frame(spark, texts), id_col="id", mode="filter", paragraphs="remove", verify=False,
                       exact_copies=False, threshold=0.95, progress=False).orderBy("id").collect()
    assert [(r.id, r.text, r.paragraphs_removed) for r in rows] == [
        (0, texts[0], 0), (1, "Body alpha beta gamma delta epsilon zeta eta", 1), (3, "Something new entirely", 1)]


@pytest.mark.parametrize("settings,message", [
    ({"paragraphs": "remove", "mode": "duplicates"}, "mode 'duplicates'"),
    ({"paragraphs": "annotate", "pass_mode": "sharded"}, "pass_mode 'driver'"),
    ({"paragraphs": "remove", "duplicate_of": True}, "duplicate_of"),
    ({"paragraphs": "remove", "paragraph_overlap": 1.5}, "paragraph_overlap must be in"),
    ({"paragraphs": "sometimes"}, "paragraphs must be one of"),
])
def test_bad_paragraph_settings_are_named(spark, settings, message):
    with pytest.raises((ConfigError, DedupInputError), match=message):
        deduplicate(_frame(spark, ["a"]), **settings)


def _annotated(spark, texts, first_id, **settings):
    df = spark.createDataFrame([(first_id + i, t) for i, t in enumerate(texts)], "id long, text string")
    out, summary = deduplicate(df.repartition(1).sortWithinPartitions("id"), id_col="id", order_by="id",
                               progress=False, return_summary=True, **{"paragraphs": "annotate", **settings})
    return {r.id: r for r in out.collect()}, summary


def test_a_kept_index_decides_paragraphs_keep_first_across_runs(spark, tmp_path):
    """Two runs into one --index-dir: the second's paragraphs are decided against the first's (the kept filter),
    keep-first over both runs' kept documents as the reference decides; the same input again is reproduced."""
    from lshbloom_udf.errors import IndexCorruptError, IndexMismatchError
    from lshbloom_udf.index import IndexTransaction

    texts, index = corpus(200), str(tmp_path / "index")
    first, s1 = _annotated(spark, texts[:100], 0, index_dir=index)
    second, s2 = _annotated(spark, texts[100:], 100, index_dir=index)
    rows = {**first, **second}
    kept = [i for i in range(len(texts)) if not rows[i].is_duplicate or rows[i].removed_paragraphs]
    removed = dict(zip(kept, ref.decide([texts[i] for i in kept], "newline",
                                        normalization_mask("dehyphen,nfkc,lower,punct"))))
    mask = normalization_mask("dehyphen,nfkc,lower,punct")

    def keys(k):
        return [tuple(ref.units(texts[k][x:y], mask, 1, 0)) for x, y in ref.spans(texts[k], "newline")]

    for i in kept:
        spans = ref.spans(texts[i], "newline")
        assert rows[i].removed_paragraphs == [list(spans[j]) for j in removed[i]]
    # Paragraphs of the second run whose first occurrence is in the first run only: the kept filter removed them.
    earlier = {u for k in kept if k < 100 for u in keys(k) if u}
    across = sum(any(keys(i)[j] in earlier for j in removed[i]) for i in kept if i >= 100)
    assert across >= 5, "the corpus has too few paragraphs repeated across the runs to test the kept filter"
    assert s2["paragraphs"]["removed"] == sum(len(removed[i]) for i in kept if i >= 100)
    again, s3 = _annotated(spark, texts[100:], 100, index_dir=index)
    assert again == second and s3["index"]["reproduced_from"] == s2["index"]["run_id"] == "000002"
    with IndexTransaction(index) as txn:
        checked = txn.verify()
        runs = txn.runs()
    assert checked["paragraph_band_files"] >= 1 and [r.paragraphs["removed"] for r in runs] == [
        s1["paragraphs"]["removed"], s2["paragraphs"]["removed"]]
    with pytest.raises(IndexMismatchError, match="paragraph filter keys 'paragraphs/newline/min1/exact'"):
        _annotated(spark, texts[:10], 500, index_dir=index, paragraph_separator="blank")
    with pytest.raises(DedupInputError, match="without paragraphs"):  # ingested with paragraphs off: reproduced
        plain = str(tmp_path / "plain")
        _annotated(spark, texts[:1], 0, index_dir=plain, paragraphs="off")
        _annotated(spark, texts[:1], 0, index_dir=plain)
    band = next((tmp_path / "index" / "paragraphs").glob("band-*"))  # one flipped bit is named by the full check
    data = bytearray(band.read_bytes())
    data[-1] ^= 1
    band.write_bytes(bytes(data))
    with pytest.raises(IndexCorruptError, match=f"{band.name}"), IndexTransaction(index) as txn:
        txn.verify()


@pytest.mark.parametrize("mode", ["remove", "annotate"])
def test_a_stream_removes_what_batch_runs_remove_and_a_replay_gets_it_back(spark, tmp_path, mode):
    """StreamDedup with paragraphs: each micro-batch's output is the batch run's into an index of its own; a batch
    Spark replays (its rows in another order and partitioning) gets its removed paragraphs back, deciding nothing."""
    from lshbloom_udf.index import IndexTransaction
    from lshbloom_udf.spark.streaming import StreamDedup

    texts = corpus(120)
    batches = [[(f"d{i:03d}", i, texts[i]) for i in range(a, a + 40)] for a in (0, 40, 80)]
    schema = "id string, seq long, text string"
    got: list = []
    index = str(tmp_path / "index")
    writer = StreamDedup(index, sink=lambda df, batch: got.append(sorted(df.collect())), query_id="q",
                         id_col="id", paragraphs=mode, progress=False)
    reference = []
    for number, rows in enumerate(batches):
        writer(spark.createDataFrame(rows, schema).repartition(1), number)
        batch_run = deduplicate(spark.createDataFrame(rows, schema).repartition(1), id_col="id", order_by="seq",
                                index_dir=str(tmp_path / "reference"), paragraphs=mode, progress=False)
        reference.append(sorted(batch_run.collect()))
    assert got == reference
    assert sum(r.paragraphs_removed for r in got[1] + got[2]) >= 5
    with IndexTransaction(index) as txn:
        before = txn.manifest()
    writer(spark.createDataFrame(list(reversed(batches[1])), schema).repartition(3), 1)
    assert got[-1] == got[1] and list(writer.progress)[-1]["replayed"]
    with IndexTransaction(index) as txn:
        assert txn.manifest() == before


def test_null_empty_binary_and_huge_texts_keep_every_row(spark):
    """Bad input is handled as the document pass handles it: null and empty texts are kept untouched, text with
    NULs and control characters is cut and keyed like any other, a 4 MB one-line paragraph of one character is one
    paragraph (and its MinHash linear: native/src/minhash/poisson.rs); every row comes back, and the repeats among
    them are removed as the reference removes them."""
    huge = "x" * (4 << 20)
    binary = "\x00\x01 header \x7f\nbody \ufffd\x00 line"
    texts = [None, "", binary, "top line\n" + huge, "\n\n\n", binary.split("\n")[0] + "\nother words here",
             "new start\n" + huge, None]
    rows = {r.id: r for r in deduplicate(_frame(spark, texts), id_col="id", order_by="id", paragraphs="annotate",
                                         progress=False).collect()}
    assert sorted(rows) == list(range(len(texts)))
    assert [rows[i].text for i in range(len(texts))] == texts
    assert rows[0].removed_paragraphs == [] and rows[1].removed_paragraphs == [] and rows[7].paragraphs_removed == 0
    kept = [i for i in range(len(texts)) if texts[i] and not (rows[i].is_duplicate and not rows[i].paragraphs_removed)]
    removed = dict(zip(kept, ref.decide([texts[i] for i in kept], "newline",
                                        normalization_mask("dehyphen,nfkc,lower,punct"))))
    for i in kept:
        spans = ref.spans(texts[i], "newline")
        assert rows[i].removed_paragraphs == [list(spans[j]) for j in removed[i]], i
    assert rows[5].removed_paragraphs == [[0, len(binary.split("\n")[0])]]  # the binary header line, seen in row 2
