"""oracle.experiments.scaling: collected runs, power-law fits, its tables, figures and numbers,
each against the aggregates computed here by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from oracle.classifiers.evaluate import read_metrics_frame
from oracle.errors import ConfigError, DataError
from oracle.experiments.scaling import findings as scaling_findings
from oracle.experiments import scaling
from oracle.experiments._pairs import COLUMNS as PAIR_COLUMNS
from oracle.measures.paired import row_values
from oracle.measures.power_laws import loglog_curvature
from oracle.experiments.columns import data_problems
from oracle.measures.two_way import two_way, two_way_from_summaries
from oracle.report.numbers import spread_problems
from paired_rows import brute_force, write_classifier, write_world

ALPHAS = {"resnet18": [0.04, 0.05, 0.06], "vit_base_patch16_224": [0.02, 0.03, 0.04],
          "mobilenetv3_large_100": [0.12, 0.14, 0.15]}
LABELS = {"resnet18": "ResNet-18", "vit_base_patch16_224": "ViT-Base", "mobilenetv3_large_100": "MobileNet"}
NS = [100, 1000, 5000, 10000]
#: The pairs data of classifiers without predictions (the plateau's KL fall is then not computed).
NO_PAIRS = pd.DataFrame(columns=list(PAIR_COLUMNS))


def log_softmax_np(a: np.ndarray) -> np.ndarray:
    m = a.max(axis=1, keepdims=True)
    return a - m - np.log(np.exp(a - m).sum(axis=1, keepdims=True))


def spec(**changes) -> dict:
    out = {"kind": "scaling", "world": "base", "archs": list(ALPHAS), "sizes": NS, "seeds": [0, 1, 2],
           "labels": "hard", "hard_label": "label", "table_size": None, "table_archs": None, "table_sizes": None,
           "arch_labels": dict(LABELS)}
    out.update(changes)
    return out


@pytest.fixture(scope="module")
def runs():
    """Three archs x 4 N x 3 seeds; epistemic = 0.4 N^-alpha exactly, alpha differs per seed."""
    rng = np.random.default_rng(0)
    rows = []
    for arch, alphas in ALPHAS.items():
        for seed, alpha in enumerate(alphas):
            for n in NS:
                epi = 0.4 * n**-alpha
                acc = 0.96 + 0.005 * np.log10(n) + rng.normal(0, 0.002)
                rows.append({
                    "experiment": "scaling", "arch": arch, "cell": f"N{n}", "N": n, "seed": seed, "evalset": "base",
                    "labels": "hard", "hard_label": "label", "n": 500,
                    "acc": acc, "acc_se": 0.004, "bayes_gap": 0.9977 - acc, "bayes_gap_se": 0.003, "num_classes": 3,
                    "oracle_nll_minus_floor": 0.001, "oracle_nll_minus_floor_se": 0.002, "nll_regret": epi,
                    "nll_regret_se": 0.05 * epi,
                    "acc_posterior": 0.97, "aleatoric": 0.012, "aleatoric_se": 0.001,
                    "epistemic": epi, "epistemic_se": 0.1 * epi, "total": 0.012 + epi, "total_se": 0.1 * epi,
                    "ece": 0.02 + 0.5 * epi, "ece_posterior": 0.01 + 0.5 * epi + rng.normal(0, 0.001),
                    "calibration_pointwise": 0.03 + 0.5 * epi, "nll": 0.02 + epi, "bayes_accuracy": 0.9977, "bayes_accuracy_se": 0.001,
                })
    df = pd.DataFrame(rows)
    return {"runs": df, "fits": scaling.all_fits(df), "pairs": NO_PAIRS}


@pytest.fixture
def world(tmp_path):
    """A world file of 60 rows, K = 3, and its posterior and labels at its 50 test rows."""
    rng = np.random.default_rng(11)
    labels = rng.integers(0, 3, 60)
    log_p = write_world(tmp_path / "all.h5", rng.normal(size=(60, 3)) * 2.0, labels, [0.5, 0.3, 0.2])
    rows = np.arange(5, 55)
    return tmp_path / "all.h5", log_p[rows], labels[rows], rows


def _write_metrics(root, arch, n, seed, epistemic, world):
    """A classifier's metrics (its epistemic KL replaced by `epistemic`, so the fits are known) and
    its predictions on the world's test rows -> (metrics path, predictions path, log q)."""
    from oracle.classifiers.evaluate import evaluate_predictions

    _, log_p, labels, rows = world
    rng = np.random.default_rng([n, seed, sum(map(ord, arch))])  # each arch its own classifiers
    log_q = log_softmax_np(log_p * rng.uniform(0.2, 1.0) + rng.normal(size=(50, 3)))
    m = evaluate_predictions(log_q, log_p, labels)
    m["epistemic"] = {"mean": epistemic, "se": 0.01}
    path = root / f"{arch}-N{n}-s{seed}.json"
    ident = {"experiment": "scaling", "arch": arch, "cell": f"N{n}", "N": n, "seed": seed, "evalset": "base",
             "labels": "hard", "hard_label": "label"}
    path.write_text(json.dumps({**ident, "metrics": m, "epochs": 3, "train_seconds": 1.0}))
    return path, write_classifier(root / f"{arch}-N{n}-s{seed}.h5", ident, log_q, labels, rows), log_q


def test_collect_reads_every_metrics_file_and_fits_each_seed(tmp_path, world):
    alphas = {"a": [0.30, 0.32, 0.34], "b": [0.10, 0.10, 0.13]}
    written = {(arch, n, seed): _write_metrics(tmp_path, arch, n, seed, 2.0 * n ** -alpha, world)
               for arch, per_seed in alphas.items() for seed, alpha in enumerate(per_seed) for n in (10, 100, 1000, 10000)}
    paths = [w[0] for w in written.values()]
    data = scaling.collect(spec(archs=list(alphas)), {"metrics": paths, "predictions": [w[1] for w in written.values()],
                                                      "samples": [world[0]]})
    problems = data_problems("scaling", {name: list(frame.columns) for name, frame in data.items()})
    assert not problems, problems  # the column dictionary (docs/outputs.md) describes exactly what collect writes
    df, fits = data["runs"], data["fits"]
    assert len(df) == 24 and list(df["N"][:4]) == [10, 10, 10, 100]  # sorted by arch, N, seed
    assert {"experiment", "arch", "cell", "N", "seed", "evalset", "epistemic", "epistemic_se", "acc", "ece",
            "source"} <= set(df.columns)
    assert set(fits["value"]) == set(scaling.FIT_VALUES)
    epi = fits[fits["value"] == "epistemic"]
    per_seed = epi[epi["kind"] == "seed"].set_index(["arch", "seed"])
    for arch, values in alphas.items():
        for seed, alpha in enumerate(values):
            assert math.isclose(per_seed.loc[(arch, seed), "alpha"], alpha, rel_tol=1e-9)
        row = epi[(epi["kind"] == "arch") & (epi["arch"] == arch)].iloc[0]
        assert math.isclose(row["alpha"], np.mean(values), rel_tol=1e-9)
        assert math.isclose(row["alpha_std"], np.std(values, ddof=1), rel_tol=1e-6)
    # the ECE's own exponent: fitted to the ECE column, not copied from the KL
    ece = fits[(fits["value"] == "ece") & (fits["kind"] == "seed")].set_index(["arch", "seed"])
    sub = df[(df["arch"] == "a") & (df["seed"] == 0)]
    slope = np.polyfit(np.log(sub["N"]), np.log(sub["ece"]), 1)[0]
    assert math.isclose(ece.loc[("a", 0), "alpha"], -slope, rel_tol=1e-9)
    # reliability: one row per (classifier, bin), the bins' counts add up to the test set
    rel = data["reliability"]
    assert len(rel) == 24 * 10 and (rel.groupby(["arch", "N", "seed"])["count"].sum() == 50).all()
    # pairs: every next step of N per (arch, seed), the KL difference paired per test row, as a loop computes it
    _, log_p, labels, _ = world
    pairs = data["pairs"]
    assert len(pairs) == 2 * 3 * 3 and set(pairs["value"]) == {"epistemic"} and (pairs["n_rows"] == 50).all()
    for _, r in pairs.iterrows():
        lo, hi = int(r["a"][1:]), int(r["b"][1:])
        assert hi == 10 * lo
        mean, se = brute_force(written[(r["arch"], lo, r["seed"])][2], written[(r["arch"], hi, r["seed"])][2], log_p,
                               labels, "epistemic")
        assert math.isclose(r["diff"], mean, rel_tol=1e-10) and math.isclose(r["diff_se"], se, rel_tol=1e-9)
    # the plateau's KL fall over the last step of N: mean over seeds of the paired differences, the rows' part the
    # mean of their paired SEs (not the unpaired hypot of the two sizes' test-set SEs)
    nums = scaling.numbers(data, spec(archs=list(alphas), arch_labels={"a": "A", "b": "B"}),
                           {d: f"{d}.csv" for d in scaling.DATA})
    for arch in alphas:
        last = pairs[(pairs["arch"] == arch) & (pairs["a"] == "N1000")]
        fall = nums[f"kl_fall_last.{arch}"]
        assert fall["artifact"] == "pairs.csv" and fall["n_seeds"] == 3 and fall["df"] is not None
        assert math.isclose(fall["value"], last["diff"].mean(), rel_tol=1e-12)
        # the two-way (seed x test row) SE of the [seeds, rows] array of per-row differences
        kl = {(n, seed): row_values(written[(arch, n, seed)][2], log_p, labels)["epistemic"]
              for n in (1000, 10000) for seed in sorted(set(last["seed"]))}
        tw = two_way(np.stack([kl[1000, seed] - kl[10000, seed] for seed in sorted(set(last["seed"]))]))
        assert math.isclose(fall["se"], tw.se, rel_tol=1e-9) and math.isclose(fall["df"], tw.df, rel_tol=1e-9)
        assert fall["rows_bound"] is False and fall["n_rows"] == 50
        # the old hypot of the seeds' spread and their mean paired SE counts the interaction twice
        assert fall["se"] <= math.hypot(last["diff"].std(ddof=1) / math.sqrt(3), last["diff_se"].mean()) + 1e-15
        # a cell's mean over seeds: runs' <value>_se_mean is the SE over rows of its seed-mean per-row values
        # (the metrics files here carry made-up means, so the entry is checked on its inputs)
        seeds = sorted(set(last["seed"]))
        seed_mean = np.mean([row_values(written[(arch, 10000, sd)][2], log_p, labels)["epistemic"] for sd in seeds], 0)
        at = df[(df["arch"] == arch) & (df["N"] == 10000)]
        assert np.allclose(at["epistemic_se_mean"], seed_mean.std(ddof=1) / math.sqrt(50), rtol=1e-9)
        cell = nums[f"epistemic_max_n.{arch}"]
        want = two_way_from_summaries(at["epistemic"], at["epistemic_se"], float(at["epistemic_se_mean"].iloc[0]), 50)
        assert math.isclose(cell["se"], want.se, rel_tol=1e-12) and cell["rows_bound"] is False
    assert spread_problems({k: v for k, v in nums.items() if k.startswith("kl_fall_last")}) == []
    # two archs paired per seed and row: ln(KL_a / KL_b) at the largest N, the two-way SE of the delta method's
    # per-row values; the exponents' difference per seed
    kl = {x: np.stack([row_values(written[(x, 10000, sd)][2], log_p, labels)["epistemic"] for sd in (0, 1, 2)])
          for x in alphas}
    ratio = nums["log_kl_ratio_max_n.a.b"]
    assert ratio["value"] == pytest.approx(math.log(kl["a"].mean() / kl["b"].mean()), rel=1e-12)
    tw = two_way(kl["a"] / kl["a"].mean() - kl["b"] / kl["b"].mean())
    assert ratio["se"] == pytest.approx(tw.se, rel=1e-9) and ratio["df"] == pytest.approx(tw.df, rel=1e-9)
    assert nums["log_kl_ratio_max_n.b.a"]["value"] == -ratio["value"] and ratio["n_seeds"] == 3
    diff = np.subtract(alphas["a"], alphas["b"])
    assert nums["alpha_diff.a.b"]["value"] == pytest.approx(diff.mean(), rel=1e-9)
    assert nums["alpha_diff.a.b"]["std"] == pytest.approx(diff.std(ddof=1), rel=1e-6)
    # the low-data half per seed: ln KL(10) / KL(100) = alpha ln 10 here
    low = nums["log_kl_drop_low_diff.a.b"]
    assert low["value"] == pytest.approx(diff.mean() * math.log(10), rel=1e-9) and low["n_seeds"] == 3
    assert nums["log_kl_drop_low.a"]["value"] == pytest.approx(np.mean(alphas["a"]) * math.log(10), rel=1e-9)
    assert spread_problems({k: v for k, v in nums.items() if "ratio_max_n" in k or "_diff." in k}) == []


def test_metrics_file_without_its_identity_is_refused(tmp_path):
    p = tmp_path / "m.json"
    p.write_text(json.dumps({"arch": "a"}))
    with pytest.raises(DataError, match="lacks key"):
        read_metrics_frame([p])


def test_power_law_fits_of_a_single_n_is_a_note(runs):
    fits = scaling.power_law_fits(runs["runs"][runs["runs"]["N"] == 100])
    assert set(fits["kind"]) == {"arch"} and (fits["note"] == "fewer than two N").all()


def test_select_runs_relabels_and_filters(runs):
    df = runs["runs"]
    sub = scaling.select_runs(df, {"resnet18": "Alpha", "vit_base_patch16_224": "Beta"}, [100, 5000])
    assert set(sub["arch"]) == {"Alpha", "Beta"} and set(sub["N"]) == {100, 5000}
    with pytest.raises(ConfigError, match="'Same'"):
        scaling.select_runs(df, {"resnet18": "Same", "vit_base_patch16_224": "Same"})
    with pytest.raises(DataError):
        scaling.select_runs(df, {"resnet18": "Alpha"}, [7])


def test_accuracy_vs_bayes_equals_aggregates(runs):
    t = scaling.table("accuracy_vs_bayes", runs, spec())
    assert list(t.columns) == ["Architecture", "N", "Seeds", "Accuracy (%)", "Accuracy std (%)", "Error (%)",
                               "Bayes (%)", "Gap (%)", "Gap SE (%)"]
    assert t["Accuracy (%)"].is_monotonic_decreasing
    df = runs["runs"]
    for arch in ALPHAS:
        at = df[(df.arch == arch) & (df.N == max(NS))]
        row = t[t.Architecture == LABELS[arch]].iloc[0]
        acc = 100 * at["acc"].to_numpy().mean()
        assert row["N"] == max(NS) and row["Seeds"] == 3
        assert row["Accuracy (%)"] == pytest.approx(acc, abs=1e-10)
        assert row["Accuracy std (%)"] == pytest.approx(100 * np.std(at["acc"], ddof=1), abs=1e-10)
        assert row["Error (%)"] == pytest.approx(100 - acc, abs=1e-10)
        assert row["Gap (%)"] == pytest.approx(99.77 - acc, abs=1e-10)
        # the gap's SE holds the seeds' spread and the shared test rows' error (0.3 pp a seed)
        se_seeds = 100 * np.std(0.9977 - at["acc"], ddof=1) / np.sqrt(3)
        assert row["Gap SE (%)"] == pytest.approx(math.hypot(se_seeds, 0.3), rel=1e-9)
    at_size = scaling.table("accuracy_vs_bayes", runs, spec(table_size=1000))
    assert set(at_size["N"]) == {1000}


def test_epistemic_vs_n_equals_seed_means(runs):
    t = scaling.table("epistemic_vs_n", runs, spec())
    assert t["Dataset size N"].tolist() == NS
    for arch, alphas in ALPHAS.items():
        np.testing.assert_allclose(t[LABELS[arch]], [np.mean([0.4 * n**-a for a in alphas]) for n in NS], rtol=1e-12)
    sub = scaling.table("epistemic_vs_n", runs, spec(table_archs=["resnet18"], table_sizes=[100, 10000]))
    assert list(sub.columns) == ["Dataset size N", "ResNet-18", "ResNet-18 std"] and sub["Dataset size N"].tolist() == [100, 10000]
    with_std = scaling.epistemic_vs_n(runs["runs"], with_std=True)
    np.testing.assert_allclose(with_std["resnet18 std"], [np.std([0.4 * n**-a for a in ALPHAS["resnet18"]], ddof=1)
                                                          for n in NS], rtol=1e-10)


def test_tables_refuse_mixed_label_modes_and_missing_columns(runs):
    df = runs["runs"]
    with pytest.raises(DataError, match="label modes"):
        scaling.accuracy_vs_bayes(pd.concat([df, df.assign(labels="soft")]))
    with pytest.raises(DataError, match="bayes_accuracy"):
        scaling.accuracy_vs_bayes(df.drop(columns="bayes_accuracy"))
    with pytest.raises(DataError, match="no table"):
        scaling.table("table9", runs, spec())


def _check_image_pair(paths):
    assert set(paths) == {"pdf", "png"}
    assert paths["pdf"].read_bytes()[:5] == b"%PDF-"
    with Image.open(paths["png"]) as im:
        im.verify()
    with Image.open(paths["png"]) as im:
        assert im.size[0] > 300 and im.size[1] > 200


def _caption_names_drawn_panels(name: str, out: dict) -> None:
    """Issue 48: the artifact's caption names only panels the figure draws, each as its title
    says (Figure 2's "(d) exponent alpha" over a panel of floor + epistemic failed here)."""
    from oracle.report.figures import caption_panel_problems, pdf_facts

    panels = pdf_facts(out["pdf"].read_bytes())["panels"]
    assert not caption_panel_problems(scaling.ARTIFACTS[name].caption, panels), (name, panels)


def test_figures_write_pdf_and_png_and_rerun_identically(runs, tmp_path):
    _check_image_pair(out := scaling.figure("scaling_panels", runs, spec(), tmp_path / "panels"))
    _caption_names_drawn_panels("scaling_panels", out)
    _check_image_pair(out := scaling.figure("epistemic_curves", runs, spec(), tmp_path / "curves"))
    _caption_names_drawn_panels("epistemic_curves", out)
    first = (tmp_path / "panels.pdf").read_bytes()
    scaling.figure("scaling_panels", runs, spec(), tmp_path / "panels")
    assert (tmp_path / "panels.pdf").read_bytes() == first  # no timestamps: reruns are identical


def test_figures_with_a_single_seed(runs, tmp_path):
    one = runs["runs"][runs["runs"].seed == 0]
    _check_image_pair(scaling.epistemic_curves(one[one.arch == "resnet18"], tmp_path / "one"))
    _check_image_pair(scaling.scaling_panels(one, tmp_path / "panels_one"))


def test_numbers_spread_over_seeds_and_bayes_gaps():
    rows = [{"arch": arch, "N": n, "seed": seed, "labels": "hard", "acc": 0.6 + 0.01 * seed + (0.1 if n == 100 else 0),
             "cell": f"N{n}", "acc_se": 0.02, "ece": 0.05, "ece_posterior": 0.04, "calibration_pointwise": 0.06, "epistemic": 0.3 / n ** 0.2 + 0.001 * seed, "epistemic_se": 0.004,
             "bayes_accuracy": 0.8, "bayes_accuracy_se": 0.01, "n": 400}
            for arch in ("r18", "vit") for n in (10, 100) for seed in ((0, 1) if arch == "r18" else (0,))]
    data = {"runs": pd.DataFrame(rows), "fits": pd.DataFrame(), "pairs": NO_PAIRS}
    s = spec(archs=["r18", "vit"], sizes=[10, 100], arch_labels={"r18": "ResNet-18", "vit": "ViT"})
    nums = scaling.numbers(data, s, {"runs": "runs.csv", "fits": "fits.csv", "pairs": "pairs.csv"})
    two = data["runs"][(data["runs"]["arch"] == "r18") & (data["runs"]["N"] == 100)]["acc"].to_numpy()
    acc = nums["accuracy.r18"]
    assert acc["se_over"] == "seeds" and acc["n_seeds"] == 2 and acc["artifact"] == "runs.csv"
    assert math.isclose(acc["std"], np.std(two, ddof=1)) and math.isclose(acc["se"], np.std(two, ddof=1) / math.sqrt(2))
    assert nums["accuracy.vit"]["se_over"] == "test set" and nums["accuracy.vit"]["se"] == 0.02
    assert nums["accuracy.vit"]["std"] is None
    # the gap of the accuracy_vs_bayes table, under the architecture's name, not its label
    assert math.isclose(nums["bayes_gap.r18"]["value"], 100 * (0.8 - two.mean()), rel_tol=1e-12)
    gaps = [nums["bayes_gap.r18"]["value"], nums["bayes_gap.vit"]["value"]]
    assert nums["bayes_gap_min"]["value"] == min(gaps) and nums["bayes_gap_max"]["value"] == max(gaps)
    assert nums["epistemic_min_n.vit"]["value"] == 0.3 / 10 ** 0.2 and nums["n_min"]["value"] == 10
    assert nums["test_size"]["value"] == 400 and nums["test_bayes_accuracy"]["value"] == 0.8
    assert "alpha.r18" not in nums  # no fits: no exponent rather than a made-up one
    for entry in nums.values():
        assert {"value", "unit", "artifact", "description"} <= set(entry)


def test_calibration_figures(runs, tmp_path):
    from oracle.classifiers.evaluate import evaluate_predictions

    rng = np.random.default_rng(3)
    rows = []
    for arch in ALPHAS:
        for n in NS:
            for seed in (0, 1, 2):
                m = evaluate_predictions(log_softmax_np(3 * rng.normal(size=(80, 3))),
                                         log_softmax_np(rng.normal(size=(80, 3))), rng.integers(0, 3, 80))
                rel = m["reliability"]
                rows += [{"experiment": "scaling", "arch": arch, "cell": f"N{n}", "seed": seed, "evalset": "base",
                          "N": n, "bin": b, **{k: rel[k][b] for k in ("count", "confidence", "accuracy",
                                                                       "true_probability")}} for b in range(10)]
    data = {**runs, "reliability": pd.DataFrame(rows).fillna(np.nan)}
    for name in ("calibration_vs_n", "calibration_agreement", "reliability"):
        _check_image_pair(out := scaling.figure(name, data, spec(), tmp_path / name))
        _caption_names_drawn_panels(name, out)
    with pytest.raises(DataError, match="calibration_vs_n"):
        scaling.figure("fig9", data, spec(), tmp_path / "x")


def test_numbers_recover_the_exponents(runs):
    nums = scaling.numbers(runs, spec(), {"runs": "runs.csv", "fits": "fits.csv", "pairs": "pairs.csv"})
    assert spread_problems(nums) == []  # every mean over seeds: std, se, se_over, n_seeds
    for arch, alphas in ALPHAS.items():
        assert math.isclose(nums[f"alpha.{arch}"]["value"], np.mean(alphas), rel_tol=1e-9)
        assert nums[f"alpha.{arch}"]["artifact"] == "fits.csv"
        assert math.isclose(nums[f"epistemic_reduction.{arch}"]["value"], (100 / 10000) ** -np.mean(alphas),
                            rel_tol=0.05)
    for arch in ALPHAS:
        sub = runs["runs"][runs["runs"]["arch"] == arch]
        per_seed = [-np.polyfit(np.log(g["N"]), np.log(g["ece"]), 1)[0] for _, g in sub.groupby("seed")]
        assert math.isclose(nums[f"ece_alpha.{arch}"]["value"], np.mean(per_seed), rel_tol=1e-9)
        # the ECE's log-log curvature, mean and SE over seeds: the claims' lack-of-fit test of ece_rate
        bends = [loglog_curvature(g["N"], g["ece"]) for _, g in sub.groupby("seed")]
        bend = nums[f"ece_curvature.{arch}"]
        assert bend["value"] == pytest.approx(np.mean(bends), rel=1e-9, abs=1e-12)
        assert bend["se"] == pytest.approx(np.std(bends, ddof=1) / math.sqrt(len(bends)), rel=1e-9, abs=1e-12)
        assert f"true_ece_alpha.{arch}" in nums and f"true_ece.{arch}" in nums


def test_agreement_numbers_against_a_hand_computation(runs):
    from oracle.experiments._calibration.report import agreement_numbers

    df = runs["runs"]
    nums = agreement_numbers(df, "runs.csv")
    diff = (df["ece"] - df["ece_posterior"]).to_numpy()
    assert nums["calibration.n_classifiers"]["value"] == len(df)
    assert nums["calibration.ece_label_minus_truth"]["value"] == pytest.approx(diff.mean(), abs=1e-15)
    assert nums["calibration.ece_label_minus_truth"]["se"] == pytest.approx(diff.std(ddof=1) / np.sqrt(len(df)))
    assert nums["calibration.ece_label_above_truth"]["value"] == pytest.approx((diff > 0).mean())
    # Spearman = Pearson correlation of the ranks (no ties in these values)
    ranks = [pd.Series(df[c]).rank().to_numpy() for c in ("ece", "ece_posterior")]
    assert nums["calibration.ece_rank_correlation"]["value"] == pytest.approx(np.corrcoef(*ranks)[0, 1], abs=1e-12)
    i = int(np.argmax(np.abs(diff)))
    assert nums["calibration.ece_largest_difference"]["value"] == pytest.approx(diff[i], abs=1e-15)
    assert f"cell={df.iloc[i]['cell']}" in nums["calibration.ece_largest_difference"]["description"]
    hidden = (df["calibration_pointwise"] - df["ece_posterior"]).mean()
    assert nums["calibration.binning_hides"]["value"] == pytest.approx(hidden, abs=1e-15)
    with pytest.raises(DataError, match="ece_posterior"):
        agreement_numbers(df.drop(columns="ece_posterior"), "runs.csv")


def test_one_size_compares_architectures_without_fits(runs, tmp_path):
    # presets/cpu-study.yaml's scaling-archs: every architecture at N_max alone (archs_differ's seeds)
    top = max(NS)
    one = {"runs": runs["runs"][runs["runs"]["N"] == top].reset_index(drop=True), "pairs": NO_PAIRS}
    one["fits"] = scaling.all_fits(one["runs"])
    assert set(one["fits"]["note"].dropna()) == {"fewer than two N"}
    s = spec(sizes=[top])
    for name in ("scaling_panels", "epistemic_curves"):
        out = scaling.figure(name, one, s, tmp_path / name)
        _check_image_pair(out)
        from oracle.report.figures import pdf_facts

        assert "fits dashed" not in str(pdf_facts(out["pdf"].read_bytes())["panels"])
        sentence = scaling_findings.findings(name, one, s)
        assert f"One training-set size (N = {top:,}): no power law is fitted" in sentence
    nums = scaling.numbers(one, s, {"runs": "runs.csv", "fits": "fits.csv", "pairs": "pairs.csv"})
    for arch in ALPHAS:  # archs_differ reads these; power_law and the exponents have nothing to read
        kl = one["runs"][one["runs"]["arch"] == arch]["epistemic"]
        assert nums[f"epistemic_max_n.{arch}"]["value"] == pytest.approx(kl.mean(), rel=1e-12)
        assert f"alpha.{arch}" not in nums
    assert nums["n_sizes"]["value"] == 1
