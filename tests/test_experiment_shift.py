"""oracle.experiments.shift: configurations from the config, the training spec of each, the data
collected from metrics, histories, divergence checks and noisy-set constants, and Tables 7-9,
Figure 3 and the numbers, each against aggregates computed here by hand."""

from __future__ import annotations

import copy
import json
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from oracle.errors import ConfigError
from oracle.io.splits import write_splits_h5
from oracle.experiments import shift
from oracle.experiments.columns import data_problems
from oracle.report.columns import METRIC_COLUMNS
from oracle.measures.divergences import label_kl, tau_kl
from oracle.measures.two_way import two_way
from oracle.report.numbers import SEEDS_AND_ROWS, spread_problems
from paired_rows import write_classifier, write_world
from tests.test_experiment_kinds import DEFAULT

PAPER = {  # Table 7 / 8 style: name -> (prior, sigma, world, accuracy per seed)
    "balanced": ([0.33, 0.33, 0.34], 0.0, "base", [0.977, 0.976, 0.978]),
    "imb70": ([0.7, 0.2, 0.1], 0.0, "base", [0.974, 0.975, 0.973]),
    "imb50": ([0.5, 0.3, 0.2], 0.0, "base", [0.975, 0.974, 0.976]),
    "noise0.1": ([0.33, 0.33, 0.34], 0.1, "base", [0.96, 0.95, 0.965]),
    "noise0.15": ([0.33, 0.33, 0.34], 0.15, "base", [0.8, 0.7, 0.85]),
    "imb50-noise": ([0.5, 0.3, 0.2], 0.05, "base", [0.97, 0.968, 0.972]),
    "tau": (None, 0.0, "tau0.9", [0.95, 0.94, 0.955]),
}
SEEDS = [0, 1, 2]


def config():
    cfg = copy.deepcopy(DEFAULT)
    cfg["worlds"] = {"base": {"prior": None, "label_temperature": 1.0, "base_temperature": 1.0},
                     "tau0.9": {"base_temperature": 0.9, "n_total": 2000, "test_size": 500}}
    cfg["experiments"] = {"sh": {
        "kind": "shift", "world": "base", "archs": ["test_resnet"], "size": 1000, "val_fraction": 0.2,
        "seeds": SEEDS, "labels": "hard", "baseline": "balanced",
        "configurations": {n: {"prior": p, "noise_std": s, **({"world": w} if w != "base" else {})}
                           for n, (p, s, w, _) in PAPER.items()}}}
    return cfg


def spec():
    cfg = config()
    return shift.check("sh", copy.deepcopy(cfg["experiments"]["sh"]), cfg)


def test_check_fills_defaults_and_training_specs():
    s = spec()
    assert s["labels"] == "hard" and s["sizes"] == [1000] and s["configurations"]["tau"]["world"] == "tau0.9"
    assert s["configurations"]["balanced"]["label"] == "balanced"
    t = shift.training_spec(s, "imb70")
    assert (t["world"], t["n"], t["class_prior"], t["noise_std"], t["val_fraction"]) == ("base", 1000, [0.7, 0.2, 0.1], 0.0, 0.2)
    assert shift.training_spec(s, "tau")["world"] == "tau0.9" and shift.training_spec(s, "tau")["class_prior"] is None
    assert len(shift.classifier_runs(s)) == len(PAPER) * len(SEEDS)
    assert shift.evaluation_sets(s) == ["base"]
    assert shift.variant_worlds(s) == ["tau0.9"] and shift.noise_levels(s) == [0.05, 0.1, 0.15]
    types = {c: shift.shift_type(s, c) for c in PAPER}
    assert types == {"balanced": "baseline", "imb70": "prior", "imb50": "prior", "noise0.1": "noise",
                     "noise0.15": "noise", "imb50-noise": "prior+noise", "tau": "variant"}


@pytest.mark.parametrize("change,match", [
    (lambda e: e.update(baseline="nope"), r"'experiments\.sh\.baseline'"),
    (lambda e: e["configurations"]["imb70"].update(prior=[0.7, 0.2, 0.2]), r"configurations\.imb70\.prior': must sum"),
    (lambda e: e["configurations"]["tau"].update(world="nowhere"), r"configurations\.tau\.world': no world"),
    (lambda e: e.update(size=1501), r"'experiments\.sh\.size': N=1501 exceeds the training pool of world 'tau0.9'"),
    (lambda e: e.update(archs=["nope"]), r"'experiments\.sh\.archs'"),
    (lambda e: e["configurations"]["imb70"].update(world="sub"),
     r"configurations\.imb70\.prior': puts mass on class\(es\) \[2\], which world 'sub' never draws"),
])
def test_check_names_the_bad_key(change, match):
    cfg = config()
    cfg["worlds"]["sub"] = {"base_temperature": 1.0, "prior": [0.5, 0.5, 0.0]}
    change(cfg["experiments"]["sh"])
    with pytest.raises(ConfigError, match=match):
        shift.check("sh", copy.deepcopy(cfg["experiments"]["sh"]), cfg)


def counts_of(prior, seed):
    return [int(round(1000 * p)) + d for p, d in zip(prior, (seed, -seed, 0))]


TEST_ROWS = 2000


def fixture_world():
    """The fixture's test rows: log p(x|y) [n, 3], labels [n], the order in which classifiers get
    them right, and each row's confidence in its predicted class (0.4 to 0.9: prior adjustment
    moves the less confident rows)."""
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 3, TEST_ROWS)
    loglik = rng.normal(size=(TEST_ROWS, 3))
    return loglik, labels, rng.permutation(TEST_ROWS), 0.4 + 0.5 * rng.random(TEST_ROWS)


def pool_world():
    """The tau0.9 world's labels [2000] and splits (500 test rows, a pool order of 1500 per
    seed): the "tau" configuration trains on the pool's first 1000 rows."""
    from oracle.io.splits import make_splits

    labels = np.random.default_rng(8).choice(3, size=2000, p=[0.5, 0.3, 0.2])
    return labels, make_splits(2000, 500, SEEDS)


def _log_q(acc):
    """Log-probabilities right (argmax = label) on exactly round(acc * rows) test rows: the easiest
    rows of one shared order, so two classifiers' errors share their rows, as on real test sets."""
    _, labels, order, confidence = fixture_world()
    right = np.zeros(TEST_ROWS, bool)
    right[order[: round(acc * TEST_ROWS)]] = True
    guess = np.where(right, labels, (labels + 1) % 3)
    q = np.repeat(((1 - confidence) / 2)[:, None], 3, axis=1)
    q[np.arange(TEST_ROWS), guess] = confidence
    return np.log(q), labels


def _predictions(root, cell, seed, acc):
    log_q, labels = _log_q(acc)
    ident = {"experiment": "sh", "arch": "test_resnet", "cell": cell, "seed": seed, "evalset": "base"}
    return str(write_classifier(root / f"p-{cell}-{seed}.h5", ident, log_q, labels, np.arange(TEST_ROWS)))


@pytest.fixture
def collected(tmp_path):
    return collect_fixture(tmp_path, spec())


def collect_fixture(tmp_path, s):
    """The fixture's inputs written under `tmp_path`, collected for spec `s`: (s, data read back from CSV)."""
    metrics, histories, predictions = [], [], []
    loglik, labels, _, _ = fixture_world()
    write_world(tmp_path / "all.h5", loglik, labels, [1 / 3, 1 / 3, 1 / 3])
    pool_labels, pool_splits = pool_world()
    write_world(tmp_path / "tau0.9.h5", np.zeros((2000, 3)), pool_labels, [1 / 3, 1 / 3, 1 / 3])
    write_splits_h5(tmp_path / "tau0.9-splits.h5", pool_splits)
    for cell, (prior, _, _, accs) in PAPER.items():
        for seed, acc in zip(SEEDS, accs):
            m = tmp_path / f"m-{cell}-{seed}.json"
            m.write_text(json.dumps({
                "experiment": "sh", "arch": "test_resnet", "cell": cell, "seed": seed, "evalset": "base", "N": 1000,
                "labels": "hard", "hard_label": "label", "epochs": 3, "train_seconds": 1.0,
                "metrics": {"acc": {"mean": acc, "se": 0.003}, "bayes_accuracy": {"mean": 0.998, "se": 0.001},
                            "num_classes": 3, "n": 2000}}))
            h = tmp_path / f"h-{cell}-{seed}.json"
            shift_info = {"counts": counts_of(prior, seed), "unique_rows": 990, "resampled": []} if prior else {}
            h.write_text(json.dumps({"arch": "test_resnet", "cell": cell, "seed": seed,
                                     "history": [{"val_acc": 0.5}, {"val_acc": acc + 0.005}], "shift": shift_info}))
            metrics.append(str(m))
            histories.append(str(h))
            predictions.append(_predictions(tmp_path, cell, seed, acc))
    div = tmp_path / "kl.json"
    div.write_text(json.dumps({"world": "tau0.9", "closed_form": {"prior": 0.0, "tau": tau_kl(64, 0.9), "total": tau_kl(64, 0.9)},
                               "monte_carlo": {"mean": 0.65, "se": 0.02, "n": 4096}, "z": -0.6}))
    noise = []
    for sigma in (0.05, 0.1, 0.15):
        p = tmp_path / f"noise{sigma}.json"
        p.write_text(json.dumps({"sigma": sigma, "posterior_shift": {"mean": sigma * 2, "se": 0.01},
                                 "oracle_accuracy_noisy": {"mean": 1 - sigma, "se": 0.004}}))
        noise.append(str(p))
    data = shift.collect(s, {"metrics": metrics, "histories": histories, "divergences": [str(div)], "noise": noise,
                             "predictions": predictions, "samples": [tmp_path / "all.h5"],
                             "pool_splits": [tmp_path / "tau0.9-splits.h5"], "pool_samples": [tmp_path / "tau0.9.h5"]})
    return s, csv_roundtrip(data, tmp_path)


def csv_roundtrip(data, tmp_path):
    """The data as the table, figure and numbers jobs see it: written to CSV and read back."""
    out = {}
    for name, frame in data.items():
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
        out[name] = pd.read_csv(tmp_path / f"{name}.csv")
    return out


def test_configurations_against_hand_aggregates(collected):
    s, data = collected
    c = data["configurations"].set_index("cell")
    base = np.mean(PAPER["balanced"][3])
    for cell, (prior, sigma, world, accs) in PAPER.items():
        r = c.loc[cell]
        assert r["acc"] == pytest.approx(np.mean(accs), abs=1e-12)
        assert r["acc_std"] == pytest.approx(np.std(accs, ddof=1), abs=1e-12)
        assert r["delta_pp"] == pytest.approx(100 * (np.mean(accs) - base), abs=1e-9)
        assert r["val_acc"] == pytest.approx(np.mean(accs) + 0.005, abs=1e-12)
        if prior is not None:
            kl = [sum(c_ / 1000 * math.log(c_ / 1000 * 3) for c_ in counts_of(prior, sd)) for sd in SEEDS]
            assert r["kl_y_target"] == pytest.approx(label_kl(prior), abs=1e-14)
            assert r["kl_y_empirical"] == pytest.approx(np.mean(kl), abs=1e-12)
            assert r["kl_y_empirical_std"] == pytest.approx(np.std(kl, ddof=1), abs=1e-12)
        if sigma > 0:
            assert math.isnan(r["kl_exact"])  # noise has no tractable density
            assert r["posterior_shift"] == pytest.approx(2 * sigma) and r["oracle_acc_noisy"] == pytest.approx(1 - sigma)
        elif world == "base":
            assert r["kl_exact"] == pytest.approx(label_kl(prior), abs=1e-14)  # the world's prior is uniform
    assert c.loc["tau", "kl_exact"] == pytest.approx(tau_kl(64, 0.9)) and c.loc["tau", "kl_monte_carlo"] == 0.65
    runs = data["runs"]
    assert len(runs) == len(PAPER) * len(SEEDS) and set(runs["shift_type"]) == set(shift.TYPES[:5])


def _train_prior(prior):
    return prior if prior is not None else [1 / 3] * 3  # the tau0.9 variant keeps the uniform prior


def test_prior_columns_against_loops(collected):
    """Per configuration: the Bayes cost of its training prior on the test rows (loops over rows
    and classes), the smallest class of its realised counts over seeds, and the logit-adjusted
    accuracy (argmax of log q - log pi_train + log(1/3), loops) of each run, aggregated by hand."""
    _, data = collected
    c, runs = data["configurations"].set_index("cell"), data["runs"]
    loglik, labels, _, _ = fixture_world()
    moved = 0
    for cell, (prior, _, _, accs) in PAPER.items():
        pi = _train_prior(prior)
        cost = []
        for row in loglik:  # the world's prior is uniform: p(y|x) ∝ p(x|y), the rule under pi ∝ p(x|y) pi(y)
            p = [math.exp(v) / sum(math.exp(u) for u in row) for v in row]
            rule = max(range(3), key=lambda y: (p[y] * pi[y], -y))
            cost.append(max(p) - p[rule])
        assert c.loc[cell, "bayes_cost_pp"] == pytest.approx(100 * np.mean(cost), abs=1e-10)
        assert c.loc[cell, "bayes_cost_se_pp"] == pytest.approx(100 * np.std(cost, ddof=1) / math.sqrt(TEST_ROWS),
                                                                abs=1e-10)
        adjusted = []
        for seed, acc in zip(SEEDS, accs):
            log_q, _ = _log_q(acc)
            hits = [max(range(3), key=lambda y: (q[y] - math.log(pi[y]) + math.log(1 / 3), -y)) == lab
                    for q, lab in zip(log_q.tolist(), labels.tolist())]
            moved += sum(hits) != round(acc * TEST_ROWS)
            run = runs[(runs["cell"] == cell) & (runs["seed"] == seed)].iloc[0]
            assert run["acc_adjusted"] == pytest.approx(np.mean(hits), abs=1e-12)
            assert run["acc_adjusted_se"] == pytest.approx(np.std(hits, ddof=1) / math.sqrt(TEST_ROWS), abs=1e-12)
            adjusted.append(np.mean(hits))
        assert c.loc[cell, "acc_adjusted"] == pytest.approx(np.mean(adjusted), abs=1e-12)
        assert c.loc[cell, "acc_adjusted_std"] == pytest.approx(np.std(adjusted, ddof=1), abs=1e-12)
        if prior is not None:
            smallest = [min(counts_of(prior, sd)) for sd in SEEDS]
        else:  # the pool's first 1000 rows of each seed's order, counted here
            pool_labels, pool_splits = pool_world()
            smallest = [min(Counter(pool_labels[pool_splits["order"][sd][:1000]].tolist()).values()) for sd in SEEDS]
            assert len(set(smallest)) > 1  # the seeds' orders differ: the count is per seed
        assert c.loc[cell, "smallest_class_rows_min"] == min(smallest)
        assert c.loc[cell, "smallest_class_rows_max"] == max(smallest)
    base = np.mean(c.loc["balanced", "acc_adjusted"])
    assert c["delta_adjusted_pp"].to_numpy() == pytest.approx(100 * (c["acc_adjusted"].to_numpy() - base), abs=1e-9)
    assert moved > 0  # the adjustment changed some run's predictions: the check above is not raw accuracy again
    assert c.loc["imb70", "bayes_cost_pp"] > c.loc["imb50", "bayes_cost_pp"] > 0 == c.loc["tau", "bayes_cost_pp"]


def test_tables_7_8_9(collected):
    s, data = collected
    t7 = shift.table("shift_configurations", data, s)
    assert list(t7["Configuration"]) == list(PAPER) and t7.loc[0, "pi"] == "(0.33, 0.33, 0.34)"
    assert t7.loc[6, "pi"] == "(pool)" and t7.loc[0, "KL_y (target)"] == pytest.approx(1.0e-4, rel=5e-3)
    # counts_of: the balanced prior's smallest class has 330 - seed rows, 70/20/10's 100 at every seed
    assert t7.loc[0, "Smallest class (rows)"] == "328–330" and t7.loc[1, "Smallest class (rows)"] == "100"
    lo, hi = data["configurations"].loc[6, ["smallest_class_rows_min", "smallest_class_rows_max"]]
    assert t7.loc[6, "Smallest class (rows)"] == f"{lo:.0f}–{hi:.0f}"  # the pool's rows, counted by collect
    assert t7["Bayes cost of pi (pp)"].tolist() == data["configurations"]["bayes_cost_pp"].tolist()
    t8 = shift.table("shift_accuracy", data, s)
    assert t8.loc[0, "Δ TestAcc (pp)"] == 0.0 and t8.loc[0, "Δ adjusted (pp)"] == 0.0
    assert t8["Logit-adjusted Acc (%)"].tolist() == pytest.approx((100 * data["configurations"]["acc_adjusted"]).tolist())
    assert t8["Test Error (%)"].to_numpy() == pytest.approx(100 - t8["Test Acc (%)"].to_numpy())
    t9 = shift.table("shift_axes", data, s)
    assert list(t9["Prior config"].dropna()) == ["balanced", "imb70", "imb50"]
    assert list(t9["sigma"].dropna()) == [0.1, 0.15]  # noise only, with the baseline prior; sorted by sigma
    assert t9["Oracle acc on x' (%)"].dropna().tolist() == pytest.approx([90.0, 85.0])


def test_drop_fits_and_numbers(collected, tmp_path):
    s, data = collected
    c = data["configurations"]
    fits = shift.drop_fits(c)
    paper = c[~c["shift_type"].str.startswith("variant")]
    x, y = paper["kl_y_empirical"].to_numpy(), -paper["delta_pp"].to_numpy()
    assert fits["kl_y"]["n"] == 6 and fits["kl_y"]["r2"] == pytest.approx(np.corrcoef(x, y)[0, 1] ** 2, rel=1e-9)
    ex = c[np.isfinite(c["kl_exact"])]
    assert fits["exact"]["n"] == 4  # balanced, two imbalances, the tau variant
    assert fits["exact"]["r2"] == pytest.approx(np.corrcoef(ex["kl_exact"], -ex["delta_pp"])[0, 1] ** 2, rel=1e-9)
    nums = shift.numbers(data, s, {"runs": "runs.csv", "configurations": "conf.csv", "pairs": "pairs.csv"})
    assert spread_problems(nums) == []  # every mean over seeds: std, se, se_over, n_seeds
    assert nums["r2_drop_vs_kl_y"]["value"] == pytest.approx(fits["kl_y"]["r2"])
    assert nums["accuracy.noise0.15"]["value"] == pytest.approx(np.mean(PAPER["noise0.15"][3]))
    assert nums["kl_exact.tau"]["value"] == pytest.approx(tau_kl(64, 0.9))
    assert nums["kl_monte_carlo.tau"]["se"] == 0.02 and nums["posterior_shift.noise0.1"]["unit"] == "nats"
    assert "kl_exact.noise0.1" not in nums and nums["oracle_accuracy_noisy.noise0.1"]["unit"] == "fraction"
    assert all(e["artifact"] == "pairs.csv" if k.endswith("_vs_imbalance") else e["artifact"] == "conf.csv"
               for k, e in nums.items())
    # no wall-clock number among them: identical reruns give identical numbers
    assert "seed_job_s" not in nums
    # the imbalance arm (the prior-only configuration of the largest drop) and its smallest class
    prior = c[(c["shift_type"] == "prior") & np.isfinite(c["kl_exact"])]
    arm = prior.loc[(-prior["delta_pp"]).idxmax()]
    assert nums["noise_vs_imbalance_smallest_class"]["value"] == int(arm["smallest_class_rows_min"])
    assert arm["label"] in nums["noise_vs_imbalance_smallest_class"]["description"]
    paths = shift.figure("shift_panels", data, s, tmp_path / "fig3")
    assert paths["pdf"].read_bytes().startswith(b"%PDF") and paths["png"].stat().st_size > 20_000


def test_type_comparisons_pair_the_two_configurations_per_test_row(collected):
    """noise_vs_imbalance: acc(imbalance) - acc(noise) per seed, paired on the baseline's test rows
    (the classifiers' errors share rows): the rows' part is the mean of the paired SEs, well below
    the unpaired hypot of the two configurations' test-set SEs."""
    s, data = collected
    pairs = data["pairs"]
    cells = list(PAPER)
    assert len(pairs) == len(SEEDS) * len(cells) * (len(cells) - 1) // 2 and set(pairs["value"]) == {"acc"}
    for _, r in pairs.iterrows():  # each pair's mean difference is the two accuracies' difference
        acc = {c: PAPER[c][3][SEEDS.index(r["seed"])] for c in (r["a"], r["b"])}
        assert r["diff"] == pytest.approx(acc[r["a"]] - acc[r["b"]], abs=1e-12)
    nums = shift.numbers(data, s, {"runs": "runs.csv", "configurations": "conf.csv", "pairs": "pairs.csv"})
    d = nums["noise_vs_imbalance"]
    # the noise-only configuration with the largest drop (noise0.15) against the prior-only one (imb70)
    imb, noise = np.array(PAPER["imb70"][3]), np.array(PAPER["noise0.15"][3])
    assert d["value"] == pytest.approx(100 * (imb - noise).mean(), abs=1e-9) and d["se_over"] == SEEDS_AND_ROWS
    # the two-way (seed x test row) SE of the [seeds, rows] array of per-row correctness differences, in pp
    correct = {a: [(_log_q(acc)[0].argmax(1) == _log_q(acc)[1]).astype(float) for acc in PAPER[a][3]]
               for a in ("imb70", "noise0.15")}
    tw = two_way(100 * (np.stack(correct["imb70"]) - np.stack(correct["noise0.15"])))
    assert d["se"] == pytest.approx(tw.se, rel=1e-9) and d["df"] == pytest.approx(tw.df, rel=1e-9)
    assert d["rows_bound"] is False and not spread_problems({"d": d})
    unpaired = 100 * math.hypot(np.mean(np.sqrt(imb * (1 - imb) / TEST_ROWS)),
                                np.mean(np.sqrt(noise * (1 - noise) / TEST_ROWS)))
    # the rows' share paired: well below the two arms' unpaired test-set SEs (0.78 against 0.97 pp)
    assert math.hypot(d["se_rows_part"], d["se_interaction_part"]) < 0.9 * unpaired


def test_paper_preset_has_the_ten_configurations_of_table_7():
    from pathlib import Path

    import yaml

    afhq = yaml.safe_load((Path(__file__).resolve().parents[1] / "presets" / "afhq256.yaml").read_text())
    e = afhq["experiments"]["shift"]
    confs = e["configurations"]
    got = {(tuple(c["prior"]), c.get("noise_std", 0.0)) for c in confs.values()}
    balanced = (0.33, 0.33, 0.34)
    want = {(balanced, 0.0), ((0.4, 0.35, 0.25), 0.0), ((0.5, 0.3, 0.2), 0.0), ((0.6, 0.25, 0.15), 0.0),
            ((0.7, 0.2, 0.1), 0.0), (balanced, 0.05), (balanced, 0.1), (balanced, 0.15), ((0.5, 0.3, 0.2), 0.05),
            ((0.7, 0.2, 0.1), 0.1)}
    assert len(confs) == 10 and got == want
    # Table 6: ResNet-50, 5,000 samples, 80/20, AdamW (wd 0.01), lr 1e-4, cosine over 40 epochs, batch 32, 3 seeds
    assert e["size"] == 5000 and e["val_fraction"] == 0.2 and len(e["seeds"]) == 3 and len(e["archs"]) == 1
    assert afhq["classifiers"]["archs"][e["archs"][0]].get("model", e["archs"][0]) == "resnet50"
    tr = {**afhq["classifiers"]["training"], **(e.get("training") or {})}
    assert (tr["epochs"], tr["batch_size"], tr["lr"], tr["weight_decay"], tr["min_steps"]) == (40, 32, 1e-4, 0.01, 0)
    assert {afhq["paper"][k] for k in ("table7", "table8", "table9", "fig3")} == {
        "shift/shift_configurations", "shift/shift_accuracy", "shift/shift_axes", "shift/shift_panels"}


def test_panels_dodge_only_points_at_nearly_the_same_kl():
    from oracle.experiments.shift.panels import _dodge

    # baseline and two noise configurations at KL_y ~ 0.01, two prior shifts apart from them
    offsets = _dodge(np.array([0.010, 0.30, 0.012, 0.09, 0.011]), step=8.0)
    assert offsets.tolist() == [-8.0, 0.0, 8.0, 0.0, 0.0]


def test_panels_draw_every_dodged_marker_inside_its_axes(collected, monkeypatch, tmp_path):
    """Four configurations at KL_y ~ 0, the smallest KL of the axis (the cpu-study's shift-3class
    has the baseline and three noise levels there): dodged side by side, the outermost markers
    stay inside panels (a) and (b) (offsets in points ran past the axis limits and were cut off)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from oracle.experiments.shift import panels

    _, data = collected
    conf = data["configurations"].copy()
    near_zero = conf["shift_type"].isin(["baseline", "noise", "prior+noise"]).to_numpy()
    conf.loc[near_zero, "kl_y_empirical"] = [0.001, 0.0012, 0.0008, 0.0011][:int(near_zero.sum())]
    figures = []
    monkeypatch.setattr(panels, "save_figure", lambda fig, stem: figures.append(fig) or {})
    panels.shift_panels(conf, shift.drop_fits(conf), tmp_path / "fig3")
    fig = figures[0]
    FigureCanvasAgg(fig).draw()  # the constrained layout, as save_figure draws it
    for ax in fig.axes[:2]:
        box = ax.get_window_extent()
        markers = [ln for ln in ax.get_lines() if ln.get_marker() not in (None, "", "None")]
        xs = np.concatenate([ln.get_transform().transform(ln.get_xydata())[:, 0] for ln in markers])
        radius = 4.5 / 2 * fig.dpi / 72  # pixels: ms=4.5 points
        assert len(xs) >= len(conf) and xs.min() - radius >= box.x0 and xs.max() + radius <= box.x1, \
            (ax.get_title(), xs.min() - radius, box.x0, xs.max() + radius, box.x1)


def test_data_columns_are_described(collected):
    """Every column shift's collect writes is in the column dictionary (docs/outputs.md) and nothing else is;
    runs.csv's metric columns are those of the fixture's short metrics files (the full set: test_columns)."""
    problems = data_problems("shift", {name: list(frame.columns) for name, frame in collected[1].items()},
                             {"runs": METRIC_COLUMNS})
    assert not problems, problems


def test_kl_y_is_against_the_baseline_worlds_prior(tmp_path):
    """The paper's Eq. 8 measures KL_y against the baseline label prior P0 (uniform there): a
    baseline world of another prior (a world of 3 of 4 classes, say) is the reference."""
    s = spec()
    p0 = [0.5, 0.25, 0.25]
    s["world_priors"]["base"] = p0
    _, data = collect_fixture(tmp_path, s)
    c = data["configurations"].set_index("cell")
    prior = PAPER["imb70"][0]
    assert c.loc["imb70", "kl_y_target"] == pytest.approx(sum(p * math.log(p / q) for p, q in zip(prior, p0)), abs=1e-14)
    kl = [sum(n / 1000 * math.log(n / 1000 / q) for n, q in zip(counts_of(prior, sd), p0)) for sd in SEEDS]
    assert c.loc["imb70", "kl_y_empirical"] == pytest.approx(np.mean(kl), abs=1e-12)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # P0 lacks a class the test priors use: KL_y inf
def test_smallest_class_counts_only_the_baseline_worlds_classes(tmp_path):
    """A baseline world of classes 0 and 1 of 3 (P0 = (0.5, 0.5, 0)): its smallest class is the
    smaller of those two counts, not the absent class's."""
    s = spec()
    s["world_priors"]["base"] = [0.5, 0.5, 0.0]
    _, data = collect_fixture(tmp_path, s)
    c = data["configurations"].set_index("cell")
    smallest = [min(counts_of(PAPER["imb70"][0], sd)[:2]) for sd in SEEDS]  # (700 + seed, 200 - seed)
    assert (c.loc["imb70", "smallest_class_rows_min"], c.loc["imb70", "smallest_class_rows_max"]) == (198, 200)
    assert smallest == [200, 199, 198]


def test_prior_columns_reach_the_captions_and_numbers(collected):
    from oracle.experiments.shift.findings import findings

    s, data = collected
    c = data["configurations"].set_index("cell")
    cap7 = findings("shift_configurations", data, s)
    worst = c["bayes_cost_pp"].idxmax()
    assert worst == "imb70" and f"at most {c.loc[worst, 'bayes_cost_pp']:.2f} ± " in cap7
    assert "the smallest class has 100 of the N = 1000 rows (imb70" in cap7
    zero = {**data, "configurations": data["configurations"].assign(bayes_cost_pp=0.0)}
    assert "in expectation over the labels) is 0 for every configuration." in findings("shift_configurations", zero, s)
    cap8 = findings("shift_accuracy", data, s)
    r = c.loc["imb50"]
    assert f"imb50 {r['delta_pp']:+.2f} raw, {r['delta_adjusted_pp']:+.2f} adjusted" in cap8
    cap9 = findings("shift_axes", data, s)
    assert "sigma 0.15: the learner trained on x' " in cap9 and "the oracle's own accuracy on x' 85.0%" in cap9
    nums = shift.numbers(data, s, {"runs": "runs.csv", "configurations": "conf.csv", "pairs": "pairs.csv"})
    assert nums["accuracy_adjusted.imb70"]["value"] == pytest.approx(c.loc["imb70", "acc_adjusted"])
    assert nums["bayes_cost.imb70"]["se"] == pytest.approx(c.loc["imb70", "bayes_cost_se_pp"])
