"""The dolma side of the paragraph-dedup benchmark: ``dolma dedupe`` with ``dedupe.paragraphs`` (dolma 1.2.1).

    python benchmarks/paragraphs_dolma.py --corpus build/paragraphs/corpus.jsonl.gz --workdir build/paragraphs/dolma \
        [--json build/paragraphs/dolma.json] [--skip-empty] [--min-length N] [--separator '\\n']

dolma runs as a subprocess through the CLI of a separate virtualenv (``DOLMA`` below, or ``$DOLMA_BIN``), made with

    python3 -m venv /work/dolma-venv && /work/dolma-venv/bin/pip install dolma==1.2.1

:func:`run_dolma` writes a config, times ``dolma -c CONFIG dedupe`` (wall seconds, which include ~2 s of Python
start-up; ``startup_seconds`` measures that with ``--dryrun``), then reads the attribute files back.

What dolma 1.2.1 does (``src/deduper.rs``, ``write_attributes``; ``src/bloom_filter.rs``), checked on hand-made
input:

* Paragraphs are ``text.split(separator)`` (Rust ``str::split``; the same pieces as Python's ``str.split``),
  ``dedupe.paragraphs.paragraph_separator``, default ``"\\n"``. A document whose ``text`` is ``""`` is not looked at
  (its attribute is absent, not ``[]``). Every piece counts, including empty ones (blank lines, the piece after a
  trailing newline), unless ``dedupe.skip_empty`` (drops pieces whose Rust ``trim()`` is empty) or
  ``dedupe.min_length`` (drops pieces of fewer code points). ``dedupe.min_words > 0`` turns the dedup off entirely
  in 1.2.1 (the hashing sits in the ``else`` of the ``min_words`` test), so it is not offered here.
* No normalisation: the key is the piece's exact bytes (case, spaces, ``\\r`` all count), hashed by ``k`` ahash
  hashers with random seeds drawn when the filter is created.
* Keep-first: per piece, in order, "in the filter? then a span, else insert". Within one file it is strictly
  sequential (so a paragraph repeated inside one document is flagged at its second occurrence). Files go in glob
  order to a pool of ``processes`` threads sharing one filter; with more than one thread the order across files,
  and so which copy is kept, is not deterministic. Default here: one file, one thread.
* The filter file is loaded if it exists, and attribute files are overwritten, so :func:`run_dolma` clears both.
  Size: ``estimated_doc_count`` is the number of keys (here: paragraphs); the size is 1 MiB doubled until the
  false-positive rate is at most ``desired_false_positive_rate``; ``k = ceil(bits / count * ln 2)``.

Span convention (what ``removed`` holds): dolma writes ``[start, end, 1]`` per flagged piece, in piece order.
``start`` and ``end`` are **code-point offsets** (Rust ``chars().count()``), i.e. Python ``str`` indices, not
UTF-8 bytes. dolma computes them as ``start = previous end``; ``end = start + len(piece)``, plus 1 "for the
newline" when ``start + len(piece) < len(text.encode("utf-8")) - 1`` (a code-point offset compared with a byte
length). So, with the default one-character separator:

* ``start`` is the piece's true offset, except for the final empty piece of an all-ASCII text that ends with the
  separator, which dolma puts at ``len(text) - 1`` (its true start is ``len(text)``); in every case
  ``text[start:start + len(piece)] == piece``;
* ``end`` covers the separator after the piece (``text[start:end] == piece + "\\n"``) except for the last piece
  (``end = start + len(piece)``), and, in an all-ASCII text that ends with the separator, for the piece before the
  final empty one (that ``"\\n"`` is in no span, and the empty last piece is ``[len-1, len-1]``);
* in a text whose UTF-8 form is 2 or more bytes longer than its code points, the last piece (the empty one when
  the text ends with the separator) gets the +1 too, so its ``end`` is ``len(text) + 1``;
* an interior empty piece (a blank line) is a span ``[k, k + 1]`` (just its ``"\\n"``); the final empty piece of a
  text ending in ``"\\n"`` is a zero-length span ``[k, k]``;
* a separator of more than one character still adds only 1, so spans drift left by ``len(sep) - 1`` per earlier
  piece (they no longer point at the paragraph).

Python slicing clips, so ``text[start:end]`` is the paragraph plus at most its one separator character whenever the
separator is one character. ``removed_paragraphs`` (the index of each flagged piece in ``text.split(sep)``) and
``removed_str_spans`` (exact ``[start, end)`` of the piece itself in Python ``str`` offsets, no separator) are
derived from ``removed`` by replaying dolma's arithmetic (:func:`dolma_piece_spans`), for comparing with another
implementation.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import time

DOLMA = os.environ.get("DOLMA_BIN", "/work/dolma-venv/bin/dolma")
ATTRIBUTE = "bff_duplicate_paragraph_spans"


def dolma_piece_spans(text: str, separator: str = "\n") -> list[tuple[int, int]]:
    """``(start, end)`` dolma 1.2.1 gives each piece of ``text.split(separator)`` (``[]`` for ``""``)."""
    if not text:
        return []
    n_bytes = len(text.encode("utf-8"))
    out, offset = [], 0
    for piece in text.split(separator):
        start = offset
        offset += len(piece)
        if offset < n_bytes - 1:
            offset += 1
        out.append((start, offset))
    return out


def exact_piece_spans(text: str, separator: str = "\n") -> list[tuple[int, int]]:
    """The true ``[start, end)`` of each piece of ``text.split(separator)`` in ``text`` (no separator)."""
    if not text:
        return []
    out, offset = [], 0
    for piece in text.split(separator):
        out.append((offset, offset + len(piece)))
        offset += len(piece) + len(separator)
    return out


def _eligible(piece: str, skip_empty: bool, min_length: int) -> bool:
    if len(piece) < min_length:
        return False
    return not (skip_empty and not piece.strip())


def _write_config(path, documents, workdir, bloom, attribute, separator, skip_empty, min_length, estimated,
                  fp_rate, size_in_bytes, processes, by_ngram):
    paragraphs = {"attribute_name": attribute, "paragraph_separator": separator}
    if by_ngram:
        paragraphs["by_ngram"] = dict(by_ngram)
    config = {
        "documents": documents,
        "work_dir": {"input": os.path.join(workdir, "tmp", "input"), "output": os.path.join(workdir, "tmp", "output")},
        "dedupe": {"name": attribute, "paragraphs": paragraphs, "skip_empty": bool(skip_empty),
                   "min_length": int(min_length), "min_words": 0},
        "bloom_filter": {"file": bloom, "read_only": False, "size_in_bytes": int(size_in_bytes or 0),
                         "estimated_doc_count": int(estimated), "desired_false_positive_rate": "@FP_RATE@"},
        "processes": int(processes),
    }
    # JSON is YAML, but PyYAML reads "1e-06" (no dot) as a string: write the rate as "1.0e-06".
    text = json.dumps(config, indent=1).replace('"@FP_RATE@"', "%.6e" % float(fp_rate))
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    config["bloom_filter"]["desired_false_positive_rate"] = float(fp_rate)
    return config


def run_dolma(corpus_path: str, workdir: str, processes: int = 1, separator: str = "\n", skip_empty: bool = False,
              min_length: int = 0, false_positive_rate: float = 1e-6, size_in_bytes: int = 0, shards: int = 1,
              by_ngram: dict | None = None, attribute: str = ATTRIBUTE, dolma: str = DOLMA,
              measure_startup: bool = False, keep_files: bool = False) -> dict:
    """Run dolma's paragraph dedup on ``corpus_path`` (gzipped JSONL, ``id`` and ``text``) inside ``workdir``.

    ``workdir`` gets ``documents/`` (a symlink to the corpus, or ``shards`` contiguous pieces of it in order),
    ``config.json``, ``bloom.bin``, ``attributes/<attribute>/`` and ``dedupe.log``; the filter and attributes of an
    earlier run are deleted first (dolma would load the old filter and flag everything). The filter is sized for
    the corpus's paragraph count at ``false_positive_rate`` (or ``size_in_bytes``, which still needs the count:
    dolma panics on a count of 0). ``by_ngram`` is passed through as ``dedupe.paragraphs.by_ngram``.

    Returns ``seconds`` (wall time of ``dolma dedupe``), ``paragraphs`` (pieces of ``text.split(separator)`` over
    documents with non-empty text: what dolma iterates), ``eligible`` (those left after ``skip_empty`` and
    ``min_length``), ``hashed`` (dolma's own count, summed from its "Job total" log lines; equals ``eligible``),
    ``removed`` ({doc id: [[start, end], ...]} exactly as dolma wrote them, without the score; the convention is in
    the module docstring), ``removed_paragraphs`` ({doc id: [piece index, ...]}), ``removed_str_spans`` ({doc id:
    [[start, end), ...]} of the pieces themselves, Python ``str`` offsets), ``scores`` (only with ``by_ngram``),
    ``documents``, ``removed_count``, ``bloom`` (size in bytes, hashers, dolma's predicted rate), ``startup_seconds``
    (``--dryrun`` wall time, if ``measure_startup``), ``config`` and ``dolma_version``.
    """
    workdir = os.path.abspath(workdir)
    docs_dir = os.path.join(workdir, "documents")
    attr_dir = os.path.join(workdir, "attributes", attribute)
    bloom = os.path.join(workdir, "bloom.bin")
    for path in (docs_dir, os.path.join(workdir, "attributes"), os.path.join(workdir, "tmp")):
        shutil.rmtree(path, ignore_errors=True)
    if os.path.exists(bloom):
        os.remove(bloom)
    os.makedirs(docs_dir)

    # One pass over the corpus: count paragraphs the way dolma splits, keep the texts for the span mapping.
    texts: dict[str, str] = {}
    paragraphs = eligible = 0
    writers = []
    if shards > 1:
        n_docs = sum(1 for _ in gzip.open(corpus_path, "rt", encoding="utf-8"))
        per = -(-n_docs // shards)
        writers = [gzip.open(os.path.join(docs_dir, f"{k:05d}.jsonl.gz"), "wt", encoding="utf-8", compresslevel=1)
                   for k in range(shards)]
    with gzip.open(corpus_path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f):
            doc = json.loads(line)
            text = doc["text"]
            texts[str(doc["id"])] = text
            if text:
                pieces = text.split(separator)
                paragraphs += len(pieces)
                eligible += sum(1 for p in pieces if _eligible(p, skip_empty, min_length))
            if writers:
                writers[n // per].write(line if line.endswith("\n") else line + "\n")
    for w in writers:
        w.close()
    if not writers:
        name = os.path.basename(corpus_path)
        if not name.endswith((".gz", ".zst", ".zstd")):
            raise ValueError("the corpus file name must end in .gz (dolma infers compression from it)")
        os.symlink(os.path.abspath(corpus_path), os.path.join(docs_dir, name))

    config_path = os.path.join(workdir, "config.json")
    config = _write_config(config_path, [os.path.join(docs_dir, "*.gz")], workdir, bloom, attribute, separator,
                           skip_empty, min_length, max(eligible, 1), false_positive_rate, size_in_bytes, processes,
                           by_ngram)
    log_path = os.path.join(workdir, "dedupe.log")

    startup = None
    if measure_startup:
        t0 = time.perf_counter()
        subprocess.run([dolma, "-c", config_path, "dedupe", "--dryrun"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        startup = time.perf_counter() - t0

    with open(log_path, "w") as log:
        t0 = time.perf_counter()
        proc = subprocess.run([dolma, "-c", config_path, "dedupe"], stdout=log, stderr=subprocess.STDOUT)
        seconds = time.perf_counter() - t0
    with open(log_path, encoding="utf-8", errors="replace") as f:
        log_text = f.read()
    if proc.returncode != 0:
        raise RuntimeError(f"dolma dedupe failed ({proc.returncode}); last lines of {log_path}:\n"
                           + "\n".join(log_text.splitlines()[-15:]))

    hashed = sum(int(m) for m in re.findall(r"Job total: (\d+)", log_text))
    m = re.search(r"Bloom filter will have size (\d+), (\d+) hashers, false positive rate ([0-9.e-]+[0-9])", log_text)
    bloom_info = {}
    if m:
        bloom_info = {"size_in_bytes": int(m.group(1)), "hashers": int(m.group(2)), "predicted_fp": float(m.group(3))}

    removed: dict[str, list[list[int]]] = {}
    removed_paragraphs: dict[str, list[int]] = {}
    removed_str: dict[str, list[list[int]]] = {}
    scores: dict[str, list[float]] = {}
    documents = removed_count = 0
    for name in sorted(os.listdir(attr_dir)):
        with gzip.open(os.path.join(attr_dir, name), "rt", encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                documents += 1
                spans = rec["attributes"].get(attribute) or []
                if not spans:
                    continue
                doc_id = str(rec["id"])
                removed[doc_id] = [[int(s[0]), int(s[1])] for s in spans]
                removed_count += len(spans)
                if by_ngram:
                    scores[doc_id] = [float(s[2]) for s in spans]
                text = texts[doc_id]
                dolma_spans = dolma_piece_spans(text, separator)
                exact = exact_piece_spans(text, separator)
                idx, j = [], 0
                for s in spans:  # spans come in piece order; equal spans (e.g. [k, k]) map to successive pieces
                    while j < len(dolma_spans) and dolma_spans[j] != (s[0], s[1]):
                        j += 1
                    if j == len(dolma_spans):
                        raise AssertionError(f"span {s} of {doc_id} matches no piece")
                    idx.append(j)
                    j += 1
                removed_paragraphs[doc_id] = idx
                removed_str[doc_id] = [list(exact[k]) for k in idx]

    result = {
        "seconds": seconds,
        "paragraphs": paragraphs,
        "eligible": eligible,
        "hashed": hashed,
        "documents": documents,
        "removed_count": removed_count,
        "removed": removed,
        "removed_paragraphs": removed_paragraphs,
        "removed_str_spans": removed_str,
        "bloom": bloom_info,
        "startup_seconds": startup,
        "config": config,
        "dolma_version": _dolma_version(dolma),
    }
    if by_ngram:
        result["scores"] = scores
    if not keep_files:
        shutil.rmtree(os.path.join(workdir, "tmp"), ignore_errors=True)
    return result


def _dolma_version(dolma: str) -> str | None:
    python = os.path.join(os.path.dirname(dolma), "python")
    try:
        out = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('dolma'))"],
                             capture_output=True, text=True, timeout=60)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def summary(result: dict) -> dict:
    """The figures of a :func:`run_dolma` result, without the per-document maps."""
    s = {k: v for k, v in result.items() if k not in ("removed", "removed_paragraphs", "removed_str_spans", "scores")}
    s["paragraphs_per_second"] = result["paragraphs"] / result["seconds"] if result["seconds"] else None
    s["documents_with_removals"] = len(result["removed"])
    return s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="gzipped JSONL (id, text), e.g. from paragraph_corpus.py")
    ap.add_argument("--workdir", required=True,
                    help="scratch folder (its documents/, attributes/ and bloom.bin are replaced)")
    ap.add_argument("--json", help="write the full result (with the per-document maps) here")
    ap.add_argument("--separator", default="\n", help="dedupe.paragraphs.paragraph_separator (default a newline)")
    ap.add_argument("--skip-empty", action="store_true", help="dedupe.skip_empty (default off, as in dolma)")
    ap.add_argument("--min-length", type=int, default=0, help="dedupe.min_length in code points (default 0)")
    ap.add_argument("--fp-rate", type=float, default=1e-6, help="bloom_filter.desired_false_positive_rate")
    ap.add_argument("--size-in-bytes", type=int, default=0, help="bloom_filter.size_in_bytes (default: from the rate)")
    ap.add_argument("--processes", type=int, default=1, help="dolma's thread count (default 1)")
    ap.add_argument("--shards", type=int, default=1, help="split the corpus into this many files, in order")
    ap.add_argument("--dolma", default=DOLMA, help="the dolma executable (default %(default)s)")
    args = ap.parse_args(argv)
    sep = args.separator.replace("\\n", "\n").replace("\\r", "\r").replace("\\t", "\t")
    result = run_dolma(args.corpus, args.workdir, processes=args.processes, separator=sep, skip_empty=args.skip_empty,
                       min_length=args.min_length, false_positive_rate=args.fp_rate, size_in_bytes=args.size_in_bytes,
                       shards=args.shards, dolma=args.dolma, measure_startup=True)
    s = summary(result)
    s.pop("config")
    print(json.dumps(s, indent=1))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)) or ".", exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
