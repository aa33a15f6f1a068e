"""oracle.report.claims_figure: the claims as a forest plot, one row per check of claims.csv."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from oracle.errors import DataError
from oracle.report import claims as cl
from oracle.report.claims_figure import claims_caption, claims_forest, forest_rows
from tests.test_claims import EXPERIMENTS, base_numbers, plain


def _frame(numbers) -> pd.DataFrame:
    return pd.DataFrame(cl.claims(numbers, EXPERIMENTS))


def test_one_row_per_check_and_one_per_finding_without_checks():
    numbers = {**base_numbers(), "scaling.n_sizes": plain(2)}  # power_law not posed: no checks
    frame = _frame(numbers)
    rows = forest_rows(frame)
    checks = {r["id"]: json.loads(r["checks"]) for r in frame.to_dict("records")}
    assert len(rows) == sum(max(len(c), 1) for c in checks.values())
    power = [r for r in rows if r["id"] == "power_law"]
    assert len(power) == 1 and power[0]["value"] is None and "2 sizes N" in power[0]["label"]
    ratio = next(r for r in rows if r["label"].startswith("gain ratio"))
    assert ratio["reference"] == cl.ACTIVE_RATIO_MARGIN == 1.3 and ratio["paper"] == 1.6
    assert ratio["lo"] < ratio["value"] < ratio["hi"]
    # every check's interval is the one its rule judged: the estimate's own
    est = cl.estimate(base_numbers(), "active.gain_ratio.test_resnet")
    assert ratio["lo"] == pytest.approx(est.lo, rel=1e-12) and ratio["hi"] == pytest.approx(est.hi, rel=1e-12)


def test_figure_and_caption_from_a_claims_csv(tmp_path):
    frame = _frame(base_numbers())
    frame.to_csv(tmp_path / "claims.csv", index=False)
    back = pd.read_csv(tmp_path / "claims.csv", keep_default_na=False)
    out = claims_forest(back, tmp_path / "claims")
    assert out["png"].read_bytes().startswith(b"\x89PNG") and out["pdf"].read_bytes().startswith(b"%PDF")
    # floor_exact (a check of the world) and shift_exact (shift_type's arm) are shown, not counted
    assert ("This run: 11 findings counted; verdicts: supported 11, contradicted 0, unresolved 0, not posed 0, "
            "not run 0 (not counted: floor_exact, shift_exact)." in claims_caption(back))
    with pytest.raises(DataError, match="checks"):
        forest_rows(back.drop(columns="checks"))
    bad = back.copy()
    bad.loc[0, "checks"] = "{not json"
    with pytest.raises(DataError, match="power_law"):
        forest_rows(bad)
