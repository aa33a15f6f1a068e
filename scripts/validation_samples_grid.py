"""Rule `validation_samples_grid`: samples/base/all.h5 -> validation/figures/samples_grid.{pdf,png,caption.rst}, the first
oracle samples of each class, one row per class, at most `max_classes` of the sampled classes spaced
evenly over their indices (a look at the world before trusting it)."""

from oracle.workflow.jobs import run_job


def main(sm):
    import numpy as np

    from oracle.io.images import read_class_names
    from oracle.report.captions import write_caption
    from oracle.report.figures import grid_classes, sample_grid_figure
    from oracle.io.shards import open_samples

    names = read_class_names(sm.input.train)
    per_class = int(sm.params.per_class)
    with open_samples(sm.input.samples) as f:
        labels = f["source_class"][()]
        classes = grid_classes(labels, int(sm.params.max_classes))  # among the classes sampled
        # the first `per_class` rows of each shown class, read row by row (never the whole x)
        rows = np.sort(np.concatenate([np.flatnonzero(labels == k)[:per_class] for k in classes]))
        x = np.stack([f["x"][int(i)] for i in rows])
    shown = "" if len(classes) == len(names) else f", {len(classes)} of the {len(names)} classes (evenly spaced)"
    sample_grid_figure(x, labels[rows], names, sm.output[0].rsplit(".", 1)[0], per_class=per_class, classes=classes,
                       title=f"oracle samples (no guidance, no denoising), {per_class} per class{shown}")
    write_caption(sm.output[-1], sm.params.caption)  # what it shows; it states no finding


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
