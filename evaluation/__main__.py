"""The evaluation suite's command line.

    python -m evaluation generate --input docs.jsonl.gz --output-dir streams/ [--docs 1000] [--levels 0.1,0.5,0.9]
    python -m evaluation score --stream streams/stream-50.jsonl.gz [--predictions flags.jsonl] [--preset paper | --threshold ...]
    python -m evaluation study --tune linux-docs.jsonl.gz --test man-pages.jsonl.gz --out docs/evaluation
    python -m evaluation corpus --packages numpy,scipy,pandas,matplotlib,pyarrow --output docstrings.jsonl.gz

``generate`` writes one labelled stream per duplication level (JSONL with id,
text, source, kind, variant, is_duplicate, level) and a ``manifest.json``.
``score`` scores predictions (a JSONL/Parquet file or Spark output directory
with the id and a boolean flag column) against a stream, or, without
``--predictions``, runs LSHBloom with the given parameters and reports its
precision, recall and F1 and its agreement with datasketch ``MinHashLSH``
and ``MinHashLSHBloom`` on the same stream. ``study`` runs the tuning study
(:mod:`evaluation.study`). ``corpus`` builds a source corpus from
the docstrings of installed packages (a genre of its own, for a held-out test
of settings chosen on other data).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from typing import Optional

from lshbloom_udf.config import DEFAULTS


def _levels(text: str) -> tuple[float, ...]:
    try:
        levels = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"levels must be a comma list of numbers, got {text!r}") from None
    for lvl in levels:
        if not 0.0 <= lvl < 1.0:
            raise argparse.ArgumentTypeError(f"duplication levels must be in [0, 1), got {lvl}")
    if not levels:
        raise argparse.ArgumentTypeError("no levels given")
    return levels


def cmd_generate(args) -> int:
    from evaluation.generator import make_streams, prepare_sources, read_jsonl, write_stream

    sources = read_jsonl(args.input, args.text_field, args.id_field)
    pool, report = prepare_sources(sources, min_words=args.min_words)
    streams = make_streams(pool, args.docs, args.levels, seed=args.seed, name=args.name)
    os.makedirs(args.output_dir, exist_ok=True)
    files = []
    for st in streams:
        path = os.path.join(args.output_dir, f"stream-{round(st.level * 100):02d}.jsonl.gz")
        write_stream(st, path)
        files.append({"path": os.path.basename(path), "level": st.level, "docs": len(st.docs),
                      "duplicates": sum(st.labels), "kinds": st.kind_counts()})
    manifest = {"input": os.path.abspath(args.input), "seed": args.seed, "docs": args.docs, "pool": report,
                "noise": streams[0].noise.to_dict() if streams else {}, "streams": files}
    with open(os.path.join(args.output_dir, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
    print(json.dumps({"pool": report, "streams": [(s["path"], s["duplicates"]) for s in files]}))
    return 0


def _read_predictions(path: str, id_col: str, flag_col: str) -> dict:
    import pandas as pd

    if os.path.isdir(path):
        parts = sorted(glob.glob(os.path.join(path, "*.parquet"))) or sorted(glob.glob(os.path.join(path, "*.json")))
        if not parts:
            raise ValueError(f"{path}: no parquet or json part files")
        frames = [pd.read_parquet(p) if p.endswith(".parquet") else pd.read_json(p, lines=True) for p in parts]
        df = pd.concat(frames, ignore_index=True)
    elif path.endswith(".parquet"):
        df = pd.read_parquet(path)
    else:
        df = pd.read_json(path, lines=True)
    for c in (id_col, flag_col):
        if c not in df.columns:
            raise ValueError(f"{path}: no column {c!r} (columns: {', '.join(map(str, df.columns))})")
    return dict(zip(df[id_col].astype(str), df[flag_col].astype(bool)))


def cmd_score(args) -> int:
    import numpy as np

    from evaluation import baselines as B
    from evaluation.generator import read_stream
    from evaluation.scoring import agreement, score
    from lshbloom_udf.index import IndexParams
    from lshbloom_udf.minhash import signatures, band_keys

    stream = read_stream(args.stream)
    labels = stream.labels
    out: dict = {"stream": args.stream, "docs": len(labels), "duplicates": int(sum(labels))}
    if args.predictions:
        pred = _read_predictions(args.predictions, args.id_column, args.flag_column)
        missing = [d.id for d in stream.docs if d.id not in pred]
        if missing:
            raise ValueError(f"{len(missing)} stream documents have no prediction (first: {missing[0]})")
        out["predictions"] = score(labels, [pred[d.id] for d in stream.docs]).to_dict()
    else:
        s = dict(DEFAULTS)
        if args.preset:
            from lshbloom_udf.config import preset_settings

            s.update(preset_settings(args.preset))
        for k in ("threshold", "num_perm", "ngram", "normalize", "scheme", "seed", "p_effective"):
            if getattr(args, k) is not None:
                s[k] = getattr(args, k)
        params = IndexParams.for_threshold(len(labels), s["threshold"], s["num_perm"], ngram=s["ngram"],
                                           normalize=s["normalize"], scheme=s["scheme"], seed=s["seed"],
                                           p_effective=s["p_effective"])
        sigs = signatures(stream.texts, params.num_perm, params.ngram, params.seed, params.scheme, params.normalize)
        has = ~(sigs == np.uint32(0xFFFFFFFF)).all(axis=1)
        ours = B.lshbloom_decisions(band_keys(sigs, params.b, params.r), has, params)
        out["params"] = {k: getattr(params, k) for k in ("threshold", "num_perm", "b", "r", "ngram", "normalize", "scheme", "seed", "p_effective")}
        out["lshbloom"] = score(labels, ours.duplicate).to_dict()
        if not args.no_datasketch:
            mh = B.minhashes_from_signatures(sigs, has, seed=params.seed, scheme=params.scheme)
            exact = B.datasketch_lsh_decisions(mh, params.threshold, params.num_perm, bands=(params.b, params.r))
            bloom = B.datasketch_lshbloom_decisions(mh, params.threshold, params.num_perm, len(labels), params.p_band,
                                                    bands=(params.b, params.r))
            out["minhashlsh"] = score(labels, exact.duplicate).to_dict()
            out["datasketch_lshbloom"] = score(labels, bloom.duplicate).to_dict()
            out["agreement"] = {"minhashlsh": agreement(ours.duplicate, exact.duplicate).to_dict(),
                                "datasketch_lshbloom": agreement(ours.duplicate, bloom.duplicate).to_dict()}
    print(json.dumps(out, indent=2))
    return 0


def cmd_corpus(args) -> int:
    import gzip

    from lshbloom_udf.sample import docstring_documents, package_modules

    packages = [p.strip() for p in args.packages.split(",") if p.strip()]
    modules = package_modules(packages)
    docs = docstring_documents(modules, args.min_words)
    if not docs:
        raise ValueError(f"no docstrings of {args.min_words}+ words found in {', '.join(packages)}")
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with gzip.open(args.output, "wt", encoding="utf-8") as f:
        for i, text in enumerate(docs):
            f.write(json.dumps({"id": f"docstring-{i:06d}", "text": text}, ensure_ascii=False) + "\n")
    print(json.dumps({"packages": packages, "modules": len(modules), "documents": len(docs), "output": args.output}))
    return 0


def cmd_study(args) -> int:
    from evaluation.study import StudyConfig, run_study

    cfg = StudyConfig(tune=args.tune, test=args.test, out_dir=args.out, docs=args.docs, levels=args.levels,
                      seed=args.seed, grid=args.grid, min_words=args.min_words, plots=not args.no_plots)
    run_study(cfg, log=(lambda *a: None) if args.quiet else (lambda msg: print(msg, flush=True)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from evaluation.generator import DEFAULT_LEVELS

    p = argparse.ArgumentParser(prog="python -m evaluation", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    default_levels = ",".join(f"{x:g}" for x in DEFAULT_LEVELS)

    g = sub.add_parser("generate", help="write labelled streams from a JSONL of source documents")
    g.add_argument("--input", required=True, help="JSONL (.gz allowed) of source documents")
    g.add_argument("--output-dir", required=True)
    g.add_argument("--docs", type=int, default=1000, help="documents per stream (default 1000)")
    g.add_argument("--levels", type=_levels, default=DEFAULT_LEVELS, help=f"duplication levels (default {default_levels})")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--min-words", type=int, default=50, help="sources shorter than this are not used")
    g.add_argument("--text-field", default="text")
    g.add_argument("--id-field", default="id")
    g.add_argument("--name", default="stream", help="prefix of the stream documents' ids")
    g.set_defaults(func=cmd_generate)

    s = sub.add_parser("score", help="score predictions, or LSHBloom against datasketch, on a labelled stream")
    s.add_argument("--stream", required=True, help="a stream written by `generate`")
    s.add_argument("--predictions", help="JSONL/Parquet file or Spark output directory with id and flag columns")
    s.add_argument("--id-column", default="id")
    s.add_argument("--flag-column", default=DEFAULTS["flag_column"])
    s.add_argument("--preset", choices=("paper",), help="start from a named preset instead of the defaults")
    s.add_argument("--threshold", type=float)
    s.add_argument("--num-perm", type=int)
    s.add_argument("--ngram", type=int)
    s.add_argument("--normalize")
    s.add_argument("--scheme", choices=("affine32", "legacy"))
    s.add_argument("--seed", type=int)
    s.add_argument("--p-effective", type=float)
    s.add_argument("--no-datasketch", action="store_true", help="skip the datasketch comparison")
    s.set_defaults(func=cmd_score)

    c = sub.add_parser("corpus", help="write a JSONL.gz source corpus of the docstrings of installed packages")
    c.add_argument("--packages", default="numpy,scipy,pandas,matplotlib,pyarrow",
                   help="comma list of importable packages, walked with their submodules (tests excluded)")
    c.add_argument("--output", required=True, help="JSONL.gz file to write (fields id, text)")
    c.add_argument("--min-words", type=int, default=50)
    c.set_defaults(func=cmd_corpus)

    st = sub.add_parser("study", help="run the tuning study (CSV, results.md, PNG plots)")
    st.add_argument("--tune", required=True, help="JSONL of source documents to tune on")
    st.add_argument("--test", help="JSONL of held-out source documents (default: the other half of an id split of --tune)")
    st.add_argument("--out", default="docs/evaluation", help="output directory (default docs/evaluation)")
    st.add_argument("--docs", type=int, default=2000, help="documents per stream (default 2000)")
    st.add_argument("--levels", type=_levels, default=DEFAULT_LEVELS)
    st.add_argument("--seed", type=int, default=0)
    st.add_argument("--grid", choices=("tiny", "default", "full"), default="default")
    st.add_argument("--min-words", type=int, default=50)
    st.add_argument("--no-plots", action="store_true")
    st.add_argument("--quiet", action="store_true")
    st.set_defaults(func=cmd_study)
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
