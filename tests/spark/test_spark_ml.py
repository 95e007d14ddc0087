"""LSHBloomDeduplicator: a pyspark.ml Transformer with typed, validated Params, in a Pipeline, saved and loaded."""

from __future__ import annotations

import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.feature import SQLTransformer

from lshbloom_udf import deduplicate
from lshbloom_udf.config import DEFAULTS
from lshbloom_udf.ml import LSHBloomDeduplicator
from spark_support import REFERENCE, datasketch_flags, sample_docs

# the reference configuration (datasketch's shingling) in the Transformer's parameter names
REFERENCE_ML = {"threshold": REFERENCE["threshold"], "numPerm": REFERENCE["num_perm"], "ngram": REFERENCE["ngram"],
                "normalize": REFERENCE["normalize"], "scheme": REFERENCE["scheme"], "bandKey": REFERENCE["band_key"],
                "shingle": REFERENCE["shingle"], "verify": REFERENCE["verify"]}


@pytest.fixture(scope="module")
def df(spark):
    docs = list(sample_docs(300, seed=5))
    return spark.createDataFrame([(d["id"], d["text"]) for d in docs], "id string, body string").repartition(3)


def test_defaults_come_from_config():
    t = LSHBloomDeduplicator()
    assert t.getInputCol() == DEFAULTS["text_column"]
    assert t.getOutputCol() == DEFAULTS["flag_column"]
    assert t.getThreshold() == DEFAULTS["threshold"]
    assert t.getNumPerm() == DEFAULTS["num_perm"]
    assert t.getNgram() == DEFAULTS["ngram"]
    assert t.getSeed() == DEFAULTS["seed"]
    assert t.getScheme() == DEFAULTS["scheme"]
    assert t.getBandKey() == DEFAULTS["band_key"] and t.getBloom() == DEFAULTS["bloom"]
    assert t.getMode() == DEFAULTS["mode"]
    assert t.getIdCol() is None and t.getIndexDir() is None and t.getBands() is None
    assert t.getPEffective() is None and t.getExpectedDocs() is None


def test_params_are_typed_and_validated():
    t = LSHBloomDeduplicator(threshold=0.7, numPerm=128.0, normalize=True, orderBy="id")
    assert isinstance(t.getThreshold(), float) and t.getNumPerm() == 128
    assert t.getNormalize() == "nfkc,lower,punct" and t.getOrderBy() == ["id"]
    with pytest.raises(ValueError, match="threshold"):
        LSHBloomDeduplicator(threshold=1.5)
    with pytest.raises(ValueError, match="mode"):
        LSHBloomDeduplicator().setMode("drop")
    with pytest.raises(ValueError, match="exceeds num_perm"):
        LSHBloomDeduplicator(numPerm=256, bands=[50, 6])
    with pytest.raises(TypeError):
        LSHBloomDeduplicator(numPerm="many")
    with pytest.raises(TypeError, match="normalize"):
        LSHBloomDeduplicator(normalize="uppercase")
    with pytest.raises(ValueError, match="scheme"):
        LSHBloomDeduplicator().setScheme("md5")
    with pytest.raises(ValueError, match="band_key"):
        LSHBloomDeduplicator().setBandKey("xor")
    with pytest.raises(ValueError, match="bloom must be one of"):
        LSHBloomDeduplicator(bloom="quotient")
    t = LSHBloomDeduplicator().setThreshold(0.8).setIdCol("id").setIndexDir(None)
    assert t.getThreshold() == 0.8 and t.getIdCol() == "id" and t.getIndexDir() is None


@pytest.mark.slow
def test_in_pipeline_saved_and_loaded(spark, df, tmp_path):
    dedup = LSHBloomDeduplicator(inputCol="body", outputCol="dup", orderBy=["id"], progress=False, **REFERENCE_ML)
    pipeline = Pipeline(stages=[SQLTransformer(statement="SELECT id, body FROM __THIS__"), dedup])
    model = pipeline.fit(df)
    out = model.transform(df)
    assert out.columns == ["id", "body", "dup"]
    rows = sorted(out.collect(), key=lambda r: r["id"])
    flags = [r["dup"] for r in rows]
    assert flags == datasketch_flags([r["body"] for r in rows], config=REFERENCE)
    expected = {r["id"]: r["is_duplicate"] for r in deduplicate(df, text_col="body", order_by="id", progress=False, **REFERENCE).collect()}
    assert {r["id"]: r["dup"] for r in rows} == expected
    assert model.stages[-1].lastSummary["duplicates"] == sum(flags)

    dedup.write().overwrite().save(str(tmp_path / "dedup"))
    loaded = LSHBloomDeduplicator.load(str(tmp_path / "dedup"))
    assert loaded.getInputCol() == "body" and loaded.getOutputCol() == "dup" and loaded.getOrderBy() == ["id"]
    assert loaded.extractParamMap() == {loaded.getParam(p.name): v for p, v in dedup.extractParamMap().items()}

    model.write().overwrite().save(str(tmp_path / "model"))
    reloaded = PipelineModel.load(str(tmp_path / "model"))
    assert isinstance(reloaded.stages[-1], LSHBloomDeduplicator)
    again = {r["id"]: r["dup"] for r in reloaded.transform(df).collect()}
    assert again == expected


def test_band_key_and_bloom_reach_the_run(df, tmp_path):
    dedup = LSHBloomDeduplicator(inputCol="body", orderBy=["id"], progress=False, bloom="blocked",
                                 indexDir=str(tmp_path / "ix"), **{**REFERENCE_ML, "bandKey": "mix"})
    dedup.transform(df).count()
    assert dedup.lastSummary["params"]["band_key"] == "mix" and dedup.lastSummary["index"]["backend"] == "blocked"
    dedup.write().overwrite().save(str(tmp_path / "dedup"))
    loaded = LSHBloomDeduplicator.load(str(tmp_path / "dedup"))
    assert (loaded.getBandKey(), loaded.getBloom()) == ("mix", "blocked")


def test_filter_mode_transformer(df):
    kept = LSHBloomDeduplicator(inputCol="body", mode="filter", idCol="id", orderBy=["id"], progress=False, **REFERENCE_ML).transform(df)
    assert kept.columns == ["id", "body"]
    flags = {r["id"]: r["is_duplicate"] for r in deduplicate(df, text_col="body", order_by="id", progress=False, **REFERENCE).collect()}
    assert {r["id"] for r in kept.collect()} == {i for i, f in flags.items() if not f}


def test_a_set_that_fails_leaves_the_transformer_as_it_was():
    """The redesign issue's bug: the setter stored numPerm=128 before the cross-check with bands failed."""
    t = LSHBloomDeduplicator(bands=[42, 6])
    with pytest.raises(ValueError, match="exceeds num_perm"):
        t.setNumPerm(128)
    assert t.getNumPerm() == DEFAULTS["num_perm"] and t.getBands() == [42, 6]
    with pytest.raises(ValueError, match="threshold"):
        t.setThreshold(2.0)
    assert t.getThreshold() == DEFAULTS["threshold"]
    with pytest.raises(ValueError, match="exceeds num_perm"):
        t.setParams(threshold=0.7, numPerm=128)  # one set of several: none of them stays
    assert (t.getThreshold(), t.getNumPerm()) == (DEFAULTS["threshold"], DEFAULTS["num_perm"])
    t.setBands(None).setNumPerm(128)  # unset bands first, then the smaller num_perm is fine
    assert t.getBands() is None and t.getNumPerm() == 128


def test_paragraphs_through_the_transformer_equal_deduplicate(spark, tmp_path):
    from paragraph_reference import corpus

    texts = spark.createDataFrame(list(enumerate(corpus(120))), "id long, body string").repartition(1)
    model = LSHBloomDeduplicator(inputCol="body", idCol="id", orderBy=["id"], paragraphs="remove",
                                 paragraphSeparator="newline", progress=False)
    model.save(str(tmp_path / "m"))
    loaded = LSHBloomDeduplicator.load(str(tmp_path / "m"))
    assert loaded.getOrDefault("paragraphs") == "remove"
    got = {r["id"]: (r["body"], r["paragraphs_removed"]) for r in loaded.transform(texts).collect()}
    want = {r["id"]: (r["body"], r["paragraphs_removed"])
            for r in deduplicate(texts, text_col="body", id_col="id", order_by="id", paragraphs="remove",
                                 progress=False).collect()}
    assert got == want and sum(n for _, n in got.values()) > 0
