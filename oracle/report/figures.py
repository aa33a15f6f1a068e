"""Figures as PDF + PNG (Agg canvas, no pyplot state, no creation date: reruns give identical
files) and the figure helpers every experiment uses (style, palette, error bars, image grids,
reliability diagrams)."""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from oracle.errors import OracleError
from oracle.report.tables import write_all


def style():
    """The seaborn whitegrid/paper style of every figure, as a context manager."""
    import seaborn as sns

    return matplotlib.rc_context({**sns.axes_style("whitegrid"), **sns.plotting_context("paper"),
                                  "axes.titlesize": 10, "legend.fontsize": 7})


def palette(archs: Sequence[str]) -> dict[str, tuple]:
    """One colorblind-safe colour per name."""
    import seaborn as sns

    return dict(zip(archs, sns.color_palette("colorblind", max(len(archs), 1))))


def save_figure(fig: Figure, stem: str | os.PathLike, dpi: int = 200) -> dict[str, Path]:
    """Save ``fig`` as ``<stem>.pdf`` and ``<stem>.png`` atomically; returns ``{"pdf", "png"}``."""
    stem = Path(stem)
    FigureCanvasAgg(fig)
    rendered = {}
    for ext, meta in (("pdf", {"CreationDate": None}), ("png", {"Software": None})):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=dpi, bbox_inches="tight", metadata=meta)
        rendered[stem.with_name(f"{stem.name}.{ext}")] = buf.getvalue()
    write_all(rendered)
    return {p.suffix[1:]: p for p in rendered}


def image_grid(images: np.ndarray, labels: np.ndarray, num_classes: int, per_class: int,
               gap: int | None = None) -> np.ndarray:
    """Tile images into one picture: row k holds the first `per_class` images of class k.

    images: [n, C, H, W] in [-1, 1] (model space); labels: int [n]. Tiles are separated by
    `gap` white pixels (default max(1, H // 8)): without a gap, neighbouring 8x8 digits merge
    and the rows read as vertical strips. Returns float [K*H + (K-1)*gap, M*W + (M-1)*gap, C]
    in [0, 1] (values outside [-1, 1], e.g. from dequantization noise, are clipped for display
    only). Cells of a class with fewer than `per_class` images stay white.
    """
    images = np.asarray(images, dtype=np.float64)
    labels = np.asarray(labels)
    if images.ndim != 4 or len(images) != len(labels):
        raise OracleError(f"image_grid: expected images [n, C, H, W] and labels [n], got "
                          f"{list(images.shape)} and {list(labels.shape)}")
    _, c, h, w = images.shape
    g = max(1, h // 8) if gap is None else int(gap)
    grid = np.ones((num_classes * (h + g) - g, per_class * (w + g) - g, c))
    for k in range(num_classes):
        for j, i in enumerate(np.flatnonzero(labels == k)[:per_class]):
            cell = (np.clip(images[i], -1.0, 1.0) + 1.0) / 2.0
            top, left = k * (h + g), j * (w + g)
            grid[top:top + h, left:left + w] = cell.transpose(1, 2, 0)
    return grid


def grid_classes(classes: Sequence[int], max_rows: int) -> np.ndarray:
    """Classes a per-class sample grid shows: all of `classes` (the classes that have samples,
    ascending) when they fit in `max_rows` rows, else `max_rows` of them spaced evenly from the
    first to the last (int ``[rows]``). A grid of all 1,000 ImageNet classes would be ~900 inches
    tall: 17 GB to render."""
    classes = np.unique(np.asarray(classes, dtype=np.int64))
    if len(classes) < 1 or max_rows < 1:
        raise OracleError(f"grid_classes: {len(classes)} classes and max_rows={max_rows}: both must be >= 1")
    if len(classes) <= max_rows:
        return classes
    return classes[np.unique(np.round(np.linspace(0, len(classes) - 1, max_rows)).astype(np.int64))]


def sample_grid_figure(images: np.ndarray, labels: np.ndarray, class_names: Sequence[str],
                       stem: str | os.PathLike, per_class: int = 8, classes: Sequence[int] | None = None,
                       title: str = "oracle samples, one row per class") -> dict[str, Path]:
    """Per-class sample grid as ``<stem>.pdf`` / ``<stem>.png``: one row per class of `classes`
    (default: every class of `class_names`), labelled by class name; images of other classes
    are not shown."""
    rows = np.arange(len(class_names)) if classes is None else np.asarray(classes, dtype=np.int64)
    row_of = {int(c): r for r, c in enumerate(rows)}
    labels = np.asarray(labels)
    keep = np.array([int(y) in row_of for y in labels], dtype=bool)
    k = len(rows)
    grid = image_grid(np.asarray(images)[keep], np.array([row_of[int(y)] for y in labels[keep]], dtype=np.int64),
                      k, per_class)
    h = (grid.shape[0] + 1) / k  # tile pitch, gap included
    fig = Figure(figsize=(1.0 + 0.9 * per_class, 0.3 + 0.9 * k))
    ax = fig.add_subplot(1, 1, 1)
    ax.imshow(grid[..., 0] if grid.shape[2] == 1 else grid, cmap="gray", vmin=0.0, vmax=1.0,
              interpolation="nearest")
    ax.set_yticks([(r + 0.5) * h for r in range(k)], [str(class_names[c]) for c in rows])
    ax.set_xticks([])
    ax.set_title(title, fontsize=9)
    return save_figure(fig, stem)


def log_tick_labels(ax, axis: str = "both") -> None:
    """Plain-number tick labels (0.6, 2, 500) on the log axes of ``ax`` ("x", "y" or "both"),
    at the coarsest of 10^k, 1-2-5, 1-1.5-2-3-5-7 and 1-1.2-1.5-2-2.5-3-...-9 x 10^k that puts at
    least three ticks inside the current limits, in both halves of the (log) range. Call it
    after plotting: matplotlib alone labels one or two powers of ten on an axis spanning about
    a decade."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    for name in ("x", "y") if axis == "both" else (axis,):
        scale_axis = getattr(ax, f"{name}axis")
        if scale_axis.get_scale() != "log":
            continue
        lo, hi = sorted(getattr(ax, f"get_{name}lim")())
        decades = range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
        for subs in LOG_TICK_LADDERS:
            ticks = [m * 10.0**e for e in decades for m in subs if lo <= m * 10.0**e <= hi]
            if len(ticks) >= 3 and ticks[0] <= lo * (hi / lo) ** 0.4 and ticks[-1] >= lo * (hi / lo) ** 0.6:
                break
        scale_axis.set_major_locator(FixedLocator(ticks))
        scale_axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        scale_axis.set_minor_formatter(NullFormatter())


#: Mantissas of the log-axis ticks, coarsest first (`log_tick_labels`).
LOG_TICK_LADDERS = ((1,), (1, 2, 5), (1, 1.5, 2, 3, 5, 7), (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9))


def errorbar(ax, agg: pd.DataFrame, col: str, color, label: str, scale: float = 1.0):
    """Mean ± std over seeds of ``col`` against N (``aggregate_over_seeds`` columns)."""
    std = agg[f"{col}_std"].fillna(0.0) * scale
    ax.errorbar(agg["N"], agg[f"{col}_mean"] * scale, yerr=std, color=color, marker="o", ms=3,
                capsize=2, lw=1.2, label=label)


def reliability_diagram(panels: Mapping[str, Mapping[str, np.ndarray]], stem: str | os.PathLike,
                        ncols: int | None = None) -> dict[str, Path]:
    """Reliability diagrams, one panel per entry of ``panels`` ({title: bins}; bins as
    `oracle.measures.calibration.reliability_bins` / `pool_reliability`).

    Against the bin's confidence (x): bars of the empirical frequency of correct predictions
    (what labels show) and, when the bins have ``true_probability``, points of the mean true
    probability p(yhat|x) per bin (what the labels estimate); the diagonal is perfect
    calibration. Both y quantities are probabilities on the same axis. Empty bins are blank;
    the share of predictions per bin is printed under the bars.
    """
    if not panels:
        raise OracleError("reliability_diagram: no panels given")
    names = list(panels)
    ncols = ncols or min(4, len(names))
    nrows = -(-len(names) // ncols)
    with style():
        fig = Figure(figsize=(3.0 * ncols, 3.0 * nrows))
        axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
        for ax, name in zip(axes, names):
            b = panels[name]
            lower, upper = np.asarray(b["lower"]), np.asarray(b["upper"])
            count = np.asarray(b["count"])
            filled = count > 0
            ax.bar(lower[filled], np.asarray(b["accuracy"])[filled], width=(upper - lower)[filled], align="edge",
                   edgecolor="k", lw=0.5, alpha=0.6, label="empirical frequency (labels)")
            if "true_probability" in b:
                ax.plot(np.asarray(b["confidence"])[filled], np.asarray(b["true_probability"])[filled], "o",
                        color="C3", ms=4, label="mean true probability p(ŷ|x)")
            ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
            for lo, hi, c in zip(lower[filled], upper[filled], count[filled]):
                ax.text((lo + hi) / 2, 0.02, f"{100 * c / count.sum():.0f}%", ha="center", fontsize=5)
            ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence max q(y|x)", ylabel="probability correct",
                   title=str(name))
        for ax in axes[len(names):]:
            ax.set_visible(False)
        # one legend above the panels: inside a panel it covered the low-confidence bins
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", ncol=len(labels), frameon=False, fontsize=7)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
        return save_figure(fig, stem)
