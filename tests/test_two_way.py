"""The two-way (seed x test row) SE of a mean over seeds and shared rows: a hand ANOVA, the
summaries' route, its coverage under the random-effects model, and the old hypot's double count."""

import math

import numpy as np
import pytest
from scipy import stats

from oracle.errors import DataError
from oracle.measures.two_way import two_way, two_way_from_summaries
from oracle.report.power import design_se


def _hand_anova(x):
    """The two-way ANOVA without replication written out with loops (an independent route)."""
    s, r = len(x), len(x[0])
    g = sum(sum(row) for row in x) / (s * r)
    sm = [sum(row) / r for row in x]
    rm = [sum(x[i][j] for i in range(s)) / s for j in range(r)]
    ss_s = sum(r * (m - g) ** 2 for m in sm)
    ss_r = sum(s * (m - g) ** 2 for m in rm)
    ss_t = sum((x[i][j] - g) ** 2 for i in range(s) for j in range(r))
    return g, ss_s / (s - 1), ss_r / (r - 1), (ss_t - ss_s - ss_r) / ((s - 1) * (r - 1))


def _draw(rng, s, r, sd_s, sd_r, sd_sr, mu=1.0):
    return mu + rng.normal(0, sd_s, (s, 1)) + rng.normal(0, sd_r, (1, r)) + rng.normal(0, sd_sr, (s, r))


def test_two_way_is_the_hand_anova_and_its_variance_the_expected_mean_squares():
    x = _draw(np.random.default_rng(0), 4, 30, 1.0, 0.5, 0.8)
    tw = two_way(x)
    g, ms_s, ms_r, ms_e = _hand_anova(x.tolist())
    assert (tw.mean, tw.ms_seeds, tw.ms_rows, tw.ms_error) == pytest.approx((g, ms_s, ms_r, ms_e), rel=1e-10)
    assert tw.var_seeds == pytest.approx((ms_s - ms_e) / 30) and tw.var_rows == pytest.approx((ms_r - ms_e) / 4)
    # unclipped, Var(mean) = (MS_S + MS_R - MS_E) / (S R) and the parts add up to it
    assert tw.se**2 == pytest.approx((ms_s + ms_r - ms_e) / 120, rel=1e-10)
    assert sum(p**2 for p in tw.parts.values()) == pytest.approx(tw.se**2, rel=1e-12)
    c = np.array([ms_s, ms_r, -ms_e]) / 120
    assert tw.df == pytest.approx(c.sum() ** 2 / (c[0] ** 2 / 3 + c[1] ** 2 / 29 + c[2] ** 2 / 87), rel=1e-10)


def test_summaries_give_the_arrays_numbers():
    x = _draw(np.random.default_rng(1), 3, 50, 0.2, 1.0, 0.6)
    full = two_way(x)
    summ = two_way_from_summaries(x.mean(1), x.std(1, ddof=1) / math.sqrt(50), x.mean(0).std(ddof=1) / math.sqrt(50),
                                  50)
    for f in ("mean", "se", "df", "ms_seeds", "ms_rows", "ms_error", "var_seeds", "var_rows", "var_interaction"):
        assert getattr(summ, f) == pytest.approx(getattr(full, f), rel=1e-9), f


def test_a_clipped_component_drops_out_of_the_variance_and_its_df():
    # no seed effect and a strong interaction: MS_S < MS_E is likely; then sigma_S^2 = 0
    rng = np.random.default_rng(2)
    for _ in range(50):
        tw = two_way(_draw(rng, 3, 40, 0.0, 0.1, 1.0))
        if tw.ms_seeds < tw.ms_error:
            break
    assert tw.var_seeds == 0.0
    assert tw.se**2 == pytest.approx(tw.var_rows / 40 + tw.ms_error / 120, rel=1e-12)
    assert tw.df is not None and tw.df > 0


def test_coverage_is_95_percent_where_the_hypot_of_seed_and_row_ses_is_too_wide():
    """Under the random-effects model with a large interaction (learners that disagree row by
    row), the two-way t interval covers the true mean about 95% of the time; the old
    hypot(se_seeds, mean of the seeds' row SEs) counts the interaction twice and is wider."""
    rng = np.random.default_rng(3)
    s, r, mu, reps = 3, 60, 0.5, 2000
    cover, ratio = 0, []
    for _ in range(reps):
        x = _draw(rng, s, r, 0.05, 0.2, 1.0, mu)
        tw = two_way(x)
        cover += abs(tw.mean - mu) <= stats.t.ppf(0.975, tw.df) * tw.se
        old = math.hypot(x.mean(1).std(ddof=1) / math.sqrt(s), float(np.mean(x.std(1, ddof=1))) / math.sqrt(r))
        ratio.append(old / tw.se)
    assert 0.93 <= cover / reps <= 0.97
    true_se = math.sqrt(0.05**2 / s + 0.2**2 / r + 1.0 / (s * r))
    assert float(np.median(ratio)) > 1.3  # about sqrt(1 + S sigma_SR^2 / (...)) here
    assert design_se(0.05**2, 0.2**2, 1.0, s, r)[0] == pytest.approx(true_se, rel=1e-12)


def test_bound_from_summaries_is_the_old_hypot_and_bad_shapes_are_refused():
    x = _draw(np.random.default_rng(4), 2, 30, 0.1, 0.1, 0.5)
    se_s = x.std(1, ddof=1) / math.sqrt(30)
    bound = two_way_from_summaries(x.mean(1), se_s, float(se_s.mean()), 30)
    assert bound.se >= two_way(x).se
    with pytest.raises(DataError, match="seeds >= 2"):
        two_way(np.zeros((1, 5)))
    with pytest.raises(DataError, match="non-finite"):
        two_way(np.array([[0.0, 1.0], [np.nan, 2.0]]))
