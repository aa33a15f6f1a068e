"""Experiment kind ``labels``: the finding sentence of each artifact's caption, computed from
the data the artifact is drawn from (`oracle.report.captions`)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from oracle.experiments._calibration import findings as _calibration_findings
from oracle.experiments.labels import report
from oracle.report.captions import convergence_finding, count_of, error_bar_note, num, paper_says


def findings(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping) -> str:
    """The finding of artifact `name` (`oracle.experiments.labels.ARTIFACTS`); "" for one that
    only shows data."""
    runs = data["runs"]
    if name == "label_comparison":
        return f"{gain_finding(runs)} {soft_ece_finding(runs)} {convergence_finding(runs, ('labels', 'N', 'seed'))}".strip()
    if name == "soft_vs_hard":
        return f"{gain_finding(runs)} {error_bar_note(runs)}".strip()
    if name == "calibration_agreement":
        return (f"{_calibration_findings.agreement_finding(runs, who=('cell', 'seed'))} "
                f"{error_bar_note(runs, '(b)')}").strip()
    return ""


def gain_finding(runs: pd.DataFrame) -> str:
    """Soft minus hard test accuracy per N (paired seeds, `report.gain_summary`) and at how
    many sizes soft labels win."""
    g = report.gain_summary(runs)
    per_n = ", ".join(f"N={int(r['N'])} {100 * r['gain']:+.2f} pp" for _, r in g.iterrows())
    seeds = sorted(set(g["n_seeds"].astype(int)))
    wins = int(g["soft_wins"].sum())
    return (f"This run: soft minus hard test accuracy {per_n} (mean over {'/'.join(map(str, seeds))} paired "
            f"seeds); soft labels win at {count_of(wins, len(g), 'sizes')}. The paper: {paper_says('soft_labels')}.")


def soft_ece_finding(runs: pd.DataFrame) -> str:
    """The soft-label ECE (against the labels) at the largest N, mean over seeds."""
    soft = runs[runs["labels"] == "soft"]
    if soft.empty:
        return ""
    top = soft[soft["N"] == soft["N"].max()]
    n = int(top["N"].iloc[0])
    hard = runs[(runs["labels"] == "hard") & (runs["N"] == n)]
    beside = f", hard labels' {num(float(hard['ece_posterior'].mean()))}" if len(hard) else ""
    return (f"Soft-label ECE at N={n}: {num(float(top['ece'].mean()))} against the labels, "
            f"{num(float(top['ece_posterior'].mean()))} against the exact posterior{beside} (means over "
            f"{len(top)} seeds). The paper: {paper_says('soft_calibration')}.")
