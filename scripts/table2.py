"""Rule `table2`: epistemic KL (nats, mean over seeds) per N and architecture -> tables/table2.*"""

from pathlib import Path

import pandas as pd

from oracle import experiments as ex
from oracle.reporting import table2, write_table

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with ex.script_job(sm.log[0], sm.threads) as started:
    runs = ex.select_runs(pd.read_csv(sm.input.metrics), sm.params.archs, sm.params.sizes)
    frame = table2(runs, "epistemic")
    write_table(frame, Path(sm.output[0]).with_suffix(""), caption=(
        "Epistemic error E[KL(p(y|x) || q(y|x))] (nats, mean over seeds) against dataset size N."),
        float_format=".3f")
    print(frame.to_string())
    ex.record_job(sm, started)
