# The two commands a newcomer runs: `make demo` and `make test`.
# Both create/refresh .venv at the repo root and build the native module.

VENV      := .venv
PY        := $(abspath $(VENV))/bin/python
export PYO3_PYTHON := $(PY)
export PYSPARK_PYTHON := $(PY)
export PYSPARK_DRIVER_PYTHON := $(PY)
export SPARK_LOCAL_IP := 127.0.0.1
CARGO_MANIFEST := native/Cargo.toml
DEMO_DIR  := build/demo
DIST      := dist

.PHONY: readme venv build wheel test test-slow test-python-slow test-builds browser release-builds spark-classes test-fast test-rust test-python lint demo bench clean

venv:
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(PY) -m pip install -q -U pip "maturin>=1.5,<2"

# Builds the Rust extension (release) into the package and installs the
# package editable with its runtime and test dependencies.
build: venv
	$(VENV)/bin/maturin develop --release --extras test -q

# The wheel to install anywhere (docs/deployment.md): abi3 (CPython >= 3.9), linked by zig
# against glibc 2.17 so that it is tagged manylinux2014 / manylinux_2_17 and installs on
# older clusters (EMR on Amazon Linux 2, CentOS 7 era YARN). Its cargo build lives in
# native/target/x86_64-unknown-linux-gnu, beside `make build`'s, so both stay incremental.
wheel: venv
	@$(PY) -m pip install -q "maturin[zig]>=1.5,<2" "auditwheel>=6"
	@rm -f $(DIST)/lshbloom_spark-*.whl
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/maturin build --release --zig \
		--compatibility manylinux2014 --out $(DIST)
	$(VENV)/bin/auditwheel show $(DIST)/lshbloom_spark-*.whl

# PYO3_PYTHON, the venv's interpreter, tells pyo3's build script which Python it builds for.
test-rust: venv
	cargo test --manifest-path $(CARGO_MANIFEST) -q

# The slowest tests named at the end of every run, so that a test that grows shows up in CI's log.
# One pytest process per core (pytest-xdist), each with its own SparkSession; a test file stays in one process
# (--dist loadfile: its module fixtures, a standalone cluster or a Connect server, are started once). Most of the
# slow tests wait on a JVM starting or a child job, so a second process keeps the cores busy meanwhile.
# `make test` runs every test not marked slow; `make test-slow` the slow ones (end-to-end jobs, crash runs, clusters,
# deployment). CI runs both (.ci/run).
test-python:
	$(PY) -m pytest -q -n auto --dist loadfile --durations=40 -m "not slow"

test-python-slow:
	$(PY) -m pytest -q -n auto --dist loadfile --durations=40 -m slow

# The inner loop: the Rust unit tests and the core and index tests that need no Spark, a couple of minutes.
test-fast: build
	cargo test --manifest-path $(CARGO_MANIFEST) -q
	$(PY) -m pytest -q -m "not slow and not spark" tests/core tests/index

# The builds first: the Rust tests compile beside the JVM class archive and the browser. `make test-slow` builds
# the wheel (a zig or glibc problem fails fast) that the deployment tests install from LSHBLOOM_WHEEL_DIR
# (tests/deploy_support.py; without it they run `make wheel` themselves).
test:
	$(MAKE) -j2 test-builds
	$(MAKE) test-python

# The wheel for the deployment tests first, then the slow tests.
test-slow: export LSHBLOOM_WHEEL_DIR := $(abspath $(DIST))
test-slow:
	$(MAKE) -j2 release-builds spark-classes browser
	$(MAKE) test-python-slow

test-builds: test-rust spark-classes browser

# The report test opens the run report in a real browser: Debian's chromium, installed when missing (CI runs as root).
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq chromium >/dev/null; }

# The tests' JVM class archive (tests/spark_classes.py): every Spark JVM of the suite starts ~3 s sooner with it.
spark-classes: build
	$(PY) tests/spark_classes.py

release-builds: build
	$(MAKE) wheel

# The guardrails CI runs after the tests: ruff and mypy on the package (pyproject.toml's [tool.ruff], [tool.mypy]:
# its files and settings), clippy on the crate.
lint: build
	$(VENV)/bin/ruff check lshbloom_udf
	$(VENV)/bin/mypy
	cargo clippy --manifest-path $(CARGO_MANIFEST) --all-targets -- -D warnings

demo: build
	$(PY) -m lshbloom_udf sample --output $(DEMO_DIR)/sample.jsonl
	rm -rf $(DEMO_DIR)/out $(DEMO_DIR)/index
	$(VENV)/bin/spark-submit --master 'local[2]' --conf spark.ui.enabled=false \
		--driver-java-options "-Dlog4j2.configurationFile=$(abspath conf/log4j2-quiet.properties)" \
		spark_jobs/dedup.py --input $(DEMO_DIR)/sample.jsonl --output $(DEMO_DIR)/out \
		--index-dir $(DEMO_DIR)/index

# The README's settings table, from lshbloom_udf/config.py (tests/spark/test_spark_readme.py checks it).
readme: build
	$(PY) tools/readme.py

# The whole benchmark suite, every figure a ratio to datasketch measured in the
# same run (see docs/benchmarks.md): BENCH_DOCS documents for the throughput/size
# runs (spark-submit local[2] included), BENCH_JSON for a machine-readable copy.
BENCH_DOCS ?= 20000
BENCH_JSON ?= build/bench.json
bench: build
	@mkdir -p $(dir $(BENCH_JSON))
	$(PY) benchmarks/bench_all.py --docs $(BENCH_DOCS) --spark-blocked --json $(BENCH_JSON)

clean:
	rm -rf build $(DIST) native/target $(VENV) lshbloom_udf/_native*.so

# The evaluation study (docs/evaluation.md): default grid, linux-docs to tune, man-pages held out.
# CORPUS_DIR holds linux-docs.jsonl.gz and man-pages.jsonl.gz; GRID=full for the paper's bigger grid.
CORPUS_DIR ?= ../shared/corpus
GRID ?= default
EVAL_DOCS ?= 2000
.PHONY: evaluate
evaluate:
	@$(PY) -c "import matplotlib" 2>/dev/null || $(PY) -m pip install -q "matplotlib>=3.8"
	$(PY) -m evaluation study --tune $(CORPUS_DIR)/linux-docs.jsonl.gz \
		--test $(CORPUS_DIR)/man-pages.jsonl.gz --out docs/evaluation --grid $(GRID) --docs $(EVAL_DOCS)

# The defaults scored on a third corpus no choice looked at: docstrings of installed packages.
.PHONY: evaluate-docstrings
evaluate-docstrings:
	$(PY) -m evaluation corpus --output build/docstrings.jsonl.gz
	$(PY) -m evaluation study --tune $(CORPUS_DIR)/linux-docs.jsonl.gz \
		--test build/docstrings.jsonl.gz --out docs/evaluation/docstrings --grid $(GRID) --docs $(EVAL_DOCS) --no-plots

# The multilingual + crawl-noise study (docs/evaluation.md, first section): every script, every kind
# of copy; picks the shingling defaults (evaluation/CHOSEN_DEFAULTS.md). ML_DOCS documents a stream.
ML_DOCS ?= 200
ML_ENGLISH_DOCS ?= 300
.PHONY: evaluate-multilingual
evaluate-multilingual:
	@$(PY) -c "import matplotlib" 2>/dev/null || $(PY) -m pip install -q "matplotlib>=3.8"
	$(PY) -m evaluation.study.multilingual --corpus-dir $(CORPUS_DIR) --docs $(ML_DOCS) \
		--english-docs $(ML_ENGLISH_DOCS) --out docs/evaluation/multilingual
