"""Rule `validation_samples_grid`: samples/base/all.h5 -> validation/figures/samples_grid.{pdf,png,caption.rst}, the first
oracle samples of each class, one row per class (a look at the world before trusting it)."""

from oracle.workflow.jobs import run_job


def main(sm):
    import numpy as np

    from oracle.io.images import read_class_names
    from oracle.report.captions import write_caption
    from oracle.report.figures import sample_grid_figure
    from oracle.io.shards import open_samples

    names = read_class_names(sm.input.train)
    per_class = int(sm.params.per_class)
    with open_samples(sm.input.samples) as f:
        labels = f["source_class"][()]
        # the first `per_class` rows of each class, read row by row (never the whole x)
        rows = np.sort(np.concatenate([np.flatnonzero(labels == k)[:per_class] for k in range(len(names))]))
        x = np.stack([f["x"][int(i)] for i in rows])
    sample_grid_figure(x, labels[rows], names, sm.output[0].rsplit(".", 1)[0], per_class=per_class,
                       title=f"oracle samples (no guidance, no denoising), {per_class} per class")
    write_caption(sm.output[-1], sm.params.caption)  # what it shows; it states no finding


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
