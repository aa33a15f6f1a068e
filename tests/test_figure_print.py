"""oracle.report.figures: every saved figure prints in a paper: TrueType fonts (never Type 3),
one or two columns wide, no text under 8 pt at that width, nothing cut off."""

from __future__ import annotations

import re

import numpy as np
import pytest
from matplotlib.figure import Figure

from oracle.errors import OracleError
from oracle.report.figures import (MIN_TEXT_PT, pdf_facts, print_widths, reliability_diagram,
                                   sample_grid_figure, save_figure, style, top_legend)


def _figure(width: float, fontsize: float | None = None) -> Figure:
    with style():
        fig = Figure(figsize=(width, 2.4))
        ax = fig.subplots()
        ax.plot([1, 2, 3], [3, 1, 2], label="a line")
        ax.set(xlabel="N", ylabel="error", title="a title")
        ax.legend()
        if fontsize is not None:
            ax.text(1.5, 2, "small", fontsize=fontsize)
        fig.tight_layout()
    return fig


def test_a_saved_figure_embeds_truetype_at_its_print_width(tmp_path):
    out = save_figure(_figure(print_widths().column_in), tmp_path / "one")
    pdf = out["pdf"].read_bytes()
    assert b"/Type3" not in pdf.replace(b" ", b"")
    facts = pdf_facts(pdf)
    assert facts["font_types"] and "Type3" not in facts["font_types"]
    assert facts["width_in"] == pytest.approx(print_widths().column_in, abs=0.01)  # saved at its size, not cropped
    assert facts["text_pt"] and min(facts["text_pt"]) >= MIN_TEXT_PT


@pytest.mark.parametrize("width, fontsize, match", [(9.5, None, "neither one column"),
                                                    (print_widths().page_in, 5, "smaller than 8 pt.*'small' 5 pt")])
def test_an_unprintable_figure_is_refused_and_nothing_written(tmp_path, width, fontsize, match):
    with pytest.raises(OracleError, match=match):
        save_figure(_figure(width, fontsize), tmp_path / "bad")
    assert not list(tmp_path.iterdir())


def test_content_outside_the_canvas_is_refused(tmp_path):
    fig = _figure(print_widths().column_in)
    fig.axes[0].legend(loc="upper left", bbox_to_anchor=(1.2, 1))  # a legend right of the canvas
    with pytest.raises(OracleError, match="outside"):
        save_figure(fig, tmp_path / "cut")


def _panels_with_legend(labels: list[str], ncol: int | None) -> Figure:
    with style():
        fig = Figure(figsize=(print_widths().page_in, 4.9), layout="constrained")
        axes = fig.subplots(2, 4)
        for i, label in enumerate(labels):
            axes[0][0].plot([1, 2], [i, i + 1], label=label)
        handles, names = axes[0][0].get_legend_handles_labels()
        if ncol is None:
            top_legend(fig, handles, names)
        else:
            fig.legend(handles, names, loc="outside upper center", ncol=ncol, frameon=False)
    return fig


def test_a_top_legend_takes_the_columns_that_fit_the_page(tmp_path):
    """cpu-study's calibration figure: six models named like "EfficientNet (test), N=4000" and the
    mean, in 4 columns, ran 0.19 in past the page and the figure job failed; `top_legend` drops to
    the columns that fit, and keeps 4 where short labels fit."""
    long = [f"{a} (test), N={n}" for a in ("EfficientNet", "ResNet", "ViT") for n in (300, 4000)]
    long.append("mean ± SE over models")
    with pytest.raises(OracleError, match="outside"):
        save_figure(_panels_with_legend(long, ncol=4), tmp_path / "four")
    fig = _panels_with_legend(long, ncol=None)
    assert fig.legends[0]._ncols < 4
    save_figure(fig, tmp_path / "fits")
    assert _panels_with_legend(["a", "b", "c", "d", "e"], ncol=None).legends[0]._ncols == 4


def test_shared_figures_print(tmp_path):
    bins = {"lower": np.linspace(0, 0.9, 10), "upper": np.linspace(0.1, 1, 10), "count": np.arange(10) * 300,
            "confidence": np.linspace(0.05, 0.95, 10), "accuracy": np.linspace(0.1, 0.9, 10),
            "true_probability": np.linspace(0.1, 0.9, 10)}
    for n in (1, 3, 6):
        out = reliability_diagram({f"panel {i}": bins for i in range(n)}, tmp_path / f"rel{n}")
        assert min(pdf_facts(out["pdf"].read_bytes())["text_pt"]) >= MIN_TEXT_PT
    rng = np.random.default_rng(0)
    images, labels = rng.uniform(-1, 1, (80, 1, 8, 8)), np.repeat(np.arange(10), 8)
    # titles as long as the validation job's (scripts/validation_samples_grid.py)
    out = sample_grid_figure(images, labels, [f"class {k}" for k in range(10)], tmp_path / "grid",
                             title="oracle samples (no guidance, no denoising), 8 per class, 10 of the 100 classes",
                             real=images, real_labels=labels,
                             real_title="real training images (data/train.h5), 8 per class")
    assert pdf_facts(out["pdf"].read_bytes())["width_in"] == pytest.approx(print_widths().page_in, abs=0.01)


def _row_of_panels(n: int, titles: list[str] | None = None) -> Figure:
    """`n` panels side by side on one page width, x ticks at N = 500, 1000, 2000 (linear)."""
    with style():
        fig = Figure(figsize=(print_widths().page_in, 2.2), layout="constrained")
        for i, ax in enumerate(fig.subplots(1, n)):
            ax.plot([500, 1000, 2000], [3, 2, 1])
            ax.set_xticks([500, 1000, 2000])
            ax.set(xlabel="N", title=(titles or [""] * n)[i])
    return fig


def test_overlapping_tick_labels_and_titles_are_refused(tmp_path):
    """Issue 48: Figure 5's ticks 1000 and 2000 ran together ("10002000") and its titles into
    each other; the figure check names them."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from oracle.report.figures import collisions

    fig = _row_of_panels(8)
    FigureCanvasAgg(fig).draw()
    assert any(re.fullmatch(r"x tick labels '\d+' and '\d+' overlap \(axes ''\)", c) for c in collisions(fig))
    save_figure(fig, tmp_path / "ticks")  # which save_figure thins to fit (below)
    assert not collisions(fig)
    (tmp_path / "ticks.pdf").unlink()
    (tmp_path / "ticks.png").unlink()
    long = ["expected calibration error against the labels"] * 3
    fig = _row_of_panels(3, long)
    FigureCanvasAgg(fig).draw()
    assert any(c.startswith("title 'expected calibration error aga' overlaps") for c in collisions(fig))
    save_figure(fig, tmp_path / "wrapped")  # which save_figure wraps to fit their panels (wrap_titles)
    assert all("\n" in ax.get_title() for ax in fig.axes) and not collisions(fig)
    for path in tmp_path.iterdir():
        path.unlink()
    word = ["expected_calibration_error_against_the_labels"] * 3  # no space to wrap at: refused
    with pytest.raises(OracleError, match=r"title 'expected_calibration_error_aga' overlaps"):
        save_figure(_row_of_panels(3, word), tmp_path / "titles")
    assert not list(tmp_path.iterdir())
    save_figure(_row_of_panels(3, ["(a) ECE", "(b) KL", "(c) gap"]), tmp_path / "fits")  # the check can pass


def test_a_run_writes_a_figure_that_does_not_fit_with_a_warning_in_its_log_and_caption(tmp_path, capsys):
    """Issue 46 item 7: presentation never costs a run: outside the tests (`strict` False) the
    figure is written, the job's log (stderr) and its caption say what is wrong."""
    from oracle.report.captions import read_caption, write_caption

    fig = _figure(print_widths().column_in)
    fig.axes[0].legend(loc="upper left", bbox_to_anchor=(1.2, 1))  # a legend right of the canvas
    out = save_figure(fig, tmp_path / "cut", strict=False)
    assert out["pdf"].is_file() and out["png"].is_file()
    assert "WARNING: figure" in capsys.readouterr().err
    write_caption(tmp_path / "cut.caption.rst", "What it shows.")
    caption = read_caption(tmp_path / "cut.caption.rst")
    assert caption.startswith("What it shows. Layout warning: this figure does not print cleanly (content reaches")
    write_caption(tmp_path / "other.caption.rst", "Another.")  # a figure written cleanly: no warning
    assert read_caption(tmp_path / "other.caption.rst") == "Another."


def _four_panels() -> Figure:
    """Figure 2's layout: four lettered panels, (d) the floor with the epistemic KL stacked on it."""
    from oracle.report.figures import panel_letters

    with style():
        fig = Figure(figsize=(print_widths().page_in, 4.8), layout="constrained")
        axes = fig.subplots(2, 2)
        for ax, title in zip(axes.ravel(), ["total loss", "epistemic error, fits dashed", "accuracy",
                                            "floor + epistemic"]):
            ax.plot([1, 2], [1, 2])
            ax.set_title(title)
        panel_letters(axes)
    return fig


def test_a_caption_naming_a_panel_the_figure_does_not_draw_fails(tmp_path):
    """Issue 48: the panels a saved figure draws are in its PDF (`pdf_facts`' panels), and a
    caption that names a letter the figure lacks, or describes a panel as another one, is named."""
    from oracle.report.figures import caption_panel_problems

    panels = pdf_facts(save_figure(_four_panels(), tmp_path / "fig2")["pdf"].read_bytes())["panels"]
    assert panels == {"a": "total loss", "b": "epistemic error, fits dashed", "c": "accuracy",
                      "d": "floor + epistemic"}
    old = ("Loss decomposition against N: (a) total cross-entropy (nats) with the aleatoric floor, (b) epistemic "
           "KL (nats) with power-law fits, (c) test accuracy (%) against the Bayes-optimal accuracy, (d) exponent "
           "alpha per architecture, mean ± std over per-seed fits; against N (samples).")
    assert caption_panel_problems(old, panels) == [
        "the caption's '(d) exponent alpha per architecture, mean ± std over per-see' does not describe panel "
        "(d), titled 'floor + epistemic'"]
    assert caption_panel_problems(old.replace("(d) exponent alpha per architecture", "(d) the floor stacked under "
                                              "the epistemic KL") + " (e) more", panels) == [
        "the caption names panel (e); the figure draws (a), (b), (c), (d)"]
    assert not caption_panel_problems(old.replace("(d) exponent alpha", "(d) the floor + epistemic KL"), panels)


def test_tick_labels_are_thinned_to_fit_their_panel(tmp_path):
    """Figure 5's "10002000": `save_figure` keeps the largest size's label and drops the ones
    that would run into a neighbour, so a narrow panel of many sizes N prints."""
    from oracle.report.figures import size_ticks

    with style():
        fig = Figure(figsize=(print_widths().page_in, 2.0), layout="constrained")
        for ax in fig.subplots(1, 4):
            ax.plot([100, 1000, 2000, 4000, 5000, 10000], [6, 5, 4, 3, 2, 1])
            size_ticks(ax, [100, 1000, 2000, 4000, 5000, 10000])
    save_figure(fig, tmp_path / "fig5")  # strict in the tests: would raise on a collision
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_visible()]
    assert labels[-1] == "10000" and "100" in labels and len(labels) < 6, labels


def test_tick_labels_that_fit_cost_no_second_layout(monkeypatch):
    """`thin_tick_labels` lays a figure out again only where it dropped a label: most figures
    fit as drawn, and each draw is a full constrained layout (the preset-figure tests draw ~90).
    Its layout passes paint nothing (`lay_out`: no `canvas.draw()`, whose raster nobody reads)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from oracle.report.figure_check import thin_tick_labels

    draws, draw = [], Figure.draw
    painted = []
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: draws.append(1) or draw(self, renderer))
    monkeypatch.setattr(FigureCanvasAgg, "draw", lambda self: painted.append(1))
    for ticks, expected in ((None, 1), ([1.0, 1.01, 1.02], 2)):  # default ticks fit; "1.001.011.02" does not
        draws.clear()
        with style():
            fig = Figure(figsize=(print_widths().page_in, 2.0), layout="constrained")
            for ax in fig.subplots(1, 4):
                ax.plot([0, 3], [0, 1])
                if ticks:
                    ax.set_xticks(ticks)
        FigureCanvasAgg(fig)
        thin_tick_labels(fig)
        assert len(draws) == expected and not painted, (ticks, len(draws), len(painted))


def test_a_layout_without_painting_saves_the_same_bytes(tmp_path, monkeypatch):
    """`lay_out` (the layout passes of `save_figure`) leaves the figure as a painted
    `canvas.draw()` would: a figure whose title wraps and whose ticks are thinned saves to the
    same PDF and PNG bytes either way (scripts/bench/layout.py does this for every preset shape)."""
    import oracle.report.figure_check as figure_check

    def drawn(painted: bool) -> dict[str, bytes]:
        if painted:
            monkeypatch.setattr(figure_check, "lay_out", lambda fig: fig.canvas.draw() or fig.canvas.get_renderer())
        with style():
            fig = Figure(figsize=(print_widths().column_in, 2.2), layout="constrained")
            ax = fig.subplots()
            ax.plot([1.0, 1.01, 1.02], [0, 1, 0])
            ax.set_xticks([1.0, 1.005, 1.01, 1.015, 1.02])
            ax.set(title="a title long enough to need a second line over one column", xlabel="N")
        out = save_figure(fig, tmp_path / ("painted" if painted else "laid_out"), strict=False)
        return {ext: p.read_bytes() for ext, p in out.items()}

    assert drawn(painted=False) == drawn(painted=True)
