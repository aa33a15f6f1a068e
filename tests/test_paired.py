"""oracle.measures.paired and oracle.experiments._pairs: differences of two classifiers on the
same test rows, paired per row, against a brute-force loop over rows; the paired SE against
the unpaired one on correlated rows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from oracle.classifiers.evaluate import evaluate_predictions
from oracle.errors import DataError
from oracle.experiments._pairs import pair_rows, pairs_frame
from oracle.measures.paired import paired_difference, row_values
from paired_rows import brute_force, log_softmax_np, write_classifier, write_world

K, N_ROWS = 4, 300


def correlated_models(rng, n: int, shared: float = 1.0):
    """A world's log p and labels, and two classifiers whose errors share each row's difficulty:
    both are misled on a row in the same way, by an amount h_i (the shared part), plus a little
    of their own."""
    log_p = log_softmax_np(rng.normal(size=(n, K)) * 2.5)
    labels = np.array([rng.choice(K, p=np.exp(r)) for r in log_p])
    misled = rng.exponential(1.0, size=(n, 1)) * rng.normal(size=(n, K))

    def model(scale: float):
        return log_softmax_np(scale * log_p + shared * misled + 0.2 * rng.normal(size=(n, K)))

    return log_p, labels, model(0.8), model(0.7)


def test_row_values_are_the_per_row_terms_of_the_metrics():
    rng = np.random.default_rng(1)
    log_p, labels, lq, _ = correlated_models(rng, 200)
    got = row_values(lq, log_p, labels)
    metrics = evaluate_predictions(lq, log_p, labels)
    assert math.isclose(got["acc"].mean(), metrics["acc"]["mean"], rel_tol=1e-12)
    assert math.isclose(got["epistemic"].mean(), metrics["epistemic"]["mean"], rel_tol=1e-12)
    assert math.isclose(got["bayes_gap"].mean(), metrics["bayes_gap"]["mean"], rel_tol=1e-12)
    with pytest.raises(DataError, match="labels"):
        row_values(lq, log_p, labels[:-1])


@pytest.mark.parametrize("value", ["acc", "epistemic"])
def test_paired_difference_is_the_brute_force_loop(value):
    rng = np.random.default_rng(2)
    log_p, labels, qa, qb = correlated_models(rng, 120)
    va, vb = row_values(qa, log_p, labels)[value], row_values(qb, log_p, labels)[value]
    got = paired_difference(va, vb)
    mean, se = brute_force(qa, qb, log_p, labels, value)
    assert got["n"] == 120
    assert math.isclose(got["mean"], mean, rel_tol=1e-12, abs_tol=1e-15)
    assert math.isclose(got["se"], se, rel_tol=1e-10)
    with pytest.raises(DataError, match="shapes"):
        paired_difference(va, vb[:-1])


def test_paired_se_is_smaller_than_unpaired_on_correlated_rows_and_is_the_true_spread():
    """Two classifiers sharing each row's difficulty: over many independent test sets, the spread
    of their KL difference is what the paired SE says, and well below the unpaired hypot."""
    rng = np.random.default_rng(3)
    means, paired, unpaired = [], [], []
    for _ in range(300):
        log_p, labels, qa, qb = correlated_models(rng, N_ROWS)
        a, b = row_values(qa, log_p, labels)["epistemic"], row_values(qb, log_p, labels)["epistemic"]
        d = paired_difference(a, b)
        means.append(d["mean"])
        paired.append(d["se"])
        unpaired.append(math.hypot(a.std(ddof=1), b.std(ddof=1)) / math.sqrt(N_ROWS))
    true_sd = float(np.std(means, ddof=1))
    assert np.mean(paired) < 0.6 * np.mean(unpaired)
    # 300 replicates: the sample std is within ~8% (2 SE) of the truth
    assert abs(np.mean(paired) / true_sd - 1.0) < 0.15
    assert np.mean(unpaired) / true_sd > 1.5
    # with nothing shared, pairing gains nothing: the two SEs agree
    log_p, labels, qa, qb = correlated_models(np.random.default_rng(4), 4000, shared=0.0)
    rng = np.random.default_rng(5)
    a = row_values(qa, log_p, labels)["acc"]
    b = row_values(qb, log_p, labels)["acc"][rng.permutation(4000)]
    d = paired_difference(a, b)
    assert abs(d["se"] / (math.hypot(a.std(ddof=1), b.std(ddof=1)) / math.sqrt(4000)) - 1.0) < 0.05


@pytest.fixture
def world_and_predictions(tmp_path):
    rng = np.random.default_rng(6)
    n_world, rows = 400, np.sort(rng.choice(400, N_ROWS, replace=False))
    loglik = rng.normal(size=(n_world, K)) * 2.0
    prior = [0.4, 0.3, 0.2, 0.1]
    labels = rng.integers(0, K, n_world)
    log_p = write_world(tmp_path / "all.h5", loglik, labels, prior)[rows]
    qs, paths = {}, []
    for arch in ("a", "b"):
        for cell in ("N10", "N20", "N40"):
            for seed in (0, 1):
                lq = log_softmax_np(log_p * rng.uniform(0.3, 1.0) + rng.normal(size=(N_ROWS, K)))
                qs[(arch, cell, seed)] = lq
                paths.append(write_classifier(tmp_path / arch / cell / f"{seed}.h5",
                                              {"arch": arch, "cell": cell, "seed": seed}, lq, labels[rows], rows))
    return tmp_path / "all.h5", paths, qs, log_p, labels[rows], rows


def test_pairs_frame_is_the_brute_force_loop_on_the_worlds_posterior(world_and_predictions):
    samples, paths, qs, log_p, labels, _ = world_and_predictions
    wanted = [("a", 0, "N10", "N40"), ("b", 1, "N20", "N10")]
    frame = pairs_frame(paths, samples, wanted, ("acc", "epistemic"))
    assert len(frame) == 4 and set(frame["value"]) == {"acc", "epistemic"} and (frame["n_rows"] == N_ROWS).all()
    for _, r in frame.iterrows():
        mean, se = brute_force(qs[(r["arch"], r["a"], r["seed"])], qs[(r["arch"], r["b"], r["seed"])], log_p, labels,
                               r["value"])
        assert math.isclose(r["diff"], mean, rel_tol=1e-10, abs_tol=1e-14)
        assert math.isclose(r["diff_se"], se, rel_tol=1e-9)
    # the order of a pair: b - a is a - b turned round, with the same SE
    back = pair_rows(frame, "epistemic", "N10", "N20", "b")
    fwd = frame[(frame["value"] == "epistemic") & (frame["arch"] == "b")].iloc[0]
    assert len(back) == 1 and back["diff"].iloc[0] == -fwd["diff"] and back["diff_se"].iloc[0] == fwd["diff_se"]
    assert pair_rows(frame, "epistemic", "N20", "N40").empty


def test_pairs_frame_refuses_predictions_that_do_not_share_the_rows(world_and_predictions, tmp_path):
    samples, paths, qs, log_p, labels, rows = world_and_predictions
    with pytest.raises(DataError, match="no predictions of classifier a/N80/seed0"):
        pairs_frame(paths, samples, [("a", 0, "N10", "N80")])
    other = write_classifier(tmp_path / "x" / "rows.h5", {"arch": "c", "cell": "N10", "seed": 0}, qs[("a", "N10", 0)],
                             labels, rows[::-1])
    with pytest.raises(DataError, match="rows.h5: its test rows"):
        pairs_frame([*paths, other], samples, [])
    wrong = write_classifier(tmp_path / "x" / "labels.h5", {"arch": "c", "cell": "N10", "seed": 0},
                             qs[("a", "N10", 0)], (labels + 1) % K, rows)
    with pytest.raises(DataError, match="labels.h5: its labels are not those of"):
        pairs_frame([*paths, wrong], samples, [])
    with pytest.raises(DataError, match="a second prediction file"):
        pairs_frame([*paths, paths[0]], samples, [])


def test_pairs_carry_the_seed_mean_rows_se_and_give_the_two_way_se_of_the_per_row_array(world_and_predictions):
    """Over a pair's seeds, `over_seeds_and_rows` of the pairs frame is `two_way` of the [seeds,
    rows] array of per-row differences (each variance counted once), per arch and over every arch."""
    from oracle.measures.two_way import two_way
    from oracle.experiments._pairs import over_seeds_and_rows
    from oracle.report.numbers import spread_problems

    samples, paths, qs, log_p, labels, _ = world_and_predictions
    wanted = [(arch, seed, "N10", "N40") for arch in ("a", "b") for seed in (0, 1)]
    frame = pairs_frame(paths, samples, wanted)
    assert set(frame["value"]) == {"acc", "epistemic", "bayes_gap"}

    def per_row(arch, seed, value):
        a = row_values(qs[(arch, "N10", seed)], log_p, labels)[value]
        return a - row_values(qs[(arch, "N40", seed)], log_p, labels)[value]

    for arch in ("a", None):
        units = [(x, s) for x in ("a", "b") if arch in (None, x) for s in (0, 1)]
        rows = pair_rows(frame, "epistemic", "N10", "N40", arch)
        assert len(rows) == len(units)
        got = over_seeds_and_rows(rows, "diff", N_ROWS)
        want = two_way(np.stack([per_row(x, s, "epistemic") for x, s in units]))
        assert got["se"] == pytest.approx(want.se, rel=1e-9) and got["df"] == pytest.approx(want.df, rel=1e-9)
        assert got["var_interaction"] == pytest.approx(want.var_interaction, rel=1e-9)
        assert got["rows_bound"] is False
        assert not spread_problems({"k": {**got, "unit": "nats"}})
    # rows of two groups mixed: refused, not averaged
    with pytest.raises(DataError, match="differs between the rows"):
        over_seeds_and_rows(frame[frame["value"] == "epistemic"], "diff", N_ROWS)
