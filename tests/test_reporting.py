"""Tables and figures: files exist and parse, numbers equal the input aggregates."""

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from oracle.measures.calibration import reliability_curve
from oracle.errors import OracleError
from oracle.reporting import arch_label, figure2, figure5, reliability_diagram, table1, table2, write_table

ALPHAS = {"resnet18": [0.04, 0.05, 0.06], "vit_base_patch16_224": [0.02, 0.03, 0.04], "mobilenetv3_large_100": [0.12, 0.14, 0.15]}
NS = [100, 1000, 5000, 10000]


@pytest.fixture(scope="module")
def runs():
    rng = np.random.default_rng(0)
    rows = []
    for arch, alphas in ALPHAS.items():
        for seed, alpha in enumerate(alphas):
            for n in NS:
                epi = 0.4 * n**-alpha
                rows.append({
                    "arch": arch, "N": n, "seed": seed, "label_mode": "hard",
                    "acc_source": 0.96 + 0.005 * np.log10(n) + rng.normal(0, 0.002),
                    "acc_posterior": 0.97, "aleatoric": 0.012, "aleatoric_se": 0.001,
                    "epistemic": epi, "epistemic_se": 0.1 * epi, "total": 0.012 + epi, "total_se": 0.1 * epi,
                    "ece": 0.02, "nll": 0.02 + epi, "bayes_accuracy": 0.9977 + rng.normal(0, 1e-5),
                })
    return pd.DataFrame(rows)


def test_write_table_outputs_parse(tmp_path):
    df = pd.DataFrame({"Architecture": ["ResNet_18", "ViT"], "Accuracy (%)": [97.7312345, np.nan], "N": [100, 40000]})
    paths = write_table(df, tmp_path / "sub" / "tab", "Accuracy & error at N = 40,000", float_format=".2f")
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


def test_write_table_rejects_non_frames_and_bad_formats(tmp_path):
    with pytest.raises(OracleError):
        write_table([1, 2], tmp_path / "t", "c")
    with pytest.raises(ValueError):
        write_table(pd.DataFrame({"a": [1.0]}), tmp_path / "t", "c", float_format="%q")
    assert not list(tmp_path.iterdir())


def test_table1_numbers_equal_aggregates(runs):
    t = table1(runs)
    assert list(t.columns) == ["Architecture", "N", "Seeds", "Accuracy (%)", "Accuracy std (%)", "Error (%)",
                               "Bayes (%)", "Gap (%)"]
    assert t["Accuracy (%)"].is_monotonic_decreasing
    for arch in ALPHAS:
        at = runs[(runs.arch == arch) & (runs.N == max(NS))]
        row = t[t.Architecture == arch_label(arch)].iloc[0]
        acc = 100 * at["acc_source"].to_numpy().mean()
        bayes = 100 * at["bayes_accuracy"].to_numpy().mean()
        assert row["N"] == max(NS) and row["Seeds"] == 3
        assert row["Accuracy (%)"] == pytest.approx(acc, abs=1e-10)
        assert row["Accuracy std (%)"] == pytest.approx(100 * np.std(at["acc_source"], ddof=1), abs=1e-10)
        assert row["Error (%)"] == pytest.approx(100 - acc, abs=1e-10)
        assert row["Gap (%)"] == pytest.approx(bayes - acc, abs=1e-10)


def test_table2_numbers_equal_seed_means(runs):
    t = table2(runs, with_std=True)
    assert t["Dataset size N"].tolist() == NS
    for arch, alphas in ALPHAS.items():
        expected = [np.mean([0.4 * n**-a for a in alphas]) for n in NS]
        np.testing.assert_allclose(t[arch_label(arch)], expected, rtol=1e-12)
        np.testing.assert_allclose(t[f"{arch_label(arch)} std"],
                                   [np.std([0.4 * n**-a for a in alphas], ddof=1) for n in NS], rtol=1e-10)


def test_table_builders_refuse_mixed_label_modes_and_missing_columns(runs):
    mixed = pd.concat([runs, runs.assign(label_mode="soft")])
    with pytest.raises(OracleError, match="label_mode"):
        table1(mixed)
    with pytest.raises(OracleError, match="bayes_accuracy"):
        table1(runs.drop(columns="bayes_accuracy"))


def _check_image_pair(paths):
    assert set(paths) == {"pdf", "png"}
    assert paths["pdf"].read_bytes()[:5] == b"%PDF-"
    with Image.open(paths["png"]) as im:
        im.verify()
    with Image.open(paths["png"]) as im:
        assert im.size[0] > 300 and im.size[1] > 200


def test_figure2_and_figure5_write_pdf_and_png(runs, tmp_path):
    _check_image_pair(figure2(runs, tmp_path / "fig2"))
    _check_image_pair(figure5(runs, tmp_path / "fig5"))
    first = (tmp_path / "fig2.pdf").read_bytes()
    figure2(runs, tmp_path / "fig2")
    assert (tmp_path / "fig2.pdf").read_bytes() == first  # no timestamps: reruns are identical


def test_figures_with_a_single_seed(runs, tmp_path):
    one = runs[runs.seed == 0]
    _check_image_pair(figure5(one[one.arch == "resnet18"], tmp_path / "fig5_one"))
    _check_image_pair(figure2(one, tmp_path / "fig2_one"))


def test_reliability_diagram(tmp_path):
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(3), size=200)
    labels = rng.integers(0, 3, size=200)
    _check_image_pair(reliability_diagram({"model": reliability_curve(probs, labels)}, tmp_path / "rel"))


def test_image_grid_places_each_class_in_its_row():
    from oracle.reporting import image_grid

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
    from oracle.reporting import sample_grid_figure

    rng = np.random.default_rng(1)
    out = sample_grid_figure(rng.uniform(-1.2, 1.2, size=(12, 1, 4, 4)), np.arange(12) % 3,
                             ["a", "b", "c"], tmp_path / "grid", per_class=4)
    assert out["pdf"].read_bytes()[:4] == b"%PDF"
    with Image.open(out["png"]) as im:
        assert im.size[0] > 0
