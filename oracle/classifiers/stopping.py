"""The stopping rule of every classifier, and whether a trained classifier converged by it.

The recipe (config key classifiers.training, README "How the learners are trained"): AdamW with
a cosine schedule over a budget of epochs, the validation loss measured on validation rows that no
training set holds (``val_size`` rows of the world's pool, or an experiment's own split,
``val_fraction``) at least every ``eval_steps`` optimizer steps, and training stopped
once ``patience`` evaluations in a row have not lowered the best validation loss by a relative
``min_delta``; the weights of the best evaluation are kept. The budget is a ceiling, not the
schedule of the run: a classifier that reaches it still improving has not converged.

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
    """

    patience: int | None = None
    eval_steps: int = 1
    min_delta: float = 0.0
    tolerance: float = 0.01

    def __post_init__(self) -> None:
        if self.patience is not None and (not isinstance(self.patience, int) or self.patience < 1):
            raise ConfigError(f"patience={self.patience!r}: expected a positive integer or null")
        if not isinstance(self.eval_steps, int) or self.eval_steps < 1:
            raise ConfigError(f"eval_steps={self.eval_steps!r}: expected a positive integer")
        if not (0.0 <= self.min_delta < 1.0 and 0.0 <= self.tolerance < 1.0):
            raise ConfigError(f"min_delta={self.min_delta!r}, tolerance={self.tolerance!r}: expected values in [0, 1)")

    @classmethod
    def from_training(cls, training: Mapping) -> StoppingRule:
        """The rule of a classifiers.training block (keys ``patience``, ``eval_steps``,
        ``min_delta``, ``tolerance``; absent keys take the defaults above)."""
        return cls(patience=None if training.get("patience") is None else int(training["patience"]),
                   eval_steps=int(training.get("eval_steps", 1)),
                   min_delta=float(training.get("min_delta", 0.0)),
                   tolerance=float(training.get("tolerance", 0.01)))

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


def is_evaluation_epoch(epoch: int, every: int, epochs: int) -> bool:
    """Whether the 1-based `epoch` of an `epochs` budget ends with an evaluation: every
    `every`-th epoch and the last."""
    return epoch % every == 0 or epoch == epochs


def convergence(history: Sequence[Mapping], rule: StoppingRule, budget_epochs: int) -> dict:
    """Whether a run with per-epoch records `history` (`oracle.classifiers.train.train_classifier`)
    converged by `rule`.

    Returns ``{"converged", "stopped_by", "epochs_run", "budget_epochs", "kept_epoch", "steps",
    "kept_steps", "monitored", "loss_change"}``: ``stopped_by`` is "patience" (the rule ended it
    before the budget) or "budget"; ``kept_epoch`` the epoch whose weights were kept (the best
    evaluation with patience, else the last); ``steps``/``kept_steps`` the optimizer steps run and
    those of the kept weights; ``monitored`` "val_loss" or "train_loss"; ``loss_change`` the
    relative change of the monitored loss's best over the last `rule.window` evaluations against
    its best before them (negative: still falling; None when there were too few evaluations).
    A run converged when the rule stopped it, or when its loss fell by at most
    ``rule.tolerance`` over that window (a loss that rose there had passed its minimum).
    """
    if not history:
        raise ValueError("convergence: empty history")
    monitored = "val_loss" if any("val_loss" in r for r in history) else "train_loss"
    points = [(int(r["epoch"]), float(r[monitored])) for r in history if monitored in r]
    epochs_run = int(history[-1]["epoch"])
    kept_epoch = int(history[-1].get("best_epoch", epochs_run)) if rule.patience is not None else epochs_run
    steps = [int(r.get("steps", 0)) for r in history]
    kept_steps = next((int(r.get("steps", 0)) for r in history if int(r["epoch"]) == kept_epoch), steps[-1])
    stopped_by = "patience" if rule.patience is not None and epochs_run < int(budget_epochs) else "budget"
    change = None
    if len(points) > rule.window:
        before = min(v for _, v in points[:-rule.window])
        recent = min(v for _, v in points[-rule.window:])
        change = (recent - before) / abs(before) if before else 0.0
    converged = stopped_by == "patience" or (change is not None and change >= -rule.tolerance)
    return {"converged": bool(converged), "stopped_by": stopped_by, "epochs_run": epochs_run,
            "budget_epochs": int(budget_epochs), "kept_epoch": kept_epoch, "steps": steps[-1], "kept_steps": kept_steps,
            "monitored": monitored, "loss_change": change}


def describe(c: Mapping) -> str:
    """One line of a `convergence` result, for a job's log."""
    return (f"{c['epochs_run']} of {c['budget_epochs']} epochs ({c['steps']} steps, kept epoch {c['kept_epoch']}), "
            f"{'converged' if c['converged'] else 'NOT converged'} ({c['stopped_by']})")
