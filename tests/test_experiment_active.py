"""Experiment kind `active` (oracle.experiments.active) and its round loop
(oracle.classifiers.active_learning): config checks, the data of a run (initial set, pool and test set
disjoint, in the seed's order), the exact-epistemic strategy acquiring the largest KL(p || q)
(recomputed here with numpy), a killed run resuming to the same selections, and the paper's
numbers against a hand computation."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

import oracle.classifiers.active_learning as al
from oracle.classifiers.data import EvaluationSet
from oracle.classifiers.predict import predict_log_probs
from oracle.errors import ConfigError, DataError
from oracle.experiments import active
from oracle.experiments.columns import data_problems
from oracle.workflow import plan
from oracle.report.numbers import spread_problems

REPO = Path(__file__).resolve().parents[1]
DEFAULT = yaml.safe_load((REPO / "config.yaml").read_text())
ARCH = {"model": "test_resnet", "input_size": None, "pretrained": False}


def log_softmax_np(a: np.ndarray) -> np.ndarray:
    m = a.max(axis=1, keepdims=True)
    return a - m - np.log(np.exp(a - m).sum(axis=1, keepdims=True))


def active_entry(**changes) -> tuple[str, dict, dict]:
    """(name, entry, config) of the embedded default's active experiment, with changes."""
    cfg = copy.deepcopy(DEFAULT)
    name = next(n for n, e in cfg["experiments"].items() if e["kind"] == "active")
    cfg["experiments"][name].update(changes)
    return name, copy.deepcopy(cfg["experiments"][name]), cfg


# --------------------------------------------------------------------------- config
def test_check_fills_defaults_and_the_rounds():
    name, entry, cfg = active_entry()
    for k in ("mc_samples", "drop_rate", "target_accuracy", "hard_label"):
        entry.pop(k, None)
    spec = active.check(name, entry, cfg)
    assert spec["mc_samples"] == 20 and spec["drop_rate"] == 0.25 and spec["target_accuracy"] is None
    assert spec["hard_label"] == "label" and "sizes" not in spec
    assert set(spec["training"]) == {"epochs", "min_steps", "batch_size", "lr", "weight_decay", "val_size", "patience",
                                     "eval_steps", "tolerance", "decay_fraction"}
    assert spec["labels_per_round"] == [spec["initial_size"] + r * spec["batch"] for r in range(spec["rounds"] + 1)]
    assert active.classifier_runs(spec) == [] and active.evaluation_sets(spec) == [spec["world"]]
    with pytest.raises(ConfigError, match="'active' trains no classifiers"):
        active.training_spec(spec, "N50")
    assert len(active.runs(spec)) == len(spec["archs"]) * len(spec["strategies"]) * len(spec["seeds"])


def test_the_strategies_a_config_names_are_random_and_the_scores_the_library_computes():
    """The planning half names the strategies (the rules' {strategy} wildcard, without loading
    numpy at DAG-build time); the library scores every one of them but random."""
    assert active.STRATEGIES[0] == "random" and set(active.STRATEGIES[1:]) == set(al.SCORES)
    assert len(set(active.STRATEGIES)) == len(active.STRATEGIES)


@pytest.mark.parametrize("changes, key", [
    ({"strategies": ["random", "max_margin"]}, "strategies"),
    ({"strategies": ["bald"], "drop_rate": 0.0}, "drop_rate"),
    ({"initial_size": 1}, "initial_size"),
    ({"pool_size": 10_000}, "pool_size"),
    ({"rounds": 100}, "batch"),
    ({"target_accuracy": 1.5}, "target_accuracy"),
    ({"archs": ["no_such_arch"]}, "archs"),
])
def test_check_names_the_bad_key(changes, key):
    name, entry, cfg = active_entry(**changes)
    with pytest.raises(ConfigError, match=rf"'experiments\.{name}\.{key}'"):
        active.check(name, entry, cfg)


def test_a_runs_settings_take_the_training_keys_from_the_one_list():
    """ActiveSettings carries a round's training block as the config spells it, every key of
    oracle.classifiers.specs.TRAINING_KEYS (the one list), and refuses a block that lacks one."""
    from oracle.classifiers.specs import TRAINING_KEYS

    name, _, cfg = active_entry()
    spec = plan.experiment_spec(cfg, name)
    s = al.ActiveSettings.from_spec(spec, "max_entropy")
    assert dict(s.training) == {k: spec["training"][k] for k in TRAINING_KEYS}
    assert s.scored == tuple(x for x in spec["strategies"] if x != "random")
    with pytest.raises(ConfigError, match="lack patience"):
        al.ActiveSettings.from_spec({**spec, "training": {k: v for k, v in spec["training"].items() if k != "patience"}},
                                    "max_entropy")


def test_split_worlds_hold_the_active_seeds():
    name, _, cfg = active_entry(seeds=[0, 7])
    spec = plan.experiment_spec(cfg, name)
    worlds = plan.split_worlds(cfg)
    assert 7 in worlds[spec["world"]]["seeds"]
    assert worlds[spec["world"]]["max_n"] >= spec["labels_per_round"][-1]
    assert active.split_needs(spec) == {spec["world"]: {"seeds": [0, 7], "max_n": spec["labels_per_round"][-1]}}


# --------------------------------------------------------------------------- the data of a run
@pytest.fixture
def world_files(tmp_path):
    """A sample file of 120 rows (K=3, 1x8x8, T=2) and its splits (test 30, seeds 0 and 1)."""
    from oracle.io.shards import ShardWriter
    from oracle.io.splits import make_splits, write_splits_h5

    rng = np.random.default_rng(0)
    n, k = 120, 3
    label = rng.integers(0, k, n)
    x = (rng.normal(size=(n, 1, 8, 8)) * 0.3 + (label - 1).reshape(-1, 1, 1, 1) * 0.5).astype(np.float32)
    ll = rng.normal(size=(n, k)) * 3.0
    attrs = {"oracle_sha256": "0" * 64, "prior": [0.2, 0.3, 0.5], "label_temperature": 2.0, "base_temperature": 1.0,
             "seed": 0, "shard": 0, "n_shards": 1, "code_version": "test"}
    samples = tmp_path / "all.h5"
    with ShardWriter(samples, k, (1, 8, 8), attrs) as w:
        w.write(x, label, label, ll, np.arange(n))
    splits = tmp_path / "splits.h5"
    write_splits_h5(splits, make_splits(n, 30, [0, 1], labels=label, test_seed=0))
    return samples, splits, x, label, ll


def test_run_data_follow_the_seed_order_and_keep_the_test_set_apart(world_files):
    from oracle.posterior import posterior_rows
    from oracle.io.splits import read_splits_h5

    samples, splits, x, label, ll = world_files
    data = al.load_active_data(samples, splits, seed=1, initial_size=10, pool_size=50)
    parts = read_splits_h5(splits)
    np.testing.assert_array_equal(data.rows, parts["order"][1][:60])
    assert data.initial_size == 10 and data.num_classes == 3 and not data.soft
    assert not np.intersect1d(data.rows, data.test.rows).size
    np.testing.assert_array_equal(data.test.rows, parts["test"])
    np.testing.assert_array_equal(data.x, x[data.rows])
    np.testing.assert_array_equal(data.targets, label[data.rows])
    np.testing.assert_array_equal(data.log_p, posterior_rows(ll[data.rows], {"prior": [0.2, 0.3, 0.5],
                                                                              "label_temperature": 2.0}))
    with pytest.raises(DataError, match="exceeds the training pool"):
        al.load_active_data(samples, splits, seed=1, initial_size=10, pool_size=81)


def test_a_pool_that_meets_the_test_set_is_refused(world_files, monkeypatch):
    import oracle.io.splits as splits_mod

    samples, splits, *_ = world_files
    real = splits_mod.read_splits_h5

    def leaky(path):
        parts = real(path)
        parts["order"][0] = np.concatenate([parts["test"][:3], parts["order"][0]])
        return parts

    monkeypatch.setattr(splits_mod, "read_splits_h5", leaky)
    with pytest.raises(DataError, match="in the test set"):
        al.load_active_data(samples, splits, seed=0, initial_size=5, pool_size=20)


# --------------------------------------------------------------------------- the round loop
@pytest.fixture(scope="module")
def data():
    """Synthetic rows: 3 classes of 8x8 images told apart by brightness; log_p a softmax of
    the brightness (some rows ambiguous), labels drawn from it."""
    rng = np.random.default_rng(0)

    def make(n):
        mean = rng.uniform(-0.8, 0.8, n)
        x = (rng.normal(size=(n, 1, 8, 8)) * 0.2 + mean.reshape(-1, 1, 1, 1)).astype(np.float32)
        log_p = log_softmax_np(-((mean[:, None] - np.array([-0.5, 0.0, 0.5])) ** 2) * 40)
        y = np.array([rng.choice(3, p=np.exp(row)) for row in log_p], dtype=np.int64)
        return x, y, log_p

    x, y, lp = make(72)
    tx, ty, tlp = make(40)
    return al.ActiveData(x=x, targets=y, soft=False, log_p=lp, rows=np.arange(72) + 500, initial_size=12,
                         num_classes=3, test=EvaluationSet(tx, ty, tlp, np.arange(40)))


def settings(strategy, **changes) -> al.ActiveSettings:
    base = dict(strategy=strategy, scored=("max_entropy", "max_epistemic", "bald"), rounds=2, batch=6, drop_rate=0.3,
                mc_samples=4, training=dict(epochs=2, min_steps=0, batch_size=16, lr=3e-3, weight_decay=0.01,
                                            val_size=0, patience=None, eval_steps=1, tolerance=0.01, decay_fraction=0.2))
    return al.ActiveSettings(**{**base, **changes})


def strip(records):
    return [{k: v for k, v in r.items() if k != "train_seconds"} for r in records]


def test_exact_epistemic_strategy_acquires_the_largest_kl(data, monkeypatch):
    """Every round, the rows max_epistemic acquires are the `batch` remaining pool rows of
    largest KL(p || q), KL recomputed here from the round's model with numpy."""
    seen = []
    real = al.pool_scores

    def spy(model, x, log_p, *args, **kwargs):
        scores = real(model, x, log_p, *args, **kwargs)
        log_q = predict_log_probs(model, __import__("torch").from_numpy(x)).numpy()
        p = np.exp(log_p)
        kl = (p * (log_p - log_q)).sum(1)
        np.testing.assert_allclose(scores["exact_epistemic"], kl, rtol=1e-10, atol=1e-12)
        seen.append((x.copy(), kl))
        return scores

    monkeypatch.setattr(al, "pool_scores", spy)
    records = al.run_active_learning(data, ARCH, settings("max_epistemic"), seed=0)
    assert len(seen) == 2
    free = np.arange(data.initial_size, len(data.rows))
    for r, (x, kl) in enumerate(seen):
        np.testing.assert_array_equal(x, data.x[free])  # scored exactly the remaining pool
        top = free[np.argsort(-kl, kind="stable")[:6]]
        assert records[r]["selected"] == [int(v) for v in data.rows[top]]
        assert records[r]["selected_epistemic"] == pytest.approx(kl[np.argsort(-kl, kind="stable")[:6]].mean(), rel=1e-12)
        assert records[r]["selected_epistemic"] >= records[r]["pool_epistemic"]
        free = np.setdiff1d(free, top)


def test_rounds_share_round_zero_and_never_acquire_twice(data):
    runs = {s: al.run_active_learning(data, ARCH, settings(s), seed=0) for s in ("random", "max_entropy")}
    r0 = [runs[s][0] for s in runs]
    for k in ("acc", "epistemic", "total", "train_loss"):
        assert r0[0][k] == r0[1][k], k  # same initial set, weights and training for every strategy
    for s, records in runs.items():
        assert [r["labelled"] for r in records] == [12, 18, 24] and [r["round"] for r in records] == [0, 1, 2]
        picked = [v for r in records for v in r["selected"]]
        assert len(picked) == len(set(picked)) == 12
        assert not set(picked) & set(data.rows[:12].tolist()) and set(picked) <= set(data.rows.tolist())
        assert records[-1]["selected"] == [] and "correlations" not in records[-1]
        for r in records[:-1]:
            assert set(r["correlations"]) == {"max_entropy", "max_epistemic", "bald"}
            assert r["correlations"]["max_epistemic"]["exact_epistemic"] == pytest.approx(1.0)
            assert all(v is None or -1 <= v <= 1 for c in r["correlations"].values() for v in c.values())
    assert runs["random"][0]["selected"] != runs["max_entropy"][0]["selected"]
    again = al.run_active_learning(data, ARCH, settings("random"), seed=0)
    assert strip(again) == strip(runs["random"])
    other_seed = al.run_active_learning(data, ARCH, settings("random", rounds=1), seed=1)
    assert other_seed[0]["selected"] != runs["random"][0]["selected"]


def test_round_zero_is_trained_once_and_every_strategy_continues_from_its_file(data, tmp_path, monkeypatch):
    """train_round_zero's file (what rule active_round_zero writes) gives every strategy the round 0
    and the first selection it would have trained itself: the same records (but the wall clock),
    with no training of round 0 in the strategy's run; a file of another seed is refused."""
    path = tmp_path / "round0.pt"
    al.write_round_zero(path, al.train_round_zero(data, ARCH, settings(None), seed=0))
    trained = []
    real = al._train
    monkeypatch.setattr(al, "_train", lambda d, labelled, *a, **k: trained.append(len(labelled)) or real(d, labelled, *a, **k))
    for strategy in ("random", "max_entropy", "bald"):
        zero = al.read_round_zero(path, data, ARCH, settings(strategy), seed=0)
        trained.clear()
        shared = al.run_active_learning(data, ARCH, settings(strategy), seed=0, round_zero=zero)
        assert trained == [18, 24]  # rounds 1 and 2 only: round 0 came from the file
        alone = al.run_active_learning(data, ARCH, settings(strategy), seed=0)
        assert strip(shared) == strip(alone), strategy
    with pytest.raises(DataError, match="round 0 of other data, arch, settings or seed"):
        al.read_round_zero(path, data, ARCH, settings("random"), seed=1)
    with pytest.raises(DataError, match="round 0 of other data, arch, settings or seed"):
        al.read_round_zero(path, data, ARCH, settings("random", drop_rate=0.1), seed=0)


def _killed_after_round(data, s, state_dir, monkeypatch, last_round: int) -> None:
    """Run active learning into `state_dir` and kill it (KeyboardInterrupt) right after round
    `last_round` was saved."""
    real_save = al.torch_save_atomic

    def save_then_die(state, path):
        real_save(state, path)
        if len(state["rounds"]) == last_round + 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(al, "torch_save_atomic", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        al.run_active_learning(data, ARCH, s, seed=0, state_dir=state_dir)
    monkeypatch.setattr(al, "torch_save_atomic", real_save)


def test_a_killed_run_resumes_at_its_last_round_with_the_same_selections(data, tmp_path, monkeypatch, capsys):
    import oracle.classifiers.train as train_mod

    s = settings("bald", rounds=3)
    full = al.run_active_learning(data, ARCH, s, seed=0)
    state_dir = tmp_path / "resume"
    _killed_after_round(data, s, state_dir, monkeypatch, 1)
    trained = []
    real_train = train_mod.train_classifier

    def counting(model, x, *args, **kwargs):
        trained.append(len(x))
        return real_train(model, x, *args, **kwargs)

    monkeypatch.setattr(train_mod, "train_classifier", counting)
    capsys.readouterr()
    resumed = al.run_active_learning(data, ARCH, s, seed=0, state_dir=state_dir)
    assert "resuming active learning at round 2/3" in capsys.readouterr().out
    assert trained == [24, 30]  # rounds 2 and 3 only
    assert strip(resumed) == strip(full)
    # state written for other settings is discarded, and the run starts over
    capsys.readouterr()
    trained.clear()
    changed = al.run_active_learning(data, ARCH, settings("bald", rounds=3, batch=5), seed=0, state_dir=state_dir)
    assert any(line.startswith("discarding the active learning resume state") for line in capsys.readouterr().out.splitlines())
    assert trained == [12, 17, 22, 27] and [r["labelled"] for r in changed] == [12, 17, 22, 27]


@pytest.mark.parametrize("change", ["lr", "targets", "truncated"])
def test_stale_or_damaged_round_state_is_discarded_and_the_result_is_a_fresh_runs(data, tmp_path, monkeypatch, capsys,
                                                                                    change):
    """Round state written for another run (a learning rate or targets that keep every shape)
    or truncated by a kill is never resumed: one line names the file, and the rounds equal a
    fresh run's exactly."""
    import dataclasses

    s = settings("max_entropy", rounds=1)
    state_dir = tmp_path / "resume"
    _killed_after_round(data, s, state_dir, monkeypatch, 0)
    state = state_dir / "state.pt"
    new_data, new_s = data, s
    if change == "lr":
        new_s = dataclasses.replace(s, training={**s.training, "lr": 1e-3})
    elif change == "targets":
        new_data = dataclasses.replace(data, targets=(data.targets + 1) % 3)
    else:
        state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
    capsys.readouterr()
    got = al.run_active_learning(new_data, ARCH, new_s, seed=0, state_dir=state_dir)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("discarding")]
    assert len(lines) == 1 and str(state) in lines[0], lines
    assert ("unreadable" in lines[0]) if change == "truncated" else ("another run" in lines[0])
    assert strip(got) == strip(al.run_active_learning(new_data, ARCH, new_s, seed=0))


def test_settings_refuse_what_the_pool_cannot_give(data):
    with pytest.raises(ConfigError, match="exceed the pool"):
        al.run_active_learning(data, ARCH, settings("random", rounds=10, batch=10), seed=0)
    with pytest.raises(ConfigError, match="strategy"):
        al.run_active_learning(data, ARCH, settings("bald", scored=("max_entropy",)), seed=0)


# --------------------------------------------------------------------------- collect, table, figures, numbers
ACC = {  # (strategy, seed) -> accuracy per round at labels 50, 75, 100, 125
    ("random", 0): [0.60, 0.64, 0.66, 0.70], ("random", 1): [0.62, 0.63, 0.67, 0.69],
    ("max_entropy", 0): [0.60, 0.62, 0.66, 0.70], ("max_entropy", 1): [0.62, 0.66, 0.68, 0.70],
    ("max_epistemic", 0): [0.60, 0.68, 0.74, 0.76], ("max_epistemic", 1): [0.62, 0.70, 0.74, 0.75],
}


def spec_for_numbers(**changes) -> dict:
    out = {"kind": "active", "name": "active", "world": "base", "archs": ["test_resnet"],
           "arch_labels": {"test_resnet": "ResNet (test)"}, "strategies": ["random", "max_entropy", "max_epistemic"],
           "seeds": [0, 1], "initial_size": 50, "rounds": 3, "batch": 25, "pool_size": 200,
           "labels_per_round": [50, 75, 100, 125], "target_accuracy": None}
    out.update(changes)
    return out


def write_runs(folder: Path) -> list[Path]:
    paths = []
    for (strategy, seed), accs in ACC.items():
        records = []
        for r, acc in enumerate(accs):
            rec = {"round": r, "labelled": 50 + 25 * r, "acc": acc, "acc_se": 0.01, "epistemic": 1.0 - acc,
                   "epistemic_se": 0.01, "test_size": 400, "selected": [] if r == 3 else list(range(25))}
            if r < 3:
                rec.update(selected_epistemic=0.5, selected_aleatoric=0.1, pool_epistemic=0.3, pool_aleatoric=0.2,
                           correlations={"max_entropy": {"exact_epistemic": 0.2 + 0.1 * seed, "exact_aleatoric": 0.6},
                                         "max_epistemic": {"exact_epistemic": 1.0, "exact_aleatoric": -0.1 * r}})
            records.append(rec)
        path = folder / f"{strategy}-{seed}.json"
        path.write_text(json.dumps({"experiment": "active", "arch": "test_resnet", "strategy": strategy, "seed": seed,
                                    "rounds": records}))
        paths.append(path)
    return paths


@pytest.fixture
def collected(tmp_path):
    data = active.collect(spec_for_numbers(), {"rounds": [str(p) for p in write_runs(tmp_path)]})
    paths = {}
    for name, frame in data.items():
        paths[name] = str(tmp_path / f"{name}.csv")
        frame.to_csv(paths[name], index=False)
    return {name: pd.read_csv(p) for name, p in paths.items()}, paths


def test_collect_has_one_row_per_round_and_per_correlation(collected):
    data, _ = collected
    rounds, corr = data["rounds"], data["correlations"]
    assert len(rounds) == 6 * 4 and list(rounds["labelled"][:4]) == [50, 75, 100, 125]
    assert list(rounds.loc[rounds["round"] == 3, "n_selected"].unique()) == [0]
    assert len(corr) == 6 * 3 * 2 * 2  # runs x rounds with a selection x scores x exact parts
    assert set(corr["target"]) == {"exact_epistemic", "exact_aleatoric"}


def test_numbers_match_a_hand_computation(collected):
    data, paths = collected
    nums = active.numbers(data, spec_for_numbers(), paths)
    assert spread_problems(nums) == []  # every mean over seeds: std, se, se_over, n_seeds
    gain = {s: [ACC[(s, seed)][-1] - ACC[(s, seed)][0] for seed in (0, 1)] for s in ("max_entropy", "max_epistemic")}
    ratios = [gain["max_epistemic"][i] / gain["max_entropy"][i] for i in (0, 1)]
    g = nums["gain_ratio.test_resnet"]
    # a ratio on its own scale: the geometric mean, and the t interval of ln r mapped back by exp
    assert g["value"] == pytest.approx(math.exp(np.mean(np.log(ratios))), rel=1e-12)
    half = stats.t.ppf(0.975, 1) * np.std(np.log(ratios), ddof=1) / math.sqrt(2)
    assert g["ci95"] == pytest.approx([g["value"] * math.exp(-half), g["value"] * math.exp(half)], rel=1e-9)
    assert g["ci95"][0] > 0  # never below 0, as a t interval on the ratio itself can be
    assert g["std"] == pytest.approx(np.std(ratios, ddof=1), rel=1e-12) and g["n_seeds"] == 2
    assert nums["gain_ratio_of_means.test_resnet"]["value"] == pytest.approx(
        np.mean(gain["max_epistemic"]) / np.mean(gain["max_entropy"]), rel=1e-12)
    # mid-regime target: halfway between the round-0 mean (0.61) and max entropy's final mean (0.70)
    target = 0.5 * (0.61 + 0.70)
    assert nums["target_accuracy.test_resnet"]["value"] == pytest.approx(target, rel=1e-12)
    assert f"{target:.4f}" in nums["fewer_labels.test_resnet"]["description"]
    # by hand, target 0.655: max entropy crosses it between 75 and 100 labels at seed 0, between
    # 50 and 75 at seed 1; max epistemic between 50 and 75 at both
    need = {("max_entropy", 0): 96.875, ("max_entropy", 1): 71.875,
            ("max_epistemic", 0): 67.1875, ("max_epistemic", 1): 60.9375}
    fewer = [1 - need[("max_epistemic", s)] / need[("max_entropy", s)] for s in (0, 1)]
    assert nums["fewer_labels.test_resnet"]["value"] == pytest.approx(np.mean(fewer), rel=1e-12)
    assert nums["labels_to_target.test_resnet.max_epistemic"]["value"] == pytest.approx(
        np.mean([need[("max_epistemic", s)] for s in (0, 1)]), rel=1e-12)
    assert nums["final_accuracy.test_resnet.max_epistemic"]["value"] == pytest.approx(0.755, rel=1e-12)
    assert nums["accuracy_gain.test_resnet.random"]["value"] == pytest.approx(np.mean([0.10, 0.07]), rel=1e-12)
    assert nums["spearman_epistemic.test_resnet.max_entropy"]["value"] == pytest.approx(0.25, rel=1e-12)
    assert nums["spearman_epistemic.test_resnet.max_entropy"]["std"] == pytest.approx(np.std([0.2, 0.3], ddof=1))
    # its interval through Fisher's z of the two seeds (tests/test_numbers_spreads.py), inside (-1, 1)
    z = np.arctanh([0.2, 0.3])
    half = stats.t.ppf(0.975, 1) * z.std(ddof=1) / np.sqrt(2)
    assert nums["spearman_epistemic.test_resnet.max_entropy"]["ci95"] == pytest.approx(
        np.tanh([z.mean() - half, z.mean() + half]).tolist(), abs=1e-12)
    assert nums["spearman_aleatoric.test_resnet.max_epistemic"]["value"] == pytest.approx(-0.1, rel=1e-12)
    assert "spearman_epistemic.test_resnet.max_epistemic" not in nums  # identically 1
    assert nums["labels_final"]["value"] == 125 and nums["test_size"]["value"] == 400
    assert all(e["artifact"] in paths.values() for e in nums.values())
    json.dumps(nums)  # finite or None


def test_numbers_with_a_configured_target_and_an_undefined_ratio(collected):
    data, paths = collected
    nums = active.numbers(data, spec_for_numbers(target_accuracy=0.75), paths)
    # max entropy never reaches 0.75: no seed counts, and the description says so
    assert nums["fewer_labels.test_resnet"]["value"] is None
    assert "left out" in nums["fewer_labels.test_resnet"]["description"]
    assert nums["labels_to_target.test_resnet.max_entropy"]["value"] is None
    flat = data["rounds"].copy()
    flat.loc[(flat["strategy"] == "max_entropy") & (flat["seed"] == 1), "acc"] = 0.62  # no gain at seed 1
    nums = active.numbers({**data, "rounds": flat}, spec_for_numbers(), paths)
    assert nums["gain_ratio.test_resnet"]["value"] is None
    assert "seed(s) [1]" in nums["gain_ratio.test_resnet"]["description"]
    ent = flat["strategy"] == "max_entropy"
    flat.loc[ent, "acc"] = flat.loc[ent, "seed"].map({0: 0.60, 1: 0.62})  # max entropy never gains
    nums = active.numbers({**data, "rounds": flat}, spec_for_numbers(), paths)
    assert nums["target_accuracy.test_resnet"]["value"] is None
    assert "undefined" in nums["target_accuracy.test_resnet"]["description"]
    assert nums["fewer_labels.test_resnet"]["value"] is None and nums["gain_ratio_of_means.test_resnet"]["value"] is None


def test_labels_to_reach():
    assert active.labels_to_reach([50, 75, 100], [0.6, 0.7, 0.8], 0.65) == pytest.approx(62.5)
    assert active.labels_to_reach([50, 75, 100], [0.6, 0.7, 0.8], 0.5) == 50.0
    assert math.isnan(active.labels_to_reach([50, 75, 100], [0.6, 0.7, 0.8], 0.9))
    # the first crossing counts, not a later one after a dip
    assert active.labels_to_reach([50, 75, 100, 125], [0.6, 0.7, 0.6, 0.9], 0.65) == pytest.approx(62.5)


def test_table_and_figures(collected, tmp_path):
    data, _ = collected
    spec = spec_for_numbers()
    frame = active.table("rounds", data, spec)
    assert len(frame) == 3 * 4
    row = frame[(frame["Strategy"] == "Max Epistemic (exact)") & (frame["Labels"] == 125)].iloc[0]
    assert row["Accuracy (%)"] == pytest.approx(75.5) and row["Seeds"] == 2
    assert row["Accuracy std (%)"] == pytest.approx(100 * np.std([0.76, 0.75], ddof=1))
    for name in ("acquisition_panels", "proxy_correlations"):
        files = active.figure(name, data, spec, tmp_path / name)
        assert files["png"].stat().st_size > 1000 and files["pdf"].read_bytes().startswith(b"%PDF")
    with pytest.raises(DataError):
        active.table("nope", data, spec)


def test_proxy_caption_names_a_score_anti_correlated_with_the_exact_kl(collected):
    from oracle.experiments.active.findings import findings

    data, _ = collected
    spec = spec_for_numbers()
    text = findings("proxy_correlations", data, spec)
    # max entropy: 0.2 at seed 0 and 0.3 at seed 1, mean 0.25; nothing below 0
    assert "Max Entropy 0.25 (seeds 0.2 to 0.3)" in text and "Anti-correlated" not in text
    n_runs = data["correlations"]["strategy"].nunique() * data["correlations"]["seed"].nunique()
    assert text.endswith(f"over {n_runs} runs ({data['correlations']['strategy'].nunique()} strategy x 2 seed).")
    corr = data["correlations"].copy()
    mine = (corr["score"] == "max_entropy") & (corr["target"] == "exact_epistemic")
    corr.loc[mine, "spearman"] = -corr.loc[mine, "spearman"]
    text = findings("proxy_correlations", {**data, "correlations": corr}, spec)
    assert "Anti-correlated with the exact epistemic KL: Max Entropy on ResNet (test) (below 0 in 2 of 2 seeds)" in text
    # below 0 on average but not in every seed: no such sentence
    corr.loc[mine & (corr["seed"] == 1), "spearman"] = 0.5
    assert "Anti-correlated" not in findings("proxy_correlations", {**data, "correlations": corr}, spec)


def test_data_columns_are_described(collected):
    """Every column active's collect writes is in the column dictionary (docs/outputs.md) and nothing else is."""
    problems = data_problems("active", {name: list(frame.columns) for name, frame in collected[0].items()})
    assert not problems, problems
