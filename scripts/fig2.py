"""Rule `fig2`: total loss, epistemic KL with power-law fits, accuracy, and exponents against
N (Figure 2 of the paper) -> figures/fig2.{pdf,png}."""

from pathlib import Path

import pandas as pd

from oracle import experiments as ex
from oracle.reporting import figure2

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with ex.script_job(sm.log[0], sm.threads) as started:
    runs = ex.select_runs(pd.read_csv(sm.input.metrics), sm.params.archs)
    figure2(runs, Path(sm.output[0]).with_suffix(""))
    ex.record_job(sm, started)
