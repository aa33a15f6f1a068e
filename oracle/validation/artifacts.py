"""What the validation stage reports: its artifacts (named by content) and its in-text numbers.

Tables ``checks`` (paper Table 3) and ``summary`` (Table 4), figure ``nn_distances``
(Figure 4); the ``samples_grid`` figure (real training images beside oracle samples) is
`oracle.report.figures.sample_grid_figure`.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from oracle.report.numbers import entry, round_to_spread
from oracle.report.paper import Artifact, artifacts_by_name
from oracle.validation.findings import split_flag_text

ARTIFACTS = artifacts_by_name(
    Artifact("checks", "table",
             "Validation checks of the oracle samples against the real images: Frechet distance (named by "
             "its feature space), Inception(-like) Score, manifold coverage, memorization rate with the "
             "held-out baseline, nearest-neighbour distance and posterior stability KL (nats)."),
    Artifact("summary", "table",
             "Oracle sample statistics against the real data: every validation metric with its value and "
             "feature space; ranges over classes for the per-class ratios (oracle / real, 100% = equal); "
             "split consistency = mean FD(D''train, oracle) / mean FD(D''train, D'train) over seeds."),
    Artifact("nn_distances", "figure",
             "Nearest-neighbour distances (feature units) from oracle samples and from held-out real test "
             "images to the training set, with the memorization threshold."),
    Artifact("samples_grid", "figure",
             "(a) The first real training images (data/train.h5) and (b) the first oracle samples (no "
             "guidance, no denoising) of each class, row beside row, one row per class: the world beside the "
             "data it stands in for. With more classes than rows, a subset of the sampled classes spaced evenly "
             "over their indices (the titles say how many)."),
)


def validation_numbers(metrics: Mapping, path: str) -> dict[str, dict]:
    """The in-text validation numbers of validation/metrics.json (``oracle.validation.run.run_validation``).

    Keys are those of numbers.json without the ``validation.`` prefix (`merge_numbers` adds
    it). The Frechet distance is named by its feature space: ``fid`` only for Inception-v3 with
    the TF-FID weights (feature kind ``inception-fid``), ``fd_<space>`` otherwise (torchvision
    Inception weights: ``fd_inception``); likewise ``is`` vs ``is_<space>``.
    """
    out: dict[str, dict] = {}
    for kind, block in metrics.get("feature_spaces", {}).items():
        # "FID" only with pytorch-fid's TF-FID Inception weights (oracle.validation.features.
        # frechet_metric_name); torchvision's Inception weights give a different number
        fid = block.get("feature_kind") == "inception-fid"
        fd_key = "fid" if fid else f"fd_{kind}"
        out[fd_key] = entry(block["frechet_samples_train"], "squared feature distance", path,
                             f"{block['frechet_name']}: oracle samples vs real train images, {block['feature_space']}")
        is_ = block.get("inception_score_samples") or {}
        if "mean" in is_:
            out["is" if fid else f"is_{kind}"] = entry(
                is_["mean"], "1", path, f"{block['is_name']} of oracle samples, mean ± std over splits",
                std=is_.get("std"), std_over="splits")
    prim = metrics.get("feature_spaces", {}).get(metrics.get("primary_space"), {})
    space = prim.get("feature_space", "?")
    cov = metrics.get("coverage") or {}
    if "paper_rule" in cov:
        out["coverage"] = entry(cov["paper_rule"]["coverage"], "fraction", path,
                                            f"manifold coverage, paper rule (adaptive 90% quantile threshold), {space}")
    if "naeem" in cov:
        out["coverage_naeem"] = entry(cov["naeem"]["coverage"], "fraction", path,
                                                  f"coverage of Naeem et al. (k=5), {space}")
    mem = metrics.get("memorization") or {}
    if "rate" in mem:
        out["memorization_rate"] = entry(mem["rate"], "fraction", path,
                                                     f"oracle samples with a train neighbour within "
                                                     f"{mem['threshold']:.4g} ({mem['threshold_source']}), {space}")
        out["memorization_threshold"] = entry(mem["threshold"], "feature distance", path,
                                                          f"memorization threshold ({mem['threshold_source']})")
        out["nn_median"] = entry(mem["median_nn"], "feature distance", path,
                                             f"median oracle-sample to train nearest-neighbour distance, {space}")
    for key, field, what in (("variance_ratio", "variance_ratio", "feature variance ratio (oracle / real)"),
                             ("distance_ratio", "pairwise_distance_ratio", "pairwise distance ratio (oracle / real)")):
        vals = [d[field] for d in (metrics.get("diversity") or {}).values() if d.get(field) == d.get(field)]
        if vals:
            out[f"{key}_min"] = entry(min(vals), "ratio", path, f"smallest per-class {what}, {space}")
            out[f"{key}_max"] = entry(max(vals), "ratio", path, f"largest per-class {what}, {space}")
    tex = ((metrics.get("texture") or {}).get("vs_noisy_real") or {}).values()
    vals = [d["texture_variance_ratio"] for d in tex if d.get("texture_variance_ratio") == d.get("texture_variance_ratio")]
    if vals:
        out["texture_ratio_min"] = entry(min(vals), "ratio", path, "smallest per-class texture variance ratio")
        out["texture_ratio_max"] = entry(max(vals), "ratio", path, "largest per-class texture variance ratio")
    if "posterior_stability" in metrics:
        ps = metrics["posterior_stability"]
        out["stability_kl"] = entry(ps["mean_kl"], "nats", path,
                                                f"E[KL(p(y|x) || p(y|x + eps))], eps ~ N(0, {ps['noise_std']}^2), "
                                                f"over {ps['n']} samples", se=ps.get("se"), se_over="samples")
    if "bpd" in metrics:
        b = metrics["bpd"]["test"]["marginal"]
        out["bpd"] = entry(b["pixel_scale"]["bpd"], "bits/dim", path,
                                       "test bits per dimension of the oracle flow at uint8 scale (marginal)",
                                       se=b["pixel_scale"]["se"], se_over="test images")
        out["bpd_model_scale"] = entry(b["model_scale"]["bpd"], "bits/dim", path,
                                                   "test bits per dimension on the flow's [-1, 1] scale (marginal)",
                                                   se=b["model_scale"]["se"], se_over="test images")
    sc = metrics.get("split_consistency") or {}
    if "oracle_ratio" in sc:
        out["split_consistency_ratio"] = entry(sc["oracle_ratio"], "ratio", path,
                                                           "FD(D''train, oracle) / FD(D''train, D'train)")
    return out


def validation_table(name: str, metrics: Mapping, dataset: str) -> "pd.DataFrame":  # noqa: F821
    """Table ``checks`` (paper Table 3) or ``summary`` (Table 4) of validation/metrics.json."""
    if name == "checks":
        return table3(metrics, dataset)
    if name == "summary":
        return table4(metrics)
    raise KeyError(f"validation: no table named {name!r} (tables: checks, summary)")


def nn_distances_figure(metrics: Mapping, stem) -> dict:
    """Figure ``nn_distances`` (paper Figure 4)."""
    return figure4(metrics, stem)


def _fid_block(metrics: Mapping) -> dict:
    spaces = metrics["feature_spaces"]
    return spaces["inception"] if "inception" in spaces else spaces[metrics["primary_space"]]


def table3(metrics: Mapping, dataset: str) -> "pd.DataFrame":  # noqa: F821
    """Table 3: one row per dataset; metric names carry their feature space (FID vs FD)."""
    import pandas as pd

    fid = _fid_block(metrics)
    is_ = fid["inception_score_samples"]
    mem = metrics["memorization"]
    row = {
        "Dataset": dataset,
        f"{fid['frechet_name']} ↓": fid["frechet_samples_train"],
        f"{fid['is_name']} ↑": _pm(is_["mean"], is_["std"]),
        "Coverage (Naeem, k=5) ↑": metrics["coverage"]["naeem"]["coverage"],
        "Coverage (paper rule)": metrics["coverage"]["paper_rule"]["coverage"],
        "Mem. rate": mem["rate"],
        "Mem. rate (test→train)": mem["test_rate"],
        "NN dist. (med)": mem["median_nn"],
    }
    if "posterior_stability" in metrics:
        row["Post. stab. KL ↓"] = metrics["posterior_stability"]["mean_kl"]
    return pd.DataFrame([row])


def _pm(value: float, spread: float) -> str:
    """"value ± spread", the value rounded to its spread (`oracle.report.numbers.round_to_spread`)."""
    v, s = round_to_spread(float(value), float(spread))
    return f"{v} ± {s}"


def _percent(fraction: float) -> str:
    """A fraction as a percentage by the tables' rule (`oracle.report.tables.format_cell`)."""
    from oracle.report.tables import format_cell

    return f"{format_cell(100 * float(fraction), 'percent')}%"


def _number(v: float) -> str:
    """A float by the tables' rule for a number (3 significant digits)."""
    from oracle.report.tables import format_cell

    return format_cell(float(v), "number")


def _range(values) -> str:
    v = [x for x in values if x == x]  # drop NaN
    return f"{100 * min(v):.0f}–{100 * max(v):.0f}%" if v else "—"


def table4(metrics: Mapping) -> "pd.DataFrame":  # noqa: F821
    """Table 4: metric / value / feature space, ranges over classes as in the paper."""
    import pandas as pd

    fid = _fid_block(metrics)
    prim = metrics["feature_spaces"][metrics["primary_space"]]
    is_ = fid["inception_score_samples"]
    div = metrics["diversity"].values()
    tex = metrics["texture"]["vs_noisy_real"].values()
    sc = metrics["split_consistency"]
    rows = [
        (f"{fid['frechet_name']} ↓", _number(fid["frechet_samples_train"]), fid["feature_space"]),
        (f"{fid['is_name']} ↑", _pm(is_["mean"], is_["std"]), fid["feature_space"]),
        ("Manifold coverage (Naeem, k=5)", _percent(metrics["coverage"]["naeem"]["coverage"]), prim["feature_space"]),
        ("Manifold coverage (paper rule, ≈90% by construction)",
         _percent(metrics["coverage"]["paper_rule"]["coverage"]), prim["feature_space"]),
        ("Feature variance ratio (per class)", _range(d["variance_ratio"] for d in div), prim["feature_space"]),
        ("Pairwise distance ratio (per class)", _range(d["pairwise_distance_ratio"] for d in div),
         prim["feature_space"]),
        ("Texture variance ratio (per class)", _range(d["texture_variance_ratio"] for d in tex),
         "pixels (Laplacian), real + dequantization noise"),
        ("Memorization rate", _percent(metrics["memorization"]["rate"]), prim["feature_space"]),
        ("Split consistency FD(D''train, oracle) / FD(D''train, D'train)", split_flag_text(sc), sc["feature_space"]),
    ]
    if "bpd" in metrics:
        b = metrics["bpd"]["test"]["marginal"]["model_scale"]
        rows.append(("Test BPD ([-1, 1] scale, marginal)", _pm(b["bpd"], b["se"]), "oracle flow"))
    return pd.DataFrame(rows, columns=["Metric", "Value", "Feature space"])


def figure4(metrics: Mapping, stem: str | os.PathLike) -> dict[str, Path]:
    """Figure 4: histogram of generated->train NN distances, test->train as the reference."""
    from matplotlib.figure import Figure

    from oracle.report.figures import print_widths, palette, save_figure, style

    nn = metrics["nn_distances"]
    gen, ref = np.asarray(nn["samples_to_train"]), np.asarray(nn["test_to_train"])
    colors = palette(["real", "oracle"])
    with style():
        fig = Figure(figsize=(print_widths().column_in, 2.8), layout="constrained")
        ax = fig.add_subplot()
        bins = np.histogram_bin_edges(np.concatenate([gen, ref]), bins=40)
        ax.hist(ref, bins=bins, density=True, alpha=0.5, color=colors["real"], label="held-out real → train")
        ax.hist(gen, bins=bins, density=True, alpha=0.5, color=colors["oracle"], label="oracle samples → train")
        ax.axvline(nn["threshold"], color="k", ls="--", lw=1, label=f"threshold d={nn['threshold']:.3g}")
        # the feature space's name is long: wrapped, not shrunk
        ax.set_xlabel("\n".join(textwrap.wrap(f"nearest-neighbour distance ({nn['feature_space']})", 40)))
        ax.set_ylabel("density")
        ax.legend(loc="best")
        return save_figure(fig, stem)
