"""Captions (issue 20): a fixed description that claims nothing, then a finding computed from the
artifact's own data, with the paper's value beside it. On constructed runs whose numbers
contradict the paper, no caption claims the paper's result, and the numbers in the sentence
are the data's; on runs that agree, the sentence says so in numbers."""

from __future__ import annotations

import importlib
import re

import numpy as np
import pandas as pd
import pytest
from docutils.core import publish_parts

from oracle.experiments import artifact_findings, kinds
from oracle.experiments.shift import report as shift_report
from oracle.report.captions import full_caption, paper_says, rst_escape, span, write_caption
from oracle.validation import artifacts as validation_artifacts
from oracle.validation.findings import findings as validation_findings
from oracle.validation.findings import split_flag_text

#: Phrases that assert one of the paper's conclusions as a fact of the run.
CLAIMS = re.compile(r"approach|matters more|plateaus|passes|match(es)? real|not memorized|beside real|"
                    r"soft labels beat|follows a power law", re.IGNORECASE)


def _run_part(caption: str) -> str:
    """The caption without the sentences that quote the paper ("The paper: ...")."""
    return re.sub(r"The paper: [^.]*\.", "", caption)


# --------------------------------------------------------------------------- descriptions
def _all_artifacts():
    for kind, mod in kinds().items():
        for art in mod.ARTIFACTS.values():
            yield f"{kind}/{art.name}", art
    for art in validation_artifacts.ARTIFACTS.values():
        yield f"validation/{art.name}", art


@pytest.mark.parametrize("where,art", list(_all_artifacts()), ids=lambda v: v if isinstance(v, str) else "")
def test_descriptions_claim_nothing(where, art):
    assert not CLAIMS.search(art.caption), (where, art.caption)


@pytest.mark.parametrize("kind", list(kinds()))
def test_every_kind_has_a_findings_function(kind):
    module = importlib.import_module(f"oracle.experiments.{kind}.findings")
    assert callable(module.findings)


def test_samples_grid_caption_names_both_panels():
    cap = validation_artifacts.ARTIFACTS["samples_grid"].caption
    assert "(a) The first real training images" in cap and "(b) the first oracle samples" in cap
    assert "no real images" not in cap


def test_reliability_captions_state_the_sparse_bin_rule():
    from oracle.experiments import kind_module
    from oracle.report.figures import SPARSE_BIN

    for kind, name in (("scaling", "reliability"), ("labels", "reliability"), ("calibration", "reliability_under_shift")):
        cap = kind_module(kind).ARTIFACTS[name].caption
        assert f"fewer than {SPARSE_BIN} predictions" in cap and "number of predictions in each bin" in cap


# --------------------------------------------------------------------------- scaling
ARCHS = {"a": "Arch A", "b": "Arch B"}
SIZES = [100, 1000, 10000]


def _scaling_runs(acc_of_n, epistemic_of_n, floor=0.05, bayes=0.98) -> pd.DataFrame:
    rows = []
    for arch in ARCHS:
        for seed in (0, 1):
            for n in SIZES:
                jitter = 0.001 * seed + (0.01 if arch == "b" else 0.0)
                epi = epistemic_of_n(n) * (1 + jitter)
                rows.append({"arch": arch, "N": n, "seed": seed, "acc": acc_of_n(n) - jitter,
                             "bayes_accuracy": bayes, "aleatoric": floor, "epistemic": epi, "total": floor + epi,
                             "ece": 0.5 * n ** -0.3 * (1 + jitter), "ece_posterior": 0.5 * n ** -0.3,
                             "calibration_pointwise": 0.6 * n ** -0.3, "cell": f"N{n}"})
    return pd.DataFrame(rows)


SCALING_SPEC = {"arch_labels": ARCHS, "archs": list(ARCHS), "table_size": None, "table_archs": None,
                "table_sizes": None}


def _scaling_pairs(runs: pd.DataFrame, se: float = 1e-4) -> pd.DataFrame:
    """The pairs frame of `runs`: per (arch, seed) KL at each N minus at the next, with a paired SE."""
    rows = []
    for (arch, seed), g in runs.sort_values("N").groupby(["arch", "seed"]):
        for (_, r1), (_, r2) in zip(g.iterrows(), list(g.iterrows())[1:]):
            rows.append({"arch": arch, "seed": seed, "value": "epistemic", "a": r1["cell"], "b": r2["cell"],
                         "diff": r1["epistemic"] - r2["epistemic"], "diff_se": se, "n_rows": 1000})
    return pd.DataFrame(rows)


def _scaling(runs: pd.DataFrame, name: str, pairs: pd.DataFrame | None = None) -> str:
    return artifact_findings("scaling", name, {"runs": runs, "fits": pd.DataFrame(), "reliability": pd.DataFrame(),
                                               "pairs": _scaling_pairs(runs) if pairs is None else pairs},
                             SCALING_SPEC)


def test_scaling_far_from_bayes_and_no_plateau():
    # accuracy stuck 40 pp under Bayes, total loss falling fast (epistemic >> floor)
    runs = _scaling_runs(lambda n: 0.5 + 0.02 * np.log10(n), lambda n: 20.0 * n ** -0.5)
    gap = _scaling(runs, "accuracy_vs_bayes")
    a_gap = 100 * (0.98 - runs[(runs.arch == "a") & (runs.N == 10000)]["acc"].mean())
    b_gap = 100 * (0.98 - runs[(runs.arch == "b") & (runs.N == 10000)]["acc"].mean())
    assert f"{a_gap:.3g} to {b_gap:.3g} percentage points" in gap
    panels = _scaling(runs, "scaling_panels")
    assert "it has not flattened" in panels and "flattened for every" not in panels
    ratio = (0.05 + 20 * 10000 ** -0.5) / (0.05 + 20 * 1000 ** -0.5)
    drop = 100 * (1 - ratio ** (1 / np.log2(10)))
    assert f"{drop:.3g}" in panels and "per doubling" in panels  # arch a's drop per doubling of N, in %
    for cap in (gap, panels):
        assert not CLAIMS.search(_run_part(cap)), cap
    assert paper_says("bayes_bound") in gap  # the paper's value beside, marked as the paper's


def test_scaling_close_to_bayes_and_flat():
    runs = _scaling_runs(lambda n: 0.97 - 1.0 / n, lambda n: 1e-3 * n ** -0.1)
    panels = _scaling(runs, "scaling_panels")
    assert "it has flattened for every architecture" in panels
    assert "alpha > 0 for 2 of 2 architectures" in panels
    gap = _scaling(runs, "accuracy_vs_bayes")
    assert "it rose for 2 of 2 architectures" in gap


def test_scaling_exponents_and_epistemic_ratio_match_the_data():
    runs = _scaling_runs(lambda n: 0.8, lambda n: 10.0 * n ** -0.4)
    curves = _scaling(runs, "epistemic_curves")
    assert "Arch A 0.4 ± " in curves
    table = _scaling(runs, "epistemic_vs_n")
    assert f"{100 ** 0.4 * 1.0:.3g}" in table and "fell at every step of N" in table and "for 2 of 2" in table
    # a step whose paired interval spans 0 is no fall (Table 2's ViT, 0.304 -> 0.302, CI [-0.067, 0.071])
    pairs = _scaling_pairs(runs)
    pairs.loc[(pairs["arch"] == "b") & (pairs["b"] == "N10000"), "diff_se"] = 10.0
    table = _scaling(runs, "epistemic_vs_n", pairs)
    assert "for 1 of 2" in table and "no clear fall at Arch B N=1000 -> 10000" in table
    rising = _scaling(_scaling_runs(lambda n: 0.8, lambda n: 0.01 * n ** 0.2), "epistemic_curves")
    assert "alpha > 0 for 0 of 2 architectures" in rising


# --------------------------------------------------------------------------- labels
def _label_runs(gain_pp: float) -> pd.DataFrame:
    rows = []
    for n in (100, 300, 1000):
        for seed in (0, 1, 2):
            hard = 0.5 + 0.05 * np.log10(n) + 0.01 * seed
            for mode, acc in (("hard", hard), ("soft", hard + gain_pp / 100)):
                rows.append({"labels": mode, "N": n, "seed": seed, "acc": acc, "epistemic": 1.0, "ece": 0.05,
                             "ece_posterior": 0.04, "calibration_pointwise": 0.06, "cell": f"{mode}-N{n}"})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("name", ["label_comparison", "soft_vs_hard"])
def test_soft_labels_losing_everywhere_is_said(name):
    cap = artifact_findings("labels", name, {"runs": _label_runs(-2.0)}, {})
    assert "soft labels win at 0 of 3 sizes" in cap
    assert cap.count("-2.00 pp") == 3
    assert not CLAIMS.search(_run_part(cap))
    assert f"The paper: {paper_says('soft_labels')}." in cap


def test_soft_labels_winning_is_said():
    cap = artifact_findings("labels", "soft_vs_hard", {"runs": _label_runs(1.5)}, {})
    assert "soft labels win at 3 of 3 sizes" in cap and cap.count("+1.50 pp") == 3
    seeds = _label_runs(1.5)["seed"].nunique()
    assert cap.endswith(f"Error bars: mean ± std over {seeds} seeds.")


# --------------------------------------------------------------------------- shift
def _configurations(drop_of) -> pd.DataFrame:
    """Baseline, two prior shifts and two noise levels; drop_of(kl_y, sigma) -> accuracy drop (pp)."""
    rows = [("base", "Balanced", "baseline", 0.0, 0.0), ("p1", "Mild", "prior", 0.1, 0.0),
            ("p2", "Strong", "prior", 0.3, 0.0), ("n1", "Noise 0.1", "noise", 0.0, 0.1),
            ("n2", "Noise 0.2", "noise", 0.0, 0.2)]
    return pd.DataFrame([{"cell": c, "label": lab, "shift_type": t, "kl_y_empirical": kl, "kl_y_target": kl,
                          "kl_exact": kl if t != "noise" else np.nan, "noise_std": s,
                          "delta_pp": -drop_of(kl, s)} for c, lab, t, kl, s in rows])


def test_shift_magnitude_explaining_the_drop_is_said():
    conf = _configurations(lambda kl, s: 30.0 * kl + 0.5 * (s > 0))  # drop ~ KL_y; noise costs little
    runs = pd.DataFrame({"arch": ["a", "b"] * 2, "seed": [0, 0, 1, 1]})
    cap = artifact_findings("shift", "shift_panels", {"configurations": conf, "runs": runs}, {})
    assert "Error bars in (a)-(d): mean ± std over 4 runs (2 arch x 2 seed)." in cap
    r2 = shift_report.drop_fits(conf)["kl_y"]["r2"]
    assert r2 > 0.9 and f"against KL_y {r2:.3g}" in cap
    assert f"The paper: {paper_says('shift_type')}." in cap
    assert "prior 6 pp (largest 9)" in cap and "noise 0.5 pp" in cap
    assert cap.index("prior 6") < cap.index("noise 0.5")  # the costliest type first
    assert not CLAIMS.search(_run_part(cap))


def test_shift_accuracy_names_the_extremes():
    conf = _configurations(lambda kl, s: 30.0 * kl + 0.5 * (s > 0))
    cap = artifact_findings("shift", "shift_accuracy", {"configurations": conf}, {})
    assert "-9 pp (Strong)" in cap and "-0.5 pp (Noise 0.1)" in cap


# --------------------------------------------------------------------------- validation
def _metrics(flagged: bool, variance_ratios) -> dict:
    ref = {"mean": 0.4, "std": 0.1, "values": [0.3, 0.5]}
    oracle = {"mean": 1.6 if flagged else 0.45, "std": 0.2, "values": []}
    return {
        "memorization": {"rate": 0.02, "test_rate": 0.05, "threshold": 0.7, "median_nn": 1.5, "test_median_nn": 1.2},
        "coverage": {"naeem": {"coverage": 0.9, "expected_if_same_distribution": 0.99}},
        "diversity": {str(k): {"variance_ratio": v} for k, v in enumerate(variance_ratios)},
        "split_consistency": {"fd_train_train": ref, "fd_train_oracle": oracle,
                              "fd_train_test": {"mean": 0.41, "std": 0.1}, "oracle_ratio": oracle["mean"] / 0.4,
                              "oracle_mismatch": flagged, "test_mismatch": False, "n_seeds": 2, "subset_size": 300,
                              "flag_rule": "mismatch when |a - b| > sa + sb"},
    }


def test_flagged_split_consistency_says_the_rule_and_its_meaning():
    m = _metrics(True, [1.0, 2.9, 1.1])
    cap = validation_findings("summary", m)
    assert "Split consistency flagged (ratio 4)" in cap and "mismatch when |a - b| > sa + sb" in cap
    assert "distinguishable from real images" in cap
    assert "within 80-125% for 2 of 3 classes" in cap and "class 1 at 290%" in cap
    assert split_flag_text(m["split_consistency"]) == "4.00 (flagged: |1.6 − 0.4| > 0.2 + 0.1, see caption)"
    assert not CLAIMS.search(cap)


def test_unflagged_split_consistency_is_not_called_flagged():
    cap = validation_findings("summary", _metrics(False, [1.0, 1.1]))
    assert "not flagged" in cap and "Split consistency flagged" not in cap
    assert "for 2 of 2 classes" in cap


def test_memorization_numbers_are_the_metrics():
    cap = validation_findings("nn_distances", _metrics(False, [1.0]))
    assert "2% of oracle samples" in cap and "against 5% of held-out real" in cap and "threshold 0.7" in cap


# --------------------------------------------------------------------------- the caption file
def test_caption_file_renders_as_the_same_text(tmp_path):
    text = full_caption("E[KL(p || q)] of test_resnet, *N*^-alpha, `x` |a| \\ (paper Figure 2)",
                        "This run: R^2 0.98.")
    path = tmp_path / "fig.caption.rst"
    write_caption(path, text)
    html = publish_parts(f".. include:: {path}\n\nMade by", writer="html",
                         settings_overrides={"report_level": 5})["body"]
    assert "system-message" not in html and "problematic" not in html
    plain = re.sub(r"<[^>]+>", "", html).replace("&quot;", '"').replace("&gt;", ">").replace("&lt;", "<")
    assert text in plain.replace("\n", " ")


def test_rst_escape_and_span():
    assert rst_escape("a_b|c*d`e\\") == "a\\_b\\|c\\*d\\`e\\\\"
    assert span([3.0, -1.0, float("nan")]) == "-1 to 3" and span([2.0], unit="%") == "2%" and span([]) == "n/a"


def test_scaling_with_one_size_states_no_exponent():
    runs = _scaling_runs(lambda n: 0.8, lambda n: 1.0)
    one = runs[runs["N"] == 100]
    # no exponent: the caption says why the figure draws none instead of a fit
    assert _scaling(one, "epistemic_curves") == ("One training-set size (N = 100): no power law is fitted, so the "
                                                 "figure draws no dashed fit and no alpha; it compares the "
                                                 "architectures at that N. Error bars: mean ± std over 2 seeds.")
    assert "percentage points" in _scaling(one, "accuracy_vs_bayes")


# --------------------------------------------------------------------------- active
def _rounds(epistemic_gain: float, entropy_gain: float) -> dict[str, pd.DataFrame]:
    rows = []
    for strategy, gain in (("max_entropy", entropy_gain), ("max_epistemic", epistemic_gain)):
        for seed in (0, 1):
            for r, labelled in enumerate((50, 100, 150)):
                rows.append({"arch": "a", "strategy": strategy, "seed": seed, "round": r, "labelled": labelled,
                             "acc": 0.4 + gain * r / 2, "epistemic": 1.0, "test_size": 1000,
                             "selected_epistemic": 1.0, "selected_aleatoric": 0.1})
    return {"rounds": pd.DataFrame(rows),
            "correlations": pd.DataFrame(columns=["arch", "target", "score", "seed", "spearman"])}


ACTIVE_SPEC = {"archs": ["a"], "arch_labels": {"a": "Arch A"}, "strategies": ["max_entropy", "max_epistemic"],
               "labels_per_round": [50, 100, 150], "batch": 50, "rounds": 2, "pool_size": 500,
               "target_accuracy": None}


def test_active_epistemic_gaining_less_is_said():
    cap = artifact_findings("active", "acquisition_panels", _rounds(0.05, 0.10), ACTIVE_SPEC)
    assert "Max Epistemic's gain is 0.5x Max Entropy's" in cap and "more labels than Max Entropy" in cap
    assert f"The paper: {paper_says('active_learning')}." in cap
    better = artifact_findings("active", "rounds", _rounds(0.16, 0.10), ACTIVE_SPEC)
    assert "gain is 1.6x" in better and "fewer labels than Max Entropy" in better


def test_ece_rate_caption_judges_straightness_by_the_curvature_not_r2():
    """The caption reads straightness as the claims do (`oracle.report.intervals.straightness`):
    exact power laws are straight, whatever round-off their per-seed curvatures carry; an ECE
    that flattens onto an offset bends, though its log-log R^2 is 0.99."""
    runs = _scaling_runs(lambda n: 0.9, lambda n: 2.0 * n ** -0.4)
    assert "for 2 of 2 architectures" in _scaling(runs, "calibration_vs_n")
    bent = runs.assign(ece=runs["ece"] + 0.05)
    text = _scaling(bent, "calibration_vs_n")
    assert "(R^2 0.99)" in text and "for 0 of 2 architectures" in text and "a curve bends" in text


def test_error_bar_note_counts_what_the_spread_is_over():
    from oracle.report.captions import error_bar_note

    runs = pd.DataFrame({"arch": ["a", "a", "b", "b", "a", "b"], "seed": [0, 1, 0, 1, 2, 2]})
    assert error_bar_note(runs) == "Error bars: mean ± std over 3 seeds."
    assert error_bar_note(runs, "(a)-(d)", ("arch", "seed")) == \
        "Error bars in (a)-(d): mean ± std over 6 runs (2 arch x 3 seed)."
    assert error_bar_note(runs[runs["seed"] == 0].iloc[:1]) == "One seed: no error bars."


def test_figure_findings_name_their_error_bars():
    runs = _scaling_runs(lambda n: 0.8, lambda n: 10.0 * n ** -0.4)  # seeds 0 and 1
    assert "Error bars in (a)-(c): mean ± std over 2 seeds." in _scaling(runs, "scaling_panels")
    assert "Error bars: mean ± std over 2 seeds." in _scaling(runs, "epistemic_curves")
    one = _scaling(runs[runs["seed"] == 0], "scaling_panels")
    assert "One seed: no error bars in (a)-(c)." in one
