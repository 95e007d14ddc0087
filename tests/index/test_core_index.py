"""LSHBloomIndex: decisions, persistence and interoperability with datasketch MinHashLSHBloom."""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest
from datasketch import MinHash, MinHashLSHBloom

from lshbloom_udf import IndexMismatchError, IndexParams, LSHBloomIndex, signatures, text_band_keys
from lshbloom_udf.sample import build_sample, near_duplicate


@pytest.fixture(scope="module")
def corpus():
    """Stdlib docstrings with near-duplicates at known places, plus empty documents."""
    docs = [d["text"] for d in build_sample(num_docs=600, duplicate_fraction=0.3, seed=3)]
    rng = random.Random(9)
    docs[10:10] = ["", None, "  \n "]
    docs += [near_duplicate(docs[i], rng) for i in range(20, 60, 4)]  # late copies of early documents
    return docs


def datasketch_minhashes(texts, num_perm=256):
    out = []
    for text in texts:
        m = MinHash(num_perm=num_perm, seed=1)
        m.update_batch([s.encode("utf-8") for s in set((text or "").split())])
        out.append(m)
    return out


def datasketch_keep_first(texts, lsh):
    """The reference loop: query, and insert only what is new. Documents without shingles are skipped."""
    flags = []
    for text, m in zip(texts, datasketch_minhashes(texts)):
        if not (text or "").split():
            flags.append(False)
            continue
        dup = lsh.query(m)
        if not dup:
            lsh.insert(m)
        flags.append(dup)
    return flags


def make_params(n, **kw):
    return IndexParams.for_threshold(capacity=n, threshold=0.5, num_perm=256, **kw)


def test_query_insert_equals_datasketch_loop(tmp_path, corpus):
    params = make_params(len(corpus))
    keys, has = text_band_keys(corpus, **params.signature_kwargs())
    with LSHBloomIndex.create(str(tmp_path / "ours"), params) as index:
        ours = index.query_insert(keys, active=has)
        assert index.inserted == int(np.count_nonzero(has & ~ours))
    lsh = MinHashLSHBloom(threshold=0.5, num_perm=256, n=len(corpus), fp=params.p_band, save_dir=str(tmp_path / "ds"))
    theirs = datasketch_keep_first(corpus, lsh)
    assert ours.tolist() == theirs
    # The corpus has real near-duplicates, and the late copies are caught.
    assert 100 < int(ours.sum()) < len(corpus) // 2
    assert ours[-10:].all()
    assert not ours[10:13].any()


def test_index_we_wrote_opens_in_datasketch_with_same_answers(tmp_path, corpus):
    params = make_params(len(corpus))
    path = str(tmp_path / "index")
    half = len(corpus) // 2
    keys, has = text_band_keys(corpus, **params.signature_kwargs())
    with LSHBloomIndex.create(path, params) as index:
        index.query_insert(keys[:half], active=has[:half])
        ours = index.query(keys)
    lsh = MinHashLSHBloom(threshold=0.5, num_perm=256, n=len(corpus), fp=params.p_band, save_dir=path, params=(params.b, params.r))
    theirs = [lsh.query(m) for m in datasketch_minhashes(corpus)]
    assert ours[has].tolist() == [t for t, h in zip(theirs, has) if h]
    assert ours[:half][has[:half]].all()


def test_index_datasketch_wrote_is_adopted_with_supplied_parameters(tmp_path, corpus):
    path = str(tmp_path / "ds")
    params = make_params(len(corpus))
    lsh = MinHashLSHBloom(threshold=0.5, num_perm=256, n=len(corpus), fp=params.p_band, save_dir=path)
    minhashes = datasketch_minhashes(corpus)
    half = len(corpus) // 2
    for text, m in zip(corpus[:half], minhashes[:half]):
        if (text or "").split() and not lsh.query(m):
            lsh.insert(m)
    lsh.sync()
    theirs = [lsh.query(m) for m in minhashes]
    del lsh

    with pytest.raises(FileNotFoundError, match="manifest"):
        LSHBloomIndex.open(path)
    index = LSHBloomIndex.adopt(path, {"b": params.b, "r": params.r, "num_perm": 256, "threshold": 0.5})
    assert index.params.capacity == len(corpus)
    assert index.params.p_effective == pytest.approx(params.p_effective, rel=1e-9)
    keys, has = text_band_keys(corpus, **index.params.signature_kwargs())
    assert index.query(keys)[has].tolist() == [t for t, h in zip(theirs, has) if h]
    index.close()
    # From now on it is an ordinary index.
    with LSHBloomIndex.open(path, expected={"b": params.b, "r": params.r}) as reopened:
        assert reopened.params == index.params


def test_reopen_continues_and_mismatch_is_refused(tmp_path, corpus):
    path = str(tmp_path / "index")
    params = make_params(1000)
    keys, has = text_band_keys(corpus, **params.signature_kwargs())
    with LSHBloomIndex.create(path, params) as index:
        first = index.query_insert(keys, active=has)
    with LSHBloomIndex.open(path, expected=params) as index:
        assert index.inserted == int(np.count_nonzero(has & ~first))
        # Everything inserted before is found again.
        again = index.query_insert(keys, active=has)
        assert again[has].all()

    for change, field in (({"ngram": 3}, "ngram"), ({"seed": 2}, "seed"), ({"scheme": "legacy"}, "scheme"), ({"normalize": True}, "normalize")):
        with pytest.raises(IndexMismatchError, match=field):
            LSHBloomIndex.open(path, expected=make_params(1000, **change))
    with pytest.raises(IndexMismatchError, match="capacity"):
        LSHBloomIndex.open_or_create(path, make_params(5000))
    with LSHBloomIndex.open_or_create(path, make_params(5000), sizing_given=False) as index:
        assert index.params.capacity == 1000
    with pytest.raises(FileExistsError):
        LSHBloomIndex.create(path, params)


def test_manifest_records_every_compatibility_parameter(tmp_path):
    path = str(tmp_path / "index")
    params = make_params(500, ngram=3, normalize="nfkc,lower", seed=5)
    LSHBloomIndex.create(path, params).close()
    manifest = json.loads((tmp_path / "index" / "manifest.json").read_text())
    assert manifest["params"] == {
        "b": params.b, "r": params.r, "capacity": 500, "num_perm": 256, "threshold": 0.5, "scheme": "affine32",
        "seed": 5, "ngram": 3, "normalize": "nfkc,lower", "p_effective": 1e-5, "band_key": "sum", "shingle": "words",
    }
    assert manifest["p_band"] == pytest.approx(params.p_band)
    assert manifest["format_version"] == 1 and manifest["inserted"] == 0
    assert sorted(os.listdir(path)) == sorted([".lock", "manifest.json"] + [f"band-{i}.bf" for i in range(params.b)])


def test_stats_and_read_only(tmp_path, corpus):
    path = str(tmp_path / "index")
    params = make_params(len(corpus))
    keys, has = text_band_keys(corpus, **params.signature_kwargs())
    with LSHBloomIndex.create(path, params) as index:
        index.query_insert(keys, active=has)
        stats = index.stats()
    assert stats["bytes_on_disk"] == sum(os.path.getsize(os.path.join(path, f"band-{i}.bf")) for i in range(params.b))
    assert 0 < stats["expected_false_positive"] < params.p_effective
    with LSHBloomIndex.open(path, read_only=True) as ro:
        assert ro.query(keys)[has].all()
        with pytest.raises(PermissionError):
            ro.insert(keys[:1])
    index.close()
    with pytest.raises(ValueError, match="closed"):
        index.query(keys)


def test_bad_keys_and_parameters(tmp_path):
    with pytest.raises(ValueError, match="exceeds num_perm"):
        IndexParams(b=42, r=7, capacity=10)
    with pytest.raises(ValueError, match="p_effective"):
        make_params(10, p_effective=1.0)
    with pytest.raises(ValueError, match="capacity"):
        make_params(0)
    with pytest.raises(ValueError, match="threshold"):
        IndexParams.for_threshold(capacity=10, threshold=1.2)
    with LSHBloomIndex.create(str(tmp_path / "i"), make_params(10)) as index:
        with pytest.raises(ValueError, match=r"shape \(N, 42\)"):
            index.query(np.zeros((3, 5), dtype=np.uint64))


def test_missing_or_corrupt_band_file_is_refused(tmp_path):
    path = tmp_path / "index"
    LSHBloomIndex.create(str(path), make_params(100)).close()
    (path / "band-3.bf").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="band-3.bf"):
        LSHBloomIndex.open(str(path))
    os.remove(path / "band-3.bf")
    with pytest.raises(FileNotFoundError, match="band-3.bf"):
        LSHBloomIndex.open(str(path))


def test_signatures_feed_index_like_fused_keys(corpus):
    params = make_params(10)
    keys, has = text_band_keys(corpus[:50], **params.signature_kwargs())
    sig = signatures(corpus[:50])
    from lshbloom_udf import band_keys

    np.testing.assert_array_equal(band_keys(sig, params.b, params.r)[has], keys[has])
