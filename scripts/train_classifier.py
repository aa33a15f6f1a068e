"""Rule `train_classifier`: train one model (world, arch, condition, seed) on its world's
oracle samples under the recipe and stopping rule of classifiers.training
(`oracle.classifiers.stopping`) -> model.pt (spec + the kept weights) and history.json (per-epoch
loss, lr, validation loss, whether the run converged and, on classifiers.curve_size test rows at
each evaluation, accuracy and exact epistemic KL; with a training-time shift what it realised:
class counts, noise std).

A training checkpoint next to the outputs (train_state.pt) lets a killed job resume; it is
removed once the outputs exist.
"""

from oracle.workflow.jobs import run_job


def main(sm):
    from pathlib import Path

    import torch

    from oracle.classifiers.build import build_classifier
    from oracle.classifiers.checkpoints import save_model
    from oracle.classifiers.data import curve_monitor, evaluation_set, training_set, validation_set
    from oracle.classifiers.specs import validation_size
    from oracle.classifiers.stopping import describe
    from oracle.classifiers.train import train_by_recipe
    from oracle.devices import pick_device
    from oracle.io.atomic import write_json_atomic

    spec, arch, wc = sm.params.training, sm.params.arch, sm.wildcards
    seed, tr = int(wc.seed), sm.params.training["training"]
    data = training_set(sm.input.samples, sm.input.splits, spec, seed, stream="auto")  # large sets stream: memory flat in N
    device = pick_device(sm.params.device)
    _, c, h, _ = data.x.shape
    pretrained = arch["pretrained"] if isinstance(arch["pretrained"], str) else None
    model = build_classifier(arch["model"], data.num_classes, int(c), int(h), arch["input_size"], pretrained, seed=seed)
    curve_size = int(spec["curve_size"])
    monitor = curve_monitor(evaluation_set(sm.input.samples, sm.input.splits, curve_size), device) if curve_size else None
    state = Path(sm.output.model).with_name("train_state.pt")
    model, history, converged = train_by_recipe(
        model, data.images(), torch.from_numpy(data.targets), tr, soft=data.soft, seed=seed, device=device,
        val_fraction=float(spec.get("val_fraction") or 0.0), monitor=monitor, curve_points=spec["curve_points"],
        validation=validation_set(sm.input.samples, sm.input.splits, seed, validation_size(spec), spec["labels"],
                                  spec["hard_label"]),
        checkpoint_path=state, num_classes=data.num_classes)
    epochs = converged["budget_epochs"]
    classifier = f"{wc.world}/{wc.arch}/{wc.condition}/seed{seed}"  # its runs: the specs' `classifiers`
    identity = {"classifier": classifier, "arch": wc.arch, "model": arch["model"], "condition": wc.condition, "seed": seed,
                **{k: spec[k.lower()] for k in ("N", "world", "labels")}, "hard_label": spec["hard_label"]}
    save_model(sm.output.model, model.cpu(), meta=identity)
    write_json_atomic(sm.output.history, {**identity, "epochs": epochs, "device": str(device), "curve_size": curve_size,
                                          "curve_epochs": [r["epoch"] for r in history if "curve_acc" in r],
                                          "train_seconds": sum(r["seconds"] for r in history),
                                          "convergence": converged, "history": history, "shift": data.shift})
    state.unlink(missing_ok=True)
    print(f"{classifier}: {describe(converged)}, final loss {history[-1]['train_loss']:.4f}")
    return dict(extra={"device": str(device), "weights_loaded": pretrained, "steps_run": converged["steps"]})


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
