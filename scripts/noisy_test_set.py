"""Rule `noisy_test_set`: one world's test rows with clipped Gaussian noise ->
samples/<world>/noise<sigma>/test.h5 (x', log p(x'|k) by the frozen model at the stored x',
the clean rows' labels) and constants.json (the oracle's posterior shift E[KL(p(y|x) ||
p(y|x'))] and accuracy on x', the clean Bayes accuracy; oracle.noisy_test_sets)."""

from oracle.workflow.job_server import delegate

delegate(snakemake)  # noqa: F821 - a local run hands this script to the job server

from oracle.devices import pick_device
from oracle.io.atomic import write_json_atomic
from oracle.worlds import sample_world
from oracle.noisy_test_sets import noise_seed, write_noisy_test_set
from oracle.workflow.jobs import record_job, script_job

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with script_job(sm) as started:
    p = sm.params
    device = pick_device(p.device)
    world = sample_world(sm.input.world, sm.input.samples, map_location=device)
    seed = noise_seed(p.world_seed, p.sigma)
    out = write_noisy_test_set(world, sm.input.samples, sm.input.splits, sm.output.samples, p.sigma, seed,
                               batch_size=p.samples["batch_size"], class_batch=p.samples["class_batch"])
    write_json_atomic(sm.output.constants, {"world": sm.wildcards.world, **out})
    print(f"sigma {p.sigma:g}: posterior shift {out['posterior_shift']['mean']:.4g} ± {out['posterior_shift']['se']:.2g} "
          f"nats, oracle accuracy {out['oracle_accuracy_clean']['mean']:.4f} -> {out['oracle_accuracy_noisy']['mean']:.4f}")
    record_job(sm, started, seed=seed, extra={"device": str(device)})
