"""Rule `world_summary`: the oracle world's exact constants -> analysis/world.json.

Aleatoric floor E[H(p(y|x))], Bayes accuracy and error, I(X;Y) in bits: Monte Carlo means
with standard errors over the fixed test set ("test", paired with the classifiers) and over
all samples ("all", the world constants of numbers.json).

A Gaussian world with two classes (oracle.world: gaussian) also has its Bayes error in closed
form (DESIGN rule 7): "bayes_error_closed_form" holds it next to the Monte Carlo estimate over
all samples and whether the two agree within 3 standard errors. The world file is the one the
samples were drawn from (its sha256 is checked against the samples' oracle_sha256).
"""

from oracle import experiments as ex
from oracle.errors import DataError
from oracle.io.atomic import write_json_atomic
from oracle.workflow.provenance import file_sha256
from oracle.io.splits import read_splits_h5

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive


def load_world(world_path: str, attrs: dict):
    """The world file the samples were drawn from (refused if its hash differs)."""
    from oracle.worlds import world_from_checkpoint

    if file_sha256(world_path) != attrs.get("oracle_sha256"):
        raise DataError(f"{world_path} is not the world of {sm.input.samples} (sha256 differs from its "
                        "oracle_sha256); rerun the samples stage")
    return world_from_checkpoint(world_path, prior=attrs["prior"], label_temperature=float(attrs["label_temperature"]),
                                 base_temperature=float(attrs["base_temperature"]))


with ex.script_job(sm.log[0], sm.threads) as started:
    rows = ex.read_rows(sm.input.samples, None, fields=("loglik",))
    attrs = rows["attrs"]
    log_p = ex.posterior_rows(rows["loglik"], attrs)
    test = read_splits_h5(sm.input.splits)["test"]
    prior = attrs["prior"]
    out = {
        "prior": [float(v) for v in prior],
        "label_temperature": float(attrs["label_temperature"]),
        "base_temperature": float(attrs["base_temperature"]),
        "all": ex.world_constants(log_p, prior),
        "test": ex.world_constants(log_p[test], prior),
    }
    if sm.params.world_kind == "gaussian":  # flows have no closed form: do not load them here
        entry = ex.closed_form_comparison(load_world(sm.input.world, attrs), out["all"])
        if entry is not None:
            out["bayes_error_closed_form"] = entry
            print(f"Bayes error: closed form {entry['value']:.6f} ({entry['method']}), Monte Carlo "
                  f"{entry['monte_carlo']['mean']:.6f} ± {entry['monte_carlo']['se']:.6f} (z = {entry['z']:.2f}, "
                  f"agree within 3 SE: {entry['agrees_within_3se']})")
    write_json_atomic(sm.output[0], out)
    print(out["all"])
    ex.record_job(sm, started)
