# The two commands: `make run` (the main job, writes results/) and `make test`.
# Each creates .venv in the repository root when missing and installs what it needs
# (CPU jax by default; for GPU/TPU install the matching jax wheel into .venv).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.codedjax-installed
OUT ?= results

.PHONY: run test install clean lint mutation device-table results results-quick \
	results-make-run

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

# The pages of docs/results/, each rewritten by the command that measures it
# (docs/results/README.md): `make results` runs the full forms (hours on 2 cores),
# `make results-quick` the quick forms (minutes each). A page keeps what follows
# its figures (the reading) and gets a new header: command, commit, date, load.
PAGES := docs/results
results: $(STAMP) results-make-run
	$(PY) -m theory.example --out $(OUT)/example --results-page $(PAGES)/decoding.md
	$(PY) -m theory.calibration --codes all --masks 500 --out $(OUT)/calibration_codes \
		--results-page $(PAGES)/calibration.md
	$(PY) -m models.nercc_experiment --out $(OUT)/nercc --results-page $(PAGES)/nercc.md
	$(PY) -m models.parity_experiment --out $(OUT)/parity --results-page $(PAGES)/parity.md
	$(PY) -m benchmarks.schemes --models --out $(OUT)/schemes \
		--results-page $(PAGES)/schemes.md
	$(PY) -m benchmarks.regimes --out $(OUT)/regimes --results-page $(PAGES)/regimes.md
	$(PY) -m benchmarks.serving --out $(OUT)/serving --results-page $(PAGES)/serving.md
	$(PY) -m benchmarks.ray_cost --no-progress --out $(OUT)/ray_cost \
		--results-page $(PAGES)/ray.md
	$(PY) -m models.serve_dcn --no-progress --out $(OUT)/serve_dcn_full \
		--results-page $(PAGES)/serve-dcn.md
	$(PY) -m benchmarks.load --bisection 6 --out $(OUT)/load --results-page $(PAGES)/load.md
	OPENBLAS_NUM_THREADS=1 $(PY) -m benchmarks.run --out $(OUT)/bench \
		--results-page $(PAGES)/benchmarks.md
	OPENBLAS_NUM_THREADS=1 $(PY) -m benchmarks.decode --out $(OUT)/bench_decode \
		--results-page $(PAGES)/decode.md
	OPENBLAS_NUM_THREADS=1 $(PY) -m benchmarks.latency --out $(OUT)/bench_latency \
		--results-page $(PAGES)/latency.md
	$(PY) -m benchmarks.systematic --out $(OUT)/systematic \
		--results-page $(PAGES)/systematic.md
	$(MAKE) device-table DEVICE=cpu QUICK=--quick

results-quick: $(STAMP) results-make-run
	$(PY) -m theory.example --quick --out $(OUT)/example \
		--results-page $(PAGES)/decoding.md
	$(PY) -m theory.calibration --codes all --masks 100 --out $(OUT)/calibration_codes \
		--results-page $(PAGES)/calibration.md
	$(PY) -m models.nercc_experiment --quick --out $(OUT)/nercc \
		--results-page $(PAGES)/nercc.md
	$(PY) -m models.parity_experiment --quick --out $(OUT)/parity \
		--results-page $(PAGES)/parity.md
	$(PY) -m benchmarks.schemes --quick --out $(OUT)/schemes \
		--results-page $(PAGES)/schemes.md
	$(PY) -m benchmarks.regimes --quick --out $(OUT)/regimes \
		--results-page $(PAGES)/regimes.md
	$(PY) -m benchmarks.serving --quick --out $(OUT)/serving \
		--results-page $(PAGES)/serving.md
	$(PY) -m benchmarks.ray_cost --quick --no-progress --out $(OUT)/ray_cost \
		--results-page $(PAGES)/ray.md
	$(PY) -m models.serve_dcn --quick --no-progress --out $(OUT)/serve_dcn \
		--results-page $(PAGES)/serve-dcn.md
	$(PY) -m benchmarks.load --quick --out $(OUT)/load --results-page $(PAGES)/load.md
	OPENBLAS_NUM_THREADS=1 $(PY) -m benchmarks.run --quick --out $(OUT)/bench \
		--results-page $(PAGES)/benchmarks.md
	OPENBLAS_NUM_THREADS=1 $(PY) -m benchmarks.decode --out $(OUT)/bench_decode \
		--results-page $(PAGES)/decode.md
	OPENBLAS_NUM_THREADS=1 $(PY) -m benchmarks.latency --calls 200 --out $(OUT)/bench_latency \
		--results-page $(PAGES)/latency.md
	$(PY) -m benchmarks.systematic --quick --out $(OUT)/systematic \
		--results-page $(PAGES)/systematic.md
	$(MAKE) device-table DEVICE=cpu QUICK=--quick

# make-run.md: what `make run` writes, gathered (the same for both forms)
results-make-run: run
	$(PY) -m theory.collect --out $(OUT) --results-page $(PAGES)/make-run.md

# Mutation testing of the numerical modules (minutes to hours; not part of CI):
# make mutation MUTATE="codedjax/_chebyshev.py codedjax/_leverage.py" MUTATION_ARGS="--max 60"
# (the default: tools/mutation.py's DEFAULT, _chebyshev.py and the bounds modules)
MUTATE ?=
MUTATION_ARGS ?=
mutation: $(STAMP)
	$(PY) -m pip install --quiet -e '.[mutation]'
	$(PY) tools/mutation.py $(MUTATE) $(MUTATION_ARGS) --out $(OUT)/mutation

lint: $(STAMP)
	$(PY) -m ruff check codedjax runkit theory models benchmarks tests tools
	$(PY) -m ruff format --check codedjax runkit theory models benchmarks tests tools

clean:
	rm -rf $(VENV) $(OUT)
