"""Rule `merge_samples`: the shards of one world -> samples/<world>/all.h5, HDF5 virtual
datasets (no copy)."""

from oracle.workflow.job_server import delegate

delegate(snakemake)  # noqa: F821 - a local run hands this script to the job server

from oracle.io.merge import merge_shards
from oracle.io.shards import verify_shard
from oracle.workflow.jobs import record_job, script_job

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with script_job(sm) as started:
    merge_shards(sm.input.shards, sm.output[0])
    verify_shard(sm.output[0])
    print(f"merged {len(sm.input.shards)} shards into {sm.output[0]}")
    # all.h5 only refers to the shards: a job reading it checks them too (verify_inputs)
    record_job(sm, started, extra={"references": list(sm.input.shards)})
