"""The column dictionary of a run's CSVs (oracle.report.columns, docs/outputs.md): every column
the code writes is described, nothing else is, and the docs hold the generated text."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from oracle.report.columns import CSV_COLUMNS, column_problems, data_entry, describe, dictionary_markdown

REPO = Path(__file__).resolve().parents[1]


def written_columns(tmp_path) -> dict[str, list[str]]:
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
    return {"<kind>/<experiment>/data/runs.csv": list(runs.columns),
            "<kind>/<experiment>/data/reliability.csv": list(read_reliability_frame(files).columns),
            "scaling/<experiment>/data/fits.csv": list(all_fits(runs).columns),
            "claims.csv": list(pd.DataFrame(claims_rows({}, {})).columns),
            "timings.csv": list(TIMING_COLUMNS)}


def test_every_written_column_is_in_the_dictionary_and_nothing_else(tmp_path):
    """The run-level CSVs and the shared runs/reliability/fits; each kind's own data files are
    checked on its collect's output in tests/test_experiment_<kind>.py (test_data_columns_are_described)."""
    written = written_columns(tmp_path)
    for path, columns in written.items():
        assert not column_problems(path, columns), column_problems(path, columns)
    # shift's runs.csv: the full metric columns (its own test has short metrics files) and its additions
    shift_runs = data_entry("shift", "runs").path
    assert not [col for col in written["<kind>/<experiment>/data/runs.csv"] if describe(shift_runs, col) is None]
    assert describe("<kind>/<experiment>/data/runs.csv", "epistemic_se")[0] == "nats"
    assert describe("<kind>/<experiment>/data/runs.csv", "no_such_column") is None
    assert column_problems("<kind>/<experiment>/data/runs.csv", ["no_such_column"])  # the check can fail


def test_every_data_file_a_run_writes_has_an_entry_and_every_entry_a_file():
    from oracle.experiments import kinds

    declared = {(kind, data) for kind, module in kinds().items() for data in module.DATA}
    missing = [f"{kind}/{data}" for kind, data in sorted(declared) if data_entry(kind, data) is None]
    assert not missing, missing
    used = {data_entry(kind, data).path for kind, data in declared} | {"claims.csv", "timings.csv"}
    assert not [c.path for c in CSV_COLUMNS if c.path not in used]
    for c in CSV_COLUMNS:  # a shared entry's kinds do write the file
        name = c.path.rsplit("/", 1)[-1].removesuffix(".csv")
        assert all((kind, name) in declared for kind in c.kinds), c.path
        assert c.path.startswith("<kind>/") == bool(c.kinds), c.path


def test_every_table_csv_is_listed():
    from oracle.experiments import kinds, table_csvs

    listed = [path for path, _ in table_csvs()]
    want = [f"{kind}/<experiment>/tables/{a.name}.csv" for kind, m in kinds().items()
            for a in m.ARTIFACTS.values() if a.type == "table"]
    assert set(want) < set(listed) and len(listed) == len(set(listed))
    assert {"validation/tables/checks.csv", "validation/tables/summary.csv"} <= set(listed)
    text = dictionary_markdown(table_csvs())
    assert all(f"| `{path}` |" in text for path in listed)


def test_the_docs_hold_the_generated_dictionary():
    from oracle.experiments import table_csvs

    text = (REPO / "docs" / "outputs.md").read_text(encoding="utf-8")
    block = text.split("<!-- BEGIN column dictionary (generated) -->\n")[1].split("<!-- END column dictionary -->")[0]
    assert block == dictionary_markdown(table_csvs())
    assert "pd.read_csv" in text
