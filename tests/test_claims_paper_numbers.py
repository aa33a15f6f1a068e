"""oracle.report.claims on the paper's own printed numbers (`oracle.report.paper_numbers`, whose
docstring says how a printed number and its spread become an entry): each rule that the paper
prints enough to judge reaches the paper's verdict (supported), and a perturbed copy (the effect
reversed, or shrunk below the rule's margin) is contradicted.

Where the paper's own spreads do not decide its sentence the test says so (`UNDECIDED`), and
where it prints no number a rule could read it names what is missing (`NOT_PRINTED`); every
finding is in exactly one of the three groups.
"""

from __future__ import annotations

import pytest

from oracle.measures.power_laws import fit_power_law, loglog_curvature
from oracle.report import claims as cl
from oracle.report.intervals import straightness
from oracle.report.paper_numbers import (NOT_PRINTED_VERDICT, PAPER_EXPERIMENTS as EXPERIMENTS, TABLE2, TABLE2_N,
                                         curvature_with_se, loglog_r2, over_3_seeds, paper_numbers, paper_verdicts,
                                         printed, slope_with_se)

#: Not the paper's: 0.02 + 0.14 (100 / N)^0.5 on Table 2's grid, printed to 3 digits (a curve that bends).
BENT = (0.160, 0.064, 0.040, 0.034, 0.027)


def test_the_curvature_and_r2_are_the_pipelines_own_estimators():
    for kl in (*TABLE2.values(), BENT):
        assert curvature_with_se(TABLE2_N, kl)["value"] == pytest.approx(loglog_curvature(TABLE2_N, kl), abs=1e-12)
        assert loglog_r2(TABLE2_N, kl) == pytest.approx(fit_power_law(TABLE2_N, kl)["r2"], abs=1e-12)


#: Supported on the paper's numbers, each with perturbed copies that must be contradicted.
SUPPORTED = {
    "exponents_differ": [
        # reversed: ViT-B's KL falls at ResNet-18's slope and ResNet-18's at ViT-B's
        {"scaling.alpha.resnet": slope_with_se(TABLE2_N, TABLE2["vit"]),
         "scaling.alpha.vit": slope_with_se(TABLE2_N, TABLE2["resnet"])},
        # the same rate: ViT-B's exponent 0.02 below ResNet-18's, both known to 0.005 (within ± 0.071)
        {"scaling.alpha.resnet": over_3_seeds(0.316, 0.005), "scaling.alpha.vit": over_3_seeds(0.296, 0.005)}],
    "archs_differ": [
        # shrunk below the margin: ViT's KL at N = 40,000 1.5x ResNet's (not "markedly", 2x)
        {"scaling.epistemic_max_n.vit": printed(0.039, 0.001)}],
    "bayes_bound": [
        # ViT's gap doubled: 5.6 pp (0.916 of the way from chance, K = 3), outside "within 2-3%"
        {"scaling.bayes_gap.vit": printed(5.60, 0.01)},
        # the effect reversed: an accuracy above the Bayes accuracy
        {"scaling.bayes_gap.vit": printed(-2.80, 0.01)}],
    "active_learning": [
        # reversed: max entropy gains 1.6x what max epistemic gains
        {"active.gain_ratio.resnet": printed(0.6, 0.1)},
        # shrunk below halfway to 1.6x
        {"active.gain_ratio.resnet": printed(1.2, 0.1)},
        # fewer labels halved below halfway to 47.8%
        {"active.fewer_labels.resnet": printed(0.200, 0.001)}],
}

#: The paper prints these numbers, but its own spreads do not decide its sentence at 95%.
UNDECIDED = {
    # Table 2's five seed means: the curvature's interval (ResNet-18 [-0.101, 0.079] with 2 degrees of
    # freedom) is far wider than the bend a straight line must rule out (0.5 alpha / (2 ln 400) = 0.013)
    "power_law": {"scaling.alpha.vit": over_3_seeds(-0.032, 0.010)},
    # a 20.5 pp gap with sigma 0.15's std of 13.02 over 3 seeds: t = 2.7 against t(0.975, 2) = 4.3
    "shift_type": None,
}

#: The paper prints these numbers, but they lie outside the regime the rule asks its sentence in.
NOT_POSED = {
    # Table 2 at N = 40,000: the floor (0.012 nats) is 32% (ResNet-18) and 9% (ViT-B) of the total,
    # not a floor that dominates it
    "plateau": "floor",
}

#: What the paper does not print for the rule to read.
NOT_PRINTED = {
    "floor_exact": "the labels' check and classifiers' NLL regret (a check of the world, not counted)",
    "soft_labels": "appendix D's per-size gains (only '4 of 5 sizes, up to ~1%', Figure 7)",
    "soft_calibration": "a true ECE, and a hard-label ECE (only soft labels' ECE 0.018 against labels)",
    "ece_rate": "an exponent of the ECE ('at a different rate', Figure 2)",
    "shift_exact": "anything: beyond the paper (its noise has no exact KL)",
    "learner_bayes_gap": "Theisen et al.'s Figure 3 values (a figure only)",
}


def verdicts(numbers) -> dict[str, str]:
    return {r["id"]: r["verdict"] for r in cl.claims(numbers, EXPERIMENTS)}


def test_every_finding_is_judged_on_the_paper_or_says_what_the_paper_lacks():
    ids = [f.id for f in cl.FINDINGS]
    groups = [set(SUPPORTED), set(UNDECIDED), set(NOT_POSED), set(NOT_PRINTED)]
    assert sorted(set().union(*groups)) == sorted(ids) and sum(map(len, groups)) == len(ids)
    got = verdicts(paper_numbers())
    for fid in NOT_PRINTED:
        assert got[fid] in {"unresolved", "not posed"}, fid


@pytest.mark.parametrize("fid", sorted(SUPPORTED))
def test_the_papers_numbers_reach_the_papers_verdict(fid):
    row = next(r for r in cl.claims(paper_numbers(), EXPERIMENTS) if r["id"] == fid)
    assert row["verdict"] == "supported", (fid, row["this run"], row["uncertainty"])


@pytest.mark.parametrize("fid,change", [(f, c) for f, changes in SUPPORTED.items() for c in changes])
def test_a_perturbed_copy_of_the_papers_numbers_is_contradicted(fid, change):
    got = verdicts({**paper_numbers(), **change})
    assert got[fid] == "contradicted", (fid, change)


@pytest.mark.parametrize("fid", sorted(UNDECIDED))
def test_the_papers_spreads_leave_these_unresolved_and_a_reversal_decides(fid):
    got = verdicts(paper_numbers())
    assert got[fid] == "unresolved", fid
    if UNDECIDED[fid] is not None:
        assert verdicts({**paper_numbers(), **UNDECIDED[fid]})[fid] == "contradicted", fid


@pytest.mark.parametrize("fid", sorted(NOT_POSED))
def test_the_papers_numbers_lie_outside_these_rules_regime(fid):
    row = next(r for r in cl.claims(paper_numbers(), EXPERIMENTS) if r["id"] == fid)
    assert row["verdict"] == "not posed" and NOT_POSED[fid] in row["this run"], (fid, row["this run"])


def test_a_bent_curve_is_contradicted_as_power_law():
    """ResNet's curve bent: the same 0.16 -> 0.027 over Table 2's grid, but a power law flattening
    onto an offset, 0.02 + 0.14 (100 / N)^0.5 (its log-log R^2 still high): its curvature's
    interval excludes 0."""
    got = verdicts({**paper_numbers(), "scaling.curvature.resnet": curvature_with_se(TABLE2_N, BENT)})
    assert got["power_law"] == "contradicted"


def test_table2_slopes_differ_by_the_papers_interval():
    """The issue's hand computation: slopes 0.316 and 0.032, the difference's 95% interval
    [0.144, 0.424] (3 degrees of freedom), read by the rule as exponents_differ's first half."""
    n = paper_numbers()
    assert n["scaling.alpha.resnet"]["value"] == pytest.approx(0.316, abs=0.001)
    assert n["scaling.alpha.vit"]["value"] == pytest.approx(0.032, abs=0.001)
    d = cl.difference(n, "scaling.alpha.resnet", "scaling.alpha.vit")
    assert (d.lo, d.hi) == (pytest.approx(0.144, abs=0.001), pytest.approx(0.424, abs=0.001))


def test_below_the_papers_rows_per_class_bayes_bound_is_not_posed():
    """Table 1's claim at the default's scale (N = 2,000 of 10 classes: 200 a class) is not posed,
    whatever its gaps; at 3 classes and 50,000 rows it is."""
    small = {**paper_numbers(), "scaling.table_n": {"value": 2_000}, "scaling.num_classes": {"value": 10}}
    row = next(r for r in cl.claims(small, EXPERIMENTS) if r["id"] == "bayes_bound")
    assert row["verdict"] == "not posed" and "200 a class" in row["this run"]


def test_the_shallow_vit_is_a_power_law_though_its_r2_is_low():
    """The issue's case: Table 2's ViT has a log-log R^2 of about 0.29 (alpha 0.032); straightness is
    judged by its curvature, not by R^2."""
    n = paper_numbers()
    assert n["scaling.kl_r2.vit"]["value"] == pytest.approx(0.294, abs=0.001)
    assert straightness(cl.estimate(n, "scaling.curvature.vit")) == 1          # its interval contains 0
    assert straightness(cl.estimate(n, "scaling.curvature.vit"), 0.013) == 0   # but is too wide to rule out a bend
    assert straightness(cl.estimate({"c": curvature_with_se(TABLE2_N, BENT)}, "c")) == -1
    assert fit_power_law(TABLE2_N, BENT)["r2"] > 0.9   # which the R^2 gate called a power law


def test_the_papers_verdict_column_is_the_rules_on_the_papers_numbers():
    """claims' "paper verdict" column (`paper_verdicts`): the verdict of each group above, and
    "not printed" exactly where the paper prints no number the rule reads."""
    got = paper_verdicts()
    assert sorted(got) == sorted(f.id for f in cl.FINDINGS)
    assert {f for f, v in got.items() if v == NOT_PRINTED_VERDICT} <= set(NOT_PRINTED)
    for fid in SUPPORTED:
        assert got[fid] == "supported", fid
    for fid in UNDECIDED:
        assert got[fid] == verdicts(paper_numbers())[fid], fid
    assert got["soft_labels"] == got["learner_bayes_gap"] == NOT_PRINTED_VERDICT
