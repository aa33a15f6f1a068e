"""Figures as PDF + PNG (Agg canvas, no pyplot state, no creation date: reruns give identical
files) and the figure helpers every experiment uses (style, palette, error bars, image grids,
reliability diagrams)."""

from __future__ import annotations

import io
import os
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from oracle.errors import OracleError
from oracle.report.figure_check import (MIN_TEXT_PT, _PANELS_KEY, PrintWidths,  # noqa: F401
                                        caption_panel_problems, collisions, drawn_panels, lay_out, pdf_facts,
                                        print_problems, print_widths, thin_tick_labels, use_print_widths,
                                        wrap_titles)
from oracle.report.tables import write_all


#: Embed fonts as TrueType (Type 42): the default Type 3 bitmaps/procedures are refused by
#: journals' PDF checks (IEEE PDF eXpress, ACM TAPS).
_FONT_RC = {"pdf.fonttype": 42, "ps.fonttype": 42}


def style():
    """The seaborn whitegrid/paper style of every figure, as a context manager: text at
    `MIN_TEXT_PT` (titles 1 pt larger), fonts embedded as TrueType."""
    import seaborn as sns

    sizes = {k: MIN_TEXT_PT for k in ("font.size", "axes.labelsize", "xtick.labelsize", "ytick.labelsize",
                                      "legend.fontsize", "legend.title_fontsize")}
    return matplotlib.rc_context({**sns.axes_style("whitegrid"), **sns.plotting_context("paper"), **sizes,
                                  "axes.titlesize": MIN_TEXT_PT + 1, "figure.titlesize": MIN_TEXT_PT + 1,
                                  **_FONT_RC})


def palette(archs: Sequence[str]) -> dict[str, tuple]:
    """One colorblind-safe colour per name."""
    import seaborn as sns

    return dict(zip(archs, sns.color_palette("colorblind", max(len(archs), 1))))


#: The resolution of every figure's PNG (the report shows it at its size in inches).
FIGURE_DPI = 200


#: The environment variable that makes `save_figure` refuse a figure `print_problems` finds
#: unprintable ("1"; the test suite sets it): a run writes the figure with a warning instead.
STRICT_ENV = "ORACLE_STRICT_FIGURES"


def save_figure(fig: Figure, stem: str | os.PathLike, dpi: int = FIGURE_DPI,
                strict: bool | None = None) -> dict[str, Path]:
    """Save ``fig`` as ``<stem>.pdf`` and ``<stem>.png`` atomically; returns ``{"pdf", "png"}``.

    Saved at its own size (no cropping to the content, which would change the print width).
    Where `print_problems` finds the figure unprintable: `strict` (default: `STRICT_ENV` is
    "1", as in the tests) raises OracleError and writes nothing; otherwise (a run) the figure is
    written, the problems go to stderr (the job's log) and to its caption
    (`oracle.report.captions.note_layout_problems`): presentation never costs a run's results."""
    stem = Path(stem)
    FigureCanvasAgg(fig)
    wrap_titles(fig)  # before the ticks: a wrapped title moves the panels
    thin_tick_labels(fig)
    # thin_tick_labels' draw placed the axes for good: without this each savefig below would run
    # the constrained layout again (a third of a figure job), and the PDF would be laid out with
    # the PDF renderer's text metrics instead of the ones print_problems checks.
    fig.set_layout_engine("none")
    rendered = {}
    with matplotlib.rc_context(_FONT_RC):
        panels = "; ".join(f"({k}) {t}" for k, t in sorted(drawn_panels(fig).items()))
        for ext, meta in (("pdf", {"CreationDate": None, _PANELS_KEY: panels}), ("png", {"Software": None})):
            buf = io.BytesIO()
            fig.savefig(buf, format=ext, dpi=dpi, metadata=meta)
            rendered[stem.with_name(f"{stem.name}.{ext}")] = buf.getvalue()
    problems = print_problems(fig, rendered[stem.with_name(f"{stem.name}.pdf")])
    if strict is None:
        strict = os.environ.get(STRICT_ENV) == "1"
    if problems and strict:
        raise OracleError(f"figure {stem.name}: " + "; ".join(problems))
    write_all(rendered)
    if problems:
        import sys

        from oracle.report.captions import note_layout_problems

        print(f"WARNING: figure {stem}: written though it does not print cleanly: " + "; ".join(problems),
              file=sys.stderr)
        note_layout_problems(stem, problems)
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


def first_rows_per_class(labels: np.ndarray, classes: Sequence[int], per_class: int) -> np.ndarray:
    """Row indices (int64, ascending) of the first `per_class` rows of each class of `classes`
    in `labels` [n]: what a per-class grid shows, read row by row (never a whole image file)."""
    labels = np.asarray(labels)
    picked = [np.flatnonzero(labels == int(k))[:per_class] for k in classes]
    return np.sort(np.concatenate(picked)).astype(np.int64) if picked else np.zeros(0, np.int64)


def sample_grid_figure(images: np.ndarray, labels: np.ndarray, class_names: Sequence[str],
                       stem: str | os.PathLike, per_class: int = 8, classes: Sequence[int] | None = None,
                       title: str = "oracle samples", real: np.ndarray | None = None,
                       real_labels: np.ndarray | None = None,
                       real_title: str = "real training images") -> dict[str, Path]:
    """Per-class sample grid as ``<stem>.pdf`` / ``<stem>.png``: one row per class of `classes`
    (default: every class of `class_names`), labelled by class name; images of other classes
    are not shown. With `real` ([m, C, H, W], uint8 or on [-1, 1]) and `real_labels`, the real
    images of the same classes stand in a panel to the left of the samples, row beside row, as
    the paper's sample figures show them: (a) real, (b) oracle samples."""
    rows = np.arange(len(class_names)) if classes is None else np.asarray(classes, dtype=np.int64)
    row_of = {int(c): r for r, c in enumerate(rows)}
    k = len(rows)

    def grid_of(x, y):
        y = np.asarray(y)
        keep = np.array([int(v) in row_of for v in y], dtype=bool)
        x = np.asarray(x)
        x = x.astype(np.float64) / 127.5 - 1.0 if x.dtype == np.uint8 else x
        return image_grid(x[keep], np.array([row_of[int(v)] for v in y[keep]], dtype=np.int64), k, per_class)

    grids = [(grid_of(images, labels), title)]
    if real is not None:
        grids.insert(0, (grid_of(real, real_labels), real_title))
    width = print_widths().page_in if len(grids) > 1 else print_widths().column_in
    pitch = (width - 1.0) / (per_class * len(grids))  # inches per image, 1 in for the class names
    with style():
        fig = Figure(figsize=(width, 0.5 + pitch * k), layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(grids), squeeze=False)).ravel()
        for i, (ax, (grid, name)) in enumerate(zip(axes, grids)):
            h = (grid.shape[0] + 1) / k  # tile pitch, gap included
            ax.imshow(grid[..., 0] if grid.shape[2] == 1 else grid, cmap="gray", vmin=0.0, vmax=1.0,
                      interpolation="nearest")
            if i == 0:  # the class names once, left of the first panel
                ax.set_yticks([(r + 0.5) * h for r in range(k)], [str(class_names[c]) for c in rows])
            else:
                ax.set_yticks([])
            ax.set_xticks([])
            ax.grid(False)
            # wrapped to the panel: at 9 pt a title as long as the validation's ran past the figure
            ax.set_title(textwrap.fill(name, int((width - 1.0) / len(grids) / 0.09)))
        panel_letters(axes)
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

#: `size_ticks` labels each size when there are at most this many, each at least
#: `SIZE_TICK_RATIO` times the one before (closer ones would print over each other).
SIZE_TICK_MAX = 8
SIZE_TICK_RATIO = 1.4


def size_ticks(ax, sizes: Sequence[float], axis: str = "x") -> None:
    """Plain-number ticks of a log axis of training-set sizes N at the sizes that were trained
    (50, 300, 2000): a reader sees which N each point is. With more than `SIZE_TICK_MAX` sizes,
    or two closer than `SIZE_TICK_RATIO`, `log_tick_labels` instead. Call it after plotting.
    The same rule on every N axis, so no figure mixes 10^2 with 50, 100, 200."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    scale_axis = getattr(ax, f"{axis}axis")
    if scale_axis.get_scale() != "log":
        getattr(ax, f"set_{axis}scale")("log")
    values = np.unique(np.asarray([s for s in sizes if s and s > 0], dtype=float))
    if len(values) == 0 or len(values) > SIZE_TICK_MAX or (np.diff(np.log(values)) < np.log(SIZE_TICK_RATIO)).any():
        log_tick_labels(ax, axis)
        return
    lo, hi = sorted(getattr(ax, f"get_{axis}lim")())
    scale_axis.set_major_locator(FixedLocator(values))
    scale_axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    scale_axis.set_minor_locator(NullLocator())
    scale_axis.set_minor_formatter(NullFormatter())
    getattr(ax, f"set_{axis}lim")(min(lo, values[0] / 1.15), max(hi, values[-1] * 1.15))


def panel_letters(axes) -> None:
    """"(a) ", "(b) ", ... before the title of each visible panel of `axes` (any nesting of
    Axes; row by row for a grid), so that every multi-panel figure names its panels one way
    and a caption can point at one. Call it once, after the titles are set. A figure of one
    panel gets no letter."""
    flat = [ax for ax in np.asarray(axes, dtype=object).ravel() if ax is not None and ax.get_visible()]
    for i, ax in enumerate(flat if len(flat) > 1 else []):
        letter = chr(ord("a") + i) if i < 26 else str(i + 1)
        ax.set_title(f"({letter}) {ax.get_title()}".rstrip())


def top_legend(fig: Figure, handles: Sequence, labels: Sequence[str], max_ncol: int = 4):
    """One legend above the panels (constrained layout's "outside upper center") in as many
    columns as fit the figure's width, at most `max_ncol`: long labels (six models of
    "EfficientNet (test), N=4000") take more rows instead of running off the page, which
    `save_figure` refuses. Returns the legend."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    for ncol in range(min(max_ncol, len(labels)), 1, -1):
        legend = fig.legend(handles, labels, loc="outside upper center", ncol=ncol, frameon=False)
        if legend.get_window_extent(renderer).width <= fig.bbox.width:
            return legend
        legend.remove()
    return fig.legend(handles, labels, loc="outside upper center", ncol=1, frameon=False)


def errorbar(ax, agg: pd.DataFrame, col: str, color, label: str, scale: float = 1.0):
    """Mean ± std over seeds of ``col`` against N (``aggregate_over_seeds`` columns)."""
    std = agg[f"{col}_std"].fillna(0.0) * scale
    ax.errorbar(agg["N"], agg[f"{col}_mean"] * scale, yerr=std, color=color, marker="o", ms=3,
                capsize=2, lw=1.2, label=label)


#: Bins of a reliability diagram with fewer predictions than this are faded: the frequency of
#: correct predictions among 1-9 predictions is mostly noise (its SE is up to 0.5/sqrt(n)).
SPARSE_BIN = 10


def reliability_diagram(panels: Mapping[str, Mapping[str, np.ndarray]], stem: str | os.PathLike,
                        ncols: int | None = None, sparse: int = SPARSE_BIN) -> dict[str, Path]:
    """Reliability diagrams, one panel per entry of ``panels`` ({title: bins}; bins as
    `oracle.measures.calibration.reliability_bins` / `pool_reliability`), lettered (a), (b), ...

    Against the bin's confidence (x): bars of the empirical frequency of correct predictions
    (what labels show) and, when the bins have ``true_probability``, points of the mean true
    probability p(yhat|x) per bin (what the labels estimate); the diagonal is perfect
    calibration. Both y quantities are probabilities on the same axis. Empty bins are blank;
    the number of predictions in each bin is printed under its bar, and bins holding fewer
    than `sparse` predictions are drawn faded (hatched bar, hollow point).
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if not panels:
        raise OracleError("reliability_diagram: no panels given")
    names = list(panels)
    ncols = ncols or min(3, len(names))
    nrows = -(-len(names) // ncols)
    width = print_widths().column_in if ncols == 1 else print_widths().page_in
    any_sparse = False
    with style():
        fig = Figure(figsize=(width, (width / ncols) * nrows + 0.9), layout="constrained")
        axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
        for ax, name in zip(axes, names):
            b = panels[name]
            lower, upper = np.asarray(b["lower"]), np.asarray(b["upper"])
            count = np.asarray(b["count"])
            filled, thin = count >= sparse, (count > 0) & (count < sparse)
            any_sparse |= bool(thin.any())
            for keep, faded in ((filled, False), (thin, True)):
                ax.bar(lower[keep], np.asarray(b["accuracy"])[keep], width=(upper - lower)[keep], align="edge",
                       color="C0", edgecolor="k", lw=0.5, alpha=0.2 if faded else 0.6, hatch="////" if faded else None)
                if "true_probability" in b:
                    ax.plot(np.asarray(b["confidence"])[keep], np.asarray(b["true_probability"])[keep], "o", ms=4,
                            color="C3", **({"mfc": "none", "alpha": 0.6} if faded else {}))
            ax.plot([0, 1], [0, 1], "k--", lw=1)
            # upright counts at 8 pt: a bin is too narrow for more than one digit across
            for lo, hi, c in zip(lower[count > 0], upper[count > 0], count[count > 0]):
                ax.text((lo + hi) / 2, 0.02, f"{int(c)}", ha="center", va="bottom", rotation=90,
                        color="k" if c >= sparse else "0.4")
            # titles wrapped to the panel: at 9 pt a long one ran past the figure's edge
            ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence max q(y|x)",
                   title=textwrap.fill(str(name), int(width / ncols / 0.09)))
        for ax in axes[::ncols]:
            ax.set_ylabel("probability correct")
        for ax in axes[len(names):]:
            ax.set_visible(False)
        panel_letters(axes[:len(names)])
        # one legend above the panels: inside a panel it covered the low-confidence bins
        handles = [Patch(facecolor="C0", alpha=0.6, edgecolor="k", lw=0.5, label="empirical frequency (labels)")]
        if any("true_probability" in panels[n] for n in names):
            handles.append(Line2D([], [], ls="", marker="o", ms=4, color="C3",
                                                   label="mean true probability p(ŷ|x)"))
        handles.append(Line2D([], [], ls="--", color="k", lw=1, label="perfect calibration"))
        if any_sparse:
            handles.append(Patch(facecolor="C0", alpha=0.2, hatch="////", edgecolor="k", lw=0.5,
                                 label=f"bin of < {sparse} predictions (faded)"))
        fig.legend(handles=handles, loc="outside upper center", ncol=1 if ncols == 1 else 2, frameon=False)
        fig.supxlabel("number in each bar: predictions in the bin", fontsize=MIN_TEXT_PT, color="0.3")
        return save_figure(fig, stem)
