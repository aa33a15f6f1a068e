"""Pool-based active learning on oracle samples (paper section 4.4), one run per (arch,
strategy, seed), with the exact epistemic and aleatoric parts of every pool sample known.

Data (`load_active_data`): the seed's permutation of the world's training pool
(`oracle.io.splits`) gives the initial labelled set (its first ``initial_size`` rows) and the
unlabelled pool (the next ``pool_size`` rows); the test set is the world's fixed test set,
disjoint from both by construction (checked). Targets are those of a classifier experiment
(`oracle.classifiers.targets`: the world's label y ~ p_T(y|x) by default).

Rounds r = 0 .. R (`run_active_learning`): the model is rebuilt with the same initial weights
(``build_classifier(seed=seed)``: every round and every strategy of a seed starts from the
same weights, so round 0 is the same model for every strategy: `train_round_zero` trains it,
and scores the pool, once per seed, and each strategy's run starts from that file) and trained
from scratch on the labelled rows (`oracle.classifiers.train`), then scored on the test set (accuracy against the
world's labels, exact epistemic KL E[KL(p || q)], nats). Before the last round, every score of
the experiment's strategies is computed on the remaining pool (`oracle.measures.acquisition`),
with its Spearman rank correlation against the exact KL(p || q) and the exact H(p) of each
pool sample, and the run's strategy selects the next ``batch`` rows (top-b; ``random`` draws
them with a generator seeded by (seed, round)). Every model of a run carries the same dropout
(``drop_rate``, timm's dropout before the head), so strategies differ only in what they
acquire; ``bald`` scores with ``mc_samples`` MC-dropout passes of that dropout
(`oracle.classifiers.predict.mc_dropout_log_probs`).

Resume: with ``state_dir``, the finished rounds (records and selections) are saved atomically
after each round under a resume key of everything that decides them (data, settings, arch,
seed, code; `oracle.io.resume`), and the round in progress checkpoints its training after
every epoch. A killed run resumes at its last finished round (mid-round at its last epoch)
and makes the same selections as an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING, Any

import numpy as np

from oracle.classifiers.specs import TRAINING_KEYS
from oracle.progress import Progress
from oracle.errors import ConfigError, DataError
from oracle.io.atomic import torch_save_atomic
from oracle.io.resume import array_sha256, canonical_key, load_resume_state, source_sha256

if TYPE_CHECKING:
    import torch

    from oracle.classifiers.data import EvaluationSet

# torch and the classifiers are imported where used: the workflow imports this module (through
# oracle.experiments.active) when it builds the DAG, which must stay fast.
log = logging.getLogger(__name__)

#: The scores a strategy other than ``random`` acquires by (`pool_scores`); the strategies
#: a config may name are the `active` kind's (`oracle.experiments.active.STRATEGIES`).
SCORES = ("max_entropy", "max_epistemic", "bald")
STATE_FORMAT = "oracle-active-learning/1"
ROUND_ZERO_FORMAT = "oracle-active-round-zero/1"
# stream tags: the random strategy's draws and the MC-dropout masks never share numbers
_RANDOM_TAG, _MC_TAG = 0xAC71, 0xD80


@dataclass(frozen=True)
class ActiveData:
    """The rows of one run. ``x`` float32 [m, C, H, W], ``targets`` (int64 [m] or float32
    [m, K]), ``log_p`` float64 [m, K] (log p_T(y|x)), ``rows`` int64 [m] (sample-file rows):
    the first ``initial_size`` are the initial labelled set, the rest the pool, in the seed's
    order. ``test``: the world's test set. ``validation``: the stopping rule's rows, (x, targets)
    tensors of the tail of the seed's pool order (`oracle.classifiers.data.validation_set`), or None."""

    x: np.ndarray
    targets: np.ndarray
    soft: bool
    log_p: np.ndarray
    rows: np.ndarray
    initial_size: int
    num_classes: int
    test: EvaluationSet
    validation: tuple | None = None


@dataclass(frozen=True)
class ActiveSettings:
    """What a run does besides its data, arch and seed: its strategy, the scores it computes
    on the pool (``scored``: the experiment's strategies other than random), R ``rounds`` of
    ``batch`` labels, ``drop_rate`` of every model, ``mc_samples`` MC-dropout passes (BALD) and
    a round's training hyperparameters as classifiers.training spells them (``training``: each of
    `oracle.classifiers.specs.TRAINING_KEYS`; its budget `oracle.classifiers.specs.training_epochs`
    and its stopping rule)."""

    strategy: str | None  # None: round 0, shared by every strategy (`train_round_zero`)
    scored: tuple[str, ...]
    rounds: int
    batch: int
    drop_rate: float
    mc_samples: int
    training: Mapping[str, Any]

    def __post_init__(self) -> None:
        if missing := [k for k in TRAINING_KEYS if k not in self.training]:
            raise ConfigError(f"active learning's training settings lack {', '.join(missing)}")

    @classmethod
    def from_spec(cls, spec: Mapping, strategy: str | None) -> ActiveSettings:
        """The settings of strategy `strategy` of an `active` experiment spec (None: those of its
        round 0, which every strategy shares)."""
        if strategy is not None and strategy not in spec["strategies"]:
            raise ConfigError(f"strategy {strategy!r} is not one of the experiment's {spec['strategies']}")
        return cls(strategy=strategy, scored=tuple(s for s in spec["strategies"] if s != "random"),
                   rounds=int(spec["rounds"]), batch=int(spec["batch"]), drop_rate=float(spec["drop_rate"]),
                   mc_samples=int(spec["mc_samples"]),
                   training={k: spec["training"][k] for k in TRAINING_KEYS if k in spec["training"]})


def load_active_data(samples: str | os.PathLike, splits: str | os.PathLike, seed: int, initial_size: int,
                     pool_size: int, labels: str = "hard", hard_label: str | None = "label",
                     val_size: int = 0) -> ActiveData:
    """The initial set, pool and test set of seed `seed` (module docstring). DataError when
    the training pool is too small or (a corrupt splits file) the pool meets the test set."""
    from oracle.classifiers.data import evaluation_set, validation_set
    from oracle.classifiers.targets import training_targets
    from oracle.io.sample_rows import read_rows
    from oracle.io.splits import read_splits_h5, training_indices
    from oracle.posterior import posterior_rows

    parts = read_splits_h5(splits)
    rows = training_indices(parts, seed, int(initial_size) + int(pool_size))
    shared = np.intersect1d(rows, parts["test"])
    if shared.size:
        raise DataError(f"{splits}: {shared.size} row(s) of seed {seed}'s labelled set and pool are in the test set")
    data = read_rows(samples, rows)
    attrs = data["attrs"]
    log_p = posterior_rows(data["loglik"], attrs)
    targets = training_targets(labels, hard_label, data["label"], log_p, source_class=data["source_class"],
                               label_temperature=float(attrs["label_temperature"]))
    return ActiveData(x=data["x"], targets=targets, soft=labels == "soft", log_p=log_p, rows=rows,
                      initial_size=int(initial_size), num_classes=int(attrs["num_classes"]),
                      test=evaluation_set(samples, splits),
                      validation=validation_set(samples, splits, seed, val_size, labels, hard_label))


def _seed_of(*parts: int) -> int:
    """A 63-bit seed from integers (seed, round, stream tag)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(2, np.uint64)[0] >> np.uint64(1))


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman's rank correlation of two score vectors (ties get average ranks); None when
    either is constant (no ranking) or there are fewer than 3 rows."""
    from scipy.stats import spearmanr

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    rho = float(spearmanr(a, b).statistic)
    return rho if math.isfinite(rho) else None


def pool_scores(model: torch.nn.Module, x: np.ndarray, log_p: np.ndarray, scored: tuple[str, ...],
                mc_samples: int, mc_seed: int, device: torch.device, batch_size: int = 256) -> dict[str, np.ndarray]:
    """Scores of the pool rows ``x`` (float32 [n, ...]) with oracle log-posteriors ``log_p``:
    ``exact_epistemic`` KL(p || q) and ``exact_aleatoric`` H(p) (always) and one per strategy
    of `scored` (max_entropy: H(q); max_epistemic: KL(p || q); bald: MC-dropout BALD), each
    float64 [n] in nats."""
    import torch

    from oracle.classifiers.predict import mc_dropout_log_probs, predict_log_probs
    from oracle.measures import acquisition as acq

    xt = torch.from_numpy(x)
    log_q = predict_log_probs(model, xt, batch_size=batch_size, device=device)
    out = {"exact_epistemic": acq.exact_epistemic(log_p, log_q), "exact_aleatoric": acq.exact_aleatoric(log_p)}
    for name in scored:
        if name == "max_entropy":
            out[name] = acq.predictive_entropy(log_q)
        elif name == "max_epistemic":
            out[name] = out["exact_epistemic"]
        elif name == "bald":
            out[name] = acq.bald(mc_dropout_log_probs(model, xt, mc_samples, mc_seed, batch_size, device))
        else:
            raise ConfigError(f"no score for strategy {name!r} (scored strategies: {', '.join(SCORES)})")
    return out


def _resume_key(data: ActiveData, arch: Mapping, settings: ActiveSettings, seed: int) -> dict:
    from oracle.classifiers import build, evaluate, predict, train
    from oracle.measures import acquisition

    t = data.test
    return canonical_key({
        "format": STATE_FORMAT, "arch": dict(arch), "settings": dataclasses.asdict(settings), "seed": int(seed),
        "initial_size": data.initial_size,
        "data": array_sha256(data.x, data.targets, data.log_p, data.rows, t.x, t.labels, t.log_p, t.rows,
                             *(data.validation or ())),
        "code": source_sha256(sys.modules[__name__], acquisition, build, train, predict, evaluate),
        "timm": importlib.metadata.version("timm"),
    })


def _metrics(model, test: EvaluationSet, batch_size: int, device) -> dict:
    import torch

    from oracle.classifiers.evaluate import evaluate_predictions
    from oracle.classifiers.predict import predict_log_probs

    log_q = predict_log_probs(model, torch.from_numpy(test.x), batch_size=batch_size, device=device)
    m = evaluate_predictions(log_q, test.log_p, test.labels)
    out = {"test_size": m["n"], "ece": m["ece"]}
    for name in ("acc", "epistemic", "total", "aleatoric", "bayes_accuracy"):
        out[name], out[f"{name}_se"] = m[name]["mean"], m[name]["se"]
    return out


def _train(data: ActiveData, positions: np.ndarray, arch: Mapping, s: ActiveSettings, seed: int, device,
           checkpoint: Path | None):
    import torch

    from oracle.classifiers.build import build_classifier
    from oracle.classifiers.train import train_by_recipe

    _, c, h, _ = data.x.shape
    pretrained = arch["pretrained"] if isinstance(arch.get("pretrained"), str) else None
    model = build_classifier(arch["model"], data.num_classes, int(c), int(h), arch.get("input_size"), pretrained,
                             seed=seed, model_kwargs={"drop_rate": s.drop_rate})
    model, history, conv = train_by_recipe(
        model, torch.from_numpy(data.x[positions]), torch.from_numpy(data.targets[positions]), s.training,
        soft=data.soft, seed=seed, device=device, checkpoint_path=checkpoint, num_classes=data.num_classes,
        validation=data.validation)
    return model, {"epochs": conv["budget_epochs"], "train_seconds": sum(r["seconds"] for r in history),
                   "train_loss": history[-1]["train_loss"], "converged": conv["converged"],
                   "stopped_by": conv["stopped_by"], "kept_lr": conv["kept_lr"], "steps": conv["steps"],
                   "kept_steps": conv["kept_steps"]}


def _free(data: ActiveData, labelled: np.ndarray) -> np.ndarray:
    """The pool positions not labelled yet, ascending."""
    return np.setdiff1d(np.arange(data.initial_size, len(data.rows)), labelled)


def _round(data: ActiveData, labelled: np.ndarray, r: int, arch: Mapping, s: ActiveSettings, seed: int, device,
           checkpoint: Path | None) -> tuple[torch.nn.Module, dict, dict[str, np.ndarray] | None]:
    """Round `r` on the `labelled` positions: the trained model, its record (training and test
    metrics) and, before the last round, every score of the remaining pool (`pool_scores`)."""
    batch = max(256, int(s.training["batch_size"]))
    model, record = _train(data, labelled, arch, s, seed, device, checkpoint)
    record = {"round": r, "labelled": int(len(labelled)), **record, **_metrics(model, data.test, batch, device)}
    if r >= s.rounds:
        return model, record, None
    free = _free(data, labelled)
    return model, record, pool_scores(model, data.x[free], data.log_p[free], s.scored, s.mc_samples,
                                      _seed_of(seed, r, _MC_TAG), device, batch)


def train_round_zero(data: ActiveData, arch: Mapping, settings: ActiveSettings, seed: int,
                     device: str | torch.device = "cpu", checkpoint: str | os.PathLike | None = None) -> dict:
    """Round 0 of every strategy of seed `seed` (the strategy of `settings` is not read): the
    model trained on the initial labelled set, its record and the scores of the whole pool.
    {"format", "record", "scores": {name: float64 tensor [pool]}, "state_dict", "key"} (`key`:
    what decides it, `_resume_key` without the strategy), for `write_round_zero`."""
    import torch

    from oracle.devices import pick_device

    device = device if isinstance(device, torch.device) else pick_device(device)
    s = dataclasses.replace(settings, strategy=None)
    model, record, scores = _round(data, np.arange(data.initial_size, dtype=np.int64), 0, arch, s, seed, device,
                                   Path(checkpoint) if checkpoint is not None else None)
    return {"format": ROUND_ZERO_FORMAT, "record": record, "key": _resume_key(data, arch, s, seed),
            "scores": {k: torch.from_numpy(np.asarray(v, np.float64)) for k, v in (scores or {}).items()},
            "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()}}


def write_round_zero(path: str | os.PathLike, round_zero: Mapping) -> Path:
    """`train_round_zero`'s result to `path`, atomically."""
    return torch_save_atomic(dict(round_zero), path)


def read_round_zero(path: str | os.PathLike, data: ActiveData, arch: Mapping, settings: ActiveSettings,
                    seed: int) -> tuple[dict, dict[str, np.ndarray] | None]:
    """(record, pool scores) of the round-0 file at `path`; DataError naming it when it is not
    one or was trained on other data, arch, settings or seed than a run of `settings` (its key)."""
    from oracle.classifiers.checkpoints import read_checkpoint

    blob = read_checkpoint(path, "active-learning round 0")
    if not isinstance(blob, dict) or blob.get("format") != ROUND_ZERO_FORMAT:
        raise DataError(f"{path} is not an active-learning round 0 of format {ROUND_ZERO_FORMAT}; rerun its "
                        "active_round_zero job")
    if blob["key"] != _resume_key(data, arch, dataclasses.replace(settings, strategy=None), seed):
        raise DataError(f"{path}: round 0 of other data, arch, settings or seed than this run; rerun its "
                        "active_round_zero job")
    scores = {k: v.numpy() for k, v in blob["scores"].items()} if blob["scores"] else None
    return dict(blob["record"]), scores


def run_active_learning(data: ActiveData, arch: Mapping, settings: ActiveSettings, seed: int,
                        device: str | torch.device = "cpu", state_dir: str | os.PathLike | None = None,
                        round_zero: tuple[dict, dict[str, np.ndarray] | None] | None = None) -> list[dict]:
    """Run R + 1 rounds (module docstring); one record per round.

    arch: {model (timm name), input_size, pretrained} (`oracle.classifiers.specs.arch_spec`).
    Each record: ``round``, ``labelled`` (labels used for training), ``epochs`` (the budget),
    ``steps`` and ``kept_steps`` (optimizer steps run, and those of the weights kept),
    ``converged``, ``stopped_by`` and ``kept_lr`` (`oracle.classifiers.stopping.convergence`), ``train_seconds``, ``train_loss``, the test metrics ``acc``, ``epistemic``, ``total``,
    ``aleatoric``, ``bayes_accuracy`` (each with ``_se``), ``ece``, ``test_size``; and for
    r < R the acquisition: ``selected`` (sample-file rows, in selection order), ``pool_remaining``,
    ``pool_epistemic``/``pool_aleatoric`` (means over the remaining pool, nats),
    ``selected_epistemic``/``selected_aleatoric`` (means over the selected rows, nats) and
    ``correlations`` {score: {"exact_epistemic": rho, "exact_aleatoric": rho}} (Spearman over
    the remaining pool; None where undefined). The last round has ``selected`` = [] and no
    correlations. `round_zero`: round 0's (record, pool scores) as `read_round_zero` gives them,
    trained once for every strategy (`train_round_zero`); None trains it here.
    """
    import torch

    from oracle.devices import pick_device
    from oracle.measures.acquisition import select_top

    s = settings
    device = device if isinstance(device, torch.device) else pick_device(device)
    if s.strategy != "random" and (s.strategy not in SCORES or s.strategy not in s.scored):
        raise ConfigError(f"strategy {s.strategy!r}: expected random or one of {', '.join(SCORES)} (and scored: "
                          f"{s.scored})")
    n_pool = len(data.rows) - data.initial_size
    if s.rounds * s.batch > n_pool:
        raise ConfigError(f"{s.rounds} rounds of {s.batch} labels exceed the pool of {n_pool} rows")
    state_dir = Path(state_dir) if state_dir is not None else None
    key = _resume_key(data, arch, s, seed)
    records: list[dict] = []
    chosen: list[list[int]] = []
    if state_dir is not None:
        state = load_resume_state(state_dir / "state.pt", key, "active learning", discard=state_dir)
        if state is not None:
            records, chosen = list(state["rounds"]), [list(c) for c in state["chosen"]]
            print(f"resuming active learning at round {len(records)}/{s.rounds}", flush=True)
    labelled = np.concatenate([np.arange(data.initial_size), *[np.asarray(c, np.int64) for c in chosen]]).astype(np.int64)
    rounds = Progress(f"active learning {s.strategy}", s.rounds + 1, unit="round", start=len(records), every_s=0)
    for r in range(len(records), s.rounds + 1):
        ckpt = state_dir / "train_state.pt" if state_dir is not None else None
        if r == 0 and round_zero is not None:
            record, scores = dict(round_zero[0]), round_zero[1]
        else:
            _, record, scores = _round(data, labelled, r, arch, s, seed, device, ckpt)
        pick = np.zeros(0, np.int64)
        if r < s.rounds:
            free = _free(data, labelled)
            if s.strategy == "random":
                at = select_top(np.zeros(len(free)), s.batch, np.random.default_rng(_seed_of(seed, r, _RANDOM_TAG)))
            else:
                at = select_top(scores[s.strategy], s.batch)
            pick = free[at]
            kl, h = scores["exact_epistemic"], scores["exact_aleatoric"]
            record.update(pool_remaining=int(len(free)), pool_epistemic=float(kl.mean()), pool_aleatoric=float(h.mean()),
                          selected_epistemic=float(kl[at].mean()), selected_aleatoric=float(h[at].mean()),
                          correlations={name: {"exact_epistemic": spearman(scores[name], kl),
                                               "exact_aleatoric": spearman(scores[name], h)} for name in s.scored})
        record["selected"] = [int(v) for v in data.rows[pick]]
        records.append(record)
        chosen.append([int(v) for v in pick])
        labelled = np.concatenate([labelled, pick])
        rounds.update(r + 1, labels=record["labelled"], acc=record["acc"], epistemic_nats=record["epistemic"])
        if state_dir is not None:
            torch_save_atomic({"format": STATE_FORMAT, "resume_key": key, "rounds": records, "chosen": chosen},
                              state_dir / "state.pt")
            ckpt.unlink(missing_ok=True)
    return records
