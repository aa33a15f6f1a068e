# Two entry points for a fresh machine with Python 3.11:
#   make demo   -> set up .venv and run the embedded default end to end
#   make test   -> set up .venv and run the test suite (CI runs exactly this)
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: setup demo test test-fast clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: requirements.txt | $(BIN)/activate
	$(BIN)/pip install --disable-pip-version-check -q -r requirements.txt
	$(BIN)/pip install --disable-pip-version-check -q --no-deps -e .
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(BIN)/snakemake --cores all

# --durations / --file-durations: where the suite's time goes, printed by every run (docs/benchmarks.md)
test: setup
	$(BIN)/python -m pytest -q --durations=25 --file-durations=0

# Skips the slow end-to-end runs (workflow smoke, SLURM); CI runs everything via `make test`.
test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow" --durations=25

clean:
	rm -rf $(VENV) .snakemake results
