"""Rule `world_summary`: the oracle world's exact constants -> analysis/world.json.

Aleatoric floor E[H(p(y|x))], Bayes accuracy and error, I(X;Y) in bits: Monte Carlo means
with standard errors over the fixed test set ("test", paired with the classifiers) and over
all samples ("all", the world constants of numbers.json).
"""

from oracle import experiments as ex
from oracle.provenance import write_json_atomic
from oracle.splits import read_splits_h5

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

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
    write_json_atomic(sm.output[0], out)
    print(out["all"])
    ex.record_outputs(sm.output, rule=sm.rule,
                      config={"oracle": {k: sm.params.oracle[k] for k in ("prior", "label_temperature")}},
                      inputs=sm.input, started=started)
