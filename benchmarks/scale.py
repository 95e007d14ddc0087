"""The whole job at scale (10^6-10^7 documents): false flags, recall, stages, memory, and the ratio to datasketch.

    PYTHONPATH=. .venv/bin/python benchmarks/scale.py --docs 1000000 [--jobs mix,sum,paper,mix-spark,paper-spark]
                                                     [--datasketch-sample 20000] [--json build/scale.json]

Method:

1. **Data** (``benchmarks/scale_data.py``): N documents as one Parquet file
   (``id`` int64 = processing order, ``text``), cached under ``--cache`` keyed by
   the parameters: distinct documents are random word windows of the shared
   corpora (normalized, 40-80 words by default, from windows with few 4-grams
   the corpora repeat) with 30 % of their words replaced, and 1 % of N are
   planted near-duplicates (5 % of the words of an earlier distinct document
   replaced), placed after their source. A side file keeps the truth.
2. **Jobs**: ``spark-submit spark_jobs/dedup.py`` of this checkout on
   ``local[2]``, wall time from launch to exit (start-up included), the band key
   always explicit; ``--index-dir`` a fresh directory under ``--index-root``
   (/dev/shm), removed afterwards. ``mix`` / ``sum``: the product defaults with
   that band key (a new mix index is blocked, a sum one datasketch's format);
   ``mix-sources`` (on request): ``mix`` with ``--duplicate-of``, whose flags among distinct documents are
   checked against the job's rule with their named source (``unplanted_by_the_rule``); ``mix-blocked`` (on request): ``mix`` with an explicit ``--bloom blocked``, ``mix-cuckoo`` with ``--bloom cuckoo``,
   ``mix-no-template`` with ``--template-max-df 0`` (verification without its template rule);
   ``paper``: ``--preset paper --scheme affine32`` (band key sum);
   ``paper-mix`` (on request): the same with band key mix; ``mix-spark`` /
   ``paper-spark``: ``mix`` / ``paper`` with ``--key-transfer spark`` (keys
   through ``toLocalIterator``, one partition at a time, instead of the socket
   stream). From the output: false flags among
   distinct documents, recall on planted duplicates, rows lost or repeated;
   from ``<output>.summary.json``: seconds per stage, index bytes. The
   spark-submit process tree is polled with psutil (every 0.5 s): peak RSS and
   PSS summed by kind (the JVM = driver and executor in local mode; the Python
   driver, which maps the index, so its RSS includes the index pages it
   touched; the Python workers) and CPU seconds (user + system), which a
   shared machine's load inflates far less than wall time.
3. **Causes of false flags** (defaults): with the band keys of all documents
   (mix, computed in this process), each falsely flagged distinct document is
   looked up for an earlier document the job kept with an identical band: if
   there is one it is an LSH candidate (its true Jaccard is reported), if not a
   Bloom false positive or, with band key sum, two different bands of equal sum.
4. **Ratios**: the single-process datasketch 2.x pipeline with the same settings
   (``evaluation.baselines``: the contract's plain-Python shingling,
   ``MinHash`` + ``MinHashLSHBloom`` keep-first with the job's (b, r), capacity N
   and per-band rate) is timed (wall and CPU) on the first
   ``--datasketch-sample`` documents and extrapolated linearly to N (plus the
   measured time to read all N texts); its decisions on that prefix must equal
   the ``sum`` / ``paper`` job's. The driver pass inside the job (documents /
   ``seconds.driver_pass``) is set beside the native backend alone
   (``LSHBloomIndex.query_insert`` on the same keys, median of ``--repeat``) for
   both Bloom backends.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import scale_data  # noqa: E402
from bench_all import cpu_flags, load_avg  # noqa: E402
from bench_core import machine  # noqa: E402

from lshbloom_udf import _native  # noqa: E402
from lshbloom_udf.config import DEFAULTS, preset_settings  # noqa: E402
from lshbloom_udf.index import BLOOMS, IndexParams, LSHBloomIndex  # noqa: E402

# name: (settings for datasketch, job flags)
JOBS = {
    "mix": ("defaults", ["--band-key", "mix"]),  # the defaults: a new mix index is blocked
    # the defaults in a one-off run that keeps no index (no --index-dir: no index files, no records), as a peer runs
    "mix-no-index": ("defaults", ["--band-key", "mix"]),
    "sum": ("defaults", ["--band-key", "sum"]),
    # datasketch's band key on the product's filters: the key's false flags without the slower compatible files
    "sum-blocked": ("defaults", ["--band-key", "sum", "--bloom", "blocked"]),
    "mix-blocked": ("defaults", ["--band-key", "mix", "--bloom", "blocked"]),
    # the cuckoo layout in the job (issue 23): its driver pass beside the blocked default's
    "mix-cuckoo": ("defaults", ["--band-key", "mix", "--bloom", "cuckoo"]),
    "paper": ("paper", ["--preset", "paper", "--scheme", "affine32", "--band-key", "sum"]),
    # not run by default: the paper's settings with the mix key, to tell the band key's false flags from the unigrams'
    "paper-mix": ("paper", ["--preset", "paper", "--scheme", "affine32", "--band-key", "mix"]),
    # the keys through toLocalIterator (Spark Connect's way) instead of the socket stream: the streaming's effect
    "mix-spark": ("defaults", ["--band-key", "mix", "--key-transfer", "spark"]),
    # the defaults without verification's template rule (issue 20): its cost side by side
    "mix-no-template": ("defaults", ["--band-key", "mix", "--template-max-df", "0"]),
    # the defaults' permissive bands without verification (issue 33's yardstick: the defaults within 1.5x of it)
    "mix-no-verify": ("defaults", ["--band-key", "mix", "--no-verify", "--threshold", "0.3"]),
    # the defaults naming each flag's source: the unplanted flags are then checked against the rule (score)
    "mix-sources": ("defaults", ["--band-key", "mix", "--duplicate-of"]),
    # the defaults with paragraph dedup (issue 51; the paragraph filter is the run's own: no --index-dir)
    "mix-paragraphs": ("defaults", ["--band-key", "mix", "--paragraphs", "remove"]),
    # the defaults with verified flags (issue 14): a candidate below T is not a duplicate
    "mix-verify": ("defaults", ["--band-key", "mix", "--verify"]),
    # the defaults before the multilingual study (word 4-grams, T 0.45, 512 affine32 permutations, no verification):
    # the yardstick of issue 20's "at most 1.5x today's defaults"
    "previous": ("previous", ["--band-key", "mix", "--shingle", "words", "--ngram", "4", "--normalize", "all",
                              "--threshold", "0.45", "--num-perm", "512", "--scheme", "affine32", "--no-verify"]),
    # the paper's settings with the product's own Bloom format (not datasketch-readable)
    "paper-blocked": ("paper", ["--preset", "paper", "--scheme", "affine32", "--band-key", "sum", "--bloom", "blocked"]),
    "paper-spark": ("paper", ["--preset", "paper", "--scheme", "affine32", "--band-key", "sum", "--key-transfer", "spark"]),
}
WITHOUT_INDEX = ("mix-no-index", "mix-paragraphs")  # the jobs given no --index-dir
DEFAULT_JOBS = ("mix", "sum", "paper", "mix-spark", "paper-spark")
# The job whose decisions datasketch's must equal, per settings.
SAME_DECISIONS = {"defaults": "sum", "paper": "paper"}
KINDS = ("jvm", "py_driver", "py_workers", "other")


PREVIOUS_DEFAULTS = {"shingle": "words", "ngram": 4, "normalize": "all", "threshold": 0.45, "num_perm": 512,
                     "scheme": "affine32", "verify": False}


def settings(which: str, band_key: str = "sum") -> dict:
    """The MinHash settings of ``defaults`` or the ``paper`` preset with affine32, as IndexParams keywords."""
    if which == "previous":
        s = {**dict(DEFAULTS), **PREVIOUS_DEFAULTS}
    else:
        s = dict(DEFAULTS) if which == "defaults" else {**dict(DEFAULTS), **preset_settings("paper"), "scheme": "affine32"}
    keys = ("threshold", "num_perm", "ngram", "shingle", "normalize", "seed", "scheme", "p_effective")
    return {**{k: s[k] for k in keys}, "band_key": band_key}


def index_params(n: int, which: str, band_key: str = "sum") -> IndexParams:
    s = settings(which, band_key)
    return IndexParams.for_threshold(n, s.pop("threshold"), s.pop("num_perm"), **s)


# --------------------------------------------------------------------------
# the job


class TreePeaks(threading.Thread):
    """Peak memory of a process tree by kind (RSS and PSS sums), polled until :meth:`stop`."""

    def __init__(self, pid: int, interval: float = 0.5):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak = {f"{k}_{m}": 0 for k in (*KINDS, "total") for m in ("rss", "pss")}
        self.cpu: dict = {}  # pid -> (kind, last user + system seconds seen)
        self._done = threading.Event()

    @staticmethod
    def kind(proc) -> str:
        name, cmd = proc.name(), " ".join(proc.cmdline())
        if "java" in name:
            return "jvm"
        if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
            return "py_workers"
        return "py_driver" if "python" in name else "other"

    def sample(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
            procs = [root] + root.children(recursive=True)
        except psutil.Error:
            return
        now = dict.fromkeys(self.peak, 0)
        for p in procs:
            try:
                kind, mem, cpu = self.kind(p), p.memory_full_info(), p.cpu_times()
            except psutil.Error:
                continue
            self.cpu[p.pid] = (kind, cpu.user + cpu.system)
            for m in ("rss", "pss"):
                now[f"{kind}_{m}"] += getattr(mem, m)
                # "other": the bash wrapper, and the JVM's short-lived spawn helpers, which share its pages
                now[f"total_{m}"] += getattr(mem, m) if kind != "other" else 0
        for k, v in now.items():
            self.peak[k] = max(self.peak[k], v)

    def run(self) -> None:
        while not self._done.wait(self.interval):
            self.sample()

    def stop(self) -> dict:
        """Peaks, and CPU seconds by kind (each process's last sample: up to ``interval`` of its end is missed)."""
        self._done.set()
        self.join()
        cpu = {f"{k}_cpu_s": sum(c for kind, c in self.cpu.values() if kind == k) for k in KINDS}
        return {**self.peak, **cpu, "total_cpu_s": sum(cpu.values())}


def spark_command(args, job: str, data: dict, out: str, index: str) -> list:
    py = sys.executable
    confs = ["spark.ui.enabled=false", "spark.driver.host=127.0.0.1", "spark.driver.bindAddress=127.0.0.1", *args.conf]
    return [
        os.path.join(os.path.dirname(py), "spark-submit"), "--master", "local[2]", "--driver-memory", args.driver_memory,
        *[x for c in confs for x in ("--conf", c)],
        os.path.join(ROOT, "spark_jobs", "dedup.py"), "--input", data["docs"], "--input-format", "parquet",
        "--output", out, "--summary-path", out + ".summary.json",
        *(() if job in WITHOUT_INDEX else ("--index-dir", index)), *JOBS[job][1],
    ]


def wait_or_kill(proc, log: str, timeout: float, stall: float) -> tuple:
    """(exit status, None), or (None, why) after killing the process tree: past ``timeout`` seconds, or no new
    line in the job's log for ``stall`` seconds (a JVM in a GC spiral, or a lost task result, never exits by itself)."""
    import psutil

    start = changed = time.monotonic()
    size = -1
    while True:
        try:
            return proc.wait(timeout=5), None
        except subprocess.TimeoutExpired:
            now = time.monotonic()
            if os.path.getsize(log) != size:
                size, changed = os.path.getsize(log), now
            why = (f"killed after --job-timeout {timeout:.0f} s" if now - start > timeout else
                   f"killed: no new log line for --stall-timeout {stall:.0f} s" if now - changed > stall else None)
            if why:
                break
    root = psutil.Process(proc.pid)
    tree = root.children(recursive=True) + [root]
    for p in tree:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(tree, timeout=30)
    return None, why


def run_job(args, job: str, data: dict, workdir: str) -> dict:
    """One spark-submit of the job; wall time, peaks, summary and scores (or the error and the log's tail)."""
    out = os.path.join(workdir, job, "out")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    index_base = tempfile.mkdtemp(prefix="lshbloom-scale-index-", dir=args.index_root)
    cmd = spark_command(args, job, data, out, os.path.join(index_base, "index"))
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    log = os.path.join(workdir, job, "job.log")
    res = {"command": " ".join(cmd), "log": log, "load_before": load_avg()}
    try:
        with open(log, "w") as f:
            t = time.perf_counter()
            proc = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, cwd=os.path.dirname(log))
            poller = TreePeaks(proc.pid)
            poller.start()
            rc, why = wait_or_kill(proc, log, args.job_timeout, args.stall_timeout)
            res["seconds"] = time.perf_counter() - t
            res["tree"] = poller.stop()
        res["load_after"] = load_avg()
        if rc != 0:
            with open(log) as f:
                res["error"] = f"{why or f'exit {rc}'}:\n" + "".join(f.readlines()[-40:])
            return res
        with open(out + ".summary.json") as f:
            summary = json.load(f)
        res.update(summary=summary, stages=summary["seconds"], duplicates=summary["duplicates"],
                   index_bytes=summary["index"].get("bytes_on_disk"), params=summary["params"])
        res.update(score(out, data["truth"]))
        res.update(unplanted_by_the_rule(out, data, res["flags"], summary))
        return res
    finally:
        shutil.rmtree(index_base, ignore_errors=True)
        if not args.keep_outputs:
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(out + ".lshbloom-tmp", ignore_errors=True)


def score(out: str, truth_path: str) -> dict:
    """False flags among distinct documents, recall on planted duplicates, rows lost or repeated."""
    import pyarrow.parquet as pq

    table = pq.read_table(out, columns=["id", "is_duplicate"])
    ids = table.column("id").to_numpy()
    with np.load(truth_path) as truth:
        planted = truth["planted"]
    n = len(planted)
    seen = np.bincount(ids, minlength=n)
    flags = np.zeros(n, dtype=bool)
    flags[ids] = table.column("is_duplicate").to_numpy(zero_copy_only=False)
    distinct = int(n - planted.sum())
    false_flags = int(flags[~planted].sum())
    return {
        "rows": len(ids), "lost": int((seen == 0).sum()), "repeated": int((seen > 1).sum()),
        "false_flags": false_flags, "false_flag_share": false_flags / distinct,
        "planted_found": int(flags[planted].sum()), "recall": float(flags[planted].mean()) if planted.any() else float("nan"),
        "flags": flags,
    }


def unplanted_by_the_rule(out: str, data: dict, flags: np.ndarray, summary: dict) -> dict:
    """Where the output names each flag's source (``--duplicate-of``): how many flags among the generator's
    distinct documents meet the job's own rule against it (exact Jaccard / containment of their shingle sets,
    computed here from the texts), i.e. near-duplicates the generator did not plant (overlapping corpus windows),
    and how many do not (false by the rule). Empty otherwise."""
    import pyarrow.parquet as pq

    from lshbloom_udf.minhash import normalization_mask
    from lshbloom_udf.spark.verify.rule import Shingling, VerifyRule, shingle_set

    table = pq.read_table(out)
    if "duplicate_of" not in table.column_names:
        return {}
    with np.load(data["truth"]) as truth:
        unplanted = np.flatnonzero(flags & ~truth["planted"])
    ids = table.column("id").to_numpy()
    source = dict(zip(ids.tolist(), table.column("duplicate_of").to_pylist()))
    if "row_id" in table.column_names:  # no id column given: duplicate_of names the source's row id
        id_of = dict(zip(table.column("row_id").to_pylist(), ids.tolist()))
        source = {d: None if e is None else id_of[e] for d, e in source.items()}
    pairs = [(int(d), source[int(d)]) for d in unplanted.tolist()]
    named = [(d, int(e)) for d, e in pairs if e is not None]
    wanted = sorted({i for pair in named for i in pair})
    texts = pq.read_table(data["docs"], columns=["id", "text"], filters=[("id", "in", wanted)]) if wanted else None
    text = dict(zip(texts.column("id").to_pylist(), texts.column("text").to_pylist())) if wanted else {}
    p, v = summary["params"], summary["verify"]
    shingling = Shingling(p["ngram"], normalization_mask(p["normalize"]), p["shingle"])
    rule = VerifyRule(v["threshold"], v["containment_threshold"], v["containment_min_jaccard"])
    sizes = []
    for d, e in named:
        a, b = shingle_set(text[d], shingling), shingle_set(text[e], shingling)
        sizes.append((len(a & b), len(a), len(b)))
    meets = rule.judge(*np.array(sizes, np.int64).T)[0] if sizes else np.zeros(0, bool)
    return {"unplanted_flags": len(pairs), "unplanted_without_source": len(pairs) - len(named),
            "unplanted_meeting_the_rule": int(meets.sum()), "false_by_the_rule": int(len(pairs) - meets.sum())}


# --------------------------------------------------------------------------
# the ratios


def read_texts(path: str, limit: int | None = None):
    """The ``text`` column (all of it, or the first ``limit`` rows) and the seconds it took."""
    import pyarrow.parquet as pq

    t = time.perf_counter()
    if limit is None:
        col = pq.read_table(path, columns=["text"]).column("text")
    else:
        col = next(pq.ParquetFile(path).iter_batches(batch_size=limit, columns=["text"])).column(0)
    return col, time.perf_counter() - t


def datasketch_minhashes(texts: list, s: dict) -> list:
    """datasketch ``MinHash`` objects over the settings' shingles made in Python (``evaluation.shingling``, the
    study's reference of every unit), with datasketch's own permutations: the settings' scheme when datasketch has
    it, affine32 otherwise (``poisson`` is the product's own)."""
    from datasketch import MinHash

    from evaluation.shingling import Shingling, shingles

    from lshbloom_udf.minhash import normalization_name

    steps = tuple(x for x in normalization_name(s["normalize"]).split(",") if x != "none")
    shingling = Shingling(s["shingle"], s["ngram"], steps)
    scheme = s["scheme"] if s["scheme"] in ("affine32", "legacy") else "affine32"
    proto = MinHash(num_perm=s["num_perm"], seed=s["seed"], scheme=scheme)
    out = []
    for text in texts:
        got = shingles(text, shingling)
        if not got:
            out.append(None)
            continue
        m = MinHash(num_perm=s["num_perm"], seed=s["seed"], scheme=scheme, permutations=proto.permutations)
        m.update_batch(sorted(x.encode("utf-8") for x in got))
        out.append(m)
    return out


def datasketch_pipeline(data: dict, which: str, sample: int) -> dict:
    """datasketch MinHash + MinHashLSHBloom on the first ``sample`` documents, extrapolated to all of them."""
    from evaluation.baselines import datasketch_lshbloom_decisions

    n = data["n"]
    _, read_all = read_texts(data["docs"])
    texts = read_texts(data["docs"], sample)[0].to_pylist()
    s, params = settings(which), index_params(n, which)
    t, cpu = time.perf_counter(), time.process_time()
    minhashes = datasketch_minhashes(texts, s)
    t_minhash = time.perf_counter() - t
    bloom = datasketch_lshbloom_decisions(minhashes, s["threshold"], s["num_perm"], n, params.p_band, (params.b, params.r))
    per_doc, cpu_per_doc = (t_minhash + bloom.seconds) / len(texts), (time.process_time() - cpu) / len(texts)
    return {
        "settings": s, "b": params.b, "r": params.r, "sample": len(texts), "read_all_s": read_all,
        "minhash_s": t_minhash, "lshbloom_s": bloom.seconds, "sample_docs_per_s": 1 / per_doc,
        "extrapolated_s": read_all + per_doc * n, "extrapolated_cpu_s": read_all + cpu_per_doc * n, "flags": bloom.duplicate,
    }


def mix_keys(data: dict, params: IndexParams) -> tuple[np.ndarray, np.ndarray, float]:
    """Band keys of all documents, batch by batch in this process (2 native threads); seconds with the Parquet read."""
    import pyarrow.parquet as pq

    from lshbloom_udf import arrow_band_keys

    keys = np.empty((data["n"], params.b), dtype=np.uint64)
    active = np.empty(data["n"], dtype=bool)
    t, lo = time.perf_counter(), 0
    for batch in pq.ParquetFile(data["docs"]).iter_batches(batch_size=262_144, columns=["text"]):
        k, a = arrow_band_keys(batch.column(0), threads=2, **params.signature_kwargs())
        keys[lo : lo + len(a)], active[lo : lo + len(a)] = k, a
        lo += len(a)
    return keys, active, time.perf_counter() - t


def backend_alone(keys: np.ndarray, active: np.ndarray, params: IndexParams, repeat: int, root: str) -> dict:
    """Native ``query_insert`` of both backends on these keys, median of ``repeat``, as bench_core times it."""
    import warnings

    warnings.simplefilter("ignore")  # CapacityWarning: the index is sized for exactly these documents
    res = {"b": params.b, "r": params.r}
    for bloom in BLOOMS:
        times = []
        for _ in range(repeat):
            d = tempfile.mkdtemp(prefix="lshbloom-scale-backend-", dir=root)
            try:
                with LSHBloomIndex.create(os.path.join(d, "ix"), params, bloom=bloom) as index:
                    t = time.perf_counter()
                    flags = index.query_insert(keys, active)
                    times.append(time.perf_counter() - t)
            finally:
                shutil.rmtree(d, ignore_errors=True)
        res[bloom] = {"seconds": float(np.median(times)), "docs_per_s": len(keys) / float(np.median(times)),
                      "duplicates": int(flags.sum())}
    return res


def earlier_identical_band(keys: np.ndarray, flags: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Per document of ``docs``: the first earlier document the job inserted (not flagged) with an identical band, or -1.

    ``keys`` are mix keys (a collision between different bands has probability ~2^-61).
    """
    inserted = np.flatnonzero(~flags)
    partner = np.full(len(docs), -1, dtype=np.int64)
    for band in range(keys.shape[1]):
        uniq, first = np.unique(keys[inserted, band], return_index=True)
        first = inserted[first]
        q = keys[docs, band]
        pos = np.minimum(np.searchsorted(uniq, q), len(uniq) - 1)
        hit = (uniq[pos] == q) & (first[pos] < docs) & (partner < 0)
        partner[hit] = first[pos][hit]
    return partner


def false_flag_causes(data: dict, keys: np.ndarray, flags: np.ndarray, which: str) -> dict:
    """Why distinct documents were flagged: an earlier kept document with an identical band (an LSH candidate,
    with its true Jaccard), or none (a Bloom false positive, or with band key sum two bands of equal sum)."""
    import pyarrow.parquet as pq

    from lshbloom_udf import _native
    from lshbloom_udf.minhash import normalization_mask

    with np.load(data["truth"]) as truth:
        docs = np.flatnonzero(flags & ~truth["planted"])
    partner = earlier_identical_band(keys, flags, docs)
    pairs = [(int(a), int(b)) for a, b in zip(docs, partner) if b >= 0]
    wanted = sorted({i for pair in pairs for i in pair})
    table = pq.read_table(data["docs"], columns=["id", "text"], filters=[("id", "in", wanted)]) if wanted else None
    text = dict(zip(table.column("id").to_pylist(), table.column("text").to_pylist())) if wanted else {}
    s = settings(which)
    mask = normalization_mask(s["normalize"])
    shingles = {i: set(_native.shingles(text[i], s["ngram"], mask, s["shingle"])) for i in wanted}
    jac = np.array([len(shingles[a] & shingles[b]) / len(shingles[a] | shingles[b]) for a, b in pairs])
    return {
        "false_flags": len(docs), "identical_band": len(pairs), "no_identical_band": len(docs) - len(pairs),
        "identical_band_at_or_above_threshold": int((jac >= s["threshold"]).sum()),
        "jaccard_percentiles_0_50_90_100": np.percentile(jac, [0, 50, 90, 100]).round(3).tolist() if len(jac) else [],
    }


# --------------------------------------------------------------------------
# report


def mb(x) -> str:
    return f"{x / 2**20:,.0f}" if x else "-"


def print_jobs(jobs: dict) -> None:
    print(f"  {'job':12s} {'wall s':>8s} {'docs/s':>8s} {'duplicates':>10s} {'false flags (share)':>22s} {'recall':>8s} {'CPU s':>7s} "
          f"{'index bytes':>14s} {'JVM MB':>7s} {'py drv MB':>9s} {'py wrk MB':>9s} {'(PSS)':>6s} {'tree MB':>8s}")
    for name, r in jobs.items():
        if "error" in r:
            print(f"  {name:12s} FAILED after {r.get('seconds', 0):.0f} s; process tree {r.get('tree')}; log {r['log']}")
            print("    " + r["error"].replace("\n", "\n    "))
            continue
        m = r["tree"]
        flags = f"{r['false_flags']:,} ({100 * r['false_flag_share']:.4f}%)"
        print(f"  {name:12s} {r['seconds']:8.1f} {r['rows'] / r['seconds']:8,.0f} {r['duplicates']:10,} {flags:>22s} "
              f"{100 * r['recall']:7.2f}% {m['total_cpu_s']:7,.0f} {r['index_bytes']:14,} {mb(m['jvm_rss']):>7s} {mb(m['py_driver_rss']):>9s} "
              f"{mb(m['py_workers_rss']):>9s} {mb(m['py_workers_pss']):>6s} {mb(m['total_rss']):>8s}")
        if "unplanted_flags" in r:
            print(f"    of the {r['unplanted_flags']:,} flags among the generator's distinct documents, "
                  f"{r['unplanted_meeting_the_rule']:,} meet the job's rule against their duplicate_of (near-duplicates "
                  f"it did not plant), {r['false_by_the_rule']:,} do not ({r['unplanted_without_source']:,} name none)")
        c = r.get("false_flag_causes")
        if c:
            print(f"    {c['false_flags']:,} false flags: {c['identical_band']:,} with an earlier kept document having an identical "
                  f"band (LSH candidates; their Jaccard p0/50/90/100 {c['jaccard_percentiles_0_50_90_100']}, "
                  f"{c['identical_band_at_or_above_threshold']} >= T), {c['no_identical_band']:,} without "
                  "(Bloom false positives, or with band key sum: bands of equal sum)")
        if r["lost"] or r["repeated"]:
            print(f"    !! rows lost {r['lost']:,}, repeated {r['repeated']:,}")
    print("  (CPU s: user + system seconds of the spark-submit process tree; MB: peak RSS summed by kind over it: JVM = "
          "driver and executor (local mode), py drv = the job's Python driver, index pages it touched included, "
          "py wrk = Python workers, RSS and PSS)")


def print_stages(jobs: dict) -> None:
    ok = {k: v for k, v in jobs.items() if "stages" in v}
    if not ok:
        return
    order = ["read_schema", "pin", "id_check", "keys", "driver_pass", "join_plan", "write", "job_total"]
    names = order + sorted({s for v in ok.values() for s in v["stages"]} - set(order) - {"total"})
    print("  seconds per stage (the job's summary JSON; wall = spark-submit launch to exit)")
    print(f"  {'stage':14s}" + "".join(f"{k:>12s}" for k in ok))
    for s in names:
        print(f"  {s:14s}" + "".join(f"{v['stages'].get(s, float('nan')):12.2f}" for v in ok.values()))
    print(f"  {'wall':14s}" + "".join(f"{v['seconds']:12.2f}" for v in ok.values()))
    print(f"  {'outside job':14s}" + "".join(f"{v['seconds'] - v['stages']['job_total']:12.2f}" for v in ok.values()))


def print_ratios(res: dict) -> None:
    jobs = res["jobs"]
    for which, ds in res.get("datasketch", {}).items():
        s = ds["settings"]
        print(f"  datasketch {which} (T {s['threshold']}, {s['num_perm']} perms, {s['ngram']}-grams, normalize "
              f"{s['normalize']}, {s['scheme']}, b x r {ds['b']} x {ds['r']}, capacity {res['data']['n']:,}): "
              f"{ds['sample_docs_per_s']:,.0f} docs/s on the first {ds['sample']:,} documents (MinHash {ds['minhash_s']:.1f} s, "
              f"LSHBloom {ds['lshbloom_s']:.1f} s) -> {ds['extrapolated_s']:,.0f} s for {res['data']['n']:,} "
              f"(extrapolated; reading all texts {ds['read_all_s']:.1f} s measured)")
        print(f"    (CPU time of datasketch: {ds['extrapolated_cpu_s']:,.0f} s extrapolated)")
        for job in (j for j, (w, _) in JOBS.items() if w == which and "seconds" in jobs.get(j, {})):
            r = jobs[job]
            print(f"    job {job}: {r['seconds']:,.1f} s wall -> {ds['extrapolated_s'] / r['seconds']:.1f}x; CPU time of the "
                  f"job's process tree {r['tree']['total_cpu_s']:,.0f} s -> {ds['extrapolated_cpu_s'] / r['tree']['total_cpu_s']:.1f}x "
                  f"(wall at 2 busy cores would be >= {r['tree']['total_cpu_s'] / 2:,.0f} s)")
        if "decisions_differ" in ds:
            print(f"    decisions on the first {ds['sample']:,} documents, datasketch vs job {SAME_DECISIONS[which]}: "
                  f"{ds['decisions_differ']} differ")
    be = res.get("backend")
    for job, bloom in (("mix", "blocked"), ("sum", "pybloomfiltermmap3")):  # each default backend
        r = jobs.get(job, {})
        if "stages" not in r and not be:
            continue
        inside = f"{r['rows'] / r['stages']['driver_pass']:,.0f} docs/s" if "stages" in r else "-"
        alone = f"{be[bloom]['docs_per_s']:,.0f} docs/s" if be else "-"
        print(f"  driver pass {bloom:18s} (b {be['b'] if be else '?'}): inside the job (documents / driver_pass s) "
              f"{inside}; native query_insert alone {alone}")
    if be:
        print(f"  (keys of all documents in this process, 2 threads, Parquet read included: {be['keys_s_2_threads']:.1f} s)")


def in_process(args, res: dict, data: dict) -> None:
    """The band keys of all documents (defaults, mix) in this process: the backend alone, and the false flags' causes."""
    params = index_params(data["n"], "defaults", "mix")
    keys, active, seconds = mix_keys(data, params)
    if not args.no_backend:
        res["backend"] = {**backend_alone(keys, active, params, args.repeat, args.index_root), "keys_s_2_threads": seconds}
    if not args.no_explain:
        for job in ("mix", "sum", "mix-blocked"):
            if "flags" in res["jobs"].get(job, {}):
                res["jobs"][job]["false_flag_causes"] = false_flag_causes(data, keys, res["jobs"][job]["flags"], "defaults")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=1_000_000)
    p.add_argument("--jobs", default=",".join(DEFAULT_JOBS), help=f"comma list of {', '.join(JOBS)} (empty: none)")
    p.add_argument("--datasketch-sample", type=int, default=20_000, help="documents datasketch is timed on (0: skip)")
    p.add_argument("--no-backend", action="store_true", help="skip the native backend alone (needs N x b x 8 bytes of keys)")
    p.add_argument("--no-explain", action="store_true",
                   help="skip the causes of false flags (needs N x b x 8 bytes of keys and the output flags)")
    p.add_argument("--repeat", type=int, default=3, help="runs of the backend alone (median)")
    p.add_argument("--dup-fraction", type=float, default=0.01)
    p.add_argument("--edit", type=float, default=0.05, help="share of a planted duplicate's words replaced")
    p.add_argument("--replace", type=float, default=0.30, help="share of a distinct document's words replaced")
    p.add_argument("--words", type=int, nargs=2, default=(40, 80), metavar=("MIN", "MAX"))
    p.add_argument("--max-repeated", type=float, default=0.10,
                   help="usable windows: at most this share of their word 4-grams occur more than once in the corpus")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "lshbloom-scale"))
    p.add_argument("--index-root", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    p.add_argument("--driver-memory", help="spark.driver.memory (default 8g up to 2M documents, else 14g)")
    p.add_argument("--job-timeout", type=float, default=3600, help="kill a job (its process tree) after this many seconds")
    p.add_argument("--stall-timeout", type=float, default=900,
                   help="kill a job whose log has no new line for this many seconds (a hung job)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf, repeatable")
    p.add_argument("--keep-outputs", action="store_true")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    args.driver_memory = args.driver_memory or ("8g" if args.docs <= 2_000_000 else "14g")
    args.jobs = [j for j in args.jobs.split(",") if j]
    unknown = set(args.jobs) - set(JOBS)
    if unknown:
        p.error(f"unknown job(s) {sorted(unknown)}; known: {', '.join(JOBS)}")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    res = {"machine": f"{machine()}; {cpu_flags()}; kernel backend {_native.simd_backend()}", "started": started,
           "load_before": load_avg(), "args": vars(args), "jobs": {}}
    print(f"machine: {res['machine']}; load {res['load_before']}; {started}")
    params = {"dup_fraction": args.dup_fraction, "edit": args.edit, "replace": args.replace,
              "min_words": args.words[0], "max_words": args.words[1], "seed": args.seed,
              "max_repeated": args.max_repeated}
    data = res["data"] = scale_data.generate(args.docs, params, args.cache)
    if args.replace >= 1:
        distinct = "words drawn independently from the corpus's word frequencies (every window word replaced)"
    else:
        distinct = (f"corpus windows with {100 * args.replace:g}% of words replaced, from {data['usable_starts']:,} "
                    f"usable starts (<= {100 * args.max_repeated:g}% repeated 4-grams)")
    print(f"data: {data['n']:,} documents = {data['distinct']:,} distinct + {data['planted']:,} planted near-duplicates "
          f"({100 * args.edit:g}% of words replaced); {args.words[0]}-{args.words[1]} words (mean {data['mean_words']:.1f}, "
          f"{data['mean_bytes']:.0f} bytes); distinct = {distinct}; "
          f"corpus {data['corpus']}; {data['parquet_bytes'] / 2**20:,.0f} MB Parquet ({data['docs']}, "
          f"generated in {data['generation_seconds']} s)")
    workdir = tempfile.mkdtemp(prefix=f"run-{args.docs}-", dir=args.cache)
    print(f"spark-submit local[2], --driver-memory {args.driver_memory}, index in {args.index_root}; logs in {workdir}")
    for job in args.jobs:
        print(f"  running {job} ...", flush=True)
        res["jobs"][job] = run_job(args, job, data, workdir)
    if args.datasketch_sample:
        res["datasketch"] = {w: datasketch_pipeline(data, w, args.datasketch_sample) for w in ("paper", "defaults")}
        for which, ds in res["datasketch"].items():
            job = res["jobs"].get(SAME_DECISIONS[which], {})
            # datasketch decides as the job only with the job's own permutations (not with scheme poisson)
            if "flags" in job and ds["settings"]["scheme"] in ("affine32", "legacy"):
                ds["decisions_differ"] = int(np.count_nonzero(job["flags"][: ds["sample"]] != ds["flags"]))
    if not (args.no_backend and args.no_explain):
        in_process(args, res, data)
    res["load_after"] = load_avg()
    print_jobs(res["jobs"])
    print_stages(res["jobs"])
    print_ratios(res)
    print(f"load average before {res['load_before']}, after {res['load_after']}; per job: "
          + "; ".join(f"{k} {v.get('load_before')} -> {v.get('load_after')}" for k, v in res["jobs"].items()))
    for part in (*res["jobs"].values(), *res.get("datasketch", {}).values()):
        part.pop("flags", None)
    write_json(args.json, res)


def write_json(path, res: dict) -> None:
    """``res`` as JSON at ``path`` (nothing when ``path`` is None)."""
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(res, f, indent=2, default=str)


if __name__ == "__main__":
    main()
