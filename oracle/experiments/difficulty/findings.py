"""Experiment kind ``difficulty``: the finding sentence of each artifact's caption, computed
from the data the artifact is drawn from (`oracle.report.captions`)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from oracle.report.captions import num


def findings(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping) -> str:
    """The finding of artifact `name` (`oracle.experiments.difficulty.ARTIFACTS`): how the
    Bayes error moves with tau."""
    c = data["curve"].sort_values("base_temperature", kind="stable")
    if len(c) < 2:
        return ""
    err = 100 * c["bayes_error"].to_numpy(float)
    tau = c["base_temperature"].to_numpy(float)
    rises = bool((np.diff(err) > 0).all())
    return (f"This run: the Bayes error goes from {num(err[0])}% at tau={tau[0]:g} to {num(err[-1])}% at "
            f"tau={tau[-1]:g}; it {'rises at every step' if rises else 'does not rise at every step'} of tau.")
