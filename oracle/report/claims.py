"""The paper's findings, one row each, judged from a run's numbers.json under one stated rule.

A row is ``{"id", "finding", "paper", "this run", "uncertainty", "rule", "verdict", "numbers", "checks",
"to decide"}``: the paper's sentence and value (text), this run's value and its uncertainty (both text,
generated from the numbers), the rule that decides the verdict, the verdict (`VERDICTS`), the numbers.json
keys it read, as JSON the intervals the rule compared with their references and the paper's values
(`Check`), and what would decide it if unresolved (`oracle.report.power`). None of it is hand-written.
Where the experiment trains classifiers, "this run" ends with how many of them converged by the
stopping rule (`learners_text`): shown beside the verdict, never deciding it.

Every rule tests the paper's sentence as written (both halves of a two-part claim), can fail on
plausible data (tests/test_claims.py builds numbers where each holds, fails and is not posed),
and says ``not posed`` where the run's world or grid does not reach the regime the sentence
needs (a flat total loss, aleatoric noise, power-law curves). A finding whose kind the config
does not run is ``not run``; one whose numbers are missing is ``unresolved`` and names the
missing number. A finding that can be posed by several experiments of its kind (`Finding.pick`
``"posed"``) is judged on the first, in config order, that poses it. The config's
``claims.judged_on`` names the experiment a finding is judged on instead (a contrast sized apart
from the rest of its kind: the cpu-study judges archs_differ on an experiment of the largest N
alone, with the seeds its power analysis asks for); its row then says so.

Intervals (`oracle.report.intervals`): Student t over seeds, the stated degrees of freedom of a
number whose seeds shared one test set, normal for a Monte Carlo SE; where a rule looks at
``m`` comparisons at once ("any classifier", "some pair of architectures"), each interval is
widened to the 1 - 0.05/m level (Bonferroni), so the rule's error rate stays at 5%.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from oracle.report.claim_ids import FINDING_KINDS
from oracle.report.claim_margins import (ACTIVE_FEWER_MARGIN, ACTIVE_RATIO_MARGIN, BAYES_GAP_PP, FLOOR_SHARE,
                                         MARKED_RATIO, MIN_SIZES, NEAR_PERFECT_ECE, PAPER_FEWER_LABELS,
                                         PAPER_GAIN_RATIO, PAPER_ROWS_PER_CLASS, PAPER_SLOPE_RESNET,
                                         PAPER_SLOPE_VIT, PLATEAU_DROP, PLATEAU_FLOOR_SHARE, SAME_EXPONENT,
                                         SAME_RATE_MIN, SAME_RATE_REL, SHIFT_MIN_CLASS_ROWS, SHIFT_TYPE_PP,
                                         SOFT_LABEL_MASS, STRAIGHT_SLOPE_CHANGE, SUBSTANTIAL_NOISE)
from oracle.report.claim_rules import (Judgement, _power_law, _plateau, _floor_exact, _archs_differ, _exponents_differ, _soft_beats_hard, _soft_calibration, _ece_rate, _shift_type, _shift_exact, _active, _bayes_bound, _learner_gap)
from oracle.report.intervals import Missing, NotPosed, difference, estimate, learners_text  # noqa: F401 (re-exported)
from oracle.report.power import row_to_decide


@dataclass(frozen=True)
class Finding:
    id: str
    finding: str
    paper: str
    rule: str
    judge: Callable[[Mapping, str, Mapping], Judgement]
    #: "first": the first experiment of its kind; "posed": the first that poses it.
    pick: str = "first"
    #: Why the row's verdict is shown but left out of the verdict counts ("" : counted): a check
    #: of the world that a correct pipeline cannot fail, or a row whose evidence another row
    #: already counts.
    uncounted: str = ""

    @property
    def kind(self) -> str:
        """The experiment kind whose numbers it reads (`oracle.report.claim_ids.FINDING_KINDS`)."""
        return FINDING_KINDS[self.id]


_CI = ("95% CI (value ± t SE: over seeds, and over the shared test rows where the seeds shared them, a difference "
       "of two classifiers on the same rows paired per row; 1.96 SE for a Monte Carlo SE)")

FINDINGS: tuple[Finding, ...] = (
    Finding("power_law", "epistemic error follows a power law KL ∝ N^-alpha (a nearly perfect straight "
            "line on a log-log plot)", "KL ∝ N^-alpha, alpha > 0 for every architecture (Figure 2b)",
            f"not posed on fewer than {MIN_SIZES} sizes N; per architecture, with the {_CI}: alpha, and the "
            "curvature of ln KL against ln N (the (ln N)^2 coefficient of a quadratic fit per seed, a lack-of-fit "
            "test: 0 on a straight line whatever its slope): supported if alpha's CI lies above 0 and the "
            f"curvature's lies within ± {STRAIGHT_SLOPE_CHANGE:g} alpha / (2 ln(N_max / N_min)) (it rules out a bend "
            f"that changes the exponent by {STRAIGHT_SLOPE_CHANGE:g} alpha across the grid); contradicted if alpha's "
            "lies below 0 or the curvature's excludes 0 (the curve ""bends); the row is supported when every architecture is, contradicted when one is, else unresolved "
            "(the log-log R^2 stands beside it: it grows with the slope, not with straightness)", _power_law),
    Finding("plateau", "epistemic error keeps shrinking where the total loss plateaus",
            "the KL decay continues even when total loss appears to plateau (the floor dominates at large N)",
            f"posed for the architectures whose aleatoric floor is at least {100 * PLATEAU_FLOOR_SHARE:g}% of the "
            "total loss (floor + KL) at the largest N (the floor dominates: the paper's Table 2 has 9-32%, where a "
            "flat total would be a flat KL) and whose seed-mean total cross-entropy has not clearly kept falling; "
            f"flat: the {_CI} of its relative drop per doubling of N over the last step of N lies below "
            f"{100 * PLATEAU_DROP:g}%. For each flat one, supported if the interval of KL(N_prev) - KL(N_last) "
            "(paired per test row) lies above 0, contradicted if below 0; an architecture whose total may or may "
            "not be flat is unresolved; not posed when no floor dominates or no total flattened. Beside it: the "
            "asymptote c of L(N) = a N^-b + c fitted to the total alone (what a "
            "practitioner without the oracle would call the floor) against the exact floor", _plateau, pick="posed"),
    Finding("floor_exact", "the aleatoric floor is exactly measurable and a hard limit no architecture "
            "beats", "aleatoric floor exactly 0.012 nats (AFHQ), 0.10 (ImageNet-64)",
            "two checks on the test rows, each SE the labels' own (y ~ p(y|x) given the rows, exact from p): the "
            "labels' cross-entropy under the exact posterior E[-log p(y|x)] agrees with the floor E[H(p)] (the 95% "
            "CI of the difference contains 0: the labels are drawn from p), and no classifier's test cross-entropy "
            "lies below the labels' under p (the Bonferroni 95% CI, over every classifier, of the smallest "
            "E[log p(y|x) - log q(y|x)] does not lie below 0); supported if both hold, contradicted if either "
            "fails", _floor_exact, uncounted="a check of the world, not a finding: labels drawn from p and KL >= 0 "
            "make it hold for any correct pipeline"),
    Finding("archs_differ", "architectures differ markedly in how they approach the floor",
            "ResNet-18 reduces KL 6x, ViT-B 1.2x over N = 100 ... 40,000 (Table 2)",
            f"not posed with one architecture; the ratio of the epistemic KLs at the largest N (larger over smaller), "
            f"every pair, Bonferroni {_CI} of its logarithm (delta method, paired per seed and test row where the run "
            f"has both): supported if one pair's lies above {MARKED_RATIO:g}x (\"markedly\"; the paper's Table 2: "
            f"4.5x); contradicted if every pair's lies below {MARKED_RATIO:g}x; else unresolved", _archs_differ),
    Finding("exponents_differ", "ResNets show clean power-law scaling while ViTs stall in low-data "
            "regimes", "alpha_ResNet > alpha_ViT; ViT improves < 1.2x (Table 2)",
            f"not posed without a ResNet and a ViT; two halves, each with the {_CI} of a difference: alpha_ResNet - "
            f"alpha_ViT lies above 0 (the paper's evidence, Table 2's ResNet-18 against ViT-B: slopes "
            f"{PAPER_SLOPE_RESNET:g} and {PAPER_SLOPE_VIT:g}), and over the "
            "low-data half of the N grid (N_min to the middle N) ln KL falls by more for ResNet than for ViT; "
            f"exponents whose difference lies within ± {SAME_EXPONENT:.3g} (a quarter of the paper's contrast) scale "
            "at the same rate, which contradicts the claim; ""supported if both halves lie above 0, contradicted if either lies below 0 or the exponents are the same, "
            "else unresolved", _exponents_differ),
    Finding("soft_labels", "soft labels beat hard at most N", "soft > hard at 4 of 5 sizes, up to ~1 pp",
            f"not posed where the world's posteriors are nearly one-hot (Bayes error x N_max below "
            f"{SOFT_LABEL_MASS:g} rows); per N, the {_CI} of the accuracy gain (soft - hard, the same training "
            "images and test rows): supported if it lies above 0 at more than half of the sizes; contradicted if below 0 "
            "at half or more; else unresolved", _soft_beats_hard),
    Finding("soft_calibration", "soft labels give near-perfect calibration",
            "ECE = 0.018 (against the labels)",
            f"not posed as soft_labels; judged against the truth (the true ECE, correctness replaced by p(yhat|x)) "
            f"at the largest N, two "
            f"halves with {_CI}: the soft-label true ECE lies below {NEAR_PERFECT_ECE} and soft labels' true ECE "
            "lies below hard labels' (paired per seed); supported if both, contradicted if either lies on the "
            "other side, else unresolved", _soft_calibration),
    Finding("ece_rate", "ECE falls with N at a different rate than the epistemic KL",
            "alpha_ECE != alpha_KL",
            f"posed for the architectures where both the ECE and the KL are straight on a log-log plot (the 95% CI "
            f"of each one's log-log curvature contains 0, as in power_law); per such architecture, the Bonferroni "
            f"{_CI} of alpha_ECE - alpha_KL: "
            f"supported if one excludes 0; contradicted if every one lies within ± max({SAME_RATE_MIN:g}, "
            f"{SAME_RATE_REL:g} alpha_KL); else unresolved", _ece_rate),
    Finding("shift_type", "shift type matters more than magnitude: imbalance barely affects accuracy at "
            "divergences where input noise degrades it", "imbalance -0.08 ... -0.28 pp at KL_y 0.02-0.29; noise "
            "sigma 0.15 -20.75 pp at KL_y ~1e-4; R^2 0.042",
            f"the noise-only configuration with the largest accuracy drop against the prior-only one with the "
            f"largest, both at the paper's measure of divergence (KL_y; noise keeps the balanced prior, the KL of "
            f"clipped noise in x is not tractable), {_CI} of drop(noise) - drop(imbalance): supported if above "
            f"{SHIFT_TYPE_PP:g} pp (the paper's imbalance drops, \"barely\", are 0.08-0.28 pp), contradicted if below "
            f"{SHIFT_TYPE_PP:g} pp, else unresolved; not posed without both kinds of configuration. The R^2 of "
            "the drop on the divergence stands beside it, with its point count. Not posed where the imbalance arm's "
            f"smallest class has fewer than {SHIFT_MIN_CLASS_ROWS} training rows (a starved class, not a prior)",
            _shift_type, pick="posed"),
    Finding("shift_exact", "at an exact divergence no larger than an imbalance's, a shift of p(x|y) costs "
            "more accuracy than the imbalance (beyond the paper: its noise has no exact KL)",
            "(the paper's mechanism: imbalance leaves p(x|y) intact)",
            f"the world variant of exact KL (base temperature) with the largest KL not above the largest "
            f"prior-only KL, against the prior-only configuration with the largest drop among those of at least "
            f"its KL, {_CI} of the difference of drops: supported if above {SHIFT_TYPE_PP:g} pp, contradicted if "
            f"below {SHIFT_TYPE_PP:g} pp, else unresolved; not posed without such a variant or where the imbalance "
            "arm's smallest class is starved (both as shift_type)", _shift_exact, pick="posed",
            uncounted="beyond the paper, and its imbalance arm is shift_type's: one measurement, counted once there"),
    Finding("active_learning", "under substantial aleatoric noise, max epistemic gains 1.6x what max "
            "entropy gains and needs 47.8% fewer labels", "gain ratio 1.6x; 47.8% fewer labels (ImageNet-64, "
            "Bayes error 4.03%)",
            f"posed where the experiment's world has a Bayes error of at least {100 * SUBSTANTIAL_NOISE:g}% and its "
            f"aleatoric floor is at least {100 * FLOOR_SHARE:g}% of max entropy's last loss (floor + KL); two "
            f"halves, each judged at halfway from no effect to the paper's value, with the {_CI}: the gain ratio "
            f"against {ACTIVE_RATIO_MARGIN:g} (paper {PAPER_GAIN_RATIO:g}) and the fraction of fewer labels against "
            f"{ACTIVE_FEWER_MARGIN:g} (paper {PAPER_FEWER_LABELS:g}); supported if both lie above, contradicted if "
            "either lies below, else unresolved. Beside it, where measured: the Spearman correlation of max-entropy "
            "scores with the exact epistemic KL over the pool (near 1: entropy is nearly epistemic and the "
            "strategies pick alike)", _active, pick="posed"),
    Finding("bayes_bound", "classifiers approach the Bayes-optimal bound",
            "97-98% against 99.77%: within 2-3 pp (Table 1)",
            f"not posed below Table 1's {PAPER_ROWS_PER_CLASS:,.0f} training rows per class (50,000 samples, 3 "
            f"classes; N over the classes of positive prior in the world); judged on the first experiment of "
            f"its kind that poses it; the paper's sentence, \"within 2-3%\" as a gap of at most {BAYES_GAP_PP:g} percentage points: per "
            f"architecture at the table's N, the gap Bayes accuracy - accuracy paired per test row with the {_CI}: "
            f"supported if every architecture's lies below {BAYES_GAP_PP:g} pp; contradicted if one lies above "
            f"{BAYES_GAP_PP:g} pp or below 0 (an accuracy above the Bayes accuracy); else unresolved", _bayes_bound,
            pick="posed"),
    Finding("learner_bayes_gap", "a learner comes close to the Bayes error on easy worlds and falls "
            "further behind it as tau makes the world harder (Theisen et al., Figure 3)",
            "test error near the Bayes error at small tau; the gap grows with tau",
            f"not posed with a learner on one world, or below Table 1's {PAPER_ROWS_PER_CLASS:,.0f} training rows per "
            f"class (as bayes_bound); two halves, the gap = test error - Bayes error of the same "
            f"test rows (paired per row) with the {_CI}: "
            f"at the smallest tau the gap lies below {BAYES_GAP_PP:g} percentage points (bayes_bound's reading of "
            "\"close\"), and gap(largest tau) - gap(smallest tau) lies above 0; supported if both, contradicted if "
            "either lies on the other side, else unresolved", _learner_gap),
)


def _judge(f: Finding, numbers: Mapping, name: str, spec: Mapping) -> dict:
    try:
        value_, unc, verdict, keys, checks = f.judge(numbers, name, spec)
        # a learner's number comes with whether its learners converged: a verdict read from
        # classifiers stopped short measures the recipe, not the world
        learners, learner_keys = learners_text(numbers, name)
        seed_cost = numbers.get(f"{name}.seed_job_s", {}).get("value")  # prices "to decide"'s seeds
        return {"this run": f"{value_}; {learners}" if learners else value_, "uncertainty": unc, "verdict": verdict,
                "numbers": " ".join(dict.fromkeys([*keys, *learner_keys])),
                "checks": json.dumps([c.record() for c in checks]), "to decide": row_to_decide(checks, verdict, seed_cost)}
    except NotPosed as why:
        return {"this run": f"{name}: {why.args[0]}", "verdict": "not posed"}
    except Missing as m:
        return {"this run": f"missing number {m.args[0]}", "verdict": "unresolved"}


def claims(numbers: Mapping[str, Mapping], experiments: Mapping[str, Mapping],
           judged_on: Mapping[str, str] | None = None) -> list[dict]:
    """One row per finding of `FINDINGS` (module docstring), in that order.

    numbers: numbers.json's dict ("<experiment>.<name>" -> entry); experiments: the config's
    ``experiments`` (name -> entry with ``kind`` and, where it has one, ``world``). A finding is
    judged on the first experiment of its kind in the config's order, or with ``pick="posed"``
    on the first that poses it; judged_on (the config's ``claims.judged_on``: finding id ->
    experiment name) overrides that choice, and the row's "this run" begins by naming it.
    """
    judged_on = dict(judged_on or {})
    for fid, name in judged_on.items():
        if fid not in FINDING_KINDS:
            raise ValueError(f"claims.judged_on: {fid!r} is not a finding ({', '.join(FINDING_KINDS)})")
        if experiments.get(name, {}).get("kind") != FINDING_KINDS[fid]:
            raise ValueError(f"claims.judged_on.{fid}: {name!r} is not an experiment of kind "
                             f"{FINDING_KINDS[fid]!r} here")
    rows = []
    for f in FINDINGS:
        row = {"id": f.id, "finding": f.finding, "paper": f.paper, "this run": "", "uncertainty": "", "rule": f.rule,
               "verdict": "not run", "counted": f.uncounted or "yes", "numbers": "", "checks": "[]", "to decide": ""}
        names = [name for name, spec in experiments.items() if spec["kind"] == f.kind]
        if f.id in judged_on:
            row.update(_judge(f, numbers, judged_on[f.id], experiments[judged_on[f.id]]))
            row["this run"] = f"judged on {judged_on[f.id]} (claims.judged_on): {row['this run']}"
        elif not names:
            row["this run"] = f"no {f.kind} experiment in the config"
        else:
            tried = [_judge(f, numbers, name, experiments[name]) for name in names[:1 if f.pick == "first" else None]]
            row.update(next((t for t in tried if t["verdict"] != "not posed"), tried[0]))
        rows.append(row)
    return rows
