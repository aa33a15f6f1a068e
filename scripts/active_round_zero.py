"""Rule `active_round_zero`: round 0 of an active-learning experiment's runs of one (arch, seed),
trained once for every strategy -> round0.pt (the model trained on the initial labelled set, its
record: training, test accuracy and exact epistemic KL; and every score of the pool, which each
strategy's run selects its first batch by; `oracle.classifiers.active_learning.train_round_zero`).

A training checkpoint next to the output (train_state.pt) lets a killed job resume; it is removed
once the output exists.
"""

from oracle.workflow.jobs import run_job


def main(sm):
    from pathlib import Path

    from oracle.classifiers.active_learning import ActiveSettings, load_active_data, train_round_zero, write_round_zero
    from oracle.devices import pick_device
    from oracle.experiments._training import hard_label_of

    spec, arch, seed = sm.params.spec, sm.params.arch, int(sm.wildcards.seed)
    data = load_active_data(sm.input.samples, sm.input.splits, seed, spec["initial_size"], spec["pool_size"],
                            spec["labels"], hard_label_of(spec), spec["training"]["val_size"])
    device = pick_device(sm.params.device)
    state = Path(sm.output.round_zero).with_name("train_state.pt")
    zero = train_round_zero(data, arch, ActiveSettings.from_spec(spec, None), seed, device=device, checkpoint=state)
    write_round_zero(sm.output.round_zero, zero)
    state.unlink(missing_ok=True)
    r = zero["record"]
    print(f"round 0 of {sm.wildcards.experiment}/{sm.wildcards.arch}/seed{seed}: {r['labelled']} labels, "
          f"acc {r['acc']:.4f}, epistemic {r['epistemic']:.4f} nats, converged {r['converged']}")
    return dict(extra={"device": str(device)})


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
