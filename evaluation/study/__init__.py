"""The tuning study: every method's parameter grid on labelled streams, then held-out scores.

Protocol (the paper's §5.1, with one change of criterion):

1. Build labelled streams (:mod:`~evaluation.generator`) at
   duplication levels 10 %..90 % from a *tuning* pool and, separately, from a
   *held-out* pool (another corpus, or the other half of an id split).
2. On the tuning streams, run each method over its grid: LSHBloom over
   threshold x num_perm x n-gram size x normalization; datasketch MinHashLSH
   over threshold x num_perm (at the paper's shingling and at the chosen one);
   CCNet and Dolma over the overlap threshold; Dolma-Ngram and DCLM over
   n-gram size x overlap threshold.
3. Select each method's configuration by the **worst F1 over the duplication
   levels** (ties: higher mean F1, then the cheaper configuration). The paper
   tuned on one balanced stream; a default must also hold when duplicates are
   rare, where precision matters most.
4. Score every selected configuration, and the paper's LSHBloom configuration,
   on the held-out streams; measure agreement of LSHBloom with datasketch
   ``MinHashLSH`` and ``MinHashLSHBloom`` on the same streams; time each
   selected method end to end and record its index bytes (Pareto plots).

Outputs in ``out_dir``: ``grid.csv`` (one row per method, configuration,
split and level), ``selected.csv``, ``heldout.csv``, ``agreement.csv``,
``pareto.csv``, ``summary.json``, ``results.md`` and, when matplotlib is
installed, the PNG plots.

The modules, in the order the study uses them:

:mod:`~evaluation.study.configs`
    a MinHash configuration, the paper's, and the grids (``tiny``,
    ``default``, ``full``).
:mod:`~evaluation.study.grid`
    the streams of a pool (:class:`Split`) and the grid runs: score rows per
    method, configuration and level (step 2).
:mod:`~evaluation.study.selection`
    selection by worst F1 (step 3), the cost rows, ``results.md`` and the CSV
    files.
:mod:`~evaluation.study.run`
    :class:`StudyConfig` and :func:`run_study`, the steps in order (what
    ``python -m evaluation study`` runs).

Every public name of these modules is importable from here.
"""

from evaluation.study.configs import (
    GRIDS, P_EFFECTIVE, PAPER, Grid, MinHashConfig, config_from_params, config_label,
)
from evaluation.study.grid import (
    SignatureCache, Split, load_pool, run_datasketch, run_lshbloom_grid, run_overlap_grid,
)
from evaluation.study.run import StudyConfig, run_study
from evaluation.study.selection import (
    agreement_summary, pareto_rows, results_markdown, select, summarize, write_csv,
)

__all__ = [
    "GRIDS", "P_EFFECTIVE", "PAPER", "Grid", "MinHashConfig", "SignatureCache", "Split", "StudyConfig",
    "agreement_summary", "config_from_params", "config_label", "load_pool", "pareto_rows", "results_markdown",
    "run_datasketch", "run_lshbloom_grid", "run_overlap_grid", "run_study", "select", "summarize", "write_csv",
]
