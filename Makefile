# Two entry points for a new machine: `make demo` (install + main job) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# constraints.txt pins the versions the tests ran with (torch==2.13.0, CPU wheel).
PIP_INSTALL := $(BIN)/pip install -q --disable-pip-version-check -c constraints.txt
# Where torch comes from. Empty (the default): pip's own configuration, which on Linux gives PyPI's CUDA
# build (with its nvidia-* CUDA packages) unless pip is pointed at CPU wheels. A CPU-only machine:
#   make demo TORCH_INDEX=https://download.pytorch.org/whl/cpu
# a GPU machine with CUDA 12.6 drivers: TORCH_INDEX=https://download.pytorch.org/whl/cu126. Only torch is
# read from that index; the rest comes from pip's usual index, so a machine that cannot reach it leaves
# TORCH_INDEX empty.
TORCH_INDEX ?=
TORCH_FROM := $(if $(strip $(TORCH_INDEX)),--index-url $(TORCH_INDEX),)

.PHONY: install demo test lint schema bench clean

$(BIN)/rmspec: pyproject.toml constraints.txt
	@echo "== rmspec install: a virtual environment in $(VENV), then torch, then rmspec with its dev tools: this takes minutes, and pip prints only errors"
	$(PYTHON) -m venv $(VENV)
	@echo "== installing torch 2.13.0$(if $(strip $(TORCH_INDEX)), from $(TORCH_INDEX),) (the largest download)"
	$(PIP_INSTALL) $(TORCH_FROM) torch==2.13.0 || { echo "could not install torch==2.13.0$(if $(strip $(TORCH_INDEX)), from TORCH_INDEX=$(TORCH_INDEX): is it reachable from here? Leave TORCH_INDEX empty to use pip's own index,)"; exit 1; }
	@echo "== installing rmspec and its dependencies (transformers, datasets, accelerate, ...) and the dev tools"
	$(PIP_INSTALL) -e ".[dev]"
	@echo "== installed: $(BIN)/rmspec"
	@touch $@

install: $(BIN)/rmspec

# The main job on the embedded default: validate, plan, train, evaluate, report (runs/quickstart/).
demo: install
	HF_HUB_OFFLINE=1 $(BIN)/rmspec validate specs/quickstart.yaml
	HF_HUB_OFFLINE=1 $(BIN)/rmspec plan specs/quickstart.yaml
	# --overwrite: running the demo again starts a fresh runs/quickstart instead of refusing.
	HF_HUB_OFFLINE=1 $(BIN)/rmspec run specs/quickstart.yaml --overwrite

# Two workers (pytest-xdist): much of the suite waits on subprocesses that import torch on one core
# (`rmspec run`, servers, vLLM's engine), so the second core is idle in one process. `--dist loadfile`:
# each test module stays whole on one worker, its module fixtures and engines built once. TEST_WORKERS=0
# runs it in one process.
# Measured: bench/results/ci_durations.md.
TEST_WORKERS ?= 2
test: install
	$(BIN)/rmspec schema --check
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=40

# ruff (style, bugs, import order; `ruff format` owns the layout), mypy (types; strict on the typed layers), import-linter (the
# one-way import contracts in pyproject.toml) and a circle check over every module. Each runs even
# when an earlier one fails, so one pass shows every finding; the target fails if any failed.
LINT_PATHS := rmspec tests scripts bench
lint: install
	@status=0; \
	echo "== ruff"; $(BIN)/ruff check $(LINT_PATHS) || status=1; \
	echo "== ruff format"; $(BIN)/ruff format --check $(LINT_PATHS) || status=1; \
	echo "== mypy"; $(BIN)/mypy || status=1; \
	echo "== import contracts"; $(BIN)/lint-imports --no-cache || status=1; \
	echo "== import circles"; $(BIN)/python scripts/check_import_cycles.py rmspec || status=1; \
	echo "== scorer kinds"; $(BIN)/python scripts/check_scorer_kinds.py || status=1; \
	exit $$status

schema: install
	$(BIN)/rmspec schema

# Benchmarks (minutes each); results land in bench/results/*.md.
bench: install
	$(PIP_INSTALL) -e ".[dev,bench]"
	for b in validate_speed plan_speed plan_calibration plan_cpu_bf16 data_demo data_learnability eval_scoring trl_vs_rmspec; do \
	  HF_HUB_OFFLINE=1 $(BIN)/python bench/$$b.py || exit 1; done

clean:
	rm -rf $(VENV) runs .pytest_cache
