"""Rule `classifier`: train one (experiment, arch, N, seed) classifier on oracle samples and
evaluate it on the fixed oracle test set -> metrics.json + predictions.h5 (log q, test rows).

A training checkpoint next to the outputs (train_state.pt) lets a killed job resume; it is
removed once the outputs exist.
"""

from pathlib import Path

import torch

from oracle.workflow import config as oc
from oracle import experiments as ex
from oracle.classifiers import build_classifier, evaluate_predictions, predict_log_probs, train_classifier
from oracle.devices import pick_device
from oracle.errors import DataError
from oracle.io.atomic import write_json_atomic
from oracle.io.splits import read_splits_h5

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with ex.script_job(sm.log[0], sm.threads) as started:
    exp, arch, tr = sm.params.experiment, sm.params.arch, sm.params.training
    n, seed = int(sm.wildcards.N), int(sm.wildcards.seed)
    splits = read_splits_h5(sm.input.splits)
    if seed not in splits["train"] or n not in splits["train"][seed]:
        raise DataError(f"{sm.input.splits} has no training subset N={n} seed={seed}; rerun make_splits")
    train = ex.read_rows(sm.input.samples, splits["train"][seed][n])
    test = ex.read_rows(sm.input.samples, splits["test"])
    attrs = train["attrs"]
    num_classes = int(attrs["num_classes"])
    log_p_train = ex.posterior_rows(train["loglik"], attrs)
    log_p_test = ex.posterior_rows(test["loglik"], attrs)
    targets = ex.training_targets(exp["labels"], exp["hard_label"], train["source_class"], log_p_train)

    device = pick_device(sm.params.device)
    _, c, h, _ = train["x"].shape
    pretrained = arch["pretrained"] if isinstance(arch["pretrained"], str) else None
    model = build_classifier(arch["model"], num_classes, int(c), int(h), arch["input_size"], pretrained, seed=seed)
    epochs = oc.effective_epochs(n, tr["epochs"], tr["batch_size"], tr["min_steps"])
    state = Path(sm.output.metrics).with_name("train_state.pt")
    model, history = train_classifier(
        model, torch.from_numpy(train["x"]), torch.from_numpy(targets), soft=exp["labels"] == "soft",
        epochs=epochs, batch_size=tr["batch_size"], lr=tr["lr"], weight_decay=tr["weight_decay"], seed=seed,
        device=device, checkpoint_path=state, num_classes=num_classes,
    )
    log_q = predict_log_probs(model, torch.from_numpy(test["x"]), batch_size=max(256, tr["batch_size"]), device=device)
    metrics = evaluate_predictions(log_q, log_p_test, test["source_class"])
    ex.write_predictions(sm.output.predictions, log_q.numpy(), splits["test"], test["source_class"],
                         attrs={"experiment": exp["name"], "arch": sm.wildcards.arch, "N": n, "seed": seed})
    write_json_atomic(sm.output.metrics, {
        "experiment": exp["name"], "arch": sm.wildcards.arch, "model": arch["model"], "N": n, "seed": seed,
        "labels": exp["labels"], "hard_label": exp["hard_label"] if exp["labels"] == "hard" else None,
        "epochs": epochs, "train_seconds": sum(h_["seconds"] for h_ in history), "history": history,
        "device": str(device), "metrics": metrics,
    })
    state.unlink(missing_ok=True)
    print(f"{exp['name']}/{sm.wildcards.arch}/N{n}/seed{seed}: acc {metrics['acc_source']['mean']:.4f} "
          f"epistemic {metrics['epistemic']['mean']:.4f} nats")
    ex.record_job(sm, started, extra={"device": str(device)})
