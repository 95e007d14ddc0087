"""Bands that follow the decision (issue 33, item 4): which threshold a run's bands serve, in each case, and the
refusal of a kept index banded for another (lshbloom_udf/bands.py, docs/algorithm.md "Bands that follow the
decision"). No Spark here: tests/spark/test_spark_bands_for.py runs them."""

from __future__ import annotations

import json

import pytest

from lshbloom_udf.bands import check_kept_bands, check_kept_rate
from lshbloom_udf.compat import COMPAT_DEFAULTS
from lshbloom_udf.config import DEFAULTS, PRESETS, DedupConfig
from lshbloom_udf.errors import IndexMismatchError
from lshbloom_udf.index import LSHBloomIndex, read_manifest
from lshbloom_udf.lsh import optimal_params

NUM_PERM = DEFAULTS["num_perm"]


def _bands(config: DedupConfig):
    p = config.index_params()
    return p.threshold, (p.b, p.r), config.bands_for.text


def test_with_verification_the_bands_stay_permissive_for_threshold():
    t = DEFAULTS["threshold"]
    assert _bands(DedupConfig()) == (t, optimal_params(t, NUM_PERM),
                                     "threshold (default: candidates, verification decides)")
    assert _bands(DedupConfig().replace(threshold=0.5)) == (0.5, optimal_params(0.5, NUM_PERM),
                                                            "threshold (given: candidates, verification decides)")


def test_without_verification_the_bands_serve_verify_threshold_unless_threshold_is_given():
    t_v = DEFAULTS["verify_threshold"]
    assert t_v != DEFAULTS["threshold"]  # else this test shows nothing
    off = DedupConfig().replace(verify=False)
    assert _bands(off) == (t_v, optimal_params(t_v, NUM_PERM), "verify_threshold (verification off: the bands decide)")
    assert _bands(off.replace(num_perm=128)) == (t_v, optimal_params(t_v, 128), off.bands_for.text)
    # Given explicitly, even at the default's value: the user means it (the old, permissive behaviour, knowingly).
    given = DedupConfig().replace(verify=False, threshold=DEFAULTS["threshold"])
    assert _bands(given) == (DEFAULTS["threshold"], optimal_params(DEFAULTS["threshold"], NUM_PERM), "threshold (given)")
    assert _bands(DedupConfig().replace(verify=False, threshold=0.7))[:2] == (0.7, optimal_params(0.7, NUM_PERM))
    # A config file's settings are given too (the job passes them through replace).
    assert DedupConfig.from_settings({"verify": False, "threshold": 0.3}).bands_for.setting == "threshold"


def test_explicit_bands_are_kept_and_checked_against_the_threshold_meant():
    off = DedupConfig().replace(verify=False, bands=(20, 5))
    p = off.index_params()
    assert (p.b, p.r, p.threshold) == (20, 5, DEFAULTS["verify_threshold"]) and off.bands_for.text == "bands (given)"
    on = DedupConfig().replace(bands=(20, 5))
    assert (on.index_params().b, on.index_params().threshold) == (20, DEFAULTS["threshold"])


def test_the_paper_preset_bands_for_its_own_threshold_as_before():
    paper = DedupConfig.from_preset("paper")
    assert not paper.verify and not paper.is_given("threshold")  # a preset's values are defaults, not given
    t = PRESETS["paper"]["threshold"]
    assert _bands(paper) == (t, optimal_params(t, PRESETS["paper"]["num_perm"]), "threshold (preset)")
    assert (paper.index_params().b, paper.index_params().r) == (42, 6)  # datasketch's MinHashLSH(0.5, 256)


def _index(path, threshold: float):
    """The parameters of a new kept index banded for ``threshold``, as its manifest records them."""
    config = DedupConfig().replace(threshold=threshold)
    LSHBloomIndex.create(str(path), config.index_params(capacity=100), bloom="cuckoo").close()
    return read_manifest(str(path)).params


def test_no_verify_against_an_index_banded_for_verification_is_refused_naming_the_settings(tmp_path):
    manifest = _index(tmp_path / "permissive", DEFAULTS["threshold"])
    off = DedupConfig().replace(verify=False)
    with pytest.raises(IndexMismatchError) as e:
        check_kept_bands("ix", manifest, off, off.index_params())
    message = str(e.value)
    assert "banded for threshold 0.3 (b x r = 64 x 4" in message and "this run bands for 0.4" in message
    assert "verify_threshold" in message and "drop --no-verify" in message and "--threshold 0.3" in message
    # Said so, the index's permissive bands decide (knowingly); with verification on, they are what they were made for.
    given = DedupConfig().replace(verify=False, threshold=0.3)
    check_kept_bands("ix", manifest, given, given.index_params())
    check_kept_bands("ix", manifest, DedupConfig(), DedupConfig().index_params())


def test_a_verified_run_against_an_index_made_without_verification_names_its_threshold(tmp_path):
    manifest = _index(tmp_path / "strict", DEFAULTS["verify_threshold"])
    with pytest.raises(IndexMismatchError, match=r"banded for threshold 0\.4 .*Give --threshold 0\.4"):
        check_kept_bands("ix", manifest, DedupConfig(), DedupConfig().index_params())
    off = DedupConfig().replace(verify=False)
    check_kept_bands("ix", manifest, off, off.index_params())  # the same bands: the index's own decision
    check_kept_bands("ix", None, off, off.index_params())  # no index yet


@pytest.mark.parametrize("flags, threshold", [([], 0.3), (["--no-verify"], 0.4), (["--no-verify", "--threshold", "0.3"], 0.3),
                                              (["--threshold", "0.5"], 0.5)])
def test_plan_sizes_the_bands_a_run_with_the_same_flags_would_use(capsys, flags, threshold):
    from lshbloom_udf.__main__ import _plan

    _plan(["--docs", "1000", "--json", *flags])
    got = json.loads(capsys.readouterr().out)
    config = DedupConfig().replace(**{"verify": "--no-verify" not in flags,
                                      **({"threshold": threshold} if "--threshold" in flags else {})})
    p = config.index_params(1000)
    assert (got["threshold"], got["b"], got["r"]) == (threshold, p.b, p.r) == (threshold, *optimal_params(threshold, NUM_PERM))


def test_a_new_index_is_sized_for_the_rate_its_flags_need():
    from lshbloom_udf.index.params import P_VERIFIED

    final = COMPAT_DEFAULTS["p_effective"]
    assert DedupConfig().index_params().p_effective == P_VERIFIED  # every flag verified: a false positive is work
    assert DedupConfig().replace(verify=False).index_params().p_effective == final  # a false positive is final
    assert DedupConfig().replace(insert="first").index_params().p_effective == final  # not inserted: recall lost
    assert DedupConfig().replace(verify=False, p_effective=1e-3).index_params().p_effective == 1e-3
    assert DedupConfig(pass_mode="sharded").index_params().p_effective == P_VERIFIED


def test_final_flags_against_an_index_sized_for_verification_are_refused_naming_the_remedies(tmp_path):
    manifest = _index(tmp_path / "verified", DEFAULTS["threshold"])
    check_kept_rate("ix", manifest, DedupConfig())
    for final, why in ((DedupConfig().replace(verify=False, threshold=0.3), "no verification"),
                       (DedupConfig().replace(insert="first"), "insert first")):
        with pytest.raises(IndexMismatchError) as e:
            check_kept_rate("ix", manifest, final)
        message = str(e.value)
        assert "sized for p_effective 0.01" in message and why in message and "about 1.0% of its new" in message
        assert "new --index-dir (sized for 1e-05)" in message and "--p-effective 0.01" in message
    check_kept_rate("ix", manifest, DedupConfig().replace(verify=False, threshold=0.3, p_effective=0.01))
    strict = DedupConfig().replace(verify=False)
    LSHBloomIndex.create(str(tmp_path / "strict"), strict.index_params(capacity=100), bloom="cuckoo").close()
    check_kept_rate("ix", read_manifest(str(tmp_path / "strict")).params, strict)
    check_kept_rate("ix", None, strict)
