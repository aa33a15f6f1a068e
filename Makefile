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

# Two pytest-xdist workers: the files that read the session's shared runs (smoke, SLURM, Gaussian,
# dry runs) in one, every other file in the other as it frees (tests/conftest.py,
# pytest_collection_modifyitems); most of the suite is one busy process, so one core idled.
# --durations / --file-durations: where the suite's time goes, printed by every run (docs/benchmarks.md)
PARALLEL := -n 2 --dist loadgroup --no-loadscope-reorder
test: setup
	$(BIN)/python -m pytest -q $(PARALLEL) --durations=25 --file-durations=0

# Skips the slow end-to-end runs (workflow smoke, SLURM); CI runs everything via `make test`.
test-fast: setup
	$(BIN)/python -m pytest -q $(PARALLEL) -m "not slow" --durations=25

clean:
	rm -rf $(VENV) .snakemake results
