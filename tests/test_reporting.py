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
    assert set(paths) == {"csv", "md", "tex"} and all(p.exists() for p in paths.values())
    pd.testing.assert_frame_equal(pd.read_csv(paths["csv"], float_precision="round_trip"), df)
    md = paths["md"].read_text()
    assert md.startswith("Table: Accuracy & error at N = 40,000")
    assert "| ResNet_18" in md and "97.73" in md and "97.7312" not in md
    tex = paths["tex"].read_text()
    assert "\\begin{tabular}{lrr}" in tex and "\\end{tabular}" in tex
    assert "\\caption{Accuracy \\& error at N = 40,000}" in tex and "\\label{tab:tab}" in tex
    assert "ResNet\\_18 & 97.73 & 100 \\\\" in tex and "Accuracy (\\%)" in tex
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
