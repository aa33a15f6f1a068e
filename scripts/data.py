"""Rule `data`: real images -> data/train.h5 and data/test.h5 (uint8 [n, C, H, W] + labels).

The raw data root is a parameter (not a Snakemake input, so the DAG builds without it);
oracle.io.real_data raises a one-line DataError naming the missing path and the expected layout.
The records hash the raw files read (for digits scikit-learn's bundled file) as inputs, and
name their identity (kind, root, scikit-learn version for digits) in ``extra.raw_data``: the
end of every audit chain.
"""

from oracle import experiments as ex
from oracle.io.real_data import load_split, write_images_h5

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with ex.script_job(sm.log[0], sm.threads) as started:
    spec = {k: v for k, v in sm.params.data.items() if v is not None}
    spec["seed"] = sm.params.seed
    for split in ("train", "test"):
        images, labels, names = load_split(spec, split)
        print(f"{split}: {images.shape[0]} images {list(images.shape[1:])}, {len(names)} classes")
        write_images_h5(sm.output[split], images, labels, names, attrs={"split": split, "data": spec})
    raw, identity = ex.raw_data_inputs(spec)
    ex.record_job(sm, started, inputs=raw, extra={"raw_data": identity})
