"""Rule `data`: real images -> data/train.h5 and data/test.h5 (uint8 [n, C, H, W] + labels).

The raw data root is a parameter (not a Snakemake input, so the DAG builds without it);
oracle.io.real_data raises a one-line DataError naming the missing path and the expected layout.
Once the class count is known, every world's prior is checked against it (before any flow is
trained). The records hash the raw files read (for digits scikit-learn's bundled file) as
inputs and name their identity in ``extra.raw_data``: the end of every audit chain.
"""

from oracle.workflow.jobs import run_job


def main(sm):
    from oracle.io.raw_files import raw_data_inputs
    from oracle.io.images import write_images_h5
    from oracle.io.real_data import load_split
    from oracle.workflow.plan.config import check_prior_length

    spec = {k: v for k, v in sm.params.data.items() if v is not None}
    spec["seed"] = sm.params.seed
    splits = {split: load_split(spec, split) for split in ("train", "test")}
    check_prior_length(sm.config, len(splits["train"][2]), f"the {spec['kind']} data")
    for split, (images, labels, names) in splits.items():
        print(f"{split}: {images.shape[0]} images {list(images.shape[1:])}, {len(names)} classes")
        write_images_h5(sm.output[split], images, labels, names, attrs={"split": split, "data": spec})
    raw, identity = raw_data_inputs(spec)
    return dict(inputs=raw, extra={"raw_data": identity})


# Runs inline, not in the job server (oracle.workflow.jobs.server): the run's first job, which
# would wait ~8 s for the server to import torch & co. on the path to the flow, where its own
# imports take ~3 s.
run_job(snakemake, main, server=False)  # noqa: F821 - injected by Snakemake's script directive
