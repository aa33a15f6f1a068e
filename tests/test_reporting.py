"""oracle.report: tables parse, figures exist, grids place images where they belong."""

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from oracle.errors import OracleError
from oracle.measures.calibration import reliability_bins
from oracle.report.figures import log_tick_labels, reliability_diagram
from oracle.report.tables import write_table


def test_write_table_outputs_parse(tmp_path):
    df = pd.DataFrame({"Architecture": ["ResNet_18", "ViT"], "Accuracy (%)": [97.7312345, np.nan], "N": [100, 40000]})
    paths = write_table(df, tmp_path / "sub" / "tab", "Accuracy & error at N = 40,000")  # (%): 2 decimals
    assert set(paths) == {"csv", "md", "tex", "column.tex", "note.tex"} and all(p.exists() for p in paths.values())
    pd.testing.assert_frame_equal(pd.read_csv(paths["csv"], float_precision="round_trip"), df)
    md = paths["md"].read_text()
    assert md.startswith("Table: Accuracy & error at N = 40,000")
    assert "| ResNet_18" in md and "97.73" in md and "97.7312" not in md
    tex = paths["tex"].read_text()
    assert "\\begin{tabular}{lrr}" in tex and "\\end{tabular}" in tex
    assert "\\caption{Accuracy \\& error at N = 40,000}" in tex and "\\label{tab:tab}" in tex
    assert "ResNet\\_18 & 97.73 & 100 \\\\" in tex and "Accuracy \\\\ (\\%)" in tex  # header on two lines
    assert "ViT & -- & 40000" in tex
    assert not list((tmp_path / "sub").glob(".*"))


def test_write_table_rejects_non_frames(tmp_path):
    with pytest.raises(OracleError):
        write_table([1, 2], tmp_path / "t", "c")
    assert not list(tmp_path.iterdir())


def _check_image_pair(paths):
    assert set(paths) == {"pdf", "png"}
    assert paths["pdf"].read_bytes()[:5] == b"%PDF-"
    with Image.open(paths["png"]) as im:
        im.verify()
    with Image.open(paths["png"]) as im:
        assert im.size[0] > 300 and im.size[1] > 200


def test_reliability_diagram(tmp_path):
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(3), size=200)
    labels = rng.integers(0, 3, size=200)
    truth = rng.dirichlet(np.ones(3), size=200)
    panels = {"labels only": reliability_bins(probs, labels), "with truth": reliability_bins(probs, labels, probs_p=truth)}
    _check_image_pair(reliability_diagram(panels, tmp_path / "rel"))
    with pytest.raises(OracleError, match="no panels"):
        reliability_diagram({}, tmp_path / "none")


def test_image_grid_places_each_class_in_its_row():
    from oracle.report.figures import image_grid

    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, size=(7, 3, 2, 2))
    labels = np.array([1, 0, 1, 1, 0, 2, 1])
    grid = image_grid(images, labels, num_classes=3, per_class=2, gap=1)
    assert grid.shape == (3 * 2 + 2, 2 * 2 + 1, 3)
    # row 1, column 1 is the second image of class 1 (index 2), mapped from [-1, 1] to [0, 1]
    assert np.allclose(grid[3:5, 3:5], (images[2].transpose(1, 2, 0) + 1) / 2)
    assert np.allclose(grid[0:2, 0:2], (images[1].transpose(1, 2, 0) + 1) / 2)
    # tiles are separated by white gaps, so neighbouring images never touch
    assert np.all(grid[2, :] == 1.0) and np.all(grid[:, 2] == 1.0)
    # class 2 has one image: its second cell stays white
    assert np.all(grid[6:8, 3:5] == 1.0)


def test_sample_grid_figure_writes_pdf_and_png(tmp_path):
    from oracle.report.figures import sample_grid_figure

    rng = np.random.default_rng(1)
    out = sample_grid_figure(rng.uniform(-1.2, 1.2, size=(12, 1, 4, 4)), np.arange(12) % 3,
                             ["a", "b", "c"], tmp_path / "grid", per_class=4)
    assert out["pdf"].read_bytes()[:4] == b"%PDF"
    with Image.open(out["png"]) as im:
        assert im.size[0] > 0


def test_sample_grid_of_many_classes_shows_an_evenly_spaced_subset(tmp_path):
    from oracle.report.figures import grid_classes, sample_grid_figure

    assert grid_classes([2, 0, 1, 2], 16).tolist() == [0, 1, 2]
    picked = grid_classes(np.arange(1000), 16)
    assert len(picked) == 16 and picked[0] == 0 and picked[-1] == 999
    assert np.ptp(np.diff(picked)) <= 1  # evenly spaced, to rounding
    # only classes that have samples: 24 samples of 1,000 classes (the imagenet64 rehearsal)
    labels = np.random.default_rng(3).choice(1000, size=24)
    sub = grid_classes(labels, 16)
    assert len(sub) == 16 and set(sub) <= set(labels.tolist())
    with pytest.raises(OracleError, match="max_rows"):
        grid_classes(np.arange(10), 0)
    # rows follow `classes`; images of other classes are left out
    rng = np.random.default_rng(2)
    images = rng.uniform(-1, 1, size=(6, 1, 2, 2))
    labels = np.array([5, 0, 9, 5, 3, 9])
    names = [f"c{k}" for k in range(10)]
    out = sample_grid_figure(images, labels, names, tmp_path / "sub", per_class=2, classes=[0, 5, 9])
    with Image.open(out["png"]) as im:
        tall = im.size[1]
    full = sample_grid_figure(images, labels, names, tmp_path / "all", per_class=2)
    with Image.open(full["png"]) as im:
        assert im.size[1] > 2 * tall  # 10 rows against 3


@pytest.mark.parametrize(("limits", "expected"), [
    ((0.6, 1.9), [0.7, 1.0, 1.5]),          # about half a decade: matplotlib labelled one tick
    ((50, 2000), [50, 100, 200, 500, 1000, 2000]),
    ((0.01, 20), [0.01, 0.1, 1.0, 10.0]),   # several decades: powers of ten only
])
def test_log_tick_labels_give_three_plain_labels_over_the_range(limits, expected):
    from matplotlib.figure import Figure

    ax = Figure().add_subplot()
    ax.set(yscale="log", ylim=limits)
    log_tick_labels(ax, "y")
    ticks = ax.yaxis.get_major_locator()()
    assert np.allclose(ticks, expected)
    assert [ax.yaxis.get_major_formatter()(t, 0) for t in ticks[:2]] == [f"{t:g}" for t in expected[:2]]


def _captured_figure(monkeypatch):
    """Replace oracle.report.figures.save_figure with one that keeps the figure it is given."""
    import oracle.report.figures as figures

    kept = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, stem, dpi=figures.FIGURE_DPI: kept.append(fig) or {})
    return kept


def test_reliability_diagram_counts_every_bin_and_fades_sparse_ones(monkeypatch):
    kept = _captured_figure(monkeypatch)
    bins = {"lower": np.array([0.0, 0.5]), "upper": np.array([0.5, 1.0]), "count": np.array([3, 40]),
            "confidence": np.array([0.4, 0.8]), "accuracy": np.array([1.0, 0.75]),
            "true_probability": np.array([0.5, 0.8])}
    reliability_diagram({"one": bins, "two": {**bins, "count": np.array([0, 40])}}, "unused")
    fig = kept[0]
    ax_one, ax_two = fig.axes[:2]
    assert [ax.get_title() for ax in (ax_one, ax_two)] == ["(a) one", "(b) two"]
    # the count of each non-empty bin under its bar
    assert sorted(t.get_text() for t in ax_one.texts) == ["3", "40"] and [t.get_text() for t in ax_two.texts] == ["40"]
    # the bin of 3 predictions is drawn faded and hatched, the full one is not
    bars = {round(p.get_x(), 3): p for p in ax_one.patches}
    assert bars[0.0].get_alpha() < bars[0.5].get_alpha() and bars[0.0].get_hatch() and not bars[0.5].get_hatch()
    assert any("< 10 predictions" in t.get_text() for t in fig.legends[0].get_texts())
    # no sparse bin: no faded-bin legend entry
    kept.clear()
    reliability_diagram({"two": {**bins, "count": np.array([0, 40])}}, "unused")
    assert not any("predictions" in t.get_text() for t in kept[0].legends[0].get_texts())
    assert kept[0].axes[0].get_title() == "two"  # one panel: no letter


def test_panel_letters_go_row_by_row_over_visible_panels():
    from matplotlib.figure import Figure

    from oracle.report.figures import panel_letters

    axes = Figure().subplots(2, 2)
    for ax, title in zip(axes.ravel(), ("w", "x", "", "z")):
        ax.set_title(title)
    axes[1, 1].set_visible(False)
    panel_letters(axes)
    assert [ax.get_title() for ax in axes.ravel()] == ["(a) w", "(b) x", "(c)", "z"]


@pytest.mark.parametrize(("sizes", "expected"), [
    ([100, 300, 1000], [100, 300, 1000]),                  # each trained size labelled (300 was not)
    ([50, 100, 300, 1000, 2000], [50, 100, 300, 1000, 2000]),
    ([100, 120, 1000], [100, 200, 500, 1000]),             # too close to label both: the log ladder
    (list(range(100, 1100, 100)), [100, 200, 500, 1000]),  # too many: the log ladder
])
def test_size_ticks_label_the_trained_sizes_in_plain_numbers(sizes, expected):
    from matplotlib.figure import Figure

    from oracle.report.figures import size_ticks

    ax = Figure().add_subplot()
    ax.plot(sizes, np.ones(len(sizes)))
    size_ticks(ax, sizes)
    ticks = [t for t in ax.xaxis.get_major_locator()() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ax.get_xscale() == "log" and np.allclose(ticks, expected)
    assert [ax.xaxis.get_major_formatter()(t, 0) for t in ticks] == [f"{t:g}" for t in expected]


def test_sample_grid_puts_real_images_of_the_same_classes_beside_the_samples(tmp_path, monkeypatch):
    from oracle.io.images import read_image_labels, read_image_rows, write_images_h5
    from oracle.report.figures import first_rows_per_class, sample_grid_figure

    rng = np.random.default_rng(4)
    real = rng.integers(0, 256, size=(9, 1, 4, 4), dtype=np.uint8)
    real_labels = np.array([2, 0, 1, 2, 0, 0, 1, 2, 1])
    write_images_h5(tmp_path / "train.h5", real, real_labels, ["a", "b", "c"])
    assert read_image_labels(tmp_path / "train.h5").tolist() == real_labels.tolist()
    rows = first_rows_per_class(real_labels, [0, 2], 2)
    assert rows.tolist() == [0, 1, 3, 4]  # class 0: rows 1, 4; class 2: rows 0, 3
    assert np.array_equal(read_image_rows(tmp_path / "train.h5", rows), real[rows])
    with pytest.raises(OracleError, match="ascending"):
        read_image_rows(tmp_path / "train.h5", [3, 1])
    samples = rng.uniform(-1, 1, size=(6, 1, 4, 4))
    labels = np.array([0, 1, 2, 0, 1, 2])
    kept = _captured_figure(monkeypatch)
    sample_grid_figure(samples, labels, ["a", "b", "c"], "unused", per_class=2, classes=[0, 2],
                       real=real[rows], real_labels=real_labels[rows])
    left, right = kept[0].axes
    assert left.get_title().startswith("(a) real") and right.get_title().startswith("(b) oracle")
    # the left panel's rows hold the real images of classes 0 and 2, mapped to [0, 1]
    shown = left.images[0].get_array()
    assert np.allclose(shown[0:4, 0:4], real[1, 0] / 127.5 / 2, atol=1e-12)  # (u/127.5 - 1 + 1) / 2
    assert np.allclose(shown[5:9, 5:9], real[3, 0] / 255.0, atol=1e-12)
    assert [t.get_text() for t in left.get_yticklabels()] == ["a", "c"] and not right.get_yticklabels()
