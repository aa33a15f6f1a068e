"""The split-consistency check of Xiao et al. ("The SVHN dataset is deceptive for probabilistic
generative models"): is the real test split distributed like the training split, and the
oracle's samples like either? Frechet distances between resampled halves over several seeds."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from oracle.errors import OracleError
from oracle.validation.metrics import _features, _same_dim, frechet_distance_features


# --------------------------------------------------------------------------------------------

SPLIT_FLAG_RULE = ("mismatch when |mean(FD(D''train, X)) - mean(FD(D''train, D'train))| > "
                   "std(FD(D''train, X)) + std(FD(D''train, D'train)) over seeds (ddof=1)")


def split_mismatch_flag(ref_mean: float, ref_std: float, mean: float, std: float) -> bool:
    """The ``SPLIT_FLAG_RULE``: True when |mean - ref_mean| > std + ref_std."""
    return bool(abs(mean - ref_mean) > std + ref_std)


def split_consistency(feats_train, feats_test, feats_oracle=None, n_seeds: int = 5,
                      subset_size: int | None = None, seed: int = 0) -> dict:
    """Checks eq. 2 of the SVHN split-mismatch paper: FD(D''train, D'train) ~ FD(D''train, D'test).

    For each of ``n_seeds`` seeds: D''train and D'train are two disjoint random subsets of the
    training features, D'test a random subset of the test features, D'oracle a random subset of
    the oracle-sample features, all of ``subset_size`` rows (default: the largest size that
    fits: min(n_train // 2, n_test, n_oracle)). We compute FD(D''train, D'train) (the reference:
    the distance between two samples of one distribution at this sample size),
    FD(D''train, D'test) and FD(D''train, D'oracle). FD is biased upward at finite size, which
    is why the reference is computed at the same size.

    Flag rule (``SPLIT_FLAG_RULE``): a comparison set X is flagged when its mean FD differs from
    the reference mean by more than the sum of the two standard deviations over seeds. With the
    paper's SVHN numbers (3.31 +- 0.03 vs 16.69 +- 0.33) it flags; CIFAR-10 (5.196 +- 0.040 vs
    5.206 +- 0.031) does not. Eq. 2 is necessary, not sufficient, for equal distributions.

    Returns ``{"subset_size", "n_seeds", "seed", "flag_rule", "fd_train_train",
    "fd_train_test", "fd_train_oracle" (absent without oracle features), "test_mismatch",
    "oracle_mismatch", "test_ratio", "oracle_ratio"}``, each fd entry
    ``{"mean", "std", "values"}``, ratios = mean FD / reference mean FD.
    """
    tr = _features("feats_train", feats_train, min_rows=4)
    te = _features("feats_test", feats_test, min_rows=2)
    _same_dim("feats_train", tr, "feats_test", te)
    orc = None
    if feats_oracle is not None:
        orc = _features("feats_oracle", feats_oracle, min_rows=2)
        _same_dim("feats_train", tr, "feats_oracle", orc)
    limit = min(tr.shape[0] // 2, te.shape[0], orc.shape[0] if orc is not None else te.shape[0])
    if subset_size is None:
        subset_size = limit
    if not 2 <= subset_size <= limit:
        raise OracleError(f"split_consistency: subset_size={subset_size} must be in [2, {limit}] "
                          "(n_train // 2, n_test, n_oracle)")
    if n_seeds < 2:
        raise OracleError(f"split_consistency: n_seeds={n_seeds} must be >= 2 to estimate a spread")
    m = subset_size
    vals: dict[str, list[float]] = {"fd_train_train": [], "fd_train_test": []}
    if orc is not None:
        vals["fd_train_oracle"] = []
    for s in range(n_seeds):
        rng = np.random.default_rng([seed, s])
        perm = rng.permutation(tr.shape[0])
        dpp, dp = tr[perm[:m]], tr[perm[m:2 * m]]
        vals["fd_train_train"].append(frechet_distance_features(dpp, dp))
        vals["fd_train_test"].append(
            frechet_distance_features(dpp, te[rng.choice(te.shape[0], m, replace=False)]))
        if orc is not None:
            vals["fd_train_oracle"].append(
                frechet_distance_features(dpp, orc[rng.choice(orc.shape[0], m, replace=False)]))

    def summary(v: Sequence[float]) -> dict:
        a = np.asarray(v)
        return {"mean": float(a.mean()), "std": float(a.std(ddof=1)), "values": [float(t) for t in a]}

    out: dict = {"subset_size": int(m), "n_seeds": int(n_seeds), "seed": int(seed),
                 "flag_rule": SPLIT_FLAG_RULE}
    out.update({key: summary(v) for key, v in vals.items()})
    ref = out["fd_train_train"]

    def flagged(other: dict) -> bool:
        return split_mismatch_flag(ref["mean"], ref["std"], other["mean"], other["std"])

    out["test_mismatch"] = flagged(out["fd_train_test"])
    out["test_ratio"] = out["fd_train_test"]["mean"] / ref["mean"] if ref["mean"] > 0 else float("nan")
    if orc is not None:
        out["oracle_mismatch"] = flagged(out["fd_train_oracle"])
        out["oracle_ratio"] = (out["fd_train_oracle"]["mean"] / ref["mean"]
                               if ref["mean"] > 0 else float("nan"))
    return out
