"""The tuning study end to end on a small synthetic pool, the score command, and the defaults it chose."""

import csv
import importlib.util
import json
import os
import tomllib

import pytest

from lshbloom_udf.config import DEFAULTS, PRESETS, ConfigError, preset_settings
from evaluation import generator as G
from evaluation.__main__ import main as eval_main
from evaluation.study import GRIDS, PAPER, StudyConfig, run_study, select, summarize
from evaluation.synthetic import synthetic_sources, write_sources

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    d = tmp_path_factory.mktemp("study")
    src = write_sources(synthetic_sources(240, seed=4), str(d / "pool.jsonl"))
    cfg = StudyConfig(tune=src, test=None, out_dir=str(d / "out"), docs=60, levels=(0.2, 0.8), seed=1, grid="tiny",
                      min_words=50, plots=True, baselines=("ccnet", "dolma", "dolma-ngram", "dclm"))
    result = run_study(cfg, log=None)
    return cfg, result


def _csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_study_writes_every_output(study):
    cfg, result = study
    for name in ("grid.csv", "selected.csv", "heldout.csv", "agreement.csv", "pareto.csv", "summary.json", "results.md"):
        assert os.path.getsize(os.path.join(cfg.out_dir, name)) > 0, name
    pngs = sorted(f for f in os.listdir(cfg.out_dir) if f.endswith(".png"))
    if importlib.util.find_spec("matplotlib"):
        assert pngs == ["heatmap_minhash.png", "heatmap_ngram.png", "heldout_by_level.png", "paragraph_f1_vs_threshold.png", "pareto.png"]
    else:
        assert pngs == []


def test_grid_covers_every_method_and_configuration(study):
    cfg, _ = study
    rows = _csv(os.path.join(cfg.out_dir, "grid.csv"))
    grid = GRIDS["tiny"]
    lsh = {(r["config"], float(r["level"])) for r in rows if r["method"] == "lshbloom"}
    assert len(lsh) == len(grid.minhash_configs()) * len(cfg.levels)
    methods = {r["method"] for r in rows}
    assert methods == {"lshbloom", "lshbloom-paper", "minhashlsh", "ccnet", "dolma", "dolma-ngram", "dclm"}
    for r in rows:
        tp, fp, fn = int(r["tp"]), int(r["fp"]), int(r["fn"])
        assert int(r["duplicates"]) == tp + fn == round(int(r["docs"]) * float(r["level"]))
        assert float(r["f1"]) == pytest.approx(tp / (tp + 0.5 * (fp + fn)) if tp + fp + fn else 1.0, abs=1e-5)


def test_chosen_configuration_maximizes_the_worst_level_f1(study):
    cfg, result = study
    rows = _csv(os.path.join(cfg.out_dir, "grid.csv"))
    worst = {}
    for r in rows:
        if r["method"] == "lshbloom" and r["split"] == "tune":
            worst[r["config"]] = min(worst.get(r["config"], 1.0), float(r["f1"]))
    chosen = result["chosen"]
    label = next(r["config"] for r in rows if r["method"] == "lshbloom" and json.loads(r["params"]) == chosen)
    assert worst[label] == pytest.approx(max(worst.values()), abs=1e-4)
    assert result["selected"]["lshbloom"]["config"] == label


def test_held_out_rows_and_agreement_with_datasketch(study):
    cfg, result = study
    held = _csv(os.path.join(cfg.out_dir, "heldout.csv"))
    assert {r["split"] for r in held} == {"heldout"}
    assert {"lshbloom", "lshbloom-paper", "minhashlsh", "ccnet", "dclm"} <= {r["method"] for r in held}
    agree = _csv(os.path.join(cfg.out_dir, "agreement.csv"))
    paper_bloom = [a for a in agree if a.get("product") == "paper" and a["reference"] == "datasketch-lshbloom"]
    assert len(paper_bloom) == len(cfg.levels)
    assert all(a["identical"] == "True" for a in paper_bloom)  # the paper preset decides as datasketch MinHashLSHBloom


def test_selection_breaks_ties_by_mean_then_cost():
    rows = []
    for cfg, f1s in (("a", (0.9, 0.95)), ("b", (0.9, 0.99)), ("c", (0.9, 0.99))):
        for lvl, f in zip((0.1, 0.9), f1s):
            params = {"threshold": 0.5, "num_perm": 256 if cfg == "b" else 128, "ngram": 1, "normalize": "none"}
            rows.append({"method": "m", "config": cfg, "split": "tune", "params": json.dumps(params), "level": lvl, "f1": f,
                         "precision": f, "recall": f, "seconds": 1.0, "index_bytes": 1})
    assert select(summarize(rows), "m", "tune")["config"] == "c"  # same worst and mean as b, fewer permutations


def test_score_command_runs_lshbloom_against_datasketch(tmp_path, capsys):
    pool, _ = G.prepare_sources(synthetic_sources(100, seed=6), min_words=50)
    path = G.write_stream(G.make_stream(pool, 60, 0.5, seed=3), str(tmp_path / "s.jsonl"))
    assert eval_main(["score", "--stream", path, "--preset", "paper"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["params"]["scheme"] == "legacy" and out["params"]["ngram"] == 1 and out["params"]["threshold"] == 0.5
    assert out["agreement"]["datasketch_lshbloom"]["identical"]
    assert out["lshbloom"]["tp"] + out["lshbloom"]["fn"] == 30
    # predictions from a file: a perfect and an empty predictor
    preds = tmp_path / "p.jsonl"
    st = G.read_stream(path)
    preds.write_text("".join(json.dumps({"id": d.id, "is_duplicate": d.is_duplicate}) + "\n" for d in st.docs))
    assert eval_main(["score", "--stream", path, "--predictions", str(preds)]) == 0
    assert json.loads(capsys.readouterr().out)["predictions"]["f1"] == 1.0
    preds.write_text(json.dumps({"id": st.docs[0].id, "is_duplicate": False}) + "\n")
    assert eval_main(["score", "--stream", path, "--predictions", str(preds)]) == 2
    assert "no prediction" in capsys.readouterr().err


def test_paper_preset_matches_conf_paper_toml():
    with open(os.path.join(REPO, "conf", "paper.toml"), "rb") as f:
        paper = tomllib.load(f)["dedup"]
    for k, v in PRESETS["paper"].items():
        assert paper[k] == v, k
    assert (PAPER.threshold, PAPER.num_perm, PAPER.ngram, PAPER.normalize, PAPER.scheme) == (
        paper["threshold"], paper["num_perm"], paper["ngram"], paper["normalize"], paper["scheme"])
    with pytest.raises(ConfigError, match="unknown preset"):
        preset_settings("fast")


def test_product_defaults_are_the_studys_choice():
    """The shingling and verification are the multilingual study's choice; the bands are one of the configurations
    its stage 2 scored and found within its precision constraint (docs/evaluation.md §0.2 says why not its pick)."""
    with open(os.path.join(REPO, "docs", "evaluation", "multilingual", "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    chosen = summary["chosen"]
    from lshbloom_udf.minhash import normalization_name

    assert (DEFAULTS["shingle"], DEFAULTS["ngram"]) == (chosen["unit"], chosen["ngram"])
    assert normalization_name(DEFAULTS["normalize"]) == chosen["normalize"]
    assert (DEFAULTS["verify"], DEFAULTS["verify_threshold"], DEFAULTS["containment_threshold"],
            DEFAULTS["containment_min_jaccard"]) == (
        chosen["verify"], chosen["tj"], chosen["tc"], chosen["containment_min_jaccard"])
    # The study's labels name containment's Jaccard floor since it became a grid dimension.
    shipped = (f"T {DEFAULTS['threshold']:g} k {DEFAULTS['num_perm']} Tj {chosen['tj']:g} / Tc {chosen['tc']:g} "
               f"(J >= {chosen['containment_min_jaccard']:g})")
    assert any(ok and label.startswith(f"{chosen['unit']}{chosen['ngram']} ") and label.endswith(shipped)
               for (ok, *_), label in summary["stage2"]), shipped


def test_the_studys_shipped_row_is_the_products_defaults():
    """The row the study reports as shipped decides with the defaults' every setting: shingles, bands, signatures
    (scheme and permutations), verification, the template rule and verification's bounded candidates."""
    from evaluation.study.candidates import Bounds
    from evaluation.study.multilingual import SHIPPED
    from lshbloom_udf.spark.verify.sources import ANCHORS_PER_BUCKET, CANDIDATES_PER_DOCUMENT
    from lshbloom_udf.minhash import normalization_name

    sh = SHIPPED.shingling
    assert (sh.unit, sh.ngram, ",".join(sh.normalize)) == (
        DEFAULTS["shingle"], DEFAULTS["ngram"], normalization_name(DEFAULTS["normalize"]))
    assert (SHIPPED.threshold, SHIPPED.num_perm, SHIPPED.scheme) == (
        DEFAULTS["threshold"], DEFAULTS["num_perm"], DEFAULTS["scheme"])
    assert (SHIPPED.tj, SHIPPED.tc, SHIPPED.floor, SHIPPED.template_max_df) == (
        DEFAULTS["verify_threshold"], DEFAULTS["containment_threshold"], DEFAULTS["containment_min_jaccard"],
        DEFAULTS["template_max_df"])
    assert DEFAULTS["seed"] == 1  # the study's signatures use seed 1
    assert SHIPPED.bounds == Bounds(anchors=ANCHORS_PER_BUCKET, per_document=CANDIDATES_PER_DOCUMENT)


@pytest.mark.slow
def test_default_configuration_decides_as_datasketch_in_spark(spark):
    """deduplicate() with the new defaults equals datasketch MinHashLSHBloom over the contract's shingles.

    datasketch keys bands by their sum: the comparison runs with band_key="sum"; the default mix key
    decides the same on a stream this small (no band-sum collisions to tell them apart).
    """
    from spark_support import datasketch_flags

    from lshbloom_udf import deduplicate

    pool, _ = G.prepare_sources(synthetic_sources(100, seed=8), min_words=50)
    st = G.make_stream(pool, 80, 0.5, seed=2, name="s")
    df = spark.createDataFrame([(d.id, d.text) for d in st.docs], "id string, text string").repartition(2)
    def run(**kw):
        out = deduplicate(df, id_col="id", order_by="id", progress=False, **kw).collect()
        flags = {r["id"]: r["is_duplicate"] for r in out}
        return [flags[d.id] for d in st.docs]  # ids sort in stream order

    # The defaults' shingles with datasketch's own permutations, decided by the pass alone (scheme poisson and
    # verification are the product's own: datasketch has neither); without verification the bands are those for
    # verify_threshold (lshbloom_udf/bands.py).
    datasketch_like = dict(scheme="affine32", verify=False)
    ours = run(band_key="sum", **datasketch_like)
    assert ours == datasketch_flags(st.texts, config={**DEFAULTS, **datasketch_like,
                                                      "threshold": DEFAULTS["verify_threshold"]})
    assert run(**datasketch_like) == ours
    assert sum(ours) >= 30  # most of the 40 duplicates are found
