"""Spreads: numbers.tex's SE/Std macros, values rounded to their spread (numbers.tex, the
audit), the rule every seed-averaged number follows, and the one formatting rule of tables."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from oracle.errors import DataError
from oracle.experiments.estimators import report as estimators_report
from oracle.report.numbers import correlation_ci95, entry, mean_spread, numbers_tex, round_to_spread, spread_problems
from oracle.report.tables import column_kinds, format_cell, write_table
from oracle.tools.audit_text import number_text

NEWCOMMAND = re.compile(r"\\newcommand\{\\([A-Za-z]+)\}\{([^{}]*)\}")


@pytest.mark.parametrize("value, spread, want", [
    (0.26341, 0.0123, ("0.263", "0.012")),    # leading 1: two significant digits of the spread
    (0.0121, 0.0004, ("0.0121", "0.0004")),   # the example of docs/provenance.md
    (0.0391, 0.0071, ("0.039", "0.007")),     # leading 7: one
    (0.9798, 0.00137, ("0.9798", "0.0014")),
    (1234.5, 37.0, ("1230", "40")),           # a spread above 10 rounds the value to tens
    (-0.0004, 0.004, ("0.000", "0.004")),     # no "-0.000"
    (0.783, 0.0, ("0.783", "0")),             # a zero spread: the value keeps 4 significant digits
    (0.5, None, ("0.5", None)),
])
def test_round_to_spread(value, spread, want):
    assert round_to_spread(value, spread) == want


def test_numbers_tex_gives_every_spread_its_macros():
    nums = {"scaling.alpha.resnet50": {"value": 0.03912, "std": 0.0071, "se": 0.0031, "se_over": "seeds", "n_seeds": 5},
            "world.base.aleatoric_floor": {"value": 0.012134, "se": 0.00041, "se_over": "samples"},
            "validation.is_domain": {"value": 3.8877, "std": 0.198},
            "scaling.n_max": {"value": 40000}, "flag": {"value": True, "se": 0.1}, "none": {"value": None, "se": 0.1}}
    got = dict(NEWCOMMAND.findall(numbers_tex(nums)))
    assert got == {
        "numScalingAlphaResnetFiveZero": "0.03912", "numScalingAlphaResnetFiveZeroSE": "0.003",
        "numScalingAlphaResnetFiveZeroToSE": "0.039", "numScalingAlphaResnetFiveZeroStd": "0.007",
        "numScalingAlphaResnetFiveZeroToStd": "0.039",
        "numWorldBaseAleatoricFloor": "0.01213", "numWorldBaseAleatoricFloorSE": "0.0004",
        "numWorldBaseAleatoricFloorToSE": "0.0121",
        "numValidationIsDomain": "3.888", "numValidationIsDomainStd": "0.20", "numValidationIsDomainToStd": "3.89",
        "numScalingNMax": "40000", "numFlag": "true", "numNone": "--"}
    # a key whose macro is another key's spread macro is refused, naming both
    with pytest.raises(DataError, match=r"'a \(se\)' and 'a.SE'"):
        numbers_tex({"a": {"value": 1.0, "se": 0.1}, "a.SE": {"value": 2.0}})


def test_the_audit_prints_a_number_rounded_to_its_se():
    assert number_text({"value": 0.012134, "unit": "nats", "se": 0.00041, "se_over": "samples"}) == \
        "0.0121 nats (se 0.0004 over samples)"
    assert number_text({"value": 0.03912, "unit": "1", "std": 0.0071, "se": 0.0031, "se_over": "seeds",
                        "n_seeds": 5}) == "0.039 (se 0.003 over seeds; std 0.007 over 5 seeds)"
    assert number_text({"value": 40000, "unit": "samples"}) == "40000 samples"
    assert number_text({"value": 3.8877, "unit": "1", "std": 0.198, "std_over": "splits"}) == "3.89 (std 0.20 over splits)"


def test_spread_problems_names_a_mean_without_its_se():
    good = {"a": {"value": 1.0, **mean_spread(0.2, 4)}, "b": {"value": 1.0, "se": 0.1, "se_over": "samples"},
            "c": {"value": 1.0, **mean_spread(float("nan"), 1)}, "d": {"value": 3.9, "std": 0.2, "std_over": "splits"}}
    assert good["a"]["se"] == pytest.approx(0.1) and good["c"]["std"] is None and spread_problems(good) == []
    bad = {"x": {"value": 1.0, "std": 0.2}, "y": {"value": 1.0, "std": 0.2, "se": 0.2, "se_over": "seeds", "n_seeds": 4},
           "z": {"value": 1.0, "se": 0.2}}
    problems = spread_problems(bad)
    assert [p.split(":")[0] for p in problems] == ["x", "y", "z"], problems


def test_one_formatting_rule_by_column_kind():
    headers = ["Configuration", "Test Acc (%)", "± std", "Δ (pp)", "KL_y (empirical)", "± std", "Monte Carlo KL",
               "± SE", "sigma", "R² std", "SE (%)", "I SE", "Val Acc (%)", "Val ± std"]
    assert column_kinds(headers) == ["number", "percent", "percent", "percent", "number", "spread", "number",
                                     "spread", "parameter", "spread", "percent", "spread", "percent", "percent"]
    cases = [(78.3, "percent", "78.30"), (-3.8512, "percent", "-3.85"), (0.0, "percent", "0.00"),
             (-0.001, "percent", "0.00"), (0.05321, "number", "0.0532"), (0.9798, "number", "0.980"),
             (60.12, "number", "60.1"), (0.0, "number", "0"), (1.234e-5, "number", "1.23e-05"),
             (0.00137, "spread", "0.0014"), (0.9, "parameter", "0.9")]
    assert [format_cell(v, k) for v, k, _ in cases] == [want for _, _, want in cases]


def test_write_table_renders_by_the_rule(tmp_path):
    df = pd.DataFrame({"Set": ["a", "b"], "Accuracy (%)": [78.3, 60.1], "Acc std (%)": [0.7071, np.nan],
                       "Drop (pp)": [0.0, -3.8512], "Epistemic KL (nats)": [0.05321, 0.5], "± SE": [0.00137, 0.02],
                       "N": [100, 40000]})
    md = write_table(df, tmp_path / "t", "c")["md"].read_text()
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in md.splitlines()[4:]]
    assert rows == [["a", "78.30", "0.71", "0.00", "0.0532", "0.0014", "100"],
                    ["b", "60.10", "–", "-3.85", "0.500", "0.020", "40000"]]


def test_irreducible_share_is_blank_where_the_accuracy_rose():
    sets = pd.DataFrame({
        "evalset": ["base", "tau0.9", "tau1.5"], "shift": ["clean", "variant", "variant"],
        "parameter": ["in-distribution", "τ=0.9", "τ=1.5"], "kl_exact": [0.0, 0.1, 0.2],
        "kl_monte_carlo": [math.nan, 0.1, 0.2], "kl_monte_carlo_se": [math.nan, 0.01, 0.01],
        "posterior_shift": math.nan, "oracle_acc_noisy": math.nan, "accuracy": [0.78, 0.84, 0.66],
        "accuracy_std": [0.01, 0.01, 0.01], "bayes_accuracy": [0.9, 0.95, 0.8], "drop_pp": [0.0, -6.0, 12.0],
        "bayes_drop_pp": [0.0, -5.0, 10.0], "irreducible_share": [math.nan, 5 / 6, 10 / 12]})
    t = estimators_report.table("shifted_sets", {"sets": sets}, {})
    share = t.set_index("Set")["Irreducible share"]
    assert math.isnan(share["base"]) and math.isnan(share["tau0.9"]) and share["tau1.5"] == pytest.approx(10 / 12)


def test_numbers_tex_says_which_key_each_macro_is():
    nums = {"scaling.alpha.resnet": {"value": 0.4, "se": 0.05}, "world.base.bayes_error": {"value": 0.012}}
    lines = [ln for ln in numbers_tex(nums, {"fig2": "runs/r/figures/panels"}).splitlines() if "newcommand" in ln]
    comments = {NEWCOMMAND.search(ln).group(1): ln.split("} % ", 1)[1] for ln in lines}
    assert comments["numScalingAlphaResnet"] == "numbers.json: scaling.alpha.resnet"
    assert comments["numScalingAlphaResnetSE"] == "numbers.json: scaling.alpha.resnet (se)"
    assert comments["numWorldBaseBayesError"] == "numbers.json: world.base.bayes_error"
    assert comments["paperFigTwo"] == "paper artifact: fig2"


def test_a_correlation_over_seeds_gets_its_interval_through_fishers_z():
    """Against a hand computation of Fisher's transform: z = 0.5 ln((1 + r) / (1 - r)) per seed,
    a t interval on the z's, mapped back through (e^{2z} - 1) / (e^{2z} + 1); inside (-1, 1) where
    the t interval on rho itself runs past 1."""
    from scipy import stats

    rhos = [0.20, 0.91]
    z = [0.5 * math.log((1 + r) / (1 - r)) for r in rhos]
    zbar, sd = sum(z) / 2, math.sqrt(sum((v - sum(z) / 2) ** 2 for v in z) / 1)
    half = stats.t.ppf(0.975, 1) * sd / math.sqrt(2)
    back = lambda v: (math.exp(2 * v) - 1) / (math.exp(2 * v) + 1)  # noqa: E731
    lo, hi = correlation_ci95(rhos)
    assert lo == pytest.approx(back(zbar - half), abs=1e-12) and hi == pytest.approx(back(zbar + half), abs=1e-12)
    assert -1 < lo < min(rhos) and max(rhos) < hi < 1
    naive = stats.t.ppf(0.975, 1) * np.std(rhos, ddof=1) / math.sqrt(2)
    assert np.mean(rhos) + naive > 1  # what it replaces
    # many seeds of the same correlation: a tight interval around it; undefined where it has no spread
    rng = np.random.default_rng(0)
    many = np.tanh(np.arctanh(0.5) + 0.05 * rng.standard_normal(40))
    lo, hi = correlation_ci95(many)
    assert lo < 0.5 < hi and hi - lo < 0.05
    assert correlation_ci95([0.3]) is None and correlation_ci95([0.3, 0.3]) is None
    assert correlation_ci95([0.3, float("nan")]) is None
    lo, hi = correlation_ci95([1.0, 0.9])  # a perfect rank correlation in one seed stays finite
    assert math.isfinite(lo) and hi <= 1.0


def test_converged_entry_counts_each_classifier_once():
    from oracle.report.numbers import converged_entry

    runs = pd.DataFrame({"N": [50, 50, 100, 100, 200], "seed": [0, 0, 0, 1, 0],
                         "evalset": ["a", "b", "a", "a", "a"], "converged": [True, True, False, True, True]})
    e = converged_entry(runs, ("N", "seed"), "ResNet", "runs.csv")
    assert (e["value"], e["of"], e["unit"]) == (3, 4, "classifiers") and e["description"].endswith("of 4")
    assert converged_entry(runs.drop(columns="converged"), ("N", "seed"), "ResNet", "runs.csv") is None
    assert converged_entry(runs.assign(converged=None), ("N", "seed"), "ResNet", "runs.csv") is None


def test_a_spread_over_seeds_and_rows_is_checked_part_by_part():
    """over_seeds_and_rows' entry passes spread_problems; an se that is not the root of its parts'
    squares (e.g. the old hypot of seeds' and rows' SEs) or a missing component is named."""
    from oracle.experiments._pairs import over_seeds_and_rows
    from oracle.report.numbers import scale_spread

    rows = pd.DataFrame({"d": [0.10, 0.14, 0.12], "d_se": [0.02, 0.03, 0.025], "d_se_mean": [0.022] * 3})
    e = entry(unit="nats", artifact="x", description="d", **over_seeds_and_rows(rows, "d", 400))
    assert e["rows_bound"] is False and e["n_rows"] == 400 and not spread_problems({"k": e})
    pp = entry(unit="pp", artifact="x", description="d", **scale_spread(over_seeds_and_rows(rows, "d", 400), 100.0))
    assert pp["se"] == pytest.approx(100 * e["se"]) and pp["var_rows"] == pytest.approx(1e4 * e["var_rows"])
    assert not spread_problems({"k": pp})
    old = {**e, "se": math.hypot(e["std"] / math.sqrt(3), 0.025)}
    assert "root of the sum" in spread_problems({"k": old})[0]
    assert "lacks var_rows" in spread_problems({"k": {k: v for k, v in e.items() if k != "var_rows"}})[0]
    # without the seed-mean rows' SE: its bound, said so
    assert over_seeds_and_rows(rows.drop(columns="d_se_mean"), "d", 400)["rows_bound"] is True


def test_a_ratio_over_seeds_gets_its_interval_on_the_log_scale():
    from oracle.report.numbers import ratio_spread

    got = ratio_spread([0.6, 2.6])
    assert got["value"] == pytest.approx(math.sqrt(0.6 * 2.6)) and 0 < got["ci95"][0] < got["value"] < got["ci95"][1]
    # as wide either way in factors, where a t interval on the ratio itself goes below 0
    assert got["ci95"][1] / got["value"] == pytest.approx(got["value"] / got["ci95"][0], rel=1e-12)
    assert got["se"] == pytest.approx(np.std([0.6, 2.6], ddof=1) / math.sqrt(2)) and not spread_problems({"r": got})
    # a ratio <= 0 has no log: the arithmetic mean, no ci95
    assert ratio_spread([-0.5, 2.0]) == {"value": 0.75, **mean_spread(float(np.std([-0.5, 2.0], ddof=1)), 2)}


