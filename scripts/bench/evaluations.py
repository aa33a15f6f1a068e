"""What a classifier training's evaluations cost: the stopping rule's validation loss and the
training-curve monitor (classifiers.curve_size test rows) at every evaluation, against the
optimizer steps, and the patience tail (steps run after the kept weights), in one process.

    .venv/bin/python scripts/bench/evaluations.py --n 1000 --arch test_resnet --input-size 16

Synthetic 1x8x8 images of 10 classes told apart by their mean brightness pattern (learnable, with
ambiguous rows), trained under the embedded default's recipe (config.yaml classifiers.training).
Prints the wall seconds of the whole training, of the validation evaluations and of the monitor,
as shares of the training: ratios measured side by side, which hold on a shared machine.
"""

import argparse
import time

import numpy as np
import torch
import yaml

from oracle.classifiers import train as tr
from oracle.classifiers.build import build_classifier
from oracle.classifiers.data import EvaluationSet, curve_monitor
from oracle.workflow.plan.paths import REPO_ROOT


def rows(n: int, k: int, rng: np.random.Generator):
    means = rng.normal(0, 0.6, (k, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, k, n)
    x = (means[y] + rng.normal(0, 0.9, (n, 1, 8, 8))).clip(-1, 1).astype(np.float32)
    d = ((x[:, None] - means[None]) ** 2).sum((2, 3, 4))
    log_p = -d / (2 * 0.81)
    log_p -= np.logaddexp.reduce(log_p, axis=1, keepdims=True)
    return x, y, log_p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--arch", default="test_resnet")
    ap.add_argument("--input-size", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg = yaml.safe_load((REPO_ROOT / "config.yaml").read_text())
    training, curve = cfg["classifiers"]["training"], int(cfg["classifiers"]["curve_size"])
    rng = np.random.default_rng(a.seed)
    x, y, _ = rows(a.n, 10, rng)
    vx, vy, _ = rows(int(training["val_size"]), 10, rng)
    cx, cy, clp = rows(curve, 10, rng)
    spent = {"validation": 0.0, "monitor": 0.0}
    real_eval = tr._evaluate_loss

    def timed_eval(*args, **kw):
        s = time.perf_counter()
        out = real_eval(*args, **kw)
        spent["validation"] += time.perf_counter() - s
        return out

    tr._evaluate_loss = timed_eval
    measure = curve_monitor(EvaluationSet(cx, cy, clp, np.arange(curve)), torch.device("cpu"))

    def monitor(model):
        s = time.perf_counter()
        out = measure(model)
        spent["monitor"] += time.perf_counter() - s
        return out

    model = build_classifier(a.arch, 10, 1, 8, a.input_size, None, seed=a.seed)
    s = time.perf_counter()
    _, history, conv = tr.train_by_recipe(model, torch.from_numpy(x), torch.from_numpy(y), training, soft=False,
                                          seed=a.seed, validation=(torch.from_numpy(vx), torch.from_numpy(vy)),
                                          monitor=monitor, num_classes=10)
    total = time.perf_counter() - s
    steps, kept = conv["steps"], conv["kept_steps"]
    evals = sum(1 for h in history if "val_loss" in h)
    print(f"{a.arch} N={a.n}: {steps} steps ({kept} kept, tail {steps - kept} = {(steps - kept) / steps:.1%}), "
          f"{evals} evaluations of {len(vx)} validation + {curve} curve rows, stopped by {conv['stopped_by']}; "
          f"training {total:.2f} s: validation {spent['validation']:.2f} s ({spent['validation'] / total:.1%}), "
          f"monitor {spent['monitor']:.2f} s ({spent['monitor'] / total:.1%})")


if __name__ == "__main__":
    main()
