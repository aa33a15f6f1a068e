"""Every figure at every preset's shapes (issue 46 item 7): the scaling kind's figures drawn for
the architectures (their printed labels), sizes N and seeds of each scaling experiment of the
embedded default and of every preset, and the active kind's for each active experiment's
architectures, strategies and rounds, on synthetic numbers; each must print (`save_figure` is
strict in the tests: fit, fonts, no colliding texts) and its caption name only the panels it
draws. A preset's run can no longer stop on a figure the tests never drew at its shapes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from oracle.classifiers.specs import arch_spec
from oracle.experiments import active, scaling
from oracle.workflow.plan.config import load_yaml
from oracle.report.figures import caption_panel_problems, pdf_facts

REPO = Path(__file__).resolve().parents[1]
CONFIGS = [REPO / "config.yaml", *sorted((REPO / "presets").glob("*.yaml"))]


def scaling_shapes() -> dict[tuple, str]:
    """{(arch labels, sizes, number of seeds up to 3): the first "<config>: <experiment>" of that shape}."""
    shapes = {}
    for path in CONFIGS:
        cfg = load_yaml(path)
        for name, entry in (cfg.get("experiments") or {}).items():
            if entry.get("kind") != "scaling":
                continue
            labels = tuple((a, arch_spec(cfg, a)["label"]) for a in entry["archs"])
            key = (labels, tuple(entry["sizes"]), min(len(entry["seeds"]), 3))
            shapes.setdefault(key, f"{path.name}: {name}")
    return shapes


SHAPES = scaling_shapes()


def synthetic(labels, sizes, n_seeds) -> dict[str, pd.DataFrame]:
    """Runs and reliability bins of the shape: epistemic KL 0.4 N^-alpha per seed, ECE above it."""
    rng = np.random.default_rng(0)
    rows, bins = [], []
    for i, (arch, _) in enumerate(labels):
        for seed in range(n_seeds):
            alpha = 0.1 + 0.05 * i + 0.01 * seed
            for n in sizes:
                epi = 0.4 * n ** -alpha
                acc = min(0.99, 0.9 + 0.01 * np.log10(n) + rng.normal(0, 0.002))
                rows.append({"experiment": "scaling", "arch": arch, "cell": f"N{n}", "N": n, "seed": seed,
                             "evalset": "base", "labels": "hard", "hard_label": "label", "n": 500, "acc": acc,
                             "acc_se": 0.004, "bayes_accuracy": 0.998, "bayes_accuracy_se": 0.001, "aleatoric": 0.012,
                             "aleatoric_se": 0.001, "epistemic": epi, "epistemic_se": 0.1 * epi, "total": 0.012 + epi,
                             "total_se": 0.1 * epi, "ece": 0.02 + 0.5 * epi, "ece_posterior": 0.01 + 0.4 * epi,
                             "calibration_pointwise": 0.03 + 0.5 * epi, "nll": 0.02 + epi})
                conf = np.linspace(0.05, 0.95, 10)
                bins += [{"experiment": "scaling", "arch": arch, "cell": f"N{n}", "seed": seed, "evalset": "base",
                          "N": n, "bin": b, "count": 50, "confidence": conf[b], "accuracy": conf[b] * 0.95,
                          "true_probability": conf[b] * 0.97} for b in range(10)]
    runs = pd.DataFrame(rows)
    return {"runs": runs, "fits": scaling.all_fits(runs), "reliability": pd.DataFrame(bins)}


@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES.values()))
def test_every_scaling_figure_prints_at_the_presets_shapes(shape, tmp_path):
    labels, sizes, n_seeds = shape
    data = synthetic(labels, sizes, n_seeds)
    spec = {"kind": "scaling", "archs": [a for a, _ in labels], "sizes": list(sizes),
            "seeds": list(range(n_seeds)), "arch_labels": dict(labels)}
    figures = [n for n, a in scaling.ARTIFACTS.items() if a.type == "figure"]
    assert "calibration_vs_n" in figures and "epistemic_curves" in figures
    for name in figures:
        out = scaling.figure(name, data, spec, tmp_path / name)  # raises on a figure that does not print
        panels = pdf_facts(out["pdf"].read_bytes())["panels"]
        assert not caption_panel_problems(scaling.ARTIFACTS[name].caption, panels), (name, panels)


def active_shapes() -> dict[tuple, str]:
    """{(arch labels, strategies, labelled sizes): the first "<config>: <experiment>" of that shape}."""
    shapes = {}
    for path in CONFIGS:
        cfg = load_yaml(path)
        for name, entry in (cfg.get("experiments") or {}).items():
            if entry.get("kind") != "active":
                continue
            labels = tuple((a, arch_spec(cfg, a)["label"]) for a in entry["archs"])
            sizes = tuple(entry["initial_size"] + r * entry["batch"] for r in range(entry["rounds"] + 1))
            shapes.setdefault((labels, tuple(entry["strategies"]), sizes), f"{path.name}: {name}")
    return shapes


ACTIVE = active_shapes()


@pytest.mark.parametrize("shape", list(ACTIVE), ids=list(ACTIVE.values()))
def test_every_active_figure_prints_at_the_presets_shapes(shape, tmp_path):
    labels, strategies, sizes = shape
    rng = np.random.default_rng(1)
    rounds, corr = [], []
    for arch, _ in labels:
        for j, strategy in enumerate(strategies):
            for seed in range(2):
                for r, n in enumerate(sizes):
                    rounds.append({"arch": arch, "strategy": strategy, "seed": seed, "round": r, "labelled": n,
                                   "acc": 0.6 + 0.3 * r / len(sizes) + 0.01 * j + rng.normal(0, 0.005),
                                   "epistemic": 0.5 / (1 + r) + 0.01 * j})
                    if strategy == "random":
                        continue
                    corr += [{"arch": arch, "strategy": strategy, "seed": seed, "round": r, "labelled": n,
                              "score": strategy, "target": target, "spearman": rho + rng.normal(0, 0.02)}
                             for target, rho in (("exact_epistemic", 0.6), ("exact_aleatoric", 0.2))]
    data = {"rounds": pd.DataFrame(rounds), "correlations": pd.DataFrame(corr)}
    spec = {"kind": "active", "archs": [a for a, _ in labels], "strategies": list(strategies),
            "arch_labels": dict(labels)}
    figures = [n for n, a in active.ARTIFACTS.items() if a.type == "figure"]
    assert "acquisition_panels" in figures
    for name in figures:
        out = active.figure(name, data, spec, tmp_path / name)  # raises on a figure that does not print
        panels = pdf_facts(out["pdf"].read_bytes())["panels"]
        assert not caption_panel_problems(active.ARTIFACTS[name].caption, panels), (name, panels)
