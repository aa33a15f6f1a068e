"""The paper's own printed numbers as numbers.json entries, so the claims' rules can be applied
to them (`paper_verdicts`): a run's claims show the paper's verdict beside this run's, and
tests/test_claims_paper_numbers.py checks that each rule reaches the paper's verdict there.

Spreads: a number the paper prints as mean ± std over its 3 seeds ("All results are averaged
over 3 seeds with standard deviation shown") is entered as SE = std / sqrt(3) with 2 degrees of
freedom; a number printed without a spread is entered at its printed precision, SE = half a unit
of its last digit (normal quantile): the least uncertainty the print admits, so a rule that
cannot decide on it cannot decide on the paper at all. A curvature is the (ln N)^2 coefficient
of a quadratic fit to Table 2's curve with its regression SE (5 points, 2 degrees of freedom), an
exponent the slope of a line (3 degrees of freedom).
A finding whose numbers the paper does not print gets "not printed" (`NOT_PRINTED_VERDICT`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: The experiments the paper's numbers stand for, as a config's ``experiments`` (the worlds name
#: the paper's datasets: AFHQ for scaling, labels and shift; ImageNet-64 for active learning).
PAPER_EXPERIMENTS = {"scaling": {"kind": "scaling", "world": "afhq"}, "labels": {"kind": "labels", "world": "afhq"},
                     "shift": {"kind": "shift", "world": "afhq"},
                     "active": {"kind": "active", "world": "imagenet64"}, "difficulty": {"kind": "difficulty"}}

#: Table 2: epistemic KL (nats) against N on AFHQ, seed means.
TABLE2_N = (100, 1_000, 5_000, 10_000, 40_000)
TABLE2 = {"resnet": (0.160, 0.090, 0.058, 0.033, 0.026), "vit": (0.131, 0.141, 0.099, 0.117, 0.117)}
#: Figure 2d / section 4.1: alpha mean ± std over 3 seeds (ResNet-50 and ViT-Base on AFHQ): another
#: pair of architectures than Table 2's, a contrast the paper does not draw; no rule reads it (the
#: exponents are Table 2's slopes, `slope_with_se`).
ALPHA_FIG2D = {"resnet": (0.039, 0.007), "vit": (0.032, 0.010)}
#: Table 1: gap to the Bayes accuracy (pp) per architecture; Bayes accuracy 99.77%, K = 3.
TABLE1_GAP = {"convnext": 1.75, "resnet": 2.05, "swin": 2.10, "mobilenet": 2.12, "vit": 2.80}
#: Section 4.1: the aleatoric floor on AFHQ (nats); section 2.3: Bayes errors of AFHQ and ImageNet-64.
FLOOR_AFHQ, BAYES_ERROR_AFHQ, BAYES_ERROR_IMAGENET = 0.012, 0.0023, 0.04031

#: The paper's verdict of a finding none of whose deciding numbers the paper prints.
NOT_PRINTED_VERDICT = "not printed"


def printed(value: float, unit: float) -> dict:
    """A number printed without a spread, at its printed precision (`unit`: its last digit)."""
    return {"value": value, "se": unit / 2, "se_over": "printed precision"}


def over_3_seeds(mean: float, std: float) -> dict:
    """A number printed as mean ± std over the paper's 3 seeds."""
    return {"value": mean, "std": std, "se": std / math.sqrt(3), "se_over": "seeds", "n_seeds": 3}


def curvature_with_se(sizes: Sequence[float], kl: Sequence[float]) -> dict:
    """The (ln N)^2 coefficient of a least-squares quadratic in ln N fitted to ln KL, with its
    regression SE (residual variance over n - 3 degrees of freedom); `sizes` N and `kl` (nats)
    of one curve, at least 4 points."""
    x = np.log(np.asarray(sizes, float))
    x -= x.mean()
    z = np.log(np.asarray(kl, float))
    design = np.stack([np.ones_like(x), x, x**2], axis=1)
    coef, *_ = np.linalg.lstsq(design, z, rcond=None)
    df = len(z) - 3
    s2 = float(np.sum((z - design @ coef) ** 2)) / df
    se = math.sqrt(s2 * np.linalg.inv(design.T @ design)[2, 2])
    return {"value": float(coef[2]), "se": se, "se_over": "fit residuals", "df": df}


def slope_with_se(sizes: Sequence[float], kl: Sequence[float]) -> dict:
    """alpha: minus the least-squares slope of ln KL on ln N, with its regression SE (residual
    variance over n - 2 degrees of freedom): Table 2's exponent of one architecture (ResNet-18
    0.316, ViT-B 0.032)."""
    x, z = np.log(np.asarray(sizes, float)), np.log(np.asarray(kl, float))
    design = np.stack([np.ones_like(x), x], axis=1)
    coef, *_ = np.linalg.lstsq(design, z, rcond=None)
    df = len(z) - 2
    s2 = float(np.sum((z - design @ coef) ** 2)) / df
    return {"value": -float(coef[1]), "se": math.sqrt(s2 * np.linalg.inv(design.T @ design)[1, 1]),
            "se_over": "fit residuals", "df": df}


def loglog_r2(sizes: Sequence[float], kl: Sequence[float]) -> float:
    """The R^2 of a least-squares line of ln KL on ln N (what `oracle.measures.power_laws.
    fit_power_law` reports; computed here, as the report layer does not import measures)."""
    x, z = np.log(np.asarray(sizes, float)), np.log(np.asarray(kl, float))
    resid = z - np.polyval(np.polyfit(x, z, 1), x)
    return float(1.0 - np.sum(resid**2) / np.sum((z - z.mean()) ** 2))


def paper_numbers() -> dict:
    """The paper's printed numbers as numbers.json's dict, under `PAPER_EXPERIMENTS`' names."""
    n = {"scaling.n_sizes": {"value": len(TABLE2_N)}, "scaling.n_min": {"value": TABLE2_N[0]},
         "scaling.n_max": {"value": TABLE2_N[-1]},
         # Table 1: 50,000 oracle samples of 3 classes
         "scaling.table_n": {"value": 50_000},
         "scaling.test_bayes_accuracy": printed(0.9977, 0.0001), "scaling.num_classes": {"value": 3},
         "world.afhq.bayes_error": printed(BAYES_ERROR_AFHQ, 0.0001),
         "world.imagenet64.bayes_error": printed(BAYES_ERROR_IMAGENET, 0.00001),
         # section 4.4: 1.6x the gain of max entropy, 47.8% fewer labels (ImageNet-64)
         "active.gain_ratio.resnet": printed(1.6, 0.1), "active.fewer_labels.resnet": printed(0.478, 0.001),
         # Table 9: the largest noise-only drop (sigma 0.15, 76.92 ± 13.02) against the largest
         # prior-only one (70/20/10, 97.38 ± 0.20): the baseline cancels, the seeds' spreads add
         "shift.noise_vs_imbalance": {"value": 97.38 - 76.92, "se": math.hypot(13.02, 0.20) / math.sqrt(3),
                                      "se_over": "seeds", "n_seeds": 3, "posed": True}}
    for arch, kl in TABLE2.items():
        n[f"scaling.alpha.{arch}"] = slope_with_se(TABLE2_N, kl)
        n[f"scaling.curvature.{arch}"] = curvature_with_se(TABLE2_N, kl)
        n[f"scaling.kl_r2.{arch}"] = {"value": loglog_r2(TABLE2_N, kl)}
        n[f"scaling.epistemic_max_n.{arch}"] = printed(kl[-1], 0.001)
        # the low-data half: ln KL(100) / KL(5,000), the middle N of Table 2's grid
        n[f"scaling.log_kl_drop_low.{arch}"] = {"value": math.log(kl[0] / kl[2]), "se": math.hypot(
            0.0005 / kl[0], 0.0005 / kl[2]), "se_over": "printed precision"}
        # the total is the floor plus the KL; its drop per doubling over the last step of N, its SE the
        # KL fall's through the derivative of the drop
        total_prev, total_last = FLOOR_AFHQ + kl[-2], FLOOR_AFHQ + kl[-1]
        slope = (total_last / total_prev) ** (1 / 2 - 1) / (2 * total_prev)
        n[f"scaling.total_drop_last.{arch}"] = {"value": 1 - (total_last / total_prev) ** (1 / math.log2(4)),
                                                "se": slope * math.hypot(0.0005, 0.0005),
                                                "se_over": "printed precision"}
        n[f"scaling.kl_fall_last.{arch}"] = {"value": kl[-2] - kl[-1], "se": math.hypot(0.0005, 0.0005),
                                             "se_over": "printed precision"}
        n[f"scaling.aleatoric.{arch}"] = printed(FLOOR_AFHQ, 0.001)
    for arch, gap in TABLE1_GAP.items():
        n[f"scaling.bayes_gap.{arch}"] = printed(gap, 0.01)
    return n


def paper_verdicts() -> dict[str, str]:
    """Each finding's verdict (`oracle.report.claims.FINDINGS` ids) when its rule is applied to
    `paper_numbers`; `NOT_PRINTED_VERDICT` where the rule misses a number the paper does not print."""
    from oracle.report.claims import claims

    return {r["id"]: NOT_PRINTED_VERDICT if r["this run"].startswith("missing number") else r["verdict"]
            for r in claims(paper_numbers(), PAPER_EXPERIMENTS)}
