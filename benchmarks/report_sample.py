"""The run report of the held-out sample, as a screenshot for docs/report.png.

    PYTHONPATH=. .venv/bin/python benchmarks/report_sample.py --out docs/report.png

The held-out streams of the multilingual study (evaluation/study/multilingual.py: every language's held-out half,
English's from man-pages; the 50 % duplicates level, crawl-noise copies), concatenated into one JSONL file with a
``lang`` column. One job (local[2]) with the defaults and ``--id-column id --duplicate-of --duplicate-count
--report --report-by lang``; the report is opened in headless Chromium and saved as a PNG (full page, 1280 px wide).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

LEVEL = 0.5


def write_sample(corpus_dir: str, path: str) -> int:
    from evaluation.study.multilingual import build_splits

    splits, _ = build_splits(corpus_dir, docs=200, english_docs=300, seed=0, log=lambda *a: None)
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for lang, (_, held) in sorted(splits.items()):
            stream = next(s for s in held.streams if s.level == LEVEL)
            for d in stream.docs:
                f.write(json.dumps({"id": f"{lang}-{n:05d}", "lang": lang, "text": d.text}, ensure_ascii=False) + "\n")
                n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus-dir", default=os.path.join(ROOT, "..", "shared", "corpus"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "report.png"))
    ap.add_argument("--height", type=int, default=4900)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="lshbloom-report-sample-")
    sample = os.path.join(work, "heldout.jsonl")
    print(f"{write_sample(args.corpus_dir, sample):,} documents in {sample}")
    out = os.path.join(work, "out")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=ROOT)
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "spark-submit"), "--master", "local[2]",
                    "--conf", "spark.ui.enabled=false", os.path.join(ROOT, "spark_jobs", "dedup.py"),
                    "--input", sample, "--output", out, "--id-column", "id", "--duplicate-of", "--duplicate-count",
                    "--report", "--report-by", "lang", "--quiet"], env=env, check=True)
    chromium = shutil.which("chromium") or "chromium"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={work}/profile", f"--window-size=1280,{args.height}",
                    "--virtual-time-budget=15000", f"--screenshot={args.out}", f"file://{out}.report.html"],
                   check=True, capture_output=True)
    print(f"screenshot {args.out} of {out}.report.html")


if __name__ == "__main__":
    main()
