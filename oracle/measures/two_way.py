"""The standard error of a mean over seeds and shared test rows, each source of variance once.

A quantity measured for S seeds (independent classifiers, or pairs of them) on the same R test
rows is an [S, R] array ``x[s, r] = mu + a_s + b_r + e_sr`` (seed effect, row effect, their
interaction) under the two-way random-effects model. Its grand mean has variance

    Var(mean) = sigma_S^2 / S + sigma_R^2 / R + sigma_SR^2 / (S R),

estimated from the mean squares of the two-way ANOVA without replication (``MS_S`` over seeds,
``MS_R`` over rows, ``MS_E`` the residual), whose expectations are ``R sigma_S^2 + sigma_SR^2``,
``S sigma_R^2 + sigma_SR^2`` and ``sigma_SR^2``. The SE of the seeds' spread alone, ``sqrt(MS_S /
(S R))``, already holds the interaction; adding the seeds' own SEs over rows (``~ sqrt((sigma_R^2
+ sigma_SR^2) / R)``) counts it a second time, which is what the older ``hypot(se_seeds,
se_rows)`` did. Negative component estimates are set to 0 (a component is a variance), and the
t quantile's degrees of freedom are Satterthwaite's for the linear combination of mean squares
the estimate is.

`two_way` takes the array; `two_way_from_summaries` gives the same numbers from per-seed means
and SEs over rows plus the SE over rows of the seed-mean row values, which is all a kind keeps
after reading its predictions. The SE at another design (more seeds or rows) and the counts that
would decide a claim: `oracle.report.power`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from oracle.errors import DataError
from oracle.report.power import satterthwaite_df

__all__ = ["TwoWay", "two_way", "two_way_from_summaries"]


@dataclass(frozen=True)
class TwoWay:
    """The grand mean of an [S, R] array with its two-way SE (module docstring).

    mean: the grand mean; se: sqrt(Var(mean)) from the components; df: Satterthwaite's degrees
    of freedom of that variance (None when it is 0); n_seeds, n_rows: S and R; ms_seeds,
    ms_rows, ms_error: the mean squares; var_seeds, var_rows, var_interaction: the variance
    components sigma_S^2, sigma_R^2, sigma_SR^2 (>= 0, in the value's unit squared);
    seed_std: the std (ddof=1) of the S seed means."""

    mean: float
    se: float
    df: float | None
    n_seeds: int
    n_rows: int
    ms_seeds: float
    ms_rows: float
    ms_error: float
    var_seeds: float
    var_rows: float
    var_interaction: float
    seed_std: float

    @property
    def parts(self) -> dict[str, float]:
        """The SE's three parts, each sqrt(component / its count): ``se_seeds_part`` =
        sqrt(sigma_S^2 / S), ``se_rows_part`` = sqrt(sigma_R^2 / R), ``se_interaction_part`` =
        sqrt(sigma_SR^2 / (S R)); ``se`` = the root of their sum of squares."""
        s, r = self.n_seeds, self.n_rows
        return {"se_seeds_part": math.sqrt(self.var_seeds / s), "se_rows_part": math.sqrt(self.var_rows / r),
                "se_interaction_part": math.sqrt(self.var_interaction / (s * r))}

    def record(self) -> dict[str, float | int | None]:
        return asdict(self)


def _from_mean_squares(mean: float, s: int, r: int, ms_s: float, ms_r: float, ms_e: float,
                       seed_std: float) -> TwoWay:
    ms_e = max(ms_e, 0.0)  # round-off of a sum-of-squares difference
    var_s, var_r = max((ms_s - ms_e) / r, 0.0), max((ms_r - ms_e) / s, 0.0)
    var = var_s / s + var_r / r + ms_e / (s * r)
    # the variance as a combination of mean squares: a component set to 0 drops its MS and
    # keeps its share of MS_E, so the coefficients follow which components were kept
    keep_s, keep_r = ms_s > ms_e, ms_r > ms_e
    c_e = (1.0 - keep_s - keep_r) / (s * r)
    terms = [(ms_s / (s * r), s - 1.0)] if keep_s else []
    terms += [(ms_r / (s * r), r - 1.0)] if keep_r else []
    terms += [(c_e * ms_e, (s - 1.0) * (r - 1.0))]
    return TwoWay(mean=mean, se=math.sqrt(var), df=satterthwaite_df(terms), n_seeds=s, n_rows=r,
                  ms_seeds=ms_s, ms_rows=ms_r, ms_error=ms_e, var_seeds=var_s, var_rows=var_r,
                  var_interaction=ms_e, seed_std=seed_std)


def two_way(values: np.ndarray) -> TwoWay:
    """The two-way decomposition of `values`, float [S, R] (S seeds, R shared test rows, S, R
    >= 2, all finite): the grand mean, its SE and Satterthwaite df, the mean squares and the
    variance components (`TwoWay`). DataError on another shape or a non-finite value."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        raise DataError(f"two-way decomposition: expected values [seeds >= 2, rows >= 2], got shape {x.shape}")
    if not np.isfinite(x).all():
        raise DataError("two-way decomposition: a non-finite value in the [seeds, rows] array")
    s, r = x.shape
    grand = float(x.mean())
    seed_means, row_means = x.mean(axis=1), x.mean(axis=0)
    ss_s = r * float(((seed_means - grand) ** 2).sum())
    ss_r = s * float(((row_means - grand) ** 2).sum())
    resid = x - seed_means[:, None] - row_means[None, :] + grand
    ss_e = float((resid**2).sum())
    return _from_mean_squares(grand, s, r, ss_s / (s - 1), ss_r / (r - 1), ss_e / ((s - 1) * (r - 1)),
                              float(seed_means.std(ddof=1)))


def two_way_from_summaries(seed_means, seed_row_se, mean_row_se: float, n_rows: int) -> TwoWay:
    """`two_way` of an [S, R] array known only through its summaries: `seed_means` float [S] (each
    seed's mean over the rows), `seed_row_se` float [S] (each seed's SE over the rows, std ddof=1
    / sqrt(R)), `mean_row_se` (the SE over rows of the per-row values averaged over the S seeds)
    and `n_rows` R. The sums of squares follow exactly: SS_S from the seed means, SS_R = S (R -
    1) R mean_row_se^2 and SS_E = R (R - 1) (sum seed_row_se^2 - S mean_row_se^2).

    Where the seeds' rows were never combined, ``mean_row_se`` = mean(seed_row_se) is its upper
    bound (the rows' errors of the seeds perfectly correlated), which gives the bound
    ``sqrt(se_seeds^2 + mean(seed_row_se)^2)`` back."""
    m = np.asarray(seed_means, dtype=np.float64)
    se = np.asarray(seed_row_se, dtype=np.float64)
    s, r = m.size, int(n_rows)
    if m.ndim != 1 or se.shape != m.shape or s < 2 or r < 2:
        raise DataError(f"two-way decomposition: expected [seeds >= 2] means and SEs and rows >= 2, got shapes "
                        f"{m.shape} and {se.shape}, {r} rows")
    if not (np.isfinite(m).all() and np.isfinite(se).all() and math.isfinite(mean_row_se)):
        raise DataError("two-way decomposition: a non-finite seed mean or SE")
    grand = float(m.mean())
    ms_s = r * float(((m - grand) ** 2).sum()) / (s - 1)
    ms_r = s * r * float(mean_row_se) ** 2
    ms_e = r * (float((se**2).sum()) - s * float(mean_row_se) ** 2) / (s - 1)
    return _from_mean_squares(grand, s, r, ms_s, ms_r, ms_e, float(m.std(ddof=1)))
