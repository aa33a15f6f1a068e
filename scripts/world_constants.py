"""Rule `world_constants`: one world's exact constants -> samples/<world>/constants.json.

Aleatoric floor E[H(p(y|x))], Bayes accuracy and error, I(X;Y) in bits: Monte Carlo means
with standard errors over all samples of the world (oracle.measures.world_constants). An
analytic world with two classes also has its Bayes error in closed form (DESIGN rule 7):
"bayes_error_closed_form" holds it next to the Monte Carlo estimate and whether the two agree
within 3 standard errors. The model file must be the one the samples were drawn from.
"""

from oracle.workflow.job_server import delegate

delegate(snakemake)  # noqa: F821 - a local run hands this script to the job server

from oracle.io.sample_rows import read_rows
from oracle.posterior import posterior_rows
from oracle.worlds import sample_world
from oracle.io.atomic import write_json_atomic
from oracle.measures.world_constants import closed_form_comparison, world_constants
from oracle.workflow.jobs import record_job, script_job

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with script_job(sm) as started:
    rows = read_rows(sm.input.samples, None, fields=("loglik",))
    attrs = rows["attrs"]
    prior = attrs["prior"]
    out = {
        "world": sm.wildcards.world,
        "prior": [float(v) for v in prior],
        "label_temperature": float(attrs["label_temperature"]),
        "base_temperature": float(attrs["base_temperature"]),
        "all": world_constants(posterior_rows(rows["loglik"], attrs), prior),
    }
    if sm.params.world_kind == "gaussian":  # flows have no closed form: do not load them here
        entry = closed_form_comparison(sample_world(sm.input.world, sm.input.samples), out["all"])
        if entry is not None:
            out["bayes_error_closed_form"] = entry
            print(f"Bayes error: closed form {entry['value']:.6f} ({entry['method']}), Monte Carlo "
                  f"{entry['monte_carlo']['mean']:.6f} ± {entry['monte_carlo']['se']:.6f} (z = {entry['z']:.2f}, "
                  f"agree within 3 SE: {entry['agrees_within_3se']})")
    write_json_atomic(sm.output[0], out)
    print(out["all"])
    record_job(sm, started)
