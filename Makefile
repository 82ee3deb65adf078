# torchtfx: `make run` runs the whole pipeline on the embedded default; `make test` runs the test suite.
# Both create .venv and install the pinned stack on first use; later calls install nothing unless
# constraints.txt, requirements.in or setup.py changed.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RUN_ROOT ?= runs/local
PYTEST_ARGS ?=
# Tests get their own TMPDIR, emptied at the start of each run: TF autograph, killed Beam workers and
# killed DDP workers leave files behind, and /tmp is shared with everything else on the machine.
TEST_TMP := $(CURDIR)/.tmp/tests
PYTEST := rm -rf $(TEST_TMP) && mkdir -p $(TEST_TMP) && TMPDIR=$(TEST_TMP) $(PY) -m pytest

# python3.10 on PATH first, then pyenv's versions folder; a pyenv shim that is on PATH but has no
# active 3.10 fails its --version probe and is skipped.
PYENV_DIR := $(or $(PYENV_ROOT),$(HOME)/.pyenv)
PYTHON310 := $(shell for p in "$$(command -v python3.10)" "$$(pyenv which python3.10 2>/dev/null)" \
  $(PYENV_DIR)/versions/3.10*/bin/python3.10; do \
  [ -n "$$p" ] && "$$p" -c 'import sys; assert sys.version_info[:2] == (3, 10)' 2>/dev/null && { echo "$$p"; break; }; done)

.PHONY: help venv run test test-faults test-unit test-e2e conformance bench gpu-check lint format compile image draft-schema clean

help:
	@echo "make run    - run the whole pipeline locally on the embedded taxi data"
	@echo "make test   - run the test suite (unit + e2e)"
	@echo "make test-faults - long fault-injection runs (pipeline killed, MLflow unreachable)"
	@echo "make bench  - the eight benchmarks (reference, serving, serving_text, scale, input_path, ddp, zoo, evaluator) (tests/bench/results/*.json, tests/bench/results/README.md, plots); BENCH_ARGS='--only serving'"
	@echo "make gpu-check - on a machine with NVIDIA GPUs: AMP DDP training, FP16 drift gate, GPU/CPU parity, torchtfx run on cuda (SKIP lines without one)"
	@echo "make conformance - ONNX's backend tests through the converter (CONFORMANCE_ARGS='--markdown FILE')"
	@echo "make lint   - ruff check + format check, mypy on the packages mypy.ini lists"
	@echo "make compile - compile the Kubeflow pipeline spec from kubeflow/pools.yaml"
	@echo "make image  - docker build the Kubeflow step image (IMAGE=...)"

$(PY):
	@if [ -z "$(PYTHON310)" ]; then \
	  echo "error: python3.10 not found on PATH or through pyenv." >&2; \
	  echo "  TFX 1.16 needs Python 3.10 (Debian 12/13 ship only newer ones): 'pyenv install 3.10.13', or put a python3.10 with venv on PATH." >&2; \
	  exit 1; fi
	"$(PYTHON310)" -m venv $(VENV)

# The stack takes about 8.8 GiB in .venv (the CUDA build of torch with its nvidia-* libraries 5.4 GiB,
# tensorflow 1.7 GiB), and pip holds every downloaded wheel until its install ends. Installing torch
# first, then the rest, frees torch's 3.5 GiB of wheels before the second download starts.
$(STAMP): $(PY) constraints.txt requirements.in requirements-research.in requirements-dynamo.txt setup.py
	@free_kib=$$(df -Pk "$(VENV)" | awk 'NR==2 {print $$4}'); if [ "$$free_kib" -lt 12582912 ]; then \
	  echo "warning: $$((free_kib / 1048576)) GiB free on the disk of $(VENV); installing the pinned stack needs about 12 GiB (8.8 GiB stay)." >&2; fi
	$(PY) -m pip install --quiet --upgrade "pip==24.3.1"
	$(PY) -m pip install --quiet --no-cache-dir "torch==$$(sed -n 's/^torch==//p' constraints.txt)" -c constraints.txt
	$(PY) -m pip install --quiet --no-cache-dir -r requirements.in -r requirements-research.in -c constraints.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation --use-pep517 -e .
	$(PY) -m pip check
	rm -rf $(VENV)/dynamo-exporter
	$(PY) -m pip install --quiet --no-cache-dir --no-deps --target $(VENV)/dynamo-exporter -r requirements-dynamo.txt
	touch $(STAMP)

venv: $(STAMP)

# No TF Serving reads $(RUN_ROOT)/serving: the setting confirms each promotion's label move, so runs follow each
# other without `torchtfx promote --finish` (the CLI's default stages them until it is run).
run: $(STAMP)
	$(VENV)/bin/torchtfx run --pipeline-root $(RUN_ROOT) --confirm-labels immediate

# make test runs on TEST_WORKERS pytest-xdist processes, a test file per worker at a time (its module fixtures are
# built once). Measured on 2 cores (c85ff4e): the e2e tier took 1,158 s in one process and 806 s on two workers,
# peak memory 6.4 GB; much of a pipeline run is one busy core (imports, TFX's orchestration, MLMD), so two runs
# side by side gain. The fault runs (make test-faults) stay in one process: they kill processes on a schedule.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadfile
test: $(STAMP)
	$(PYTEST) -m "not faults" $(XDIST) $(PYTEST_ARGS)

test-faults: $(STAMP)
	$(PYTEST) -m faults $(PYTEST_ARGS)

test-unit: $(STAMP)
	$(PYTEST) -m "not e2e" $(XDIST) $(PYTEST_ARGS)

test-e2e: $(STAMP)
	$(PYTEST) -m "e2e and not faults" $(XDIST) $(PYTEST_ARGS)

# ONNX's own backend tests (shipped in the onnx wheel) through the converter: per-suite and per-operator figures;
# fails when a target is missed or a test fails for a reason not in conformance.KNOWN_DIFFERENCES.
CONFORMANCE_ARGS ?=
conformance: $(STAMP)
	$(PY) -m torchtfx.components.converter conformance --check $(CONFORMANCE_ARGS)

BENCH_ARGS ?=
bench: $(STAMP)
	$(PY) -m tests.bench $(BENCH_ARGS)

# The GPU paths no CI machine runs (issue #44), on a machine with NVIDIA GPUs: one PASS/FAIL/SKIP line per item,
# under 8 minutes; without a usable GPU every item is skipped with its reason. Not part of `make test` or .ci/run.
GPU_CHECK_ARGS ?=
GPU_CHECK_TMP := $(CURDIR)/.tmp/gpu-check
gpu-check: $(STAMP)
	rm -rf $(GPU_CHECK_TMP) && mkdir -p $(GPU_CHECK_TMP) && TMPDIR=$(GPU_CHECK_TMP) $(PY) -m tests.gpu_check $(GPU_CHECK_ARGS)

# mypy reads the code as torchtfx.<layer>, the names it imports itself by: links under MYPY_PATH (mypy.ini's
# mypy_path) stand for setup.py's package_dir, which the editable install serves through an import hook that mypy
# cannot follow. Its messages name the files by their place in the repository.
MYPY_PATH := .tmp/mypy/path
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	@mkdir -p $(MYPY_PATH)/torchtfx && for layer in pipeline components data; do \
	  ln -sfn "$(CURDIR)/$$layer" $(MYPY_PATH)/torchtfx/$$layer; done
	set -o pipefail; $(VENV)/bin/mypy 2>&1 | sed 's|^$(MYPY_PATH)/torchtfx/||'

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

KFP_CONFIG ?= kubeflow/pools.yaml
IMAGE ?= $(shell sed -n 's/^image: *//p' $(KFP_CONFIG))

compile: $(STAMP)
	$(VENV)/bin/torchtfx compile --config $(KFP_CONFIG)

image:
	docker build -f kubeflow/Dockerfile -t $(IMAGE) .

clean:
	rm -rf $(RUN_ROOT) .pytest_cache .tmp
