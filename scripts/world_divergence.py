"""Rule `world_divergence`: the exact KL(p_world(x, y) || p_reference(x, y)) of two worlds that
share the frozen densities (prior part + D/2 (r^2 - 1 - ln r^2)) beside its Monte Carlo
estimate from the model's own log densities at the world's samples ->
samples/<world>/kl_from_<reference>.json (oracle.measures.divergences)."""

from oracle.workflow.job_server import delegate

delegate(snakemake)  # noqa: F821 - a local run hands this script to the job server

import math

import numpy as np
import torch

from oracle.devices import pick_device
from oracle.io.atomic import write_json_atomic
from oracle.io.sample_rows import read_rows
from oracle.worlds import sample_world
from oracle.measures.divergences import MONTE_CARLO_ROWS, summary_line, world_kl_check
from oracle.workflow.jobs import record_job, script_job
from oracle.worlds import world_from_checkpoint

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with script_job(sm) as started:
    ref = sm.params.reference
    device = pick_device(sm.params.device)
    sample_world(sm.input.world, sm.input.samples)  # refuses a model file the samples were not drawn from
    n = len(read_rows(sm.input.samples, None, fields=("source_class",))["source_class"])
    rows = read_rows(sm.input.samples, np.arange(min(n, MONTE_CARLO_ROWS)), fields=("x", "source_class", "loglik"))
    attrs = rows["attrs"]
    reference = world_from_checkpoint(sm.input.world, prior=ref["prior"], label_temperature=ref["label_temperature"],
                                      base_temperature=ref["base_temperature"], map_location=device)
    dim = math.prod(int(v) for v in attrs["event_shape"])
    result = world_kl_check(torch.from_numpy(rows["x"]), rows["source_class"], rows["loglik"], attrs["prior"],
                            float(attrs["base_temperature"]), reference, dim)
    write_json_atomic(sm.output[0], {"world": sm.wildcards.world, "reference_world": sm.wildcards.reference, **result})
    print(summary_line(result))
    record_job(sm, started, extra={"device": str(device)})
