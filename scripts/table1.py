"""Rule `table1`: accuracy, error and gap to the Bayes-optimal accuracy per architecture at
the largest N (or analysis.table1_size) -> tables/table1.{csv,md,tex}."""

from pathlib import Path

import pandas as pd

from oracle import experiments as ex
from oracle.reporting import table1, write_table

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with ex.script_job(sm.log[0], sm.threads) as started:
    size = sm.params.size
    runs = ex.select_runs(pd.read_csv(sm.input.metrics), sm.params.archs, [size] if size else None)
    frame = table1(runs)
    stem = Path(sm.output[0]).with_suffix("")
    write_table(frame, stem, caption=(
        "Classifiers approach the Bayes-optimal bound on oracle data: test accuracy (mean over seeds) "
        "at the largest N, error, and gap to the Bayes-optimal accuracy E[max_y p(y|x)] of the oracle test set."),
        float_format=".2f")
    print(frame.to_string())
    ex.record_job(sm, started)
