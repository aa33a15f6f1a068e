"""Experiment kind ``active``: the finding sentence of each artifact's caption, computed from
the data the artifact is drawn from (`oracle.report.captions`)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from oracle.experiments.active import report
from oracle.report.captions import error_bar_note, num, paper_says


def findings(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping) -> str:
    """The finding of artifact `name` (`oracle.experiments.active.ARTIFACTS`); "" for one that
    only shows data."""
    if name in ("rounds", "acquisition_panels", "accuracy_vs_labels"):
        bars = error_bar_note(data["rounds"]) if name != "rounds" else ""
        return f"{comparison_finding(data, spec)} {rounds_convergence_finding(data['rounds'])} {bars}".strip()
    if name == "proxy_correlations":
        bars = error_bar_note(data["correlations"], over=("strategy", "seed"))
        return f"{proxy_finding(data['correlations'], spec)} {bars}".strip()
    return ""


def proxy_finding(corr: pd.DataFrame, spec: Mapping) -> str:
    """Per architecture, each score's Spearman rho with the exact epistemic KL and with H(p)
    (mean over every round and run, range of the per-seed means), and which scores are
    anti-correlated with the exact epistemic KL in every seed: a score that ranks first the
    samples with the least exact epistemic error (BALD with MC dropout on a small model)."""
    parts, against = [], []
    for arch in spec["archs"]:
        label = spec["arch_labels"][arch]
        for target, what in (("exact_epistemic", "the exact epistemic KL"), ("exact_aleatoric", "H(p)")):
            c = corr[(corr["arch"] == arch) & (corr["target"] == target)]
            texts = []
            for score in [s for s in spec["strategies"] if s in set(c["score"])]:
                if score == "max_epistemic" and target == "exact_epistemic":
                    continue  # identically 1: the score is the exact KL
                per_seed = c[c["score"] == score].groupby("seed")["spearman"].mean().dropna()
                if per_seed.empty:
                    continue
                rho = float(c[c["score"] == score]["spearman"].mean())
                spread = f" (seeds {num(per_seed.min())} to {num(per_seed.max())})" if len(per_seed) > 1 else ""
                texts.append(f"{report.STRATEGY_LABELS[score]} {num(rho)}{spread}")
                if target == "exact_epistemic" and bool((per_seed < 0).all()):
                    against.append(f"{report.STRATEGY_LABELS[score]} on {label} (below 0 in {len(per_seed)} of "
                                   f"{len(per_seed)} seeds)")
            if texts:
                parts.append(f"{label}, ρ with {what}: {', '.join(texts)}")
    if not parts:
        return ""
    text = f"This run: {'; '.join(parts)}."
    if against:
        text += (f" Anti-correlated with the exact epistemic KL: {'; '.join(against)}; the pool samples such a score "
                 "ranks first tend to be those with the least exact epistemic error.")
    return text


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


def rounds_convergence_finding(rounds: pd.DataFrame) -> str:
    """How many of the rounds' classifiers (one per round of every run) converged by the
    stopping rule (`oracle.classifiers.stopping`); "" for rounds recorded without it."""
    if "converged" not in rounds or rounds["converged"].isna().all():
        return ""
    done = rounds["converged"].astype(bool)
    stopped = int((rounds["stopped_by"] == "patience").sum())
    return (f"Converged by the stopping rule with annealed kept weights: {int(done.sum())} of {len(rounds)} round "
            f"classifiers ({stopped} stopped "
            f"by it).")
