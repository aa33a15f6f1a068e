"""What the validation stage reports: its artifacts (named by content) and its in-text numbers.

Tables ``checks`` (paper Table 3) and ``summary`` (Table 4), figures ``nn_distances``
(Figure 4) and ``samples_grid``; their builders live in `oracle.validation.run`.
"""

from __future__ import annotations

from collections.abc import Mapping

from oracle.report.numbers import entry
from oracle.report.paper import Artifact, artifacts_by_name

ARTIFACTS = artifacts_by_name(
    Artifact("checks", "table",
             "The oracle passes the validation checks: Frechet distance (named by its feature space), "
             "Inception(-like) Score, manifold coverage, memorization rate with the held-out baseline, "
             "nearest-neighbour distance and posterior stability KL (nats)."),
    Artifact("summary", "table",
             "Oracle samples match real data statistics: every validation metric with its value and "
             "feature space; ranges over classes for the per-class ratios."),
    Artifact("nn_distances", "figure",
             "Oracle samples are not memorized: nearest-neighbour distances (feature units) from oracle "
             "samples and from held-out real test images to the training set, with the memorization "
             "threshold."),
    Artifact("samples_grid", "figure",
             "The first oracle samples of every class, one row per class, beside real images."),
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
                std=is_.get("std"))
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


def validation_table(name: str, metrics: Mapping, dataset: str) -> tuple["pd.DataFrame", str]:  # noqa: F821
    """Table ``checks`` (paper Table 3) or ``summary`` (Table 4) of validation/metrics.json,
    with the float format of its Markdown/LaTeX rendering."""
    from oracle.validation.run import table3, table4

    if name == "checks":
        return table3(metrics, dataset), ".4g"
    if name == "summary":
        return table4(metrics), ".4f"
    raise KeyError(f"validation: no table named {name!r} (tables: checks, summary)")


def nn_distances_figure(metrics: Mapping, stem) -> dict:
    """Figure ``nn_distances`` (paper Figure 4)."""
    from oracle.validation.run import figure4

    return figure4(metrics, stem)
