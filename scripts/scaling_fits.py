"""Rule `scaling_fits`: power laws epistemic KL ~ c N^-alpha per architecture -> fits.csv."""

import pandas as pd

from oracle import experiments as ex
from oracle.io.atomic import atomic_output

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with ex.script_job(sm.log[0], sm.threads) as started:
    fits = ex.scaling_fits(pd.read_csv(sm.input.metrics), value="epistemic")
    with atomic_output(sm.output[0]) as tmp:
        fits.to_csv(tmp, index=False)
    print(fits[fits["kind"] == "arch"].to_string())
    ex.record_job(sm, started)
