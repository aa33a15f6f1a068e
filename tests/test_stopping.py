"""The learners' stopping rule: when it evaluates, when it stops, which weights it keeps, and
whether a run converged by it (oracle.classifiers.stopping, oracle.classifiers.train)."""

import math

import pytest
import torch

import oracle.classifiers.train as training
from oracle.classifiers.build import build_classifier
from oracle.classifiers.specs import effective_epochs
from oracle.classifiers.stopping import StoppingRule, convergence, is_evaluation_epoch
from oracle.classifiers.train import train_classifier
from oracle.errors import ConfigError

HYPER = dict(batch_size=16, lr=3e-3, weight_decay=0.01, seed=7)


def _brightness(n, flip, seed):
    """Three classes of 8x8 images told apart by brightness; a fraction `flip` of the labels
    replaced by a random class, so that a long training run overfits them."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 3
    x = (torch.randn(n, 1, 8, 8, generator=g) * 0.5 + (y.float() - 1).view(-1, 1, 1, 1) * 0.4).clamp(-1, 1)
    noisy = torch.rand(n, generator=g) < flip
    y = torch.where(noisy, torch.randint(0, 3, (n,), generator=g), y)
    return x, y


@pytest.fixture(scope="module")
def val():
    return _brightness(96, 0.3, seed=99)


def _model():
    return build_classifier("test_resnet", 3, 1, 8, seed=0)


# --------------------------------------------------------------------------- the rule alone
def test_evaluations_are_spaced_in_steps_not_epochs():
    rule = StoppingRule(patience=3, eval_steps=20)
    assert rule.eval_every(1) == 20      # 40 rows, batch 64: one step an epoch
    assert rule.eval_every(7) == 3       # 21 steps between evaluations
    assert rule.eval_every(25) == 1      # every epoch once an epoch has enough steps
    assert [e for e in range(1, 11) if is_evaluation_epoch(e, 4, 10)] == [4, 8, 10]  # and the last


@pytest.mark.parametrize("kwargs", [dict(patience=0), dict(eval_steps=0), dict(min_delta=1.0), dict(tolerance=-0.1)])
def test_bad_rule_is_refused(kwargs):
    with pytest.raises(ConfigError):
        StoppingRule(**kwargs)


def test_rule_from_a_training_block():
    rule = StoppingRule.from_training({"epochs": 10, "patience": 4, "eval_steps": 30, "tolerance": 0.02})
    assert (rule.patience, rule.eval_steps, rule.tolerance, rule.min_delta) == (4, 30, 0.02, 0.0)
    assert StoppingRule.from_training({"patience": None}).patience is None


def _history(val_losses, every=1, best=None, lr_fraction=1.0, decay=0):
    """Records of a run: one per evaluation of `val_losses`, then `decay` epochs of the final
    decay (the rate falling to 0 at the last)."""
    out = []
    for i, v in enumerate(val_losses, start=1):
        rec = {"epoch": i * every, "steps": i * every * 3, "train_loss": 1.0 / i, "val_loss": v,
               "lr_fraction": lr_fraction}
        if best is not None:
            rec["best_epoch"] = best
        out.append(rec)
    last = out[-1]["epoch"]
    for j in range(1, decay + 1):
        out.append({"epoch": last + j, "steps": (last + j) * 3, "train_loss": 0.1, "phase": "decay",
                    "lr_fraction": 1.0 - j / decay, **({"val_loss": 0.6} if j == decay else {})})
    return out


def test_convergence_of_a_run_the_rule_stopped():
    rule = StoppingRule(patience=3, decay_fraction=0.5)
    h = _history([1.0, 0.8, 0.7, 0.72, 0.71, 0.75], best=3, decay=2)
    c = convergence(h, rule, budget_epochs=20)
    assert c["converged"] and c["stopped_by"] == "patience" and c["annealed"] and c["kept_lr"] == 0.0
    # kept: the decay's last epoch, from epoch 3's weights (9 steps) plus the decay's 6 steps
    assert (c["epochs_run"], c["best_epoch"], c["kept_epoch"], c["steps"], c["kept_steps"], c["decay_steps"]) == \
        (8, 3, 8, 24, 15, 6)
    assert c["monitored"] == "val_loss"


def test_a_run_the_rule_stopped_without_annealing_has_not_converged():
    """Weights kept at the peak rate (no decay) or half of it are not annealed: the rule stopped
    the run, yet its kept weights carry the step size's noise (issue 46)."""
    rule = StoppingRule(patience=3)
    for fraction in (1.0, 0.5, 0.11):
        c = convergence(_history([1.0, 0.8, 0.7, 0.72, 0.71, 0.75], best=3, lr_fraction=fraction), rule, 20)
        assert c["stopped_by"] == "patience" and not c["annealed"] and not c["converged"]
        assert (c["kept_epoch"], c["kept_steps"], c["kept_lr"]) == (3, 9, fraction)
    c = convergence(_history([1.0, 0.8, 0.7, 0.72, 0.71, 0.75], best=3, lr_fraction=0.1), rule, 20)
    assert c["annealed"] and c["converged"]
    # records from before the rate was recorded cannot show annealing
    old = [{k: v for k, v in r.items() if k != "lr_fraction"} for r in _history([1.0, 0.8, 0.9, 0.95], best=2)]
    assert not convergence(old, rule, 20)["converged"]


def test_decay_length_is_a_fraction_of_the_best_weights_steps_in_whole_epochs():
    rule = StoppingRule(patience=3, eval_steps=20, decay_fraction=0.2)
    assert rule.decay_epochs(best_steps=1000, steps_per_epoch=29) == 7     # 200 steps -> 7 epochs of 29
    assert rule.decay_epochs(best_steps=60, steps_per_epoch=1) == 12
    assert rule.decay_epochs(best_steps=1, steps_per_epoch=1) == 1         # never none
    assert StoppingRule(patience=3).decay_epochs(1000, 29) == 0             # decay_fraction 0: no decay
    assert StoppingRule(patience=None, decay_fraction=0.2).decay_epochs(1000, 29) == 0  # cosine to 0 instead
    with pytest.raises(ConfigError, match="decay_fraction"):
        StoppingRule(patience=3, decay_fraction=1.5)


def test_a_run_still_improving_at_the_end_of_its_budget_has_not_converged():
    rule = StoppingRule(patience=3, tolerance=0.01, decay_fraction=0.2)
    falling = _history([1.0, 0.9, 0.8, 0.7, 0.6, 0.5], best=6, decay=2)
    c = convergence(falling, rule, budget_epochs=6)
    assert not c["converged"] and c["stopped_by"] == "budget"
    assert c["loss_change"] == pytest.approx((0.5 - 0.8) / 0.8)  # the last 3 evaluations against the 3 before


def test_a_budget_run_whose_loss_went_flat_or_rose_converged():
    rule = StoppingRule(patience=3, tolerance=0.01, decay_fraction=0.2)
    flat = _history([1.0, 0.6, 0.5, 0.499, 0.4985, 0.498], best=6, decay=2)
    assert convergence(flat, rule, budget_epochs=6)["converged"]
    rising = _history([1.0, 0.6, 0.5, 0.55, 0.6, 0.65], best=3, decay=2)
    assert convergence(rising, rule, budget_epochs=6)["converged"]


def test_without_validation_the_training_loss_is_watched():
    rule = StoppingRule(patience=None)
    h = [{"epoch": e, "steps": e, "train_loss": 1.0 / e, "lr_fraction": 0.0} for e in range(1, 11)]
    c = convergence(h, rule, budget_epochs=10)
    assert c["monitored"] == "train_loss" and c["kept_epoch"] == 10 and not c["converged"]
    flat = [{"epoch": e, "steps": e, "train_loss": 0.1, "lr_fraction": 0.0} for e in range(1, 11)]
    assert convergence(flat, rule, budget_epochs=10)["converged"]


# --------------------------------------------------------------------------- the rule in training
def test_early_stop_without_a_decay_keeps_the_best_weights(val):
    x, y = _brightness(48, 0.3, seed=1)
    rule = StoppingRule(patience=3, eval_steps=6)
    model, history = train_classifier(_model(), x, y, soft=False, epochs=200, **HYPER, stopping=rule, validation=val)
    c = convergence(history, rule, 200)
    assert c["stopped_by"] == "patience" and c["epochs_run"] < 200
    assert c["kept_lr"] == 1.0 and not c["annealed"] and not c["converged"]  # the peak rate: constant until the stop
    evaluated = [r for r in history if "val_loss" in r]
    assert all(is_evaluation_epoch(r["epoch"], rule.eval_every(3), 200) for r in evaluated)
    best = min(evaluated, key=lambda r: r["val_loss"])
    assert c["kept_epoch"] == best["epoch"] < c["epochs_run"]
    # the returned model is the kept one: its validation loss is the best recorded
    with torch.no_grad():
        loss = torch.nn.functional.cross_entropy(model(val[0]), val[1]).item()
    assert loss == pytest.approx(best["val_loss"], rel=1e-4)


def test_the_kept_weights_are_the_end_of_a_decay_from_the_best_ones(val):
    """With decay_fraction the rule's stop restarts from the best weights and decays the rate
    linearly to 0 over that fraction of their steps: the kept weights are annealed (rate 0), their
    validation loss is recorded, and the rate was constant before the stop."""
    x, y = _brightness(48, 0.3, seed=1)
    rule = StoppingRule(patience=3, eval_steps=6, decay_fraction=0.5)
    model, history = train_classifier(_model(), x, y, soft=False, epochs=200, **HYPER, stopping=rule, validation=val)
    c = convergence(history, rule, 200)
    main = [r for r in history if r.get("phase", "main") == "main"]
    decay = [r for r in history if r.get("phase") == "decay"]
    assert all(r["lr_fraction"] == 1.0 for r in main)
    assert decay and [r["lr_fraction"] for r in decay] == sorted((r["lr_fraction"] for r in decay), reverse=True)
    best = min((r for r in main if "val_loss" in r), key=lambda r: r["val_loss"])
    assert all(r["decay_from_epoch"] == best["epoch"] for r in decay)
    assert len(decay) == rule.decay_epochs(best["steps"], 3)          # 48 rows, batch 16: 3 steps an epoch
    assert c["converged"] and c["annealed"] and c["kept_lr"] == 0.0 and c["stopped_by"] == "patience"
    assert (c["best_epoch"], c["kept_epoch"]) == (best["epoch"], decay[-1]["epoch"])
    assert c["kept_steps"] == best["steps"] + 3 * len(decay)
    with torch.no_grad():
        loss = torch.nn.functional.cross_entropy(model(val[0]), val[1]).item()
    assert loss == pytest.approx(decay[-1]["val_loss"], rel=1e-4)   # the returned model is the decay's last


def test_without_patience_the_rate_follows_a_cosine_to_zero_over_the_budget(val):
    x, y = _brightness(48, 0.3, seed=1)
    rule = StoppingRule(patience=None, eval_steps=6, decay_fraction=0.5)
    _, history = train_classifier(_model(), x, y, soft=False, epochs=10, **HYPER, stopping=rule, validation=val)
    assert len(history) == 10 and not any(r.get("phase") == "decay" for r in history)
    steps = 30
    assert [r["lr_fraction"] for r in history] == pytest.approx(
        [0.5 * (1 + math.cos(math.pi * 3 * e / steps)) for e in range(1, 11)], abs=1e-12)
    assert convergence(history, rule, 10)["kept_lr"] == pytest.approx(0.0, abs=1e-12)


def test_step_counts_are_set_by_the_rule_not_by_the_step_budget(val):
    """Two training sizes under the same rule and a budget neither reaches: each stops where
    its own validation loss stopped improving."""
    rule = StoppingRule(patience=3, eval_steps=6)
    runs = {}
    for n in (24, 72):
        x, y = _brightness(n, 0.3, seed=n)
        budget = effective_epochs(n, 1, HYPER["batch_size"], min_steps=2000)
        _, history = train_classifier(_model(), x, y, soft=False, epochs=budget, **HYPER, stopping=rule,
                                      validation=val)
        runs[n] = convergence(history, rule, budget)
        assert runs[n]["stopped_by"] == "patience"
        assert runs[n]["steps"] < 2000
    assert runs[24]["steps"] != runs[72]["steps"]


def test_patience_needs_validation_rows_and_only_one_kind_of_them(val):
    x, y = _brightness(24, 0.0, seed=0)
    with pytest.raises(ConfigError, match="validation"):
        train_classifier(_model(), x, y, soft=False, epochs=2, **HYPER, stopping=StoppingRule(patience=2))
    with pytest.raises(ConfigError, match="val_fraction"):
        train_classifier(_model(), x, y, soft=False, epochs=2, **HYPER, val_fraction=0.25, validation=val)


@pytest.mark.parametrize("killed", ["in the decay", "before the stop"])
def test_an_early_stopped_run_resumes_to_the_same_weights(val, tmp_path, monkeypatch, killed):
    """Killed in the decay (after its first epoch) or two epochs before the rule's stop, a run
    resumes to the same history and weights."""
    x, y = _brightness(48, 0.3, seed=1)
    rule = StoppingRule(patience=3, eval_steps=6, decay_fraction=1.0)
    hyper = dict(soft=False, epochs=200, **HYPER, stopping=rule, validation=val)
    full, full_history = train_classifier(_model(), x, y, **hyper)
    first_decay = next(r["epoch"] for r in full_history if r.get("phase") == "decay")
    assert full_history[-1]["epoch"] > first_decay   # a decay of several epochs
    last = first_decay if killed == "in the decay" else first_decay - 3
    real_save = training.torch_save_atomic

    def save_then_die(state, path):
        real_save(state, path)
        if state["epoch"] == last:
            raise KeyboardInterrupt

    ckpt = tmp_path / "train.ckpt"
    monkeypatch.setattr(training, "torch_save_atomic", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        train_classifier(_model(), x, y, **hyper, checkpoint_path=ckpt, checkpoint_seconds=0)
    monkeypatch.setattr(training, "torch_save_atomic", real_save)
    resumed, history = train_classifier(_model(), x, y, **hyper, checkpoint_path=ckpt, checkpoint_seconds=0)
    assert [r["epoch"] for r in history] == [r["epoch"] for r in full_history]
    a, b = full.state_dict(), resumed.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_losses_in_history_are_finite(val):
    x, y = _brightness(48, 0.0, seed=2)
    _, history = train_classifier(_model(), x, y, soft=False, epochs=30, **HYPER,
                                  stopping=StoppingRule(patience=2, eval_steps=6), validation=val)
    assert all(math.isfinite(r["val_loss"]) for r in history if "val_loss" in r)
    assert all(r["best_epoch"] <= r["epoch"] for r in history if "best_epoch" in r)


# --------------------------------------------------------------------------- what the runs report
def test_loglog_curvature_recovers_a_known_bend_and_is_zero_on_a_power_law():
    import numpy as np

    from oracle.measures.power_laws import fit_power_law, loglog_curvature

    n = np.array([50.0, 100, 300, 1000, 2000])
    x = np.log(n)
    assert loglog_curvature(n, 3.0 * n ** -0.4) == pytest.approx(0.0, abs=1e-10)
    bent = np.exp(1.0 - 0.4 * x - 0.12 * (x - x.mean()) ** 2)
    assert loglog_curvature(n, bent) == pytest.approx(-0.12, rel=1e-9)
    assert fit_power_law(n, bent)["curvature"] == pytest.approx(-0.12, rel=1e-9)
    assert math.isnan(loglog_curvature(n[:2], bent[:2]))


def test_learners_table_and_caption_count_converged_classifiers():
    import pandas as pd

    from oracle.experiments.scaling.learners import learners_table
    from oracle.report.captions import convergence_finding

    runs = pd.DataFrame({"arch": ["R"] * 4, "N": [50, 50, 300, 300], "seed": [0, 1, 0, 1],
                         "epistemic": [1.0, 0.8, 0.4, 0.5], "overconfidence_truth": [0.1, -0.1, 0.0, 0.02],
                         "ece_posterior": [0.1, 0.1, 0.02, 0.04], "converged": [True, True, True, False],
                         "stopped_by": ["patience", "budget", "patience", "budget"], "kept_steps": [60, 300, 120, 304]})
    t = learners_table(runs, ["arch", "N"])
    assert list(t["Converged"]) == ["2/2", "1/2"] and list(t["Stopped by rule"]) == ["1/2", "1/2"]
    assert list(t["Steps"]) == [180.0, 212.0] and t["Overconf. truth"].iloc[0] == pytest.approx(0.0)
    text = convergence_finding(runs)
    assert "3 of 4 classifiers" in text and "2 stopped by it" in text and "N=300 seed=1" in text
    assert convergence_finding(runs.drop(columns=["converged"])) == ""
