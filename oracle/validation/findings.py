"""The validation stage: the finding sentence of each artifact's caption, computed from
validation/metrics.json (`oracle.report.captions`), and the split-consistency flag's text."""

from __future__ import annotations

from collections.abc import Mapping

from oracle.report.captions import count_of, num

#: A per-class ratio (oracle / real) counts as matching within this band.
RATIO_BAND = (0.8, 1.25)


def findings(name: str, metrics: Mapping) -> str:
    """The finding of validation artifact `name` (`oracle.validation.artifacts.ARTIFACTS`)."""
    if name == "checks":
        return f"{memorization_finding(metrics)} {coverage_finding(metrics)}"
    if name == "summary":
        return f"{ratio_finding(metrics)} {split_finding(metrics)}"
    if name == "nn_distances":
        return memorization_finding(metrics)
    return ""


def memorization_finding(metrics: Mapping) -> str:
    """Memorization rate and median nearest-neighbour distance, oracle samples against held-out
    real test images."""
    mem = metrics.get("memorization") or {}
    if "rate" not in mem:
        return ""
    test_rate = mem.get("test_rate")
    beside = f", against {num(100 * test_rate)}% of held-out real test images" if test_rate is not None else ""
    test_nn = f" vs {num(mem['test_median_nn'])} (real test)" if mem.get("test_median_nn") is not None else ""
    return (f"This run: {num(100 * mem['rate'])}% of oracle samples lie within the memorization threshold "
            f"{num(mem['threshold'])} of a training image{beside}; median nearest-neighbour distance "
            f"{num(mem['median_nn'])} (oracle){test_nn}.")


def coverage_finding(metrics: Mapping) -> str:
    """Naeem coverage beside its value for real images."""
    nae = (metrics.get("coverage") or {}).get("naeem")
    if not nae:
        return ""
    expect = nae.get("expected_if_same_distribution")
    beside = f" ({num(100 * expect)}% expected if the samples were real images)" if expect is not None else ""
    return f"Coverage (Naeem, k=5) {num(100 * nae['coverage'])}%{beside}."


def ratio_finding(metrics: Mapping) -> str:
    """How many classes have a feature variance ratio (oracle / real) inside `RATIO_BAND`."""
    div = metrics.get("diversity") or {}
    vals = {k: d["variance_ratio"] for k, d in div.items() if d.get("variance_ratio") == d.get("variance_ratio")}
    if not vals:
        return ""
    lo, hi = RATIO_BAND
    inside = sum(lo <= v <= hi for v in vals.values())
    worst = max(vals, key=lambda k: abs(vals[k] - 1))
    return (f"This run: the per-class feature variance ratio (oracle / real; 100% is equal spread) lies within "
            f"{100 * lo:.0f}-{100 * hi:.0f}% for {count_of(inside, len(vals), 'classes')}; farthest: class {worst} "
            f"at {100 * vals[worst]:.0f}%.")


def split_flag_text(sc: Mapping) -> str:
    """The split-consistency table cell: the ratio, and when flagged the rule it failed."""
    text = f"{sc['oracle_ratio']:.2f}"
    if not sc.get("oracle_mismatch"):
        return text
    o, r = sc["fd_train_oracle"], sc["fd_train_train"]
    return (f"{text} (flagged: |{o['mean']:.3g} − {r['mean']:.3g}| > {o['std']:.3g} + {r['std']:.3g}, "
            "see caption)")


def split_finding(metrics: Mapping) -> str:
    """What the split-consistency check found and, when flagged, what the flag means."""
    sc = metrics.get("split_consistency") or {}
    if "oracle_ratio" not in sc:
        return ""
    o, r, t = sc["fd_train_oracle"], sc["fd_train_train"], sc["fd_train_test"]
    where = (f"FD to a training half: oracle samples {num(o['mean'])} ± {num(o['std'], 2)}, a second training half "
             f"{num(r['mean'])} ± {num(r['std'], 2)}, the real test split {num(t['mean'])} ± {num(t['std'], 2)} "
             f"(mean ± std over {sc['n_seeds']} seeds of {sc['subset_size']} rows)")
    test = "is flagged too" if sc.get("test_mismatch") else "is not flagged"
    if sc.get("oracle_mismatch"):
        return (f"Split consistency flagged (ratio {num(sc['oracle_ratio'])}): {where}; the rule flags a set whose "
                f"mean FD differs from the training-half reference by more than the sum of the two stds "
                f"({sc['flag_rule']}). It means the oracle samples are farther from the training data, in this "
                f"feature space, than a second sample of the training data is: the check finds them "
                f"distinguishable from real images. The real test split {test}.")
    return (f"Split consistency not flagged (ratio {num(sc['oracle_ratio'])}): {where}; the real test split {test}.")
