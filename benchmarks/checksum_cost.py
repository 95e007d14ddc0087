"""The cost of the band files' checksums (issue 21) at 10^6 documents' worth of filters.

    PYTHONPATH=. .venv/bin/python benchmarks/checksum_cost.py [--docs 1000000] [--dir /dev/shm] [--repeat 5]

Creates the index ``lshbloom plan --docs N`` sizes (its b band files, each
filled with random bits as a used filter is) in ``--dir``, then times, best of
``--repeat`` and side by side in one run:

- ``checksum``: xxh3-64 of every band file, native (what opening an index
  verifies and what a commit records), files in the page cache;
- ``copy``: the staging copy of the same files (``shutil.copyfile``), which
  every run with ``--index-dir`` already makes, for scale.

Prints JSON with the machine (cores, load average before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

import numpy as np

from lshbloom_udf.config import DEFAULTS, DedupConfig
from lshbloom_udf.index.checksums import file_checksum
from lshbloom_udf.sizing import plan


def _best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=float, default=1e6)
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    # what `lshbloom plan --docs N` sizes (the job's defaults)
    sized = plan(int(args.docs), threshold=DEFAULTS["threshold"], num_perm=DEFAULTS["num_perm"],
                 p_effective=DEFAULTS["p_effective"], ngram=DEFAULTS["ngram"], bloom=DedupConfig().new_index_bloom,
                 growth=DEFAULTS["growth"])
    per_band = sized.index_bytes // sized.b
    load_before = os.getloadavg()
    root = tempfile.mkdtemp(prefix="lshbloom-bench-checksum-", dir=args.dir)
    try:
        rng = np.random.default_rng(0)
        paths = []
        for i in range(sized.b):
            path = os.path.join(root, f"band-{i}.bbf")
            rng.integers(0, 256, per_band, dtype=np.uint8).tofile(path)
            paths.append(path)
        checksum = _best(lambda: [file_checksum(p) for p in paths], args.repeat)
        copies = os.path.join(root, "copy")
        os.mkdir(copies)
        copy = _best(lambda: [shutil.copyfile(p, os.path.join(copies, os.path.basename(p))) for p in paths], args.repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    total = per_band * sized.b
    print(json.dumps({
        "docs": int(args.docs), "bands": sized.b, "index_bytes": total, "dir": args.dir,
        "checksum_seconds": round(checksum, 4), "checksum_GB_per_s": round(total / checksum / 1e9, 2),
        "copy_seconds": round(copy, 4), "share_of_a_30_s_job_percent": round(100 * checksum / 30, 2),
        "cores": os.cpu_count(), "load_before": load_before, "load_after": os.getloadavg(),
    }, indent=2))


if __name__ == "__main__":
    main()
