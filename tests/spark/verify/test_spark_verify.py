"""verify=True and duplicate_of: the pass's flags checked with exact Jaccard against earlier kept documents.

References are computed here in plain Python from the contract: the band keys
(``text_band_keys``), the pass's flags of the same run without verification,
and the shingle sets (``reference_shingles``).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from pyspark.sql import types as T

from lshbloom_udf import deduplicate
from lshbloom_udf.config import DedupConfig
from lshbloom_udf.errors import ConfigError, DedupInputError
from evaluation import generator as G
from evaluation.baselines import reference_shingles
from evaluation.synthetic import synthetic_sources
from lshbloom_udf.minhash import text_band_keys
from lshbloom_udf.spark.verify.spark_source import PairBloom
from spark_support import ROOT
from verify_support import reference_verify as support_verify

# reference_verify is the rule over a keep-first pass, Jaccard only, with word shingles: the settings before the
# multilingual defaults, spelled out (verify_threshold None: the threshold); the plain runs give the pass's own flags.
WORDS = dict(shingle="words", ngram=4, normalize="all", threshold=0.45, num_perm=512, scheme="affine32",
             containment_threshold=None, verify_threshold=None)


def dedup(df, **settings):
    """``deduplicate`` over WORDS, unverified unless asked; a driver pass keeps its keep-first rule under verification,
    as in the plain run."""
    kw = {"verify": False, **WORDS, **settings}
    if kw.get("pass_mode") != "sharded":
        kw.setdefault("insert", "first")
    return deduplicate(df, **kw)


def words_config(**settings) -> DedupConfig:
    return DedupConfig().replace(**{**WORDS, **settings})

SCHEMA = T.StructType([T.StructField("pos", T.LongType()), T.StructField("id", T.StringType()),
                       T.StructField("text", T.StringType()), T.StructField("source", T.StringType())])


@pytest.fixture(scope="module")
def pool():
    sources, _ = G.prepare_sources(synthetic_sources(260, seed=3), min_words=50)
    return sources


def stream_frame(spark, pool, n: int, level: float, seed: int, partitions: int = 3):
    """A generated stream with known sources, in input order over ``partitions`` partitions."""
    st = G.make_stream(pool, n, level, seed=seed)
    rows = [(i, d.id, d.text, d.source) for i, d in enumerate(st.docs)]
    return spark.createDataFrame(rows, SCHEMA).coalesce(1).repartitionByRange(partitions, "pos").sortWithinPartitions("pos"), rows


def jaccard(a: str, b: str, config: DedupConfig) -> float:
    sa, sb = (reference_shingles(t, config.ngram, config.normalize) for t in (a, b))
    return len(sa & sb) / len(sa | sb)


def reference_verify(texts, pass_flags, config: DedupConfig, threshold: float) -> dict:
    """position of each flag verification keeps -> (the kept position it names, Jaccard): the module's rule.

    Round 1: the earliest earlier pass-kept document sharing a (band, key) with
    Jaccard >= threshold. Else, in processing order: the earliest earlier document
    that verification unflagged and that stays kept, sharing a key, Jaccard >= threshold; each round among the
    candidates the product's bounds choose (verify_support.Bounds).
    """
    keys, active = text_band_keys(texts, **config.index_params().signature_kwargs())
    pairs = [{(band, int(k)) for band, k in enumerate(row)} if has else set() for row, has in zip(keys, active)]
    sets = [reference_shingles(t, config.ngram, config.normalize) for t in texts]
    verdicts = support_verify(sets, pairs, [bool(f) for f in pass_flags], threshold, None)
    return {i: (v.of, v.similarity) for i, v in verdicts.items()}


# Permissive candidates: bands for T = 0.3 (and fewer permutations: a wider S-curve), verified at 0.45.
PERMISSIVE = dict(threshold=0.3, num_perm=128)


# The sharded pass's any-earlier flags, verified by the same rule (its kept documents' keys are unique too).
SHARDED = dict(PERMISSIVE, pass_mode="sharded")


@pytest.mark.parametrize("level,settings", [(0.1, {}), (0.5, {}), (0.9, {}), (0.1, PERMISSIVE), (0.5, PERMISSIVE),
                                            (0.5, SHARDED)])
@pytest.mark.slow
def test_verified_flags_and_duplicate_of_equal_the_reference(spark, pool, level, settings):
    df, rows = stream_frame(spark, pool, 240, level, seed=5)
    texts = [r[2] for r in rows]
    config = words_config(**settings)
    t_verify = 0.45
    plain = {r["pos"]: r["is_duplicate"] for r in dedup(df, id_col="id", progress=False, **settings).collect()}
    out, summary = dedup(df, id_col="id", verify=True, duplicate_of=True, progress=False, return_summary=True,
                               verify_threshold=t_verify, **settings)
    got = {r["pos"]: r for r in out.collect()}
    assert len(got) == len(rows)
    pass_flags = np.array([plain[i] for i in range(len(rows))])
    expected = reference_verify(texts, pass_flags, config, t_verify)
    if settings:
        assert len(expected) < pass_flags.sum()  # the S-curve below 0.45 flagged some: verification removes them
    flagged = {i for i, r in got.items() if r["is_duplicate"]}
    assert flagged == set(expected)
    assert flagged <= {i for i, f in plain.items() if f}  # verification never adds a flag
    pos_of = {r[1]: r[0] for r in rows}
    for i in flagged:
        r = got[i]
        c, j = expected[i]
        assert pos_of[r["duplicate_of"]] == c and not got[c]["is_duplicate"] and c < i
        assert r["similarity"] == pytest.approx(j, abs=1e-12) and r["similarity"] >= t_verify
    assert all(r["duplicate_of"] is None and r["similarity"] is None for i, r in got.items() if i not in flagged)
    v = summary["verify"]
    assert (v["pass_flagged"], v["kept_flagged"], summary["duplicates"]) == (int(pass_flags.sum()), len(flagged), len(flagged))
    # The bar: duplicate_of names a kept document of the same source for >= 99 % of the true positives.
    true_pos = [i for i in flagged if rows[i][3] in {rows[k][3] for k in range(i)}]
    same = [i for i in true_pos if rows[pos_of[got[i]["duplicate_of"]]][3] == rows[i][3]]
    assert len(true_pos) > 0 and len(same) >= 0.99 * len(true_pos)


def colliding_pair(config: DedupConfig) -> tuple[str, str, float]:
    """Two texts below the threshold that share a band key (a search over random token replacements)."""
    rng = random.Random(7)
    base = [f"w{i}" for i in range(20)]
    a = " ".join(base)
    kw = config.index_params().signature_kwargs()
    ka, _ = text_band_keys([a], **kw)
    for t in range(2000):
        toks = list(base)
        for j in rng.sample(range(20), 12):
            toks[j] = f"x{t}_{j}"
        b = " ".join(toks)
        kb, _ = text_band_keys([b], **kw)
        if (ka == kb).any() and jaccard(a, b, config) < config.threshold:
            return a, b, jaccard(a, b, config)
    raise AssertionError("no colliding pair found")


SMALL = dict(threshold=0.5, num_perm=16, bands=(8, 2), ngram=1, normalize="none")


def test_a_pair_below_the_threshold_that_collides_in_a_band_is_unflagged(spark):
    config = words_config(**SMALL)
    a, b, j = colliding_pair(config)
    assert j < 0.5
    near = a.replace("w3", "v3")  # Jaccard 19/21 with a: a true duplicate, stays flagged
    df = spark.createDataFrame([(0, "a", a), (1, "b", b), (2, "n", near)], "pos long, id string, text string").coalesce(1)
    plain = [r["is_duplicate"] for r in dedup(df, id_col="id", progress=False, **SMALL).orderBy("pos").collect()]
    assert plain == [False, True, True]
    out = dedup(df, id_col="id", progress=False, verify=True, duplicate_of=True, **SMALL).orderBy("pos").collect()
    assert [r["is_duplicate"] for r in out] == [False, False, True]
    assert (out[2]["duplicate_of"], out[2]["similarity"]) == ("a", pytest.approx(19 / 21))
    # A permissive candidate stage: a lower banding threshold, the same verified threshold.
    strict = dedup(df, id_col="id", progress=False, verify=True, verify_threshold=0.95, **SMALL)
    assert [r["is_duplicate"] for r in strict.orderBy("pos").collect()] == [False, False, False]


def test_without_an_id_column_duplicate_of_is_a_row_id(spark, pool):
    df, rows = stream_frame(spark, pool, 120, 0.5, seed=8)
    out = dedup(df, verify=True, duplicate_of=True, progress=False).collect()
    assert [r["pos"] for r in out] == list(range(len(rows)))  # the input's order, every row once
    by_row = {r["row_id"]: r for r in out}
    assert len(by_row) == len(out)
    flagged = [r for r in out if r["is_duplicate"]]
    assert flagged
    for r in flagged:
        kept = by_row[r["duplicate_of"]]
        assert not kept["is_duplicate"] and kept["pos"] < r["pos"]
        assert r["similarity"] == pytest.approx(jaccard(r["text"], kept["text"], words_config()), abs=1e-12)
    dups = dedup(df, verify=True, duplicate_of=True, mode="duplicates", progress=False).collect()
    assert sorted((r["pos"], r["duplicate_of"]) for r in dups) == sorted((r["pos"], r["duplicate_of"]) for r in flagged)


@pytest.mark.slow
def test_an_earlier_runs_duplicates_name_their_source_from_its_records(spark, pool, tmp_path):
    """An earlier run's texts are not stored, but its records are (docs/algorithm.md, "A kept index across runs"):
    a flag only an earlier run's document explains is verified on the records' estimates and names it."""
    st = G.make_stream(pool, 200, 0.5, seed=9)
    first = [d for d in st.docs[:100]]
    second = [d for d in st.docs[100:]]
    idx = str(tmp_path / "index")
    frame = lambda docs, off: spark.createDataFrame(  # noqa: E731
        [(off + i, d.id, d.text, d.source) for i, d in enumerate(docs)], SCHEMA).coalesce(1)
    kept_first = {r["id"] for r in dedup(frame(first, 0), id_col="id", index_dir=idx, progress=False).collect()
                  if not r["is_duplicate"]}
    source_of = {d.id: d.source for d in first}
    settings = dict(id_col="id", index_dir=idx, progress=False, verify=True, duplicate_of=True)
    out, summary = dedup(frame(second, 100), return_summary=True, **settings)
    got = out.orderBy("pos").collect()
    this_run_kept: set = set()
    earlier = 0
    for r in got:
        if r["is_duplicate"] and r["duplicate_of"] in kept_first:  # an earlier run's document, from its records
            earlier += 1
            assert source_of[r["duplicate_of"]] == r["source"] and r["similarity"] >= WORDS["threshold"]
        elif r["is_duplicate"]:
            assert r["duplicate_of"] in this_run_kept and r["similarity"] >= WORDS["threshold"]
        else:
            this_run_kept.add(r["id"])
    assert earlier > 0 and summary["verify"]["unverifiable"] == 0
    assert summary["verify"]["cross_run"]["verified"] == earlier
    # The same input again reproduces the run (its pass's flags are stored) and verifies them the same way.
    again = dedup(frame(second, 100), **settings).orderBy("pos").collect()
    assert again == got


def test_settings_that_need_verify_or_cannot_show_sources(spark):
    with pytest.raises(ConfigError, match="duplicate_of needs verify"):
        DedupConfig().replace(verify=False, duplicate_of=True)
    with pytest.raises(ConfigError, match="verify_threshold needs verify"):
        DedupConfig().replace(verify=False, verify_threshold=0.5)
    with pytest.raises(ConfigError, match="mode 'filter'"):
        DedupConfig().replace(verify=True, duplicate_of=True, mode="filter")
    df = spark.createDataFrame([("a", "x y", 0.5)], "id string, text string, similarity double")
    with pytest.raises(DedupInputError, match="similarity"):
        dedup(df, id_col="id", verify=True, duplicate_of=True, progress=False)
    # filter mode with verify alone is fine: the rows verification keeps flagged are removed
    assert dedup(df.drop("similarity"), verify=True, mode="filter", progress=False).count() == 1


def test_the_transformer_verifies(spark, pool):
    from lshbloom_udf.ml import LSHBloomDeduplicator

    df, rows = stream_frame(spark, pool, 80, 0.5, seed=4)
    t = LSHBloomDeduplicator(idCol="id", verify=True, duplicateOf=True, progress=False)
    out = t.transform(df)
    assert {"is_duplicate", "duplicate_of", "similarity"} <= set(out.columns)
    api = deduplicate(df, id_col="id", verify=True, duplicate_of=True, progress=False)
    assert sorted(map(tuple, out.collect())) == sorted(map(tuple, api.collect()))


def test_pair_bloom_has_no_false_negatives_and_few_false_positives():
    rng = np.random.default_rng(3)
    inserted = rng.integers(0, 2**63, 20_000, dtype=np.uint64)
    bloom = PairBloom(len(inserted))
    bloom.add(inserted)
    assert bloom.contains(inserted).all()
    others = rng.integers(0, 2**63, 200_000, dtype=np.uint64)
    assert bloom.contains(others).mean() < 0.01  # (1 - e^{-4/12})^4 = 0.65 % at 12 bits per pair


def test_the_job_takes_verify_and_writes_duplicate_of(spark, pool, tmp_path, capsys):
    import importlib.util
    import json
    import os

    path = os.path.join(ROOT, "spark_jobs", "dedup.py")
    spec = importlib.util.spec_from_file_location("lshbloom_dedup_job_verify", path)
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    st = G.make_stream(pool, 60, 0.5, seed=2)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": d.id, "text": d.text}) + "\n" for d in st.docs))
    out = str(tmp_path / "out")
    base = ["--input", str(src), "--output", out, "--output-format", "json", "--id-column", "id", "--quiet"]
    with pytest.raises(SystemExit) as exc:
        job.main(base + ["--no-verify", "--duplicate-of"])
    assert exc.value.code == 2 and "duplicate_of needs verify" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        job.main(base + ["--verify", "--duplicate-of", "--verify-threshold", "0.5"])
    assert exc.value.code == 0, capsys.readouterr().err
    with open(out + ".summary.json") as f:
        summary = json.load(f)
    assert summary["verify"]["threshold"] == 0.5 and summary["duplicates"] == summary["verify"]["kept_flagged"]
    rows = spark.read.json(out).collect()
    ids = {r["id"] for r in rows if not r["is_duplicate"]}
    flagged = [r for r in rows if r["is_duplicate"]]
    assert len(flagged) == summary["duplicates"] > 0
    assert all(r["duplicate_of"] in ids and r["similarity"] >= 0.5 for r in flagged)


def test_a_document_verification_unflagged_is_kept_and_verifies_later_ones(spark):
    """b collides with a below T (unflagged, so kept); y, a near-copy of b, collides with a too: b verifies it."""
    config = words_config(**SMALL)
    a, b, _ = colliding_pair(config)
    kw = config.index_params().signature_kwargs()
    ka = text_band_keys([a], **kw)[0]
    toks = b.split()
    for pos in range(len(toks)):
        y = " ".join(toks[:pos] + ["y"] + toks[pos + 1:])
        if (text_band_keys([y], **kw)[0] == ka).any() and jaccard(y, a, config) < 0.5:
            break
    else:
        raise AssertionError("no near-copy of b colliding with a")
    assert jaccard(y, b, config) >= 0.5
    df = spark.createDataFrame([(0, "a", a), (1, "b", b), (2, "y", y)], "pos long, id string, text string").coalesce(1)
    plain = [r["is_duplicate"] for r in dedup(df, id_col="id", progress=False, **SMALL).orderBy("pos").collect()]
    assert plain == [False, True, True]
    out, summary = dedup(df, id_col="id", progress=False, verify=True, duplicate_of=True, return_summary=True,
                               **SMALL)
    out = out.orderBy("pos").collect()
    assert [(r["is_duplicate"], r["duplicate_of"]) for r in out] == [(False, None), (False, None), (True, "b")]
    assert out[2]["similarity"] == pytest.approx(jaccard(y, b, config))
    assert summary["verify"]["unflagged"] == 1


@pytest.mark.parametrize("settings", [{}, PERMISSIVE])
def test_the_studys_verification_is_the_jobs_rule(pool, settings):
    """lshbloom_udf.evaluation.study.verified (one process, for the F1 study) decides as the reference here."""
    from evaluation.baselines import lshbloom_decisions
    from evaluation.study.verified import shingle_sets, verify_decisions

    st = G.make_stream(pool, 240, 0.5, seed=6)
    texts = [d.text for d in st.docs]
    config = words_config(**settings)
    params = config.index_params(capacity=len(texts))
    keys, has = text_band_keys(texts, **params.signature_kwargs())
    flags = lshbloom_decisions(keys, has, params).duplicate
    expected = reference_verify(texts, flags, config, 0.45)
    got = verify_decisions(keys, has, flags, shingle_sets(texts, config), 0.45)
    assert set(np.flatnonzero(got).tolist()) == set(expected)
