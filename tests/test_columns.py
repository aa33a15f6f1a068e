"""The column dictionary of a run's CSVs (oracle.report.columns, docs/outputs.md): every column
the code writes is described, nothing else is, and the docs hold the generated text."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from oracle.report.columns import CSV_COLUMNS, describe, dictionary_markdown

REPO = Path(__file__).resolve().parents[1]


def written_columns(tmp_path) -> dict[str, list[str]]:
    """The columns each CSV of the dictionary gets from the code that writes it, run on a tiny
    classifier evaluation (a metrics JSON as the prediction job writes it)."""
    from oracle.classifiers.evaluate import ID_COLUMNS, evaluate_predictions, read_metrics_frame, read_reliability_frame
    from oracle.experiments.scaling.report import all_fits
    from oracle.report.claims import claims
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
            "claims.csv": list(pd.DataFrame(claims({}, {})).columns),
            "timings.csv": list(TIMING_COLUMNS)}


def test_every_written_column_is_in_the_dictionary_and_nothing_else(tmp_path):
    written = written_columns(tmp_path)
    assert sorted(written) == sorted(c.path for c in CSV_COLUMNS)
    for c in CSV_COLUMNS:
        missing = [col for col in written[c.path] if describe(c.path, col) is None]
        assert not missing, (c.path, missing)
        stale = [col for col in c.columns if col not in written[c.path]]
        assert not stale, (c.path, stale)
        for col, (unit, meaning) in c.columns.items():
            assert unit and meaning, (c.path, col)
    assert describe("<kind>/<experiment>/data/runs.csv", "epistemic_se")[0] == "nats"
    assert describe("<kind>/<experiment>/data/runs.csv", "no_such_column") is None


def test_the_docs_hold_the_generated_dictionary():
    text = (REPO / "docs" / "outputs.md").read_text(encoding="utf-8")
    block = text.split("<!-- BEGIN column dictionary (generated) -->\n")[1].split("<!-- END column dictionary -->")[0]
    assert block == dictionary_markdown()
    assert "pd.read_csv" in text
