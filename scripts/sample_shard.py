"""Rule `sample_shard`: draw shard i of one world's oracle samples -> samples/<world>/shard-XXXX.h5.

The world is the oracle stage's model (a flow or a Gaussian world), loaded by
oracle.worlds.world_from_checkpoint with the world's prior and temperatures. Each row:
y ~ prior, x ~ p(x|y), the world's label y ~ p_T(y|x) and log p(x|k) for every class k at the
stored float32 x (oracle.sample_shards), in the precision mode of samples.precision with its measured
error against float64 in the shard's attributes (oracle.float_precision). A killed job leaves .shard-XXXX.h5.partial, which the
rerun resumes.
"""

from oracle.workflow.job_server import delegate

delegate(snakemake)  # noqa: F821 - a local run hands this script to the job server

from oracle.devices import pick_device
from oracle.sample_shards import write_sample_shard
from oracle.workflow.plan import shard_sizes
from oracle.workflow.jobs import record_job, script_job
from oracle.io.hashing import file_sha256
from oracle.worlds import world_from_checkpoint

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with script_job(sm) as started:
    w, s = sm.params.world, sm.params.samples
    shard = int(sm.wildcards.shard)
    sizes = shard_sizes(w["n_total"], w["n_shards"])
    device = pick_device(sm.params.device)
    world = world_from_checkpoint(sm.input.world, prior=w["prior"], label_temperature=w["label_temperature"],
                                  base_temperature=w["base_temperature"], map_location=device)
    info = write_sample_shard(
        world, sm.output[0], n=sizes[shard], seed=w["seed"], shard=shard, n_shards=w["n_shards"],
        batch_size=s["batch_size"], class_batch=s["class_batch"],
        attrs={"oracle_sha256": file_sha256(sm.input.world), "world_name": sm.wildcards.world},
        generator_device="cpu", index_offset=sum(sizes[:shard]), resume=True,
        precision=s["precision"], precision_rows=s["precision_rows"], precision_tolerance=s["precision_tolerance"],
    )
    print({k: v for k, v in info.items() if k != "path"})
    record_job(sm, started, seed=w["seed"], extra={"device": str(device)})
