"""Rule `validation_samples_grid`: samples/base/all.h5 and data/train.h5 -> validation/figures/samples_grid.
{pdf,png,caption.rst}: (a) the first real training images and (b) the first oracle samples of each class,
one row per class, at most `max_classes` of the sampled classes spaced evenly over their indices (a look at
the world beside the data it stands in for)."""

from oracle.workflow.jobs import run_job


def main(sm):
    import numpy as np

    from oracle.io.images import read_class_names, read_image_labels, read_image_rows
    from oracle.io.shards import open_samples
    from oracle.report.captions import write_caption
    from oracle.report.figures import (PrintWidths, first_rows_per_class, grid_classes, sample_grid_figure,
                                       use_print_widths)

    names = read_class_names(sm.input.train)
    per_class = int(sm.params.per_class)
    with open_samples(sm.input.samples) as f:
        labels = f["source_class"][()]
        classes = grid_classes(labels, int(sm.params.max_classes))  # among the classes sampled
        rows = first_rows_per_class(labels, classes, per_class)
        x = np.stack([f["x"][int(i)] for i in rows])  # row by row, never the whole x
    real_labels = read_image_labels(sm.input.train)
    real_rows = first_rows_per_class(real_labels, classes, per_class)
    shown = "" if len(classes) == len(names) else f", {len(classes)} of the {len(names)} classes (evenly spaced)"
    with use_print_widths(PrintWidths.from_config(sm.params.figures)):  # the venue's widths (config figures)
        sample_grid_figure(x, labels[rows], names, sm.output[0].rsplit(".", 1)[0], per_class=per_class, classes=classes,
                           title=f"oracle samples (no guidance, no denoising), {per_class} per class{shown}",
                           real=read_image_rows(sm.input.train, real_rows), real_labels=real_labels[real_rows],
                           real_title=f"real training images (data/train.h5), {per_class} per class")
    write_caption(sm.output[-1], sm.params.caption)  # what it shows; it states no finding


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
