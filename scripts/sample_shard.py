"""Rule `sample_shard`: draw shard i of the oracle samples -> samples/shard-XXXX.h5.

The world is the oracle stage's file (a flow or a Gaussian world), loaded by
oracle.worlds.world_from_checkpoint with the run's prior and temperatures.

Each row: x ~ p(x|y), y ~ prior, and log p(x|k) for every class k at the stored float32 x.
A killed job leaves .shard-XXXX.h5.partial, which the rerun resumes.
"""

from oracle.workflow import config as oc
from oracle import experiments as ex
from oracle.devices import pick_device
from oracle.workflow.provenance import file_sha256
from oracle.sampling import write_sample_shard
from oracle.worlds import world_from_checkpoint

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with ex.script_job(sm.log[0], sm.threads) as started:
    s, o = sm.params.samples, sm.params.oracle
    shard = int(sm.wildcards.shard)
    sizes = oc.shard_sizes(s["n_total"], s["n_shards"])
    device = pick_device(sm.params.device)
    # a flow file or a Gaussian world file (oracle.world): one sampling path for both
    world = world_from_checkpoint(sm.input.flow, prior=o["prior"], label_temperature=o["label_temperature"],
                                  base_temperature=o["base_temperature"], map_location=device)
    info = write_sample_shard(
        world, sm.output[0], n=sizes[shard], seed=sm.params.seed, shard=shard, n_shards=s["n_shards"],
        batch_size=s["batch_size"], class_batch=s["class_batch"],
        attrs={"oracle_sha256": file_sha256(sm.input.flow)}, generator_device="cpu",
        index_offset=sum(sizes[:shard]), resume=True,
    )
    print({k: v for k, v in info.items() if k != "path"})
    ex.record_job(sm, started, extra={"device": str(device)})
