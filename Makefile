# The two commands: `make run` (the main job, writes results/) and `make test`.
# Each creates .venv in the repository root when missing and installs what it needs
# (CPU jax by default; for GPU/TPU install the matching jax wheel into .venv).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.codedjax-installed
OUT ?= results

.PHONY: run test install clean lint mutation device-table

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[models,plots,dev,http]'
	touch $(STAMP)

# the suite runs on TEST_WORKERS processes (pytest-xdist), each test file in one
# process so that its shared compiled programs stay together, and the files that
# call the library at the same shapes (tests/conftest.py PROGRAM_FAMILIES) in the
# same process, so that they share the library's compiled programs too
TEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

run: $(STAMP)
	$(PY) -m theory.demo --out $(OUT)/demo
	$(PY) -m theory.verify --quick --out $(OUT)/theory
	$(PY) -m models.coded_dcn --quick --out $(OUT)/coded_dcn
	$(PY) -m models.serve_dcn --quick --no-progress --out $(OUT)/serve_dcn
	$(PY) -m theory.collect --out $(OUT)

# Every benchmark, the DCNv2 training and coded inference and the head-to-head's
# quick panels on one accelerator (docs/running.md, "GPU and TPU": install the jax
# wheel into .venv first); writes docs/results/device-$(DEVICE).md.
# make device-table DEVICE=gpu|tpu|cpu [QUICK=--quick]
DEVICE ?= gpu
QUICK ?=
device-table: $(STAMP)
	$(PY) -m benchmarks.device_table --device $(DEVICE) $(QUICK) \
		--out $(OUT)/device-$(DEVICE) --results-page docs/results/device-$(DEVICE).md

# Mutation testing of the numerical modules (minutes to hours; not part of CI):
# make mutation MUTATE="codedjax/_chebyshev.py codedjax/bounds.py" MUTATION_ARGS="--max 60"
MUTATE ?= codedjax/_chebyshev.py codedjax/bounds.py
MUTATION_ARGS ?=
mutation: $(STAMP)
	$(PY) -m pip install --quiet -e '.[mutation]'
	$(PY) tools/mutation.py $(MUTATE) $(MUTATION_ARGS) --out $(OUT)/mutation

lint: $(STAMP)
	$(PY) -m ruff check codedjax runkit theory models benchmarks tests tools
	$(PY) -m ruff format --check codedjax runkit theory models benchmarks tests tools

clean:
	rm -rf $(VENV) $(OUT)
