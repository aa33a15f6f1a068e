"""Rule `numbers`: the paper's in-text numbers -> numbers.json (each with value, unit, se/std,
the artifact it was read from and a description) and numbers.tex (one LaTeX macro each).

Sources: analysis/world.json (world constants), the main experiment's metrics.csv and fits.csv
(accuracies, epistemic KL, alpha), tables/table1.csv (gaps to the Bayes accuracy) and, when
validation is on, validation/metrics.json.
"""

import json
from pathlib import Path

import pandas as pd

from oracle import experiments as ex
from oracle.io.atomic import atomic_output, write_json_atomic

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with ex.script_job(sm.log[0], sm.threads) as started:
    world = json.loads(Path(sm.input.world).read_text())
    validation = getattr(sm.input, "validation", None)  # a path, or [] when validation is off
    validation = validation if isinstance(validation, str) else (validation[0] if validation else None)
    numbers = ex.build_numbers(
        world, sm.input.world, pd.read_csv(sm.input.metrics), sm.input.metrics,
        pd.read_csv(sm.input.fits), sm.input.fits, sm.params.archs, sm.params.size,
        table1=pd.read_csv(sm.input.table1), table1_path=sm.input.table1,
        validation=json.loads(Path(validation).read_text()) if validation else None,
        validation_path=validation,
    )
    write_json_atomic(sm.output.json, numbers)
    with atomic_output(sm.output.tex) as tmp:
        tmp.write_text(ex.numbers_tex(numbers))
    for key, entry in numbers.items():
        print(f"{key}: {entry['value']} {entry['unit']}")
    ex.record_job(sm, started)
