"""Rule `validation_report`: validation/metrics.json -> tables/table3.*, tables/table4.*,
figures/fig4.{pdf,png} (paper Tables 3-4 and Figure 4, metric names carrying their feature space)."""

import json
from pathlib import Path

from oracle import experiments as ex
from oracle.reporting import write_table
from oracle.validation.run import figure4, table3, table4

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with ex.script_job(sm.log[0], sm.threads) as started:
    metrics = json.loads(Path(sm.input.metrics).read_text())
    space = metrics["feature_spaces"][metrics["primary_space"]]["feature_space"]
    t3 = table3(metrics, sm.params.dataset_name)
    write_table(t3, Path(sm.output.table3[0]).with_suffix(""), float_format=".4g", caption=(
        "Oracle validation: distribution distance (FID only with Inception weights, else FD in the "
        f"named feature space), IS, coverage, memorization and posterior stability. Feature space: {space}."))
    t4 = table4(metrics)
    write_table(t4, Path(sm.output.table4[0]).with_suffix(""), caption=(
        "Oracle samples against real data statistics; ranges are over classes."))
    figure4(metrics, Path(sm.output.fig4[0]).with_suffix(""))
    print(t3.to_string())
    print(t4.to_string())
    ex.record_job(sm, started)
