"""The stopping rule of every classifier, and whether a trained classifier converged by it.

The recipe (config key classifiers.training, README "How the learners are trained"): AdamW at a
constant learning rate while the validation loss, measured on validation rows that no training
set holds (``val_size`` rows of the world's pool, or an experiment's own split, ``val_fraction``)
at least every ``eval_steps`` optimizer steps, still falls; once ``patience`` evaluations in a row
have not lowered the best validation loss by a relative ``min_delta`` (or the budget of epochs is
spent), training restarts from the best evaluation's weights and decays the rate linearly to zero
over ``decay_fraction`` of the steps those weights had taken (rounded up to whole epochs): the
weights kept are the annealed ones at the end of that decay. The budget is a ceiling, not the
schedule of the run: a classifier that reaches it still improving has not converged.

Why a decay after the stop rather than a cosine over the budget: the rule stops long before the
budget, so a cosine over it leaves the kept weights at 0.46-0.96 of the peak rate (the default's
N = 2,000 scaling cells, issue 46), and their KL then carries the noise of an un-annealed step
size (docs/learners.md, "Annealed weights"). Without patience (the paper's fixed-epoch recipe)
the rate follows a cosine to zero over the budget and the last weights are kept.

Because evaluations are spaced in optimizer steps rather than epochs, the rule is the same for
every N: a set of 40 rows (one step per epoch) is evaluated every ``eval_steps`` epochs, a set
of 2,000 rows (25 steps per epoch) after every epoch.

Light: standard library only (the workflow reads it at DAG-build time).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from oracle.errors import ConfigError


@dataclass(frozen=True)
class StoppingRule:
    """When to evaluate, when to stop and what counts as converged.

    patience: evaluations in a row without improvement before training stops; None: train the
        whole budget (the paper's fixed-epoch recipe) and keep the last weights.
    eval_steps: optimizer steps at least between two evaluations (rounded up to whole epochs).
    min_delta: relative fall of the validation loss below its best that counts as improvement.
    tolerance: a run that used its whole budget converged if its loss (validation, else
        training) fell by at most this relative amount over its last `patience` evaluations
        (the last 5 when patience is None).
    decay_fraction: with patience, the steps of the final decay of the rate to zero as a
        fraction of the steps of the best evaluation's weights it starts from (0: no decay, the
        best weights are kept at the peak rate: not annealed).
    """

    patience: int | None = None
    eval_steps: int = 1
    min_delta: float = 0.0
    tolerance: float = 0.01
    decay_fraction: float = 0.0

    def __post_init__(self) -> None:
        if self.patience is not None and (not isinstance(self.patience, int) or self.patience < 1):
            raise ConfigError(f"patience={self.patience!r}: expected a positive integer or null")
        if not isinstance(self.eval_steps, int) or self.eval_steps < 1:
            raise ConfigError(f"eval_steps={self.eval_steps!r}: expected a positive integer")
        if not (0.0 <= self.min_delta < 1.0 and 0.0 <= self.tolerance < 1.0):
            raise ConfigError(f"min_delta={self.min_delta!r}, tolerance={self.tolerance!r}: expected values in [0, 1)")
        if not 0.0 <= self.decay_fraction <= 1.0:
            raise ConfigError(f"decay_fraction={self.decay_fraction!r}: expected a value in [0, 1]")

    @classmethod
    def from_training(cls, training: Mapping) -> StoppingRule:
        """The rule of a classifiers.training block (keys ``patience``, ``eval_steps``,
        ``min_delta``, ``tolerance``, ``decay_fraction``; absent keys take the defaults above)."""
        return cls(patience=None if training.get("patience") is None else int(training["patience"]),
                   eval_steps=int(training.get("eval_steps", 1)),
                   min_delta=float(training.get("min_delta", 0.0)),
                   tolerance=float(training.get("tolerance", 0.01)),
                   decay_fraction=float(training.get("decay_fraction", 0.0)))

    @property
    def window(self) -> int:
        """Evaluations over which convergence is judged."""
        return self.patience or 5

    def eval_every(self, steps_per_epoch: int) -> int:
        """Epochs between two evaluations: enough for `eval_steps` optimizer steps."""
        return max(1, math.ceil(self.eval_steps / max(1, int(steps_per_epoch))))

    def improved(self, loss: float, best: float | None) -> bool:
        """Whether validation loss `loss` improves on the best so far."""
        return best is None or loss < best - self.min_delta * abs(best)

    def decay_epochs(self, best_steps: int, steps_per_epoch: int) -> int:
        """Whole epochs of the final decay from weights that took `best_steps` optimizer steps:
        ``ceil(decay_fraction * best_steps)`` steps rounded up to epochs (0 without patience or
        with decay_fraction 0)."""
        if self.patience is None or self.decay_fraction <= 0:
            return 0
        steps = max(1, math.ceil(self.decay_fraction * max(1, int(best_steps))))
        return math.ceil(steps / max(1, int(steps_per_epoch)))


#: Kept weights count as annealed when the learning rate at them is at most this fraction of the
#: peak (issue 46: "recorded rate at most 0.1 of the peak").
ANNEALED_LR = 0.1


def is_evaluation_epoch(epoch: int, every: int, epochs: int) -> bool:
    """Whether the 1-based `epoch` of an `epochs` budget ends with an evaluation: every
    `every`-th epoch and the last."""
    return epoch % every == 0 or epoch == epochs


def convergence(history: Sequence[Mapping], rule: StoppingRule, budget_epochs: int) -> dict:
    """Whether a run with per-epoch records `history` (`oracle.classifiers.train.train_classifier`)
    converged by `rule`, and whether its kept weights were annealed.

    Returns ``{"converged", "stopped_by", "annealed", "kept_lr", "epochs_run", "budget_epochs",
    "kept_epoch", "best_epoch", "steps", "kept_steps", "decay_steps", "monitored", "loss_change"}``:
    ``stopped_by`` is "patience" (the rule ended the constant-rate phase before the budget) or
    "budget"; ``kept_epoch`` the epoch whose weights were kept (the end of the final decay; without
    one the best evaluation with patience, else the last); ``best_epoch`` the best evaluation the
    decay started from; ``steps`` the optimizer steps run in all, ``kept_steps`` those behind the
    kept weights (the best evaluation's plus the decay's); ``kept_lr`` the learning rate at the kept
    weights as a fraction of the peak (``lr_fraction`` of the kept epoch's record: the rate the
    next step would have used); ``annealed`` whether it is at most `ANNEALED_LR`; ``monitored``
    "val_loss" or "train_loss"; ``loss_change`` the relative change of the monitored loss's best
    over the last `rule.window` evaluations of the constant-rate phase against its best before them
    (negative: still falling; None when there were too few evaluations). A run converged when the
    rule stopped it (or its loss fell by at most ``rule.tolerance`` over that window: a loss that
    rose there had passed its minimum) AND its kept weights were annealed.
    """
    if not history:
        raise ValueError("convergence: empty history")
    main = [r for r in history if r.get("phase", "main") == "main"] or list(history)
    decay = [r for r in history if r.get("phase") == "decay"]
    monitored = "val_loss" if any("val_loss" in r for r in main) else "train_loss"
    points = [(int(r["epoch"]), float(r[monitored])) for r in main if monitored in r]
    epochs_run = int(main[-1]["epoch"])
    best_epoch = int(main[-1].get("best_epoch") or epochs_run) if rule.patience is not None else epochs_run
    by_epoch = {int(r["epoch"]): r for r in main}
    best_steps = int(by_epoch.get(best_epoch, main[-1]).get("steps", 0))
    if decay:
        kept = decay[-1]
        kept_epoch, decay_steps = int(kept["epoch"]), int(kept["steps"]) - int(main[-1].get("steps", 0))
    else:
        kept = by_epoch.get(best_epoch, main[-1])
        kept_epoch, decay_steps = int(kept["epoch"]), 0
    kept_lr = kept.get("lr_fraction")
    annealed = kept_lr is not None and float(kept_lr) <= ANNEALED_LR
    stopped_by = "patience" if rule.patience is not None and epochs_run < int(budget_epochs) else "budget"
    change = None
    if len(points) > rule.window:
        before = min(v for _, v in points[:-rule.window])
        recent = min(v for _, v in points[-rule.window:])
        change = (recent - before) / abs(before) if before else 0.0
    settled = stopped_by == "patience" or (change is not None and change >= -rule.tolerance)
    return {"converged": bool(settled and annealed), "stopped_by": stopped_by, "annealed": bool(annealed),
            "kept_lr": None if kept_lr is None else float(kept_lr),
            "epochs_run": int(history[-1]["epoch"]), "budget_epochs": int(budget_epochs), "kept_epoch": kept_epoch,
            "best_epoch": best_epoch, "steps": int(history[-1].get("steps", 0)),
            "kept_steps": best_steps + decay_steps if decay else int(kept.get("steps", 0)),
            "decay_steps": decay_steps, "monitored": monitored, "loss_change": change}


def describe(c: Mapping) -> str:
    """One line of a `convergence` result, for a job's log."""
    lr = "" if c.get("kept_lr") is None else f", rate at them {c['kept_lr']:.3g} of the peak"
    return (f"{c['epochs_run']} of {c['budget_epochs']} epochs ({c['steps']} steps, kept epoch {c['kept_epoch']}{lr}), "
            f"{'converged' if c['converged'] else 'NOT converged'} ({c['stopped_by']}"
            f"{'' if c.get('annealed', True) else ', kept weights not annealed'})")
