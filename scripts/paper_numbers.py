"""Rule `numbers`: the paper's in-text numbers -> numbers.json (each with value, unit, se/std,
the artifact it was read from and a description) and numbers.tex (LaTeX macros)."""

import json

import pandas as pd

from oracle import experiments as ex
from oracle.provenance import atomic_output, write_json_atomic

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with ex.script_job(sm.log[0], sm.threads) as started:
    world = json.loads(open(sm.input.world).read())
    numbers = ex.build_numbers(world, sm.input.world, pd.read_csv(sm.input.metrics), sm.input.metrics,
                               pd.read_csv(sm.input.fits), sm.input.fits, sm.params.archs, sm.params.size)
    write_json_atomic(sm.output.json, numbers)
    with atomic_output(sm.output.tex) as tmp:
        tmp.write_text(ex.numbers_tex(numbers))
    for key, entry in numbers.items():
        print(f"{key}: {entry['value']} {entry['unit']}")
    ex.record_outputs(sm.output, rule=sm.rule, config={"archs": sm.params.archs, "size": sm.params.size},
                      inputs=sm.input, started=started)
