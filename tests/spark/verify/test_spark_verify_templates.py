"""template_max_df: a Jaccard-only match below 0.6 must also reach J' >= 0.3 without the template shingles.

The reference (tests/verify_support.py) is exact and set-based: the default shingles in plain Python
(evaluation/shingling.py), the pass's flags over the band keys with sets for Bloom filters, both rounds of
verification, and the template shingles counted over the documents the pass kept (all of them: the streams here
keep fewer than the sample's 1024). The stream: a family of pages made from one template (two with a small body,
whose pair has J 0.4-0.6 and C < 0.7; ten with large bodies), noisy copies (OCR-like letter edits, J 0.4-0.6),
a near-copy of a templated page, and unrelated documents.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from pyspark.sql import types as T
from verify_support import Template, band_keys, jaccard, pass_flags, reference_verify, template_family

from evaluation.shingling import Shingling, shingles
from lshbloom_udf import _native, deduplicate
from lshbloom_udf.config import DedupConfig, load_config
from lshbloom_udf.errors import ConfigError

SCHEMA = T.StructType([T.StructField("pos", T.LongType()), T.StructField("id", T.StringType()),
                       T.StructField("text", T.StringType()), T.StructField("kind", T.StringType())])
DEFAULT_SHINGLES = Shingling("mixed", 11, ("dehyphen", "nfkc", "lower", "punct"))
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def templated_stream(seed: int) -> list[tuple[str, str]]:
    """(text, kind) documents, in processing order (the module's docs)."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice(LETTERS) for _ in range(rng.randint(3, 9))) for _ in range(3000)]

    def words(n: int) -> str:
        return " ".join(rng.choice(vocab) for _ in range(n))

    def noisy(text: str, rate: float) -> str:
        return "".join(rng.choice(LETTERS) if c != " " and rng.random() < rate else c for c in text)

    head, foot = words(70), words(70)
    page = [f"{head}\n{words(n)}\n{foot}" for n in [70] + [800] * 10 + [70]]
    sources = [words(250) for _ in range(4)]
    docs = [(page[0], "sibling"), (words(200), "unrelated"), *[(p, "family") for p in page[1:11]]]
    for s in sources:
        docs += [(s, "source"), (words(150), "unrelated")]
    docs += [(noisy(s, 0.04), "noisy_copy") for s in sources]
    docs += [(page[11], "sibling"), (noisy(page[0], 0.005), "near_copy"), (words(200), "unrelated")]
    return docs


def frame(spark, docs, partitions: int = 3):
    rows = [(i, f"d{i}", text, kind) for i, (text, kind) in enumerate(docs)]
    return spark.createDataFrame(rows, SCHEMA).coalesce(1).repartitionByRange(partitions, "pos").sortWithinPartitions(
        "pos"), rows


@pytest.fixture(scope="module")
def stream():
    return templated_stream(11)


def reference(texts, config: DedupConfig, template):
    pairs, active = band_keys(texts, config)
    flags = pass_flags(pairs, active, config.insert_rule)
    sets = [shingles(t, DEFAULT_SHINGLES) for t in texts]
    return flags, sets, reference_verify(sets, pairs, flags, config.verify_threshold, config.containment_threshold,
                                         config.containment_min_jaccard, template)


def run(spark, docs, **settings):
    df, rows = frame(spark, docs)
    out, summary = deduplicate(df, id_col="id", duplicate_of=True, progress=False, return_summary=True, **settings)
    return {r["pos"]: r for r in out.collect()}, summary, rows


def test_the_stream_has_what_the_rule_is_about(stream):
    """The sibling pair matches by Jaccard alone below 0.6; the noisy copies too, with their own shingles."""
    sets = [shingles(t, DEFAULT_SHINGLES) for t, _ in stream]
    sib = [i for i, (_, kind) in enumerate(stream) if kind == "sibling"]
    d, e = sets[sib[1]], sets[sib[0]]
    assert 0.4 <= jaccard(d, e) < 0.6 and len(d & e) < 0.7 * len(d)
    of_kind = {k: [i for i, (_, kind) in enumerate(stream) if kind == k] for k in ("source", "noisy_copy")}
    for src, copy in zip(of_kind["source"], of_kind["noisy_copy"]):
        assert 0.4 <= jaccard(sets[copy], sets[src]) < 0.6


@pytest.mark.parametrize("max_df", [5, 0, 3])
def test_flags_and_sources_equal_the_exact_reference(spark, stream, max_df):
    got, summary, rows = run(spark, stream, template_max_df=max_df)
    config = DedupConfig().replace(template_max_df=max_df)
    flags, sets, expected = reference([r[2] for r in rows], config, Template(max_df) if max_df else None)
    assert {i for i, r in got.items() if r["is_duplicate"]} == set(expected)
    for i, v in expected.items():
        assert got[i]["duplicate_of"] == f"d{v.of}"
        assert got[i]["similarity"] == pytest.approx(v.similarity, abs=1e-12)
        assert got[i]["similarity_measure"] == v.measure
    kinds = {i: r[3] for i, r in enumerate(rows)}
    later_sibling = max(i for i, k in kinds.items() if k == "sibling")
    assert flags[later_sibling]  # the bands propose the sibling pair: verification decides it
    assert all(i in expected for i, k in kinds.items() if k in ("noisy_copy", "near_copy"))
    template = summary["verify"]["template"]
    if max_df:
        assert later_sibling not in expected
        assert template["sampled"] == flags.count(False) and template["refused_pairs"] >= 1
        assert template["template_shingles"] > 0
    else:
        assert later_sibling in expected and template is None


@pytest.mark.parametrize("settings", [dict(verify_driver_bytes=0), dict(pass_mode="sharded")],
                         ids=["similarities-on-executors", "sharded-pass"])
@pytest.mark.slow
def test_every_candidate_path_applies_the_rule(spark, stream, settings):
    """Texts over the driver's budget (pairs computed on the executors, the suspects' texts read apart) and the
    sharded pass (candidates by Spark joins, no spool) decide as the reference too."""
    got, summary, rows = run(spark, stream, **settings)
    config = DedupConfig().replace(**settings)
    _, _, expected = reference([r[2] for r in rows], config, Template(5))
    assert {i for i, r in got.items() if r["is_duplicate"]} == set(expected)
    assert {i: got[i]["duplicate_of"] for i in expected} == {i: f"d{v.of}" for i, v in expected.items()}
    assert summary["verify"]["template"]["refused_pairs"] >= 1


def test_the_rule_refuses_only_what_it_must(spark, stream):
    """Without the rule the sibling is flagged by Jaccard; with it, only that flag goes."""
    on, _, _ = run(spark, stream)
    off, _, _ = run(spark, stream, template_max_df=0)
    gone = {i for i, r in off.items() if r["is_duplicate"]} - {i for i, r in on.items() if r["is_duplicate"]}
    assert {stream[i][1] for i in gone} == {"sibling"}
    assert {i for i, r in on.items() if r["is_duplicate"]} <= {i for i, r in off.items() if r["is_duplicate"]}


def test_a_run_keeping_more_than_the_sample_samples_its_kept_documents(spark, monkeypatch):
    """Past SAMPLE kept documents, exactly SAMPLE of them are read, never a flagged one, the same ones each time, and
    the same ones whether the driver pass noted the candidates or a scan found them (the driver's row hash is
    Spark's xxhash64)."""
    from pyspark.sql import functions as F

    from lshbloom_udf.spark.verify import templates as vt
    from lshbloom_udf.spark.keys import row_id
    from lshbloom_udf.spark.verify.texts import TextsSource

    monkeypatch.setattr(vt, "SAMPLE", 60)
    docs = [(f"document number {i} " * 3, "doc") for i in range(600)]
    df, _ = frame(spark, docs)
    pinned = df.select("pos", "text", row_id()).cache()
    got = pinned.select("_lshb_row", F.xxhash64("_lshb_row").alias("h"), "text").collect()
    ids = np.array([r[0] for r in got], np.int64)
    assert vt.row_hashes(ids).view(np.int64).tolist() == [r[1] for r in got]
    flagged = np.sort(ids)[::3]
    source = TextsSource(pinned, "text", documents=600)
    first, top_up = source.sample_texts(flagged, 10)
    assert (first, top_up) == source.sample_texts(flagged, 10) and len(first) == 60 and len(top_up) == 10
    text_of = {r[0]: r[2] for r in got}
    noted = vt.sample_candidates(np.sort(ids), vt.sample_below(600))  # what a driver pass notes, chunk by chunk
    assert first == [text_of[r] for r in vt.kept_sample(noted, flagged).tolist()]
    assert top_up == [text_of[r] for r in vt.flagged_sample(noted, flagged, 10).tolist()]
    assert not set(first) & {text_of[r] for r in flagged.tolist()}
    assert set(top_up) <= {text_of[r] for r in flagged.tolist()}
    monkeypatch.setattr(vt, "SAMPLE", 600)
    assert sorted(source.sample_texts(np.zeros(0, np.int64), 10)[0]) == sorted(d for d, _ in docs)


def test_hash_sets_count_what_the_shingle_sets_hold():
    """|H_a ∩ H_b| = |S_a ∩ S_b| and |H_a| = |S_a|, on any thread count (xxh3-64: no collision among these)."""
    texts = [t for t, _ in templated_stream(4)] + [None, "", "文档 去重 测试文本 " * 5]
    for unit, n, mask in (("mixed", 11, 15), ("words", 4, 7), ("chars", 5, 0)):
        hashes, offsets = _native.shingle_hash_sets(texts, n, mask, unit, 1)
        sets = [set(_native.shingles(t, n, mask, unit)) for t in texts]
        h = [hashes[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
        assert [len(x) for x in h] == [len(s) for s in sets]
        assert all(np.all(np.diff(x.astype(np.float64)) > 0) for x in h if len(x) > 1)
        for a, b in [(0, 11), (0, len(texts) - 4), (3, 5)]:
            assert len(np.intersect1d(h[a], h[b])) == len(sets[a] & sets[b])
        for threads in (2, 7):
            again = _native.shingle_hash_sets(texts, n, mask, unit, threads)
            assert np.array_equal(again[0], hashes) and np.array_equal(again[1], offsets)
    with pytest.raises(ValueError, match="ngram"):
        _native.shingle_hash_sets(["a"], 0)


@pytest.mark.parametrize("value", [1, -1, 2.5, True, "5"])
def test_template_max_df_out_of_range_is_refused(value):
    with pytest.raises(ConfigError, match="template_max_df"):
        DedupConfig().replace(template_max_df=value)


def test_template_max_df_needs_verify_and_is_a_toml_key(tmp_path):
    with pytest.raises(ConfigError, match="template_max_df needs verify"):
        DedupConfig().replace(verify=False, template_max_df=5)
    assert DedupConfig().replace(verify=False, template_max_df=0).template_max_df == 0
    assert DedupConfig.from_preset("paper").template_max_df == 5  # unused there: the paper preset does not verify
    path = tmp_path / "c.toml"
    path.write_text("[dedup]\ntemplate_max_df = 8\n")
    assert DedupConfig().replace(**load_config(str(path))).template_max_df == 8


def test_the_sample_stops_at_its_hash_budget(spark, stream, monkeypatch):
    """Long texts: documents past SAMPLE_HASHES held hashes are not added, and the summary says how many were."""
    from lshbloom_udf.spark.verify import templates as verify_templates

    _, full, _ = run(spark, stream)
    monkeypatch.setattr(verify_templates, "SAMPLE_HASHES", 6000)
    _, capped, _ = run(spark, stream)
    whole, part = (s["verify"]["template"] for s in (full, capped))
    assert 1 <= part["sampled"] < whole["sampled"]


def test_a_run_that_is_one_template_family_tops_the_sample_up(spark, monkeypatch):
    """The pass keeps almost nothing of a family whose siblings match at J 0.4-0.6 (the template is two thirds of
    each page): fewer kept documents than 2 * max_df. The sample is topped up with flagged siblings, the template
    is found, and only the planted copies stay flagged; without the top-up siblings are flagged."""
    from lshbloom_udf.spark.verify import templates as verify_templates

    docs = template_family(40, 3, seed=2, frame=75, body=(90, 110))
    sets = [shingles(t, DEFAULT_SHINGLES) for t, _ in docs]
    pages = [i for i, (_, k) in enumerate(docs) if k == "page"]
    assert max(jaccard(sets[pages[0]], sets[i]) for i in pages[1:]) >= 0.4  # siblings verify by Jaccard alone
    got, summary, _ = run(spark, docs)
    template = summary["verify"]["template"]
    assert template["sampled"] <= 20 and template["topped_up"] > 0 and template["refused_pairs"] > 0
    copies = {i for i, (_, k) in enumerate(docs) if k == "copy"}
    assert {i for i, r in got.items() if r["is_duplicate"]} == copies
    monkeypatch.setattr(verify_templates, "TOP_UP_BELOW", 0)
    without, summary, _ = run(spark, docs)
    assert summary["verify"]["template"]["topped_up"] == 0
    assert {i for i, r in without.items() if r["is_duplicate"]} > copies
