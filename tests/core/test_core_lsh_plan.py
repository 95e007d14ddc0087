"""(b, r) selection equals datasketch's; the plan reproduces docs/algorithm.md §6's figures."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from datasketch.lsh import _optimal_param

from lshbloom_udf import IndexParams, LSHBloomIndex, optimal_params, plan
from lshbloom_udf.config import DEFAULTS, DedupConfig
from lshbloom_udf.sizing import per_band_p


@pytest.mark.parametrize("num_perm", [2, 3, 16, 64, 128, 256])
def test_optimal_params_equal_datasketch_on_a_grid(num_perm):
    for i in range(1, 21):
        threshold = i / 20
        assert optimal_params(threshold, num_perm) == _optimal_param(threshold, num_perm, 0.5, 0.5), threshold


@pytest.mark.parametrize("weights", [(0.3, 0.7), (0.9, 0.1), (1.0, 0.0)])
def test_optimal_params_with_weights_equal_datasketch(weights):
    for threshold in (0.35, 0.6, 0.85):
        assert optimal_params(threshold, 128, weights) == _optimal_param(threshold, 128, *weights)


@pytest.mark.parametrize(
    "threshold,num_perm,expected",
    [(0.5, 256, (42, 6)), (0.8, 256, (17, 15)), (0.9, 256, (9, 28)), (0.5, 128, (25, 5)), (0.8, 128, (9, 13))],
)
def test_reference_points(threshold, num_perm, expected):
    assert optimal_params(threshold, num_perm) == expected


def test_known_optima_equal_the_quadratures_and_cover_the_defaults_and_presets():
    from lshbloom_udf.config import PRESETS
    from lshbloom_udf.lsh import KNOWN_OPTIMA, _optimal_params_cached

    for (threshold, num_perm, w_fp, w_fn), expected in KNOWN_OPTIMA.items():
        assert _optimal_params_cached(threshold, num_perm, w_fp, w_fn) == expected
        assert _optimal_param(threshold, num_perm, w_fp, w_fn) == expected
    for settings in (DEFAULTS, *PRESETS.values()):
        assert (settings["threshold"], settings["num_perm"], 0.5, 0.5) in KNOWN_OPTIMA


def test_optimal_params_rejects_bad_input():
    for threshold in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="threshold"):
            optimal_params(threshold, 128)
    with pytest.raises(ValueError, match="num_perm"):
        optimal_params(0.5, 1)
    with pytest.raises(ValueError, match="weights"):
        optimal_params(0.5, 128, (0.6, 0.6))


def test_per_band_p_composes_to_p_effective():
    for p_eff in (1e-5, 1e-8, 1e-11):
        for b in (9, 42):
            p = per_band_p(p_eff, b)
            assert 1 - (1 - p) ** b == pytest.approx(p_eff, rel=1e-6)


@pytest.mark.parametrize(
    "docs,threshold,num_perm,p_eff,terabytes",
    [
        (10**10, 0.8, 128, 1e-10, 0.5906),
        (10**11, 0.5, 256, 1e-5, 16.66),
        (10**11, 0.5, 256, 1e-8, 24.21),
        (10**11, 0.5, 256, 1e-11, 31.76),
        (5 * 10**9, 0.5, 256, 1e-5, 0.833),
        (5 * 10**9, 0.5, 256, 1e-8, 1.211),
    ],
)
def test_plan_reproduces_design_sizes(docs, threshold, num_perm, p_eff, terabytes):
    result = plan(docs, threshold=threshold, num_perm=num_perm, p_effective=p_eff)
    decimals = len(str(terabytes).split(".")[1])
    assert round(result.index_bytes / 1e12, decimals) == terabytes
    assert result.formula_index_bytes == pytest.approx(result.index_bytes, rel=1e-6)


def test_plan_error_rates_follow_paper_equations():
    result = plan(10**9, threshold=0.5, num_perm=256, p_effective=1e-5)
    extra = 1e-5 + result.b / ((1 << 61) - 1)
    assert result.lshbloom_false_positive == pytest.approx(result.lsh_false_positive + (1 - result.lsh_false_positive) * extra)
    assert result.lshbloom_false_negative == pytest.approx((1 - extra) * result.lsh_false_negative)
    assert result.lshbloom_false_positive > result.lsh_false_positive


def test_plan_cli_json_and_text():
    # The paper's figure is for classic Bloom filters (pybloomfiltermmap3's files), not the default blocked ones.
    cmd = [sys.executable, "-m", "lshbloom_udf", "plan", "--docs", "1e10", "--threshold", "0.8", "--num-perm", "128", "--p-effective", "1e-10",
           "--bloom", "pybloomfiltermmap3", "--growth", "fixed"]
    out = json.loads(subprocess.run(cmd + ["--json"], check=True, capture_output=True, text=True).stdout)
    assert (out["b"], out["r"]) == (9, 13)
    assert round(out["index_bytes"] / 1e9, 1) == 590.6
    assert isinstance(out["fits_in_shm"], bool)
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    assert "590.6 GB" in text and "9 x 13" in text


def test_plan_cli_rejects_bad_parameters():
    bad = subprocess.run(
        [sys.executable, "-m", "lshbloom_udf", "plan", "--docs", "100", "--p-effective", "2"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "p_effective must be in (0, 1)" in bad.stderr
    bad = subprocess.run([sys.executable, "-m", "lshbloom_udf", "plan", "--docs", "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "positive integer" in bad.stderr


@pytest.mark.parametrize("bloom", ["pybloomfiltermmap3", "blocked", "cuckoo"])
def test_plan_gives_the_bytes_of_the_index_it_sizes(tmp_path, bloom):
    params = IndexParams.for_threshold(capacity=20_000, threshold=0.4, num_perm=256, p_effective=1e-6)
    sized = plan(20_000, threshold=0.4, num_perm=256, p_effective=1e-6, bloom=bloom)
    with LSHBloomIndex.create(str(tmp_path / "ix"), params, bloom=bloom) as index:
        assert sized.index_bytes == index.stats()["bytes_on_disk"]
        assert (sized.b, sized.r) == (params.b, params.r)
    # Blocked filters cost more space at LSHBloom's per-band rates (benchmarks/log.md §3).
    other = plan(20_000, threshold=0.4, num_perm=256, p_effective=1e-6, bloom="blocked")
    assert other.index_bytes > plan(20_000, threshold=0.4, num_perm=256, p_effective=1e-6).index_bytes
    # Cuckoo filters cost less than classic Bloom filters' bits there (docs/benchmarks.md).
    cuckoo = plan(20_000, threshold=0.4, num_perm=256, p_effective=1e-6, bloom="cuckoo")
    assert cuckoo.index_bytes < cuckoo.formula_index_bytes
    with pytest.raises(ValueError, match="bloom must be"):
        plan(100, bloom="quotient")


@pytest.mark.parametrize("flags, within", [(["--p-effective", "1e-5"], 1.1), ([], 1.25)])
def test_plan_of_the_defaults_is_near_classic_bloom_bits(flags, within):
    """``lshbloom plan --docs 1e9`` with the defaults: at most ``within`` x the bytes of classic Bloom filters with the
    same b and p_effective, at the plan's own per-band rate (growth: generation 0 at p_effective / 2) and at a fixed
    index's. Cuckoo filters pay ~log2(2 x slots) bits per key over the rate's own: 1.04x a classic filter at the
    final-flag rate (1e-5, 32-bit fingerprints), 1.16-1.25x at the verified one (1e-2, 20-bit)."""
    got = json.loads(subprocess.run([sys.executable, "-m", "lshbloom_udf", "plan", "--docs", "1e9", "--json", *flags],
                                    check=True, capture_output=True, text=True).stdout)
    assert got["p_effective"] == (float(flags[1]) if flags else DedupConfig().new_index_p_effective)
    assert got["index_bytes"] <= within * got["formula_index_bytes"]
    p_band_fixed = -math.expm1(math.log1p(-got["p_effective"]) / got["b"])
    classic_fixed = got["b"] * got["docs"] * -math.log(p_band_fixed) / math.log(2) ** 2 / 8
    assert got["index_bytes"] <= within * classic_fixed, got["index_bytes"] / classic_fixed


def test_plan_cli_defaults_are_the_products():
    out = subprocess.run([sys.executable, "-m", "lshbloom_udf", "plan", "--docs", "1e6", "--json"], check=True,
                         capture_output=True, text=True).stdout
    got = json.loads(out)
    assert (got["threshold"], got["num_perm"], got["ngram"], got["p_effective"]) == (
        DEFAULTS["threshold"], DEFAULTS["num_perm"], DEFAULTS["ngram"], DedupConfig().new_index_p_effective)
    assert got["bloom"] == "cuckoo"  # a new index's backend with the default (mix) band key
    blocked = subprocess.run([sys.executable, "-m", "lshbloom_udf", "plan", "--docs", "1e6", "--bloom", "blocked"],
                             check=True, capture_output=True, text=True).stdout
    assert "Bloom filters            blocked" in blocked
