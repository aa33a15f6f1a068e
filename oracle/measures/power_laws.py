"""Power-law fits ``y = c * N^-alpha`` and aggregation of classifier runs over seeds.

The fit is a straight line in log-log space: ``log y = log c - alpha * log N``, solved by
(weighted) least squares. Fitting in log space gives each dataset size the same relative
weight, which is what a straight line on a log-log plot (Figure 2b of the paper) shows.

Weights: with standard errors ``y_se`` the variance of ``log y`` is ``(y_se / y)^2`` (delta
method) and the fit uses weights ``(y / y_se)^2``. Standard errors of the parameters are the
usual ones of (weighted) least squares *scaled by the residual variance* (``s^2 = RSS_w /
(n - 2)``), as ``scipy.stats.linregress`` does unweighted and ``scipy.optimize.curve_fit`` does
with ``absolute_sigma=False``. Monte Carlo errors of a test-set mean are typically far smaller
than the scatter of the points about a power law, so trusting them absolutely would make
``alpha_se`` much too small.

The paper reports ``alpha`` as mean ± std over seeds: each seed's curve is fitted on its own
(``fit_each_seed``) and the exponents are summarised per architecture (``fit_per_seed``).

Data frames have one row per classifier run with at least the columns ``seed``, ``N`` and the
grouping columns (default ``arch``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from oracle.errors import OracleError

__all__ = ["fit_power_law", "fit_each_seed", "fit_per_seed", "fit_seed_mean", "aggregate_over_seeds", "power_law",
           "fit_power_law_offset"]


def power_law(N, coef: float, alpha: float) -> np.ndarray:
    """Evaluate ``coef * N^-alpha`` (float64)."""
    return coef * np.asarray(N, dtype=np.float64) ** (-alpha)


def fit_power_law(N, y, y_se=None) -> dict[str, float]:
    """Fit ``y = coef * N^-alpha`` by least squares on ``log y`` against ``log N``.

    Args:
        N: dataset sizes [m], > 0, at least two distinct values.
        y: values [m], > 0 (e.g. epistemic KL in nats).
        y_se: optional standard errors of ``y`` [m], > 0; turn the fit into weighted least
            squares with weights ``(y / y_se)^2``.
    Returns:
        ``{"alpha", "alpha_se", "coef", "coef_se", "r2", "n_points", "curvature"}``: exponent
        and its standard error, prefactor ``c`` and its standard error (delta method), the
        (weighted) R^2 in log space, the number of points, and the curvature: the coefficient
        of (log N)^2 in a (weighted) quadratic fit of log y on log N (0 on a straight power law,
        negative where the curve steepens with N, positive where it flattens; NaN below three
        distinct N). Standard errors are NaN with two points.
    """
    N = np.asarray(N, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if N.shape != y.shape:
        raise OracleError(f"fit_power_law: N has {N.size} values but y has {y.size}")
    if N.size < 2 or np.unique(N).size < 2:
        raise OracleError(f"fit_power_law: need at least two distinct N, got {N.tolist()}")
    for name, arr in (("N", N), ("y", y)):
        if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
            raise OracleError(f"fit_power_law: {name} must be finite and > 0 for a log-log fit, got {arr.tolist()}")
    if y_se is None:
        w = np.ones_like(y)
    else:
        se = np.asarray(y_se, dtype=np.float64).ravel()
        if se.shape != y.shape or not np.all(np.isfinite(se)) or np.any(se <= 0):
            raise OracleError(f"fit_power_law: y_se must be {y.size} finite values > 0, got {se.tolist()}")
        w = (y / se) ** 2

    x, z = np.log(N), np.log(y)
    # Centre x at its weighted mean so the normal equations are well conditioned.
    xm = np.sum(w * x) / np.sum(w)
    zm = np.sum(w * z) / np.sum(w)
    sxx = np.sum(w * (x - xm) ** 2)
    slope = np.sum(w * (x - xm) * (z - zm)) / sxx
    intercept = zm - slope * xm
    resid = z - intercept - slope * x
    rss = float(np.sum(w * resid**2))
    tss = float(np.sum(w * (z - zm) ** 2))
    m = N.size
    if m > 2:
        s2 = rss / (m - 2)
        slope_se = float(np.sqrt(s2 / sxx))
        intercept_se = float(np.sqrt(s2 * (1.0 / np.sum(w) + xm**2 / sxx)))
    else:
        slope_se = intercept_se = float("nan")
    coef = float(np.exp(intercept))
    return {
        "alpha": float(-slope),
        "alpha_se": slope_se,
        "coef": coef,
        "coef_se": coef * intercept_se,
        "r2": 1.0 - rss / tss if tss > 0 else float("nan"),
        "n_points": int(m),
        "curvature": loglog_curvature(N, y, w),
    }


def loglog_curvature(N, y, w=None) -> float:
    """The coefficient c of (log N)^2 in the least-squares fit log y = a + b log N + c (log N)^2
    (weights `w`, default 1; log N centred first, which leaves c unchanged); NaN below three
    distinct N. A schedule that gives larger N more optimizer steps bends the curve down (c < 0)."""
    N = np.asarray(N, dtype=np.float64).ravel()
    if np.unique(N).size < 3:
        return float("nan")
    x = np.log(N)
    x = x - x.mean()
    z = np.log(np.asarray(y, dtype=np.float64).ravel())
    sw = np.sqrt(np.ones_like(z) if w is None else np.asarray(w, dtype=np.float64).ravel())
    design = np.stack([np.ones_like(x), x, x**2], axis=1) * sw[:, None]
    coef, *_ = np.linalg.lstsq(design, z * sw, rcond=None)
    return float(coef[2])


def fit_power_law_offset(N, y) -> dict[str, float]:
    """Fit ``y = a N^-b + c`` by least squares on y (the saturating law a practitioner fits to a
    total loss curve to read off its asymptote c, with no oracle to say where the floor is).

    Args:
        N: dataset sizes [m], > 0, at least three distinct values.
        y: values [m] (e.g. total cross-entropy in nats), finite.
    Returns:
        ``{"a", "b", "c", "c_se", "n_points"}``, with ``a >= 0``, ``0 < b <= 5`` and
        ``0 <= c <= max(y)`` (bounded least squares, `scipy.optimize.curve_fit`); ``c_se`` from
        the fit's covariance scaled by the residual variance (NaN with three points or a
        singular fit). NaN parameters when the fit does not converge.
    """
    from scipy.optimize import curve_fit

    N = np.asarray(N, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if N.shape != y.shape or np.unique(N).size < 3 or not (np.all(np.isfinite(y)) and np.all(N > 0)):
        raise OracleError(f"fit_power_law_offset: need >= 3 distinct N > 0 and as many finite y, got N={N.tolist()}, "
                          f"y={y.tolist()}")
    nan = {"a": math.nan, "b": math.nan, "c": math.nan, "c_se": math.nan, "n_points": int(N.size)}
    top = float(y.max())
    if top <= 0:
        return nan
    # start from a pure power law through the points (c = 0), scaled by the smallest N
    n0 = float(N.min())
    start = fit_power_law(N, y) if np.all(y > 0) else {"coef": top * n0, "alpha": 0.5}
    b0 = float(np.clip(start["alpha"], 1e-3, 5.0))
    p0 = [max(start["coef"] * n0 ** (-b0), 1e-12), b0, 0.0]
    model = lambda n, a, b, c: a * (n / n0) ** (-b) + c  # noqa: E731
    try:
        popt, pcov = curve_fit(model, N, y, p0=p0, bounds=([0.0, 1e-6, 0.0], [np.inf, 5.0, top]), maxfev=20000)
    except (RuntimeError, ValueError):
        return nan
    c_var = float(pcov[2, 2]) if N.size > 3 and np.all(np.isfinite(pcov)) else math.nan
    return {"a": float(popt[0]) * n0 ** float(popt[1]), "b": float(popt[1]), "c": float(popt[2]),
            "c_se": math.sqrt(c_var) if c_var >= 0 else math.nan, "n_points": int(N.size)}


def _require(df: pd.DataFrame, cols: Sequence[str]) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise OracleError(f"data frame lacks column(s) {missing}; has {list(df.columns)}")


def _check_unique(df: pd.DataFrame, keys: Sequence[str]) -> None:
    dup = df.duplicated(subset=list(keys), keep=False)
    if dup.any():
        first = df.loc[dup, list(keys)].iloc[0].to_dict()
        raise OracleError(
            f"several rows share {first}; add the column that tells them apart (e.g. label_mode) to group_cols"
        )


def aggregate_over_seeds(
    df: pd.DataFrame,
    value_cols: Sequence[str],
    group_cols: Sequence[str] = ("arch", "N"),
    seed_col: str = "seed",
) -> pd.DataFrame:
    """Mean, standard deviation and standard error over seeds.

    Args:
        df: one row per run, with ``group_cols``, ``seed_col`` and ``value_cols``.
        value_cols: the columns to aggregate.
        group_cols: the keys of an aggregate row (one run per seed inside each group).
    Returns:
        One row per group, sorted by ``group_cols``: the group columns, ``n_seeds`` and for
        each value column ``v``: ``v_mean``, ``v_std`` (ddof=1; NaN for one seed) and
        ``v_se = v_std / sqrt(n_seeds)``.
    """
    group_cols, value_cols = list(group_cols), list(value_cols)
    _require(df, group_cols + [seed_col] + value_cols)
    _check_unique(df, group_cols + [seed_col])
    grouped = df.groupby(group_cols, sort=True)
    out = grouped[seed_col].count().rename("n_seeds").to_frame()
    for v in value_cols:
        stats = grouped[v].agg(["mean", "std"])
        out[f"{v}_mean"] = stats["mean"]
        out[f"{v}_std"] = stats["std"]
        out[f"{v}_se"] = stats["std"] / np.sqrt(out["n_seeds"])
    return out.reset_index()


def fit_each_seed(
    df: pd.DataFrame,
    value_col: str = "epistemic",
    group_cols: Sequence[str] = ("arch",),
    se_col: str | None = None,
    seed_col: str = "seed",
    n_col: str = "N",
) -> pd.DataFrame:
    """Fit one power law per (group, seed) curve of ``value_col`` against ``n_col``.

    Returns one row per (group, seed): the group columns, the seed and the keys of
    ``fit_power_law``. ``se_col`` (e.g. ``epistemic_se``) weights the fit.
    """
    group_cols = list(group_cols)
    cols = group_cols + [seed_col, n_col, value_col] + ([se_col] if se_col else [])
    _require(df, cols)
    _check_unique(df, group_cols + [seed_col, n_col])
    rows = []
    for key, curve in df.groupby(group_cols + [seed_col], sort=True):
        curve = curve.sort_values(n_col)
        try:
            fit = fit_power_law(curve[n_col], curve[value_col], curve[se_col] if se_col else None)
        except OracleError as err:
            raise OracleError(f"power-law fit of {value_col} for {dict(zip(group_cols + [seed_col], key))}: {err}") from None
        rows.append({**dict(zip(group_cols + [seed_col], key)), **fit})
    return pd.DataFrame(rows)


def fit_per_seed(
    df: pd.DataFrame,
    value_col: str = "epistemic",
    group_cols: Sequence[str] = ("arch",),
    se_col: str | None = None,
    seed_col: str = "seed",
    n_col: str = "N",
) -> pd.DataFrame:
    """The paper's exponent per architecture: fit each seed's curve, then mean ± std over seeds.

    Returns one row per group: the group columns, ``alpha`` (mean over seeds), ``alpha_std``
    (ddof=1, NaN for one seed), ``alpha_se`` (``alpha_std / sqrt(n_seeds)``), ``coef``
    (geometric mean of the seeds' prefactors), ``r2`` (mean), ``curvature`` and
    ``curvature_std`` (mean and std over seeds of `loglog_curvature`) and ``n_seeds``.
    """
    fits = fit_each_seed(df, value_col, group_cols, se_col, seed_col, n_col)
    group_cols = list(group_cols)
    fits["log_coef"] = np.log(fits["coef"])
    g = fits.groupby(group_cols, sort=True)
    out = pd.DataFrame(
        {
            "alpha": g["alpha"].mean(),
            "alpha_std": g["alpha"].std(),
            "n_seeds": g["alpha"].count(),
            "coef": np.exp(g["log_coef"].mean()),
            "r2": g["r2"].mean(),
            "curvature": g["curvature"].mean(),
            "curvature_std": g["curvature"].std(),
        }
    )
    out["alpha_se"] = out["alpha_std"] / np.sqrt(out["n_seeds"])
    return out.reset_index()[group_cols + ["alpha", "alpha_std", "alpha_se", "coef", "r2", "curvature", "curvature_std",
                                           "n_seeds"]]


def fit_seed_mean(
    df: pd.DataFrame,
    value_col: str = "epistemic",
    group_cols: Sequence[str] = ("arch",),
    seed_col: str = "seed",
    n_col: str = "N",
    weighted: bool = False,
) -> pd.DataFrame:
    """Fit one power law per group to the seed-mean curve (the dashed lines of a figure).

    Unweighted least squares in log-log space. Weighting each point by (y / se)^2, with se the
    standard error over a handful of seeds, was the first choice and is worse: with three
    seeds the se is itself so noisy that the weights mostly add noise. In a simulation of the
    paper's design (8 sizes 100 ... 40,000, 3 seeds, alpha 0.3, 10% multiplicative noise per
    point; tests/test_scaling.py repeats it) the sd of the fitted alpha is 0.015 weighted
    against 0.011 unweighted. With ``weighted=True`` the weights are used when every N has
    two or more seeds with a positive spread. Returns one row per
    group with the keys of ``fit_power_law`` and ``weighted``.
    """
    group_cols = list(group_cols)
    agg = aggregate_over_seeds(df, [value_col], group_cols + [n_col], seed_col)
    rows = []
    for key, curve in agg.groupby(group_cols, sort=True):
        se = curve[f"{value_col}_se"].to_numpy()
        use = weighted and bool(np.all(np.isfinite(se)) and np.all(se > 0))
        fit = fit_power_law(curve[n_col], curve[f"{value_col}_mean"], se if use else None)
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(group_cols, key)), **fit, "weighted": use})
    return pd.DataFrame(rows)
