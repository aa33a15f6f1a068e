"""Annealed against un-annealed kept weights, side by side: for classifiers of a finished run's
world, the test set's exact epistemic KL and accuracy, the optimizer steps and the rate at the kept
weights under each recipe, with every difference paired per test row against the first recipe.

Recipes: ``before`` (the recipe of commit bf1fc04: a cosine over the budget, the best evaluation's
weights kept wherever the rule stopped it; its train.py is loaded from git), ``best`` (a constant
rate, the best weights kept: decay_fraction 0) and ``decay<f>`` (a constant rate, then a linear
decay to 0 over a fraction f of the best weights' steps). Everything else is the run's own
classifiers.training block and the project's own data readers.

    .venv/bin/python scripts/bench/anneal.py results/default --world tau0.7 \
        --cells test_resnet:2000:0 test_vit:2000:0 --recipes before best decay0.2 decay0.5

Prints one Markdown table (docs/learners.md, "Annealed weights"). The KL differences are paired per
test row (`oracle.measures.paired.paired_difference`): one world, one test set, one seed each.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BEFORE = "bf1fc04"


def _old_train_module():
    """oracle/classifiers/train.py as of commit `BEFORE`, importable beside today's package."""
    src = subprocess.run(["git", "-C", str(REPO), "show", f"{BEFORE}:oracle/classifiers/train.py"],
                         capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "train_before.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("oracle.classifiers._train_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="a finished run's results/<run> directory")
    ap.add_argument("--world", required=True)
    ap.add_argument("--cells", nargs="+", required=True, help="arch:N:seed ...")
    ap.add_argument("--recipes", nargs="+", default=["before", "best", "decay0.2"])
    args = ap.parse_args()

    import numpy as np
    import torch

    from oracle.classifiers.build import build_classifier
    from oracle.classifiers.data import evaluation_set, training_set, validation_set
    from oracle.classifiers.predict import predict_log_probs
    from oracle.classifiers.stopping import StoppingRule, convergence
    from oracle.classifiers.train import train_by_recipe
    from oracle.io.yaml_text import parse_yaml
    from oracle.measures.paired import paired_difference, row_values

    torch.set_num_threads(max(1, torch.get_num_threads()))
    config = parse_yaml((args.run / "config.yaml").read_text())
    training = dict(config["classifiers"]["training"])
    samples, splits = args.run / "samples" / args.world / "all.h5", args.run / "splits" / f"{args.world}.h5"
    ev = evaluation_set(samples, splits)
    old = _old_train_module() if "before" in args.recipes else None
    print(f"world {args.world}: {len(ev.labels)} test rows; training {training}", file=sys.stderr)
    print("| cell | recipe | steps run | kept steps | rate at kept (of peak) | converged | KL (nats) "
          "| KL - first recipe (paired SE) | accuracy | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for cell in args.cells:
        arch, n, seed = cell.split(":")
        n, seed = int(n), int(seed)
        spec = {"world": args.world, "n": n, "labels": "hard", "hard_label": "label", "training": training}
        data = training_set(samples, splits, spec, seed, stream="auto")
        val = validation_set(samples, splits, seed, int(training["val_size"]), "hard", "label")
        a = dict(config["classifiers"]["archs"][arch])
        first = None
        for recipe in args.recipes:
            model = build_classifier(a.get("model", arch), data.num_classes, int(data.x.shape[1]), int(data.x.shape[2]),
                                     a["input_size"], None, seed=seed)
            started = time.perf_counter()
            if recipe == "before":
                from oracle.classifiers.specs import training_epochs

                epochs = training_epochs(training, n)
                rule = StoppingRule.from_training({**training, "decay_fraction": 0.0})
                model, history = old.train_classifier(
                    model, data.images(), torch.from_numpy(data.targets), soft=False, epochs=epochs,
                    batch_size=int(training["batch_size"]), lr=float(training["lr"]),
                    weight_decay=float(training["weight_decay"]), seed=seed, stopping=rule, validation=val)
                conv = convergence(history, rule, epochs)
                kept = next(r for r in history if r["epoch"] == conv["best_epoch"])
                conv["kept_lr"] = kept["lr"] / float(training["lr"])
            else:
                fraction = 0.0 if recipe == "best" else float(recipe.removeprefix("decay"))
                model, history, conv = train_by_recipe(model, data.images(), torch.from_numpy(data.targets),
                                                       {**training, "decay_fraction": fraction}, soft=False,
                                                       seed=seed, validation=val)
            seconds = time.perf_counter() - started
            log_q = predict_log_probs(model, torch.from_numpy(ev.x), batch_size=256, device=torch.device("cpu"))
            rows = row_values(log_q.numpy(), ev.log_p, ev.labels)
            diff = "" if first is None else "{mean:+.4f} ({se:.4f})".format(**paired_difference(rows["epistemic"],
                                                                                                 first["epistemic"]))
            first = first or rows
            print(f"| {arch} N={n} seed {seed} | {recipe} | {conv['steps']} | {conv['kept_steps']} | "
                  f"{conv['kept_lr']:.3f} | {conv['converged']} | {np.mean(rows['epistemic']):.4f} | {diff} | "
                  f"{np.mean(rows['acc']):.4f} | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
