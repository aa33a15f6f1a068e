"""Experiment kind ``active``: the finding sentence of each artifact's caption, computed from
the data the artifact is drawn from (`oracle.report.captions`)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from oracle.experiments.active import report
from oracle.report.captions import num, paper_says


def findings(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping) -> str:
    """The finding of artifact `name` (`oracle.experiments.active.ARTIFACTS`); "" for one that
    only shows data."""
    if name in ("rounds", "acquisition_panels", "accuracy_vs_labels"):
        return comparison_finding(data, spec)
    return ""


def comparison_finding(data: Mapping[str, pd.DataFrame], spec: Mapping) -> str:
    """Final accuracy per strategy and, per architecture, Max Epistemic's accuracy gain over
    Max Entropy's and the fraction fewer labels it needs (the kind's `numbers`, computed from
    the same rounds)."""
    n = report.numbers(data, spec, {name: name for name in data})
    parts = []
    for arch in spec["archs"]:
        label = spec["arch_labels"][arch]
        finals = [f"{report.STRATEGY_LABELS[s]} {num(100 * n[k]['value'])}%" for s in spec["strategies"]
                  if (k := f"final_accuracy.{arch}.{s}") in n and n[k]["value"] is not None]
        text = f"{label}: final accuracy {', '.join(finals)}"
        ratio, fewer = n.get(f"gain_ratio.{arch}"), n.get(f"fewer_labels.{arch}")
        if ratio is not None:
            text += f"; Max Epistemic's gain is {num(ratio['value'])}x Max Entropy's"
        if fewer is not None and fewer["value"] is not None:
            f = 100 * fewer["value"]
            text += (f"; it needs {num(abs(f))}% {'fewer' if f >= 0 else 'more'} labels than Max Entropy to reach "
                     "the target accuracy")
        parts.append(text)
    if not parts:
        return ""
    return f"This run: {'; '.join(parts)}. The paper: {paper_says('active_learning')}."
