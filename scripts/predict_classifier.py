"""Rule `predict_classifier`: a trained classifier on one evaluation set (a world's fixed test
set, or a noisy copy of it) -> predictions/<evalset>.h5 (logits and log q per test row) and
metrics/<evalset>.json (accuracy against the world's labels, the exact decomposition in nats
against the oracle's posterior at the evaluated x, calibration)."""

from oracle.workflow.jobs import run_job


def main(sm):
    import json
    from pathlib import Path

    import torch

    from oracle.classifiers.checkpoints import load_model
    from oracle.classifiers.data import evaluation_set
    from oracle.classifiers.evaluate import evaluate_predictions
    from oracle.classifiers.predict import predict_logits
    from oracle.devices import pick_device
    from oracle.io.atomic import write_json_atomic
    from oracle.io.predictions import write_predictions

    device = pick_device(sm.params.device)
    model, identity = load_model(sm.input.model, map_location=device)
    history = json.loads(Path(sm.input.history).read_text())
    ev = evaluation_set(sm.input.samples, sm.input.splits)
    batch = max(256, sm.params.training["training"]["batch_size"])
    logits = predict_logits(model, torch.from_numpy(ev.x), batch_size=batch, device=device)
    log_q = torch.log_softmax(logits, dim=1)
    metrics = evaluate_predictions(log_q, ev.log_p, ev.labels)
    evalset = sm.wildcards.evalset
    write_predictions(sm.output.predictions, log_q.numpy(), ev.rows, ev.labels, attrs={**identity, "evalset": evalset},
                      logits=logits.numpy())
    write_json_atomic(sm.output.metrics, {**identity, "evalset": evalset, "epochs": history["epochs"],
                                          "train_seconds": history["train_seconds"],
                                          "convergence": history["convergence"], "metrics": metrics})
    print(f"{identity['classifier']} on {evalset}: "
          f"acc {metrics['acc']['mean']:.4f}, epistemic {metrics['epistemic']['mean']:.4f} nats")
    return dict(extra={"device": str(device)})


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
