"""containment_threshold: verification keeps a flag when J >= verify_threshold or C >= containment_threshold.

The reference (tests/verify_support.py) is exact and set-based, in plain
Python: shingles, the pass's flags over the band keys with sets for Bloom
filters, and both rounds of verification with the J-or-C rule. The streams are
generated word sequences with truncations, excerpts and section drops keeping
40-90 % of their source, near-exact copies, and unrelated documents.
"""

from __future__ import annotations

import json
import os

import pytest
from pyspark.sql import types as T
from spark_support import ROOT
from verify_support import (band_keys, containment, jaccard, pass_flags, partial_copy_stream, reference_verify,
                            shingles)

from lshbloom_udf import deduplicate
from lshbloom_udf.config import DedupConfig, load_config
from lshbloom_udf.errors import ConfigError

SCHEMA = T.StructType([T.StructField("pos", T.LongType()), T.StructField("id", T.StringType()),
                       T.StructField("text", T.StringType()), T.StructField("kind", T.StringType())])
# Permissive candidates (bands for T = 0.3 with 128 permutations: 40 % copies are candidates), a strict Jaccard
# that partial copies fail, and containment that rescues them.
# The reference's shingles are words (tests/verify_support.py): the unit and size are pinned, and so is the pass's
# rule (any-earlier, what a pass under verification uses by default), so that the plain runs (verify off) give
# the very flags verification starts from.
PERMISSIVE = dict(threshold=0.3, num_perm=128, shingle="words", ngram=4, normalize="all", insert="all")
T_J, T_C = 0.9, 0.8


def frame(spark, docs, partitions: int = 3):
    rows = [(i, f"d{i}", text, kind) for i, (text, kind) in enumerate(docs)]
    df = spark.createDataFrame(rows, SCHEMA).coalesce(1).repartitionByRange(partitions, "pos")
    df = df.sortWithinPartitions("pos")
    return df, rows


def reference(texts, config, t_jaccard, t_containment):
    """(the pass's flags, verdicts) of the exact reference (containment with the config's Jaccard floor)."""
    pairs, active = band_keys(texts, config)
    flags = pass_flags(pairs, active, config.insert_rule)
    sets = [shingles(t, config.ngram, config.normalize) for t in texts]
    return flags, reference_verify(sets, pairs, flags, t_jaccard, t_containment, config.containment_min_jaccard)


@pytest.fixture(scope="module")
def stream():
    return partial_copy_stream(40, seed=11)


def said(texts, i: int, v) -> str:
    """The similarity_measure the run gives flag ``i`` the reference verified by ``v``: ``exact`` for a
    byte-identical copy of its source (exact_copies, docs/algorithm.md §9), else the reference's measure."""
    return "exact" if texts[i] == texts[v.of] else v.measure


@pytest.mark.slow
@pytest.mark.parametrize("settings", [PERMISSIVE, dict(PERMISSIVE, pass_mode="sharded")], ids=["driver", "sharded"])
def test_flags_and_sources_equal_the_exact_reference(spark, stream, settings):
    df, rows = frame(spark, stream)
    texts = [r[2] for r in rows]
    config = DedupConfig().replace(**settings)
    flags, expected = reference(texts, config, T_J, T_C)
    plain = {r["pos"]: r["is_duplicate"] for r in deduplicate(df, id_col="id", progress=False, verify=False,
                                                                **settings).collect()}
    assert [plain[i] for i in range(len(rows))] == flags  # the pass itself, against exact sets
    out, summary = deduplicate(df, id_col="id", verify=True, verify_threshold=T_J, containment_threshold=T_C,
                               duplicate_of=True, progress=False, return_summary=True, **settings)
    got = {r["pos"]: r for r in out.collect()}
    assert len(got) == len(rows)
    flagged = {i for i, r in got.items() if r["is_duplicate"]}
    assert flagged == set(expected)
    assert flagged <= {i for i, f in enumerate(flags) if f}  # verification never adds a flag
    pos_of = {r[1]: r[0] for r in rows}
    for i in flagged:
        r, v = got[i], expected[i]
        assert (pos_of[r["duplicate_of"]], r["similarity_measure"]) == (v.of, said(texts, i, v)), i
        assert r["similarity"] == pytest.approx(v.similarity, abs=1e-12) and not got[v.of]["is_duplicate"]
    assert all(r["duplicate_of"] is None and r["similarity"] is None and r["similarity_measure"] is None
               for i, r in got.items() if i not in flagged)
    # The stream exercises what it is for: containment decides some flags, in both rounds, and Jaccard others.
    by = {(v.measure, v.round) for v in expected.values()}
    assert {("containment", 1), ("jaccard", 1), ("containment", 2)} <= by
    kinds = {rows[i][3] for i, v in expected.items() if v.measure == "containment"}
    assert {"truncation", "excerpt", "section_drop"} <= kinds
    v = summary["verify"]
    assert (v["containment_threshold"], v["kept_flagged"], v["by_containment"]) == (
        T_C, len(flagged), sum(x.measure == "containment" for x in expected.values()))


def test_containment_only_rescues_flags_the_pass_raised(spark, stream):
    """Jaccard only ⊆ Jaccard or containment ⊆ the pass's flags; the difference is exactly the reference's."""
    df, rows = frame(spark, stream)
    texts = [r[2] for r in rows]
    config = DedupConfig().replace(**PERMISSIVE)

    def flags_of(**extra):
        out = deduplicate(df, id_col="id", progress=False, **PERMISSIVE, **extra).collect()
        return {r["pos"] for r in out if r["is_duplicate"]}

    passed = flags_of(verify=False)
    jaccard_only = flags_of(verify=True, verify_threshold=T_J, containment_threshold=None)
    both = flags_of(verify=True, verify_threshold=T_J, containment_threshold=T_C)
    assert jaccard_only < both <= passed
    assert jaccard_only == set(reference(texts, config, T_J, None)[1])
    assert both == set(reference(texts, config, T_J, T_C)[1])


def _words(n: int, offset: int = 0) -> list[str]:
    return [f"t{(7 * i + offset) % 997}" for i in range(n)]


def test_the_measure_column_names_what_decided(spark):
    """A truncation below verify_threshold: containment (1.0); a near-exact copy: jaccard (both pass)."""
    words = _words(100)
    source, truncated = " ".join(words), " ".join(words[:55])
    near = " ".join(words[:50] + ["changed"] + words[51:])
    tiny = " ".join(words[20:30])  # inside the source (C = 1) but J = 7/97: the bands do not propose it
    texts = [source, truncated, near, tiny]
    config = DedupConfig().replace(**PERMISSIVE)
    pairs, _ = band_keys(texts, config)
    assert not pairs[1].isdisjoint(pairs[0]) and not pairs[2].isdisjoint(pairs[0]) and pairs[3].isdisjoint(pairs[0])
    sets = [shingles(t, config.ngram, config.normalize) for t in texts]
    assert jaccard(sets[1], sets[0]) < T_J <= jaccard(sets[2], sets[0]) and containment(sets[2], sets[0]) >= T_C
    assert containment(sets[3], sets[0]) == 1.0
    df = spark.createDataFrame([(i, f"d{i}", t) for i, t in enumerate(texts)], "pos long, id string, text string")
    out = deduplicate(df.coalesce(1), id_col="id", verify=True, verify_threshold=T_J, containment_threshold=T_C,
                      duplicate_of=True, progress=False, **PERMISSIVE).orderBy("pos").collect()
    assert [(r["is_duplicate"], r["duplicate_of"], r["similarity_measure"]) for r in out] == [
        (False, None, None), (True, "d0", "containment"), (True, "d0", "jaccard"), (False, None, None)]
    assert out[1]["similarity"] == 1.0 and out[2]["similarity"] == pytest.approx(jaccard(sets[2], sets[0]), abs=1e-12)
    # Without containment the truncation is unflagged: its Jaccard is the share kept.
    plain = deduplicate(df.coalesce(1), id_col="id", verify=True, verify_threshold=T_J, containment_threshold=None,
                        duplicate_of=True, progress=False, **PERMISSIVE).orderBy("pos").collect()
    assert [(r["is_duplicate"], r["similarity_measure"]) for r in plain] == [
        (False, None), (False, None), (True, "jaccard"), (False, None)]


def _load_job():
    import importlib.util

    path = os.path.join(ROOT, "spark_jobs", "dedup.py")
    spec = importlib.util.spec_from_file_location("lshbloom_dedup_job_containment", path)
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    return job


def test_the_job_takes_containment_threshold(spark, stream, tmp_path, capsys):
    job = _load_job()
    docs = stream[:120]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, (t, _) in enumerate(docs)))
    out = str(tmp_path / "out")
    base = ["--input", str(src), "--output", out, "--output-format", "json", "--id-column", "id", "--quiet",
            "--threshold", "0.3", "--num-perm", "128", "--containment-threshold", "0.8", "--shingle", "words",
            "--ngram", "4", "--normalize", "all", "--insert", "all"]
    with pytest.raises(SystemExit) as exc:
        job.main(base + ["--no-verify"])
    assert exc.value.code == 2 and "containment_threshold needs verify" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        job.main(base + ["--verify", "--verify-threshold", str(T_J), "--duplicate-of"])
    assert exc.value.code == 0, capsys.readouterr().err
    with open(out + ".summary.json") as f:
        summary = json.load(f)
    _, expected = reference([t for t, _ in docs], DedupConfig().replace(**PERMISSIVE), T_J, T_C)
    assert summary["verify"]["containment_threshold"] == T_C and summary["duplicates"] == len(expected)
    rows = {r["id"]: r for r in spark.read.json(out).collect()}
    got = {int(i[1:]): (r["duplicate_of"], r["similarity_measure"]) for i, r in rows.items() if r["is_duplicate"]}
    texts = [t for t, _ in docs]
    assert got == {i: (f"d{v.of}", said(texts, i, v)) for i, v in expected.items()}
    assert "containment" in {m for _, m in got.values()}


def test_the_transformer_keeps_the_param_through_save_and_load(spark, stream, tmp_path):
    from lshbloom_udf.ml import LSHBloomDeduplicator

    df, rows = frame(spark, stream[:100])
    t = LSHBloomDeduplicator(idCol="id", verify=True, verifyThreshold=T_J, containmentThreshold=T_C, duplicateOf=True,
                             progress=False, **{"threshold": 0.3, "numPerm": 128, "shingle": "words", "ngram": 4,
                                                 "normalize": "all", "insert": "all"})
    assert t.getContainmentThreshold() == T_C
    path = str(tmp_path / "stage")
    t.save(path)
    loaded = LSHBloomDeduplicator.load(path)
    assert loaded.getContainmentThreshold() == T_C and loaded.config() == t.config()
    out = loaded.transform(df)
    _, expected = reference([r[2] for r in rows], DedupConfig().replace(**PERMISSIVE), T_J, T_C)
    got = {r["pos"]: (r["duplicate_of"], r["similarity_measure"]) for r in out.collect() if r["is_duplicate"]}
    texts = [r[2] for r in rows]
    assert got == {i: (f"d{v.of}", said(texts, i, v)) for i, v in expected.items()}
    by_containment = sum(v.measure == "containment" for v in expected.values())
    assert loaded.lastSummary["verify"]["by_containment"] == by_containment > 0
    with pytest.raises(ConfigError, match="containment_threshold needs verify"):
        LSHBloomDeduplicator(verify=False, containmentThreshold=0.8)
    with pytest.raises((ConfigError, TypeError, ValueError), match="containment_threshold"):
        t.setContainmentThreshold(1.5)
    assert t.getContainmentThreshold() == T_C  # a failed set leaves it as it was


@pytest.mark.parametrize("value", [0, 0.0, -0.1, 1.5, True, "0.8"])
def test_containment_threshold_out_of_range_is_refused(value):
    with pytest.raises(ConfigError, match=r"containment_threshold must be a number in \(0, 1\]"):
        DedupConfig().replace(verify=True, containment_threshold=value)


def test_containment_threshold_needs_verify_and_is_a_toml_key(tmp_path):
    with pytest.raises(ConfigError, match="containment_threshold needs verify"):
        DedupConfig().replace(verify=False, containment_threshold=0.8)
    assert DedupConfig().containment_threshold == 0.7  # the default since the multilingual study
    assert DedupConfig().replace(containment_threshold=None).containment_threshold is None  # off
    assert DedupConfig().replace(verify=True, containment_threshold=1).containment_threshold == 1.0
    path = tmp_path / "c.toml"
    path.write_text("[dedup]\nverify = true\ncontainment_threshold = 0.85\n")
    assert DedupConfig.from_settings(load_config(str(path))).containment_threshold == 0.85
