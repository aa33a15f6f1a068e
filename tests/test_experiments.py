"""oracle.experiments: the logic behind the workflow's scripts, each checked independently."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
import torch

from oracle import experiments as ex
from oracle.errors import ConfigError, DataError, OracleError, WorldError


def log_softmax_np(a: np.ndarray) -> np.ndarray:
    m = a.max(axis=1, keepdims=True)
    return a - m - np.log(np.exp(a - m).sum(axis=1, keepdims=True))


@pytest.fixture
def shard(tmp_path):
    from oracle.io.shards import ShardWriter

    rng = np.random.default_rng(0)
    n, k = 37, 3
    x = rng.normal(size=(n, 1, 2, 2)).astype(np.float32)
    sc = rng.integers(0, k, n)
    ll = rng.normal(size=(n, k)) * 3.0
    path = tmp_path / "shard-0000.h5"
    attrs = {"oracle_sha256": "0" * 64, "prior": [0.2, 0.3, 0.5], "label_temperature": 2.0,
             "base_temperature": 1.0, "seed": 0, "shard": 0, "n_shards": 1, "code_version": "test"}
    with ShardWriter(path, k, (1, 2, 2), attrs, chunk_rows=8) as w:
        w.write(x, sc, ll, np.arange(n))
    return path, x, sc, ll


def test_read_rows_keeps_requested_order_and_duplicates(shard):
    path, x, sc, ll = shard
    idx = np.array([5, 0, 36, 5, 17])
    got = ex.read_rows(path, idx)
    np.testing.assert_array_equal(got["x"], x[idx])
    np.testing.assert_array_equal(got["source_class"], sc[idx])
    np.testing.assert_array_equal(got["loglik"], ll[idx])
    assert got["attrs"]["label_temperature"] == 2.0
    every = ex.read_rows(path, None, fields=("loglik",))
    np.testing.assert_array_equal(every["loglik"], ll)
    with pytest.raises(DataError):
        ex.read_rows(path, np.array([37]))


def test_posterior_rows_is_tempered_bayes_rule(shard):
    path, _, _, ll = shard
    attrs = ex.read_rows(path, None, fields=())["attrs"]
    got = ex.posterior_rows(ll, attrs)
    # p(y|x) ∝ pi_y p(x|y)^(1/T), written out by hand
    w = np.array([0.2, 0.3, 0.5]) * np.exp(ll / 2.0)
    np.testing.assert_allclose(np.exp(got), w / w.sum(axis=1, keepdims=True), rtol=1e-12)


def test_training_targets():
    log_p = np.log(np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]]))
    src = np.array([1, 2])
    np.testing.assert_array_equal(ex.training_targets("hard", "source", src, log_p), [1, 2])
    np.testing.assert_array_equal(ex.training_targets("hard", "posterior_argmax", src, log_p), [0, 2])
    soft = ex.training_targets("soft", "source", src, log_p)
    assert soft.dtype == np.float32
    np.testing.assert_allclose(soft, np.exp(log_p), rtol=1e-6)
    with pytest.raises(ConfigError):
        ex.training_targets("fuzzy", "source", src, log_p)


def test_predictions_roundtrip_and_atomicity(tmp_path):
    lq = log_softmax_np(np.random.default_rng(1).normal(size=(6, 3)))
    path = tmp_path / "predictions.h5"
    ex.write_predictions(path, lq, np.arange(10, 16), np.array([0, 1, 2, 0, 1, 2]), attrs={"arch": "x", "N": 5})
    got = ex.read_predictions(path)
    np.testing.assert_array_equal(got["log_q"], lq)
    np.testing.assert_array_equal(got["index"], np.arange(10, 16))
    assert got["attrs"] == {"arch": "x", "N": 5}
    bad = tmp_path / "bad.h5"
    with pytest.raises(DataError):
        ex.write_predictions(bad, lq, np.arange(5), np.zeros(6))
    assert list(tmp_path.iterdir()) == [path]


def test_world_constants_against_numpy():
    rng = np.random.default_rng(2)
    log_p = log_softmax_np(rng.normal(size=(200, 4)) * 2)
    prior = np.array([0.1, 0.2, 0.3, 0.4])
    got = ex.world_constants(log_p, prior)
    p = np.exp(log_p)
    h = -(p * log_p).sum(axis=1)
    assert math.isclose(got["aleatoric"]["mean"], h.mean(), rel_tol=1e-12)
    assert math.isclose(got["aleatoric"]["se"], h.std(ddof=1) / np.sqrt(200), rel_tol=1e-9)
    assert math.isclose(got["bayes_accuracy"]["mean"], p.max(axis=1).mean(), rel_tol=1e-12)
    assert math.isclose(got["bayes_error"]["mean"], 1 - p.max(axis=1).mean(), rel_tol=1e-9)
    h_y = -(prior * np.log2(prior)).sum()
    assert math.isclose(got["mutual_information"]["bits"], h_y - h.mean() / np.log(2), rel_tol=1e-12)
    assert math.isclose(got["mutual_information"]["normalized"], 1 - h.mean() / np.log(2) / h_y, rel_tol=1e-12)
    assert got["n"] == 200 and got["num_classes"] == 4


def _write_metrics(root, arch, n, seed, epistemic, acc):
    from oracle.classifiers import evaluate_predictions

    rng = np.random.default_rng(n + seed)
    log_p = log_softmax_np(rng.normal(size=(50, 3)))
    log_q = log_softmax_np(rng.normal(size=(50, 3)))
    m = evaluate_predictions(log_q, log_p, rng.integers(0, 3, 50))
    m["epistemic"] = {"mean": epistemic, "se": 0.01}
    m["acc_source"] = {"mean": acc, "se": 0.01}
    path = root / f"{arch}-N{n}-s{seed}.json"
    path.write_text(json.dumps({"experiment": "scaling", "arch": arch, "N": n, "seed": seed, "labels": "hard",
                                "hard_label": "source", "metrics": m, "epochs": 3, "train_seconds": 1.0}))
    return path


@pytest.fixture
def runs(tmp_path):
    """Two archs x 4 N x 3 seeds; epistemic = c * N^-alpha exactly, alpha differs per seed."""
    alphas = {"a": [0.30, 0.32, 0.34], "b": [0.10, 0.10, 0.13]}
    paths = []
    for arch, per_seed in alphas.items():
        for seed, alpha in enumerate(per_seed):
            for n in (10, 100, 1000, 10000):
                paths.append(_write_metrics(tmp_path, arch, n, seed, 2.0 * n ** -alpha, 0.5 + 0.01 * math.log10(n)))
    return ex.collect_metrics(paths), alphas


def test_collect_metrics(runs):
    df, _ = runs
    assert len(df) == 24
    assert {"experiment", "arch", "N", "seed", "epistemic", "epistemic_se", "acc_source", "ece", "source"} <= set(df.columns)
    assert list(df["N"][:4]) == [10, 10, 10, 100]  # sorted by arch, N, seed


def test_collect_metrics_rejects_incomplete(tmp_path):
    p = tmp_path / "m.json"
    p.write_text(json.dumps({"arch": "a"}))
    with pytest.raises(DataError, match="lacks key"):
        ex.collect_metrics([p])


def test_scaling_fits_recover_exponents(runs):
    df, alphas = runs
    fits = ex.scaling_fits(df)
    per_seed = fits[fits["kind"] == "seed"].set_index(["arch", "seed"])
    for arch, values in alphas.items():
        for seed, alpha in enumerate(values):
            assert math.isclose(per_seed.loc[(arch, seed), "alpha"], alpha, rel_tol=1e-9)
        row = fits[(fits["kind"] == "arch") & (fits["arch"] == arch)].iloc[0]
        assert math.isclose(row["alpha"], np.mean(values), rel_tol=1e-9)
        assert math.isclose(row["alpha_std"], np.std(values, ddof=1), rel_tol=1e-6)


def test_scaling_fits_single_n_is_a_note(runs):
    df, _ = runs
    fits = ex.scaling_fits(df[df["N"] == 100])
    assert set(fits["kind"]) == {"arch"} and (fits["note"] == "fewer than two N").all()


def test_select_runs_relabels_and_filters(runs):
    df, _ = runs
    archs = [{"name": "a", "label": "Alpha"}, {"name": "b", "label": "Beta"}]
    sub = ex.select_runs(df, archs, [10, 1000])
    assert set(sub["arch"]) == {"Alpha", "Beta"} and set(sub["N"]) == {10, 1000}
    with pytest.raises(ConfigError, match="'Same'"):
        ex.select_runs(df, [{"name": "a", "label": "Same"}, {"name": "b", "label": "Same"}])
    with pytest.raises(DataError):
        ex.select_runs(df, archs, [7])


def test_build_numbers_and_tex(runs):
    df, alphas = runs
    fits = ex.scaling_fits(df)
    log_p = log_softmax_np(np.random.default_rng(3).normal(size=(100, 3)))
    world = {"all": ex.world_constants(log_p, np.full(3, 1 / 3)), "test": ex.world_constants(log_p[:40], np.full(3, 1 / 3))}
    archs = [{"name": "a", "label": "Alpha"}, {"name": "b", "label": "Beta"}]
    nums = ex.build_numbers(world, "w.json", df, "m.csv", fits, "f.csv", archs)
    assert nums["aleatoric_floor"]["value"] == world["all"]["aleatoric"]["mean"]
    assert nums["aleatoric_floor"]["artifact"] == "w.json" and nums["aleatoric_floor"]["unit"] == "nats"
    assert math.isclose(nums["alpha.a"]["value"], np.mean(alphas["a"]), rel_tol=1e-9)
    assert nums["alpha.a"]["artifact"] == "f.csv" and nums["accuracy.b"]["artifact"] == "m.csv"
    assert math.isclose(nums["epistemic_reduction.a"]["value"], (10 / 10000) ** -np.mean(alphas["a"]), rel_tol=0.05)
    for entry in nums.values():
        assert {"value", "unit", "artifact", "description"} <= set(entry)
    tex = ex.numbers_tex(nums)
    names = re.findall(r"\\newcommand\{\\(\w+)\}", tex)
    assert len(names) == len(nums) == len(set(names))
    assert all(re.fullmatch(r"[A-Za-z]+", n) for n in names)


def test_script_job_turns_oracle_errors_into_one_line(tmp_path, capsys):
    log = tmp_path / "job.log"
    with pytest.raises(SystemExit) as stop:
        with ex.script_job(log):
            print("working")
            raise DataError("data root /x not found: expected <root>/<split>/<class>/")
    assert stop.value.code == 1
    assert "DataError: data root /x not found" in capsys.readouterr().err
    text = log.read_text()
    assert "working" in text and "DataError: data root /x" in text
    with pytest.raises(KeyError):  # bugs keep their traceback
        with ex.script_job(tmp_path / "other.log"):
            raise KeyError("bug")
    assert issubclass(DataError, OracleError)


def test_closed_form_comparison_against_scipy():
    import scipy.stats
    import torch

    from oracle.experiments import closed_form_comparison
    from oracle.worlds import GaussianWorld

    world = GaussianWorld(torch.tensor([[0.0, 0.0], [3.0, 0.0]], dtype=torch.float64), std=1.0)
    exact = scipy.stats.norm.cdf(-1.5)
    near = closed_form_comparison(world, {"bayes_error": {"mean": exact + 0.002, "se": 0.001}, "n": 100})
    assert near["value"] == pytest.approx(exact, abs=1e-12)
    assert near["z"] == pytest.approx(2.0) and near["agrees_within_3se"]
    far = closed_form_comparison(world, {"bayes_error": {"mean": exact + 0.004, "se": 0.001}, "n": 100})
    assert not far["agrees_within_3se"]
    three = GaussianWorld(torch.eye(3, dtype=torch.float64), std=1.0)
    assert closed_form_comparison(three, {"bayes_error": {"mean": 0.1, "se": 0.01}, "n": 10}) is None
