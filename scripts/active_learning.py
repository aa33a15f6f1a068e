"""Rule `active_learning`: one active-learning run (experiment, arch, strategy, seed) on its
world's oracle samples -> rounds.json (per round: labels, test accuracy and exact epistemic
KL, the selected sample rows, Spearman correlations of every score with the exact parts). Round 0
is read from the seed's round0.pt (rule `active_round_zero`), the same file for every strategy.

The finished rounds are kept in resume/ beside the output, so a killed job resumes at its last
finished round with the same selections; the folder is removed once rounds.json exists.
"""

from oracle.workflow.jobs import run_job


def main(sm):
    import shutil
    from pathlib import Path

    from oracle.classifiers.active_learning import ActiveSettings, load_active_data, read_round_zero, run_active_learning
    from oracle.devices import pick_device
    from oracle.experiments._training import hard_label_of
    from oracle.io.atomic import write_json_atomic

    spec, arch, wc = sm.params.spec, sm.params.arch, sm.wildcards
    seed = int(wc.seed)
    data = load_active_data(sm.input.samples, sm.input.splits, seed, spec["initial_size"], spec["pool_size"],
                            spec["labels"], hard_label_of(spec), spec["training"]["val_size"])
    settings = ActiveSettings.from_spec(spec, wc.strategy)
    device = pick_device(sm.params.device)
    state = Path(sm.output.rounds).with_name("resume")
    zero = read_round_zero(sm.input.round_zero, data, arch, settings, seed)
    rounds = run_active_learning(data, arch, settings, seed, device=device, state_dir=state, round_zero=zero)
    write_json_atomic(sm.output.rounds, {
        "experiment": wc.experiment, "arch": wc.arch, "model": arch["model"], "strategy": wc.strategy, "seed": seed,
        "world": spec["world"], "labels": spec["labels"], "hard_label": spec["hard_label"],
        "initial_size": spec["initial_size"], "pool_size": spec["pool_size"], "batch": spec["batch"],
        "drop_rate": spec["drop_rate"], "mc_samples": spec["mc_samples"], "device": str(device), "rounds": rounds})
    shutil.rmtree(state, ignore_errors=True)
    return dict(extra={"device": str(device)})


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
