"""Rule `merge_samples`: the shards of one world -> samples/<world>/all.h5, HDF5 virtual
datasets (no copy)."""

from oracle.workflow.jobs import run_job


def main(sm):
    from oracle.io.merge import merge_shards
    from oracle.io.shards import verify_shard

    merge_shards(sm.input.shards, sm.output[0])
    verify_shard(sm.output[0])
    print(f"merged {len(sm.input.shards)} shards into {sm.output[0]}")
    # all.h5 only refers to the shards: a job reading it checks them too (verify_inputs)
    return dict(extra={"references": list(sm.input.shards)})


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
