"""Research code: labelled near-duplicate benchmarks, the paper's baselines and the tuning study.

:mod:`~evaluation.generator` builds labelled streams,
:mod:`~evaluation.baselines` runs the paper's methods on them,
:mod:`~evaluation.scoring` scores decisions,
:mod:`~evaluation.study` tunes every method and scores it held out
(``python -m evaluation``; ``make evaluate``), and
:mod:`~evaluation.plots` draws the figures.

This package is research code and is kept off the runtime import path: nothing
that runs deduplication (``lshbloom_udf/__init__.py``, the Spark API, the
index, ``ml.py``, the job, ``config.py``) imports it, so a job loads neither it
nor pybloomfilter, which only the baselines use (datasketch and matplotlib are
imported inside its functions); ``tests/core/test_eval_off_runtime_path.py`` checks
this in a fresh interpreter. It stays inside the package because it measures
the product itself rather than a copy: it runs the installed index and kernels
(``IndexParams``, ``LSHBloomIndex``, ``signatures``, ``band_keys``) on streams
it labels, the study's choice is what ``config.py`` ships as the defaults
(``docs/evaluation.md``), ``python -m evaluation score`` scores a
Spark job's output from the installed wheel, and the tests take the shingling
contract in plain Python (``baselines.reference_shingles``) from here.
"""
