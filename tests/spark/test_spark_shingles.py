"""deduplicate() with shingle="chars" / "mixed": flags equal an exact keep-first loop over the same band keys,
the index records the unit and refuses another, verification measures Jaccard on the unit's shingles."""

from __future__ import annotations

import json
import os
import random

import pytest
from pyspark.sql import types as T

import shingle_reference as ref
from lshbloom_udf import IndexMismatchError, deduplicate, text_band_keys
from spark_support import REFERENCE, sample_docs

SCHEMA = T.StructType([T.StructField("id", T.StringType()), T.StructField("text", T.StringType())])
# Han, hiragana, katakana, Hangul: texts without spaces, where word shingles see one token per line.
CJK = [chr(c) for c in range(0x4E00, 0x4E00 + 400)] + [chr(c) for c in range(0x3041, 0x3097)] + \
      [chr(c) for c in range(0x30A1, 0x30FB)] + [chr(c) for c in range(0xAC00, 0xAC00 + 200)]


def cjk_docs(n_sources: int = 40, seed: int = 5) -> list[dict]:
    """Space-free CJK documents, and near-duplicates of them (a few characters changed, lines re-flowed)."""
    rng = random.Random(seed)
    docs = []
    for s in range(n_sources):
        base = [rng.choice(CJK) for _ in range(rng.randint(80, 200))]
        docs.append({"id": f"cjk-{s:03d}-0", "text": "".join(base)})
        for v in range(rng.randint(0, 2)):
            copy = list(base)
            for _ in range(rng.randint(1, 4)):
                copy[rng.randrange(len(copy))] = rng.choice(CJK)
            text = "".join(copy)
            cut = rng.randrange(1, len(text))
            docs.append({"id": f"cjk-{s:03d}-{v + 1}", "text": text[:cut] + "\n" + text[cut:]})
    return docs


@pytest.fixture(scope="module")
def docs():
    english = [{"id": d["id"], "text": d["text"]} for d in sample_docs()][:250]
    return english + cjk_docs()


@pytest.fixture(scope="module")
def docs_df(spark, docs):
    return spark.createDataFrame([(d["id"], d["text"]) for d in docs], SCHEMA)


def keep_first(keys, active) -> list:
    """The exact keep-first decision over band keys: a set per band, only kept documents inserted."""
    seen = [set() for _ in range(keys.shape[1])]
    flags = []
    for row, is_active in zip(keys, active):
        dup = bool(is_active) and any(int(k) in band for k, band in zip(row, seen))
        if is_active and not dup:
            for k, band in zip(row, seen):
                band.add(int(k))
        flags.append(dup)
    return flags


@pytest.mark.parametrize("unit", ["chars", "mixed"])
def test_flags_of_a_character_unit_equal_keep_first_over_its_band_keys(docs_df, tmp_path, unit):
    index_dir = str(tmp_path / "ix")
    result = deduplicate(docs_df, **{**REFERENCE, "ngram": 5, "shingle": unit}, order_by="id", index_dir=index_dir,
                         return_summary=True, progress=False)
    out, summary = result
    rows = sorted(out.collect(), key=lambda r: r["id"])
    texts = [r["text"] for r in rows]
    keys, active = text_band_keys(texts, 42, 6, num_perm=256, ngram=5, shingle=unit)
    expected = keep_first(keys, active)
    assert [r["is_duplicate"] for r in rows] == expected
    cjk_dups = sum(f for r, f in zip(rows, expected) if r["id"].startswith("cjk-"))
    assert cjk_dups >= 20 and sum(expected) > cjk_dups  # near-duplicates found in both scripts
    assert summary["params"]["shingle"] == unit and f"ngram 5 {unit}" in result.summary_text()
    with open(os.path.join(index_dir, "manifest.json"), encoding="utf-8") as f:
        assert json.load(f)["params"]["shingle"] == unit
    with pytest.raises(IndexMismatchError, match=f"shingle: index has '{unit}', asked for 'words'"):
        deduplicate(docs_df, **{**REFERENCE, "ngram": 5}, index_dir=index_dir, progress=False)


def test_word_shingles_miss_what_character_shingles_find_in_cjk(docs_df, docs):
    """The reason for the units: a re-flowed, edited CJK copy is one or two 'words', so word shingles miss it."""
    cjk = [d["text"] for d in sorted(docs, key=lambda d: d["id"]) if d["id"].startswith("cjk-")]
    words = keep_first(*text_band_keys(cjk, 42, 6, num_perm=256, ngram=1))
    chars = keep_first(*text_band_keys(cjk, 42, 6, num_perm=256, ngram=5, shingle="chars"))
    assert sum(words) == 0 and sum(chars) >= 20


def test_verification_measures_jaccard_on_the_units_shingles(docs_df):
    out = deduplicate(docs_df, **{**REFERENCE, "ngram": 5, "shingle": "mixed", "verify": True,
                                         "verify_threshold": None, "containment_threshold": None}, id_col="id",
                      duplicate_of=True, progress=False)
    rows = {r["id"]: r for r in out.collect()}
    flagged = [r for r in rows.values() if r["is_duplicate"]]
    assert len(flagged) >= 20
    for r in flagged:
        kept = rows[r["duplicate_of"]]
        a, b = ref.shingles(r["text"], 5, 0, "mixed"), ref.shingles(kept["text"], 5, 0, "mixed")
        assert r["similarity"] == pytest.approx(len(a & b) / len(a | b), abs=1e-12) and r["similarity"] >= 0.5
        assert not kept["is_duplicate"]


def test_the_sharded_pass_keys_documents_by_the_unit(docs_df, tmp_path):
    """pass_mode="sharded" (any-earlier) with shingle="mixed": flags equal the exact rule over the unit's mix keys."""
    from test_core_insert_rule import any_earlier_reference

    index_dir = str(tmp_path / "sharded")
    out = deduplicate(docs_df.repartition(5), **{**REFERENCE, "ngram": 5, "band_key": "mix", "shingle": "mixed"},
                      order_by="id", pass_mode="sharded", expected_docs=200_000, shard_memory=1 << 16,
                      index_dir=index_dir, progress=False)
    rows = sorted(out.collect(), key=lambda r: r["id"])
    keys, active = text_band_keys([r["text"] for r in rows], 42, 6, num_perm=256, ngram=5, shingle="mixed",
                                  band_key="mix")
    expected = any_earlier_reference(keys, active).tolist()
    assert [r["is_duplicate"] for r in rows] == expected and sum(expected) >= 20
    (manifest,) = [n for n in os.listdir(index_dir) if n.startswith("manifest-")]
    with open(os.path.join(index_dir, manifest), encoding="utf-8") as f:
        assert json.load(f)["params"]["shingle"] == "mixed"
    with pytest.raises(IndexMismatchError, match="shingle"):
        deduplicate(docs_df, **{**REFERENCE, "ngram": 5, "band_key": "mix", "shingle": "chars"}, pass_mode="sharded",
                    index_dir=index_dir, progress=False)
