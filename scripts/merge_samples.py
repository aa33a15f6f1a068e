"""Rule `merge_samples`: the shards -> samples/all.h5, HDF5 virtual datasets (no copy)."""

from oracle import experiments as ex
from oracle.io.shards import merge_shards, verify_shard

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with ex.script_job(sm.log[0], sm.threads) as started:
    merge_shards(sm.input.shards, sm.output[0])
    verify_shard(sm.output[0])
    print(f"merged {len(sm.input.shards)} shards into {sm.output[0]}")
    ex.record_job(sm, started)
