"""Experiment kind ``calibration``: the finding sentence of each artifact's caption, computed
from the data the artifact is drawn from (`oracle.report.captions`)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from oracle.report.captions import error_bar_note, num

#: |z| above which the label ECE and the true ECE of a set are said to differ.
Z_DIFFERS = 2.0


def _label_vs_truth(sets: pd.DataFrame) -> str:
    """Where the label-based ECE departs from the true ECE, over the shifted sets."""
    if sets.empty:
        return ""
    z = sets["ece_diff_z"].to_numpy(float)
    d = sets["ece_diff"].to_numpy(float)
    names = sets["evalset"].astype(str).to_numpy()
    finite = np.isfinite(z)
    differs = [str(n) for n, zz in zip(names, z, strict=True) if np.isfinite(zz) and abs(zz) > Z_DIFFERS]
    i = int(np.nanargmax(np.abs(d)))
    return (f"This run: label ECE minus true ECE is largest in magnitude on {names[i]} ({num(d[i])}); "
            f"|z| > {Z_DIFFERS:g} on {len(differs)} of {int(finite.sum())} sets"
            + (f" ({', '.join(differs)})." if differs else "."))


def _true_ece_range(sets: pd.DataFrame) -> str:
    """How far the true ECE moves across the sets, mean over models."""
    if sets.empty:
        return ""
    t = sets["ece_posterior"].to_numpy(float)
    names = sets["evalset"].astype(str).to_numpy()
    lo, hi = int(np.nanargmin(t)), int(np.nanargmax(t))
    return (f"The true ECE (mean over models) ranges from {num(t[lo])} on {names[lo]} to {num(t[hi])} on "
            f"{names[hi]}.")


def findings(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping) -> str:
    """The finding of artifact `name` (`oracle.experiments.calibration.ARTIFACTS`)."""
    sets = data["sets"]
    if name == "ece_labels_vs_truth_under_shift":
        return _label_vs_truth(sets)
    if name in ("calibration_under_shift", "calibration_vs_shift"):
        bars = error_bar_note(data["runs"], "of the coloured lines") if name == "calibration_vs_shift" else ""
        return " ".join(s for s in (_true_ece_range(sets), _label_vs_truth(sets) if name == "calibration_vs_shift"
                                    else "", bars) if s)
    return ""
