"""The finding of the calibration_agreement figure that scaling and labels share: do the ECE
against the world's labels and the true ECE against the exact posterior agree?"""

from __future__ import annotations

import pandas as pd

from oracle.experiments._calibration.report import agreement_numbers
from oracle.report.captions import count_of, num


def agreement_finding(runs: pd.DataFrame, who: tuple[str, ...] = ("arch", "cell", "seed")) -> str:
    """Label ECE minus true ECE over the classifiers of `runs`, from `agreement_numbers`."""
    n = agreement_numbers(runs, "", who=[c for c in who if c in runs.columns])
    k = int(n["calibration.n_classifiers"]["value"])
    above = round(n["calibration.ece_label_above_truth"]["value"] * k)
    diff = n["calibration.ece_label_minus_truth"]
    se = f" ± {num(diff['se'], 2)} (se)" if diff.get("se") is not None else ""
    rho = n.get("calibration.ece_rank_correlation")
    order = f"; Spearman rho of the two over classifiers {num(rho['value'])}" if rho else ""
    return (f"This run: the label ECE exceeds the true ECE for {count_of(above, k, 'classifiers')}; label minus "
            f"true ECE {num(diff['value'])}{se} on average, largest "
            f"{num(n['calibration.ece_largest_difference']['value'])}{order}.")
