"""The column dictionary of a run's CSVs (oracle.report.columns: the shared and run-level
entries; each kind's COLUMNS, gathered by oracle.experiments.columns; docs/outputs.md): every
column the code writes is described, nothing else is, and the docs hold the generated text."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from oracle.experiments.columns import (csv_columns, data_entry, dictionary_markdown, documented_kinds,
                                       registry_problems)
from oracle.report.columns import CLAIMS, PAIRS, RELIABILITY, RUNS, TIMINGS, column_problems, describe

REPO = Path(__file__).resolve().parents[1]


def written_columns(tmp_path) -> list:
    """The columns each CSV of the dictionary gets from the code that writes it, run on a tiny
    classifier evaluation (a metrics JSON as the prediction job writes it)."""
    from oracle.classifiers.evaluate import ID_COLUMNS, evaluate_predictions, read_metrics_frame, read_reliability_frame
    from oracle.experiments.scaling.report import all_fits
    from oracle.report.claims_doc import claims_rows
    from oracle.report.timings import TIMING_COLUMNS

    rng = np.random.default_rng(0)
    files = []
    for i, n_train in enumerate((100, 200, 400)):
        log_p = np.log(rng.dirichlet(np.ones(3), size=50))
        log_q = np.log(rng.dirichlet(np.ones(3), size=50))
        metrics = evaluate_predictions(log_q, log_p, rng.integers(0, 3, size=50), n_bins=5)
        ident = dict(zip(ID_COLUMNS, ("e", "a", "c", 0, "base", n_train, "hard", "label")))
        path = tmp_path / f"m{i}.json"
        path.write_text(json.dumps({**ident, "metrics": metrics, "epochs": 3, "train_seconds": 1.5,
                                    "convergence": {"converged": True, "stopped_by": "budget", "steps": 9,
                                                    "kept_steps": 9, "kept_epoch": 3, "loss_change": -0.01}}))
        files.append(path)
    runs = read_metrics_frame(files)
    return [(RUNS, list(runs.columns)), (RELIABILITY, list(read_reliability_frame(files).columns)),
            (data_entry("scaling", "fits"), list(all_fits(runs).columns)),
            (CLAIMS, list(pd.DataFrame(claims_rows({}, {})).columns)), (TIMINGS, list(TIMING_COLUMNS))]


def test_every_written_column_is_in_the_dictionary_and_nothing_else(tmp_path):
    """The run-level CSVs and the shared runs/reliability/fits; each kind's own data files are
    checked on its collect's output in tests/test_experiment_<kind>.py (test_data_columns_are_described)."""
    from oracle.report.columns import SE_MEAN_COLUMNS

    written = written_columns(tmp_path)
    for entry, columns in written:
        # runs.csv's per-cell SEs come from the predictions (collect; tests/test_experiment_scaling.py)
        unwritten = SE_MEAN_COLUMNS if entry.path == RUNS.path else ()
        assert not column_problems(entry, columns, unwritten), column_problems(entry, columns, unwritten)
    # shift's runs.csv: the full metric columns (its own test has short metrics files) and its additions
    shift_runs = data_entry("shift", "runs")
    assert not [col for col in dict((e.path, c) for e, c in written)[RUNS.path] if describe(shift_runs, col) is None]
    assert describe(RUNS, "epistemic_se")[0] == "nats"
    assert describe(RUNS, "no_such_column") is None
    assert column_problems(RUNS, ["no_such_column"])  # the check can fail


def test_every_data_file_a_run_writes_has_an_entry_and_every_entry_a_file():
    """Each registered kind describes its data files in its package (COLUMNS), the shared
    entries list exactly the kinds that write them, and the dictionary lists each file once."""
    from oracle.experiments import kinds

    assert registry_problems() == []
    declared = {(kind, data) for kind, module in kinds().items() for data in module.DATA}
    entries = csv_columns()
    assert len({entry.path for entry, _ in entries}) == len(entries)
    for entry, shared_by in entries:
        name = entry.path.rsplit("/", 1)[-1].removesuffix(".csv")
        assert entry.path.startswith("<kind>/") == bool(shared_by), entry.path
        assert all((kind, name) in declared and data_entry(kind, name) is entry for kind in shared_by), entry.path
    listed = {entry.path for entry, _ in entries}
    assert {data_entry(kind, data).path for kind, data in declared} | {"claims.csv", "timings.csv"} == listed
    assert {"claims.csv", "timings.csv", PAIRS.path} <= listed


def test_the_registry_check_names_a_kind_whose_columns_are_off(monkeypatch):
    """A kind that writes a data file its COLUMNS leaves out, or files an entry under another
    path, is named (the check a new kind's package meets)."""
    from oracle.experiments import kind_module

    scaling = kind_module("scaling")
    cols = dict(scaling.COLUMNS)
    del cols["fits"]
    cols["pairs"] = cols["runs"]
    monkeypatch.setattr(scaling, "COLUMNS", cols)
    assert registry_problems() == ["scaling: data file 'fits' has no COLUMNS entry",
                                   "scaling: COLUMNS entry 'pairs' is '<kind>/<experiment>/data/runs.csv', not "
                                   "'scaling/<experiment>/data/pairs.csv' (or the shared "
                                   "oracle.report.columns.SHARED['pairs'])"]


def test_every_table_csv_is_listed():
    from oracle.experiments import kinds, table_csvs

    listed = [path for path, _ in table_csvs()]
    want = [f"{kind}/<experiment>/tables/{a.name}.csv" for kind, m in kinds().items()
            for a in m.ARTIFACTS.values() if a.type == "table"]
    assert set(want) < set(listed) and len(listed) == len(set(listed))
    assert {"validation/tables/checks.csv", "validation/tables/summary.csv"} <= set(listed)
    text = dictionary_markdown()
    assert all(f"| `{path}` |" in text for path in listed)


def test_the_docs_hold_the_generated_dictionary():
    """docs/outputs.md holds the generated dictionary of the kinds it names in its first line,
    exactly. A kind registered after the docs were last generated (its package, registry name
    and config entry only) is described and checked in its package (above); the docs name it
    in a warning until they are regenerated. A kind the docs name that is not registered fails."""
    from oracle.experiments import kinds

    text = (REPO / "docs" / "outputs.md").read_text(encoding="utf-8")
    block = text.split("<!-- BEGIN column dictionary (generated) -->\n")[1].split("<!-- END column dictionary -->")[0]
    assert "pd.read_csv" in text
    covered = documented_kinds(block)
    assert covered and set(covered) <= set(kinds()), covered
    assert block == dictionary_markdown(covered)
    if new := [kind for kind in kinds() if kind not in covered]:
        warnings.warn(f"docs/outputs.md does not list the kinds {new} yet; regenerate its column dictionary "
                      "(docs/outputs.md says how)", stacklevel=1)


def test_the_docs_check_covers_the_kinds_it_names():
    """The dictionary of some kinds leaves out the others' files and tables, and names its kinds."""
    full, part = dictionary_markdown(), dictionary_markdown(["scaling", "labels"])
    assert documented_kinds(full) == list(kinds_in_order()) and documented_kinds(part) == ["scaling", "labels"]
    assert "shift/<experiment>/data/configurations.csv" in full and "shift/<experiment>" not in part
    assert "Written by the kinds scaling, labels." in part and documented_kinds("no line") == []


def kinds_in_order():
    from oracle.experiments import kinds

    return kinds()
