"""oracle.experiments.labels: config checks, cells, the collected data, the paired gains, the
table, Figure 7 and the numbers, against aggregates computed here by hand."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from oracle.classifiers.evaluate import evaluate_predictions
from oracle.errors import ConfigError, DataError
from oracle.experiments import labels
from oracle.experiments.columns import data_problems
from oracle.measures.paired import row_values
from oracle.measures.two_way import two_way
from oracle.report.numbers import SEEDS_AND_ROWS, spread_problems
from paired_rows import brute_force, write_classifier, write_world

REPO = Path(__file__).resolve().parents[1]
DEFAULT = yaml.safe_load((REPO / "config.yaml").read_text())
NS = [100, 300, 1000, 2000]
SEEDS = [0, 1, 2]


def entry(**changes) -> dict:
    out = {"kind": "labels", "world": "tau0.7", "arch": "test_resnet", "sizes": [100, 300, 1000], "seeds": [0, 1]}
    out.update(changes)
    return out


def test_check_fills_defaults():
    spec = labels.check("labels", entry(), DEFAULT)
    assert spec["archs"] == ["test_resnet"] and "arch" not in spec
    assert spec["hard_label"] == "posterior_argmax"  # the paper's one-hot argmax
    assert spec["curve_sizes"] == [100, 300, 1000]
    assert labels.check("labels", entry(sizes=[100, 1000]), DEFAULT)["curve_sizes"] == [100, 1000]
    assert spec["training"] == DEFAULT["classifiers"]["training"] | {}


def test_check_names_bad_keys():
    with pytest.raises(ConfigError, match=r"'experiments\.labels\.curve_sizes'"):
        labels.check("labels", entry(curve_sizes=[200]), DEFAULT)
    with pytest.raises(ConfigError, match=r"'experiments\.labels\.sizes'.*at least two"):
        labels.check("labels", entry(sizes=[100]), DEFAULT)
    with pytest.raises(ConfigError, match=r"'experiments\.labels\.archs'"):
        labels.check("labels", entry(arch="no_such_arch"), DEFAULT)
    hot = copy.deepcopy(DEFAULT)
    hot["worlds"]["base"]["label_temperature"] = 3.0
    with pytest.raises(ConfigError, match=r"'experiments\.labels\.hard_label'"):
        labels.check("labels", entry(hard_label="source"), hot)


def test_cells_and_training_specs():
    spec = labels.check("labels", entry(), DEFAULT)
    runs = labels.classifier_runs(spec)
    assert len(runs) == 3 * 2 * 2 and len({(r["cell"], r["seed"]) for r in runs}) == len(runs)
    assert {r["cell"] for r in runs} == {f"{m}-N{n}" for m in ("hard", "soft") for n in (100, 300, 1000)}
    hard, soft = labels.training_spec(spec, "hard-N300"), labels.training_spec(spec, "soft-N300")
    assert hard["n"] == soft["n"] == 300 and hard["world"] == soft["world"] == "tau0.7"
    assert (hard["labels"], hard["hard_label"]) == ("hard", "posterior_argmax")
    assert (soft["labels"], soft["hard_label"]) == ("soft", None)
    assert labels.parse_cell(labels.cell_name("soft", 5000)) == ("soft", 5000)
    with pytest.raises(ConfigError, match="hard-N<size>"):
        labels.training_spec(spec, "N300")


def _log_softmax(a):
    m = a.max(axis=1, keepdims=True)
    return a - m - np.log(np.exp(a - m).sum(axis=1, keepdims=True))


MODES_SEED = {"hard": 0, "soft": 1}


#: The world's 60 test rows: log p(x|k), prior, labels (y ~ p(y|x)) and the posterior.
_WORLD_RNG = np.random.default_rng(21)
WORLD_LOGLIK, WORLD_PRIOR = 2 * _WORLD_RNG.normal(size=(60, 3)), [0.4, 0.35, 0.25]
WORLD_LOG_P = _log_softmax(WORLD_LOGLIK + np.log(WORLD_PRIOR))
WORLD_Y = np.array([_WORLD_RNG.choice(3, p=row) for row in np.exp(WORLD_LOG_P)])


def _write_classifier(root: Path, mode: str, n: int, seed: int) -> tuple[Path, Path, Path, np.ndarray]:
    """A metrics file from real evaluate_predictions output on the world's test rows, the
    predictions it was computed from and a training history; and the classifier's log q."""
    rng = np.random.default_rng([MODES_SEED[mode], n, seed])  # not hash(): str hashes differ per process
    log_p, y = WORLD_LOG_P, WORLD_Y
    sharp = 3.0 if mode == "hard" else 1.0
    log_q = _log_softmax(sharp * (log_p + rng.normal(0, 1.0 / math.sqrt(n / 100), size=(60, 3))))
    ident = {"experiment": "labels", "arch": "test_resnet", "cell": f"{mode}-N{n}", "seed": seed, "N": n,
             "labels": mode, "hard_label": "posterior_argmax" if mode == "hard" else None}
    metrics = root / f"{mode}-{n}-{seed}.json"
    metrics.write_text(json.dumps({**ident, "evalset": "base", "metrics": evaluate_predictions(log_q, log_p, y),
                                   "epochs": 4, "train_seconds": 1.0}))
    predictions = write_classifier(root / f"{mode}-{n}-{seed}.h5", ident, log_q, y, np.arange(60))
    history = root / f"{mode}-{n}-{seed}.history.json"
    records = [{"epoch": e, "train_loss": 1.0 / e, "lr": 1e-3, "seconds": 0.1, "curve_acc": 0.5 + 0.05 * e,
                "curve_epistemic": 0.3 / e} for e in range(1, 5)]
    history.write_text(json.dumps({**ident, "history": records}))
    return metrics, history, predictions, log_q


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    root = tmp_path_factory.mktemp("labels")
    write_world(root / "all.h5", WORLD_LOGLIK, WORLD_Y, WORLD_PRIOR)
    files = {(m, n, s): _write_classifier(root, m, n, s) for n in NS for m in ("hard", "soft") for s in SEEDS}
    spec = labels.check("labels", entry(sizes=NS, seeds=SEEDS), DEFAULT)
    data = labels.collect(spec, {"metrics": [f[0] for f in files.values()], "histories": [f[1] for f in files.values()],
                                 "predictions": [f[2] for f in files.values()], "samples": [root / "all.h5"]})
    return spec, data, {k: f[3] for k, f in files.items()}


def test_collect_reads_runs_curves_and_reliability(collected):
    spec, data, _ = collected
    runs, curves, rel = data["runs"], data["curves"], data["reliability"]
    assert len(runs) == len(NS) * 2 * len(SEEDS) and set(runs["labels"]) == {"hard", "soft"}
    assert len(curves) == len(runs) * 4 and {"curve_acc", "curve_epistemic", "epoch"} <= set(curves.columns)
    assert len(rel) == len(runs) * 10 and (rel.groupby(["cell", "seed"])["count"].sum() == 60).all()


def test_gain_is_paired_per_test_row_with_a_rows_part(collected):
    """soft - hard per N and seed: the correctness difference paired on the shared test rows (a
    loop over rows computes the same), and gain.N<n> holds the rows' part beside the seeds'."""
    spec, data, log_qs = collected
    pairs = data["pairs"]
    assert len(pairs) == len(NS) * len(SEEDS) and set(pairs["value"]) == {"acc"}
    for _, r in pairs.iterrows():
        n = int(r["a"].split("-N")[1])
        assert (r["a"], r["b"]) == (f"soft-N{n}", f"hard-N{n}")
        mean, se = brute_force(log_qs[("soft", n, r["seed"])], log_qs[("hard", n, r["seed"])], WORLD_LOG_P, WORLD_Y,
                               "acc")
        assert math.isclose(r["diff"], mean, abs_tol=1e-15) and math.isclose(r["diff_se"], se, rel_tol=1e-9)
    nums = labels.numbers(data, spec, {d: f"{d}.csv" for d in labels.DATA})
    runs = data["runs"]
    for n in NS:
        g, at = nums[f"gain.N{n}"], pairs[pairs["a"] == f"soft-N{n}"]
        assert g["se_over"] == SEEDS_AND_ROWS and g["artifact"] == "pairs.csv"
        # the two-way (seed x test row) SE of the [seeds, rows] array of per-row soft - hard correctness, in pp
        per_row = [row_values(log_qs[("soft", n, sd)], WORLD_LOG_P, WORLD_Y)["acc"]
                   - row_values(log_qs[("hard", n, sd)], WORLD_LOG_P, WORLD_Y)["acc"] for sd in sorted(at["seed"])]
        tw = two_way(100 * np.stack(per_row))
        assert math.isclose(g["se"], tw.se, rel_tol=1e-9) and math.isclose(g["var_rows"], tw.var_rows, rel_tol=1e-9)
        # the rows' part paired: at most the unpaired hypot of the two arms' test-set SEs
        arms = [runs[(runs["cell"] == f"{m}-N{n}")]["acc_se"].mean() for m in ("soft", "hard")]
        assert g["se_rows_part"] <= 100 * math.hypot(*arms) + 1e-12


def test_collect_needs_training_curves(tmp_path):
    m, h, _, _ = _write_classifier(tmp_path, "hard", 100, 0)
    blob = json.loads(h.read_text())
    for r in blob["history"]:
        del r["curve_acc"], r["curve_epistemic"]
    h.write_text(json.dumps(blob))
    with pytest.raises(DataError, match="curve_size"):
        labels.collect({}, {"metrics": [m], "histories": [h]})


def test_gains_are_paired_by_seed(collected):
    runs = collected[1]["runs"]
    gains = labels.paired_gains(runs)
    for _, g in gains.iterrows():
        pick = runs[(runs["N"] == g["N"]) & (runs["seed"] == g["seed"])].set_index("labels")["acc"]
        assert g["gain"] == pytest.approx(pick["soft"] - pick["hard"], abs=1e-15)
    summary = labels.gain_summary(runs).set_index("N")
    for n in NS:
        per_seed = gains[gains["N"] == n]["gain"].to_numpy()
        assert summary.loc[n, "gain"] == pytest.approx(per_seed.mean(), abs=1e-15)
        assert summary.loc[n, "gain_std"] == pytest.approx(per_seed.std(ddof=1), abs=1e-15)
        assert bool(summary.loc[n, "soft_wins"]) == (per_seed.mean() > 0)
    with pytest.raises(DataError, match="arm"):
        labels.paired_gains(runs[~((runs["labels"] == "soft") & (runs["N"] == 300) & (runs["seed"] == 1))])


def test_table_equals_seed_aggregates(collected):
    spec, data, _ = collected
    t = labels.table("label_comparison", data, spec)
    runs = data["runs"]
    assert len(t) == 2 * len(NS)
    row = t[(t["Labels"] == "soft") & (t["N"] == 300)].iloc[0]
    at = runs[(runs["labels"] == "soft") & (runs["N"] == 300)]
    assert row["Accuracy (%)"] == pytest.approx(100 * at["acc"].mean(), abs=1e-12)
    assert row["Epistemic KL (nats)"] == pytest.approx(at["epistemic"].mean(), abs=1e-15)
    assert row["ECE"] == pytest.approx(at["ece"].mean(), abs=1e-15)
    assert row["True ECE"] == pytest.approx(at["ece_posterior"].mean(), abs=1e-15)
    assert row["True ECE std"] == pytest.approx(at["ece_posterior"].std(ddof=1), abs=1e-15)
    with pytest.raises(DataError, match="label_comparison"):
        labels.table("table9", data, spec)


def test_figures_write_pdf_and_png(collected, tmp_path):
    spec, data, _ = collected
    for name in ("soft_vs_hard", "reliability", "calibration_agreement"):
        paths = labels.figure(name, data, spec, tmp_path / name)
        assert paths["pdf"].read_bytes()[:5] == b"%PDF-"
        with Image.open(paths["png"]) as im:
            assert im.size[0] > 300 and im.size[1] > 200
    with pytest.raises(DataError, match="soft_vs_hard"):
        labels.figure("fig9", data, spec, tmp_path / "x")


def test_numbers_count_wins_and_name_the_largest_gain(collected):
    spec, data, _ = collected
    runs = data["runs"]
    nums = labels.numbers(data, spec, {d: f"{d}.csv" for d in labels.DATA})
    assert spread_problems(nums) == []  # every mean over seeds: std, se, se_over, n_seeds
    means = runs.groupby(["N", "labels"])["acc"].mean().unstack()
    gain = means["soft"] - means["hard"]
    assert nums["soft_wins"]["value"] == int((gain > 1e-12).sum()) and nums["n_sizes"]["value"] == len(NS)
    assert nums["largest_gain"]["value"] == pytest.approx(100 * gain.max(), abs=1e-10)
    named = int(nums["largest_gain"]["description"].rsplit("N=", 1)[1])
    assert gain[named] == pytest.approx(gain.max(), abs=1e-12)  # accuracies in 1/60 steps: sizes can tie
    for n in NS:
        assert nums[f"gain.N{n}"]["value"] == pytest.approx(100 * gain[n], abs=1e-10)
        assert nums[f"gain.N{n}"]["n_seeds"] == len(SEEDS)
    soft_max = runs[(runs["labels"] == "soft") & (runs["N"] == max(NS))]
    assert nums["ece_soft_max_n"]["value"] == pytest.approx(soft_max["ece"].mean(), abs=1e-15)
    assert nums["true_ece_soft_max_n"]["value"] == pytest.approx(soft_max["ece_posterior"].mean(), abs=1e-15)
    assert nums["ece_soft_max_n"]["std"] == pytest.approx(soft_max["ece"].std(ddof=1), abs=1e-15)
    assert nums["calibration.n_classifiers"]["value"] == len(runs)
    for e in nums.values():
        assert {"value", "unit", "artifact", "description"} <= set(e)


def test_data_columns_are_described(collected):
    """Every column labels's collect writes is in the column dictionary (docs/outputs.md) and nothing else is."""
    problems = data_problems("labels", {name: list(frame.columns) for name, frame in collected[1].items()})
    assert not problems, problems
