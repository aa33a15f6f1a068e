"""Rule `fig5`: epistemic KL against N, one panel per architecture with its power law
(Figure 5 of the paper; Figure 6 with the ImageNet-64 preset) -> figures/fig5.{pdf,png}."""

from pathlib import Path

import pandas as pd

from oracle import experiments as ex
from oracle.reporting import figure5

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with ex.script_job(sm.log[0], sm.threads) as started:
    runs = ex.select_runs(pd.read_csv(sm.input.metrics), sm.params.archs)
    figure5(runs, Path(sm.output[0]).with_suffix(""))
    ex.record_job(sm, started)
