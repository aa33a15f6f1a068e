"""oracle.report.claims: every finding's verdict (supported, contradicted, unresolved) on
constructed numbers, "not run" for a kind the config does not run, and the intervals."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from oracle.report import claims as cl

EXPERIMENTS = {"scaling": {"kind": "scaling"}, "labels": {"kind": "labels"}, "shift": {"kind": "shift"},
               "active": {"kind": "active"}, "difficulty": {"kind": "difficulty"}}
ARCHS = ("test_resnet", "test_vit")


def seeds(value, se, n=3, unit="1"):
    return {"value": value, "se": se, "se_over": "seeds", "n_seeds": n, "unit": unit}


def mc(value, se):
    return {"value": value, "se": se, "se_over": "test set"}


def base_numbers() -> dict:
    """Numbers under which every finding is supported (3 seeds: t(0.975, 2) = 4.30)."""
    n = {"shift.r2_drop_vs_exact_kl": {"value": 0.04}, "scaling.test_bayes_accuracy": mc(0.98, 0.002),
         "labels.ece_soft_max_n": seeds(0.010, 0.001),
         "active.gain_ratio.test_resnet": seeds(1.6, 0.05), "active.fewer_labels.test_resnet": seeds(0.478, 0.02)}
    for size, gain in (("N100", 3.0), ("N300", 2.0), ("N1000", -0.1)):
        n[f"labels.gain.{size}"] = seeds(gain, 0.1, unit="percentage points")
    for arch, alpha in zip(ARCHS, (0.5, 0.2)):
        n[f"scaling.alpha.{arch}"] = seeds(alpha, 0.01)
        n[f"scaling.ece_alpha.{arch}"] = seeds(alpha + 0.3, 0.01)
        n[f"scaling.aleatoric.{arch}"] = mc(0.05, 0.003)
        n[f"scaling.accuracy_min_n.{arch}"] = seeds(0.4, 0.01)
        n[f"scaling.accuracy_max_n.{arch}"] = seeds(0.9, 0.01)
    # the learner's gap to the Bayes error grows with tau (named out of tau order on purpose)
    for world, tau, gap in (("tau0.9", 0.9, 0.01), ("hard", 1.5, 0.08), ("base", 1.0, 0.03)):
        n[f"difficulty.base_temperature.{world}"] = {"value": tau, "unit": "1"}
        n[f"difficulty.gap.{world}"] = seeds(gap, 0.005, unit="fraction")
    return n


def verdicts(numbers, experiments=EXPERIMENTS) -> dict[str, str]:
    return {r["id"]: r["verdict"] for r in cl.claims(numbers, experiments)}


def test_every_finding_supported_and_rows_are_complete():
    rows = cl.claims(base_numbers(), EXPERIMENTS)
    assert [r["id"] for r in rows] == [f.id for f in cl.FINDINGS] and len(rows) == 10
    assert {r["verdict"] for r in rows} == {"supported"}
    for r in rows:
        assert r["rule"] and r["paper"] and r["this run"] and r["numbers"]
    soft = next(r for r in rows if r["id"] == "soft_labels")
    assert soft["this run"].startswith("N100: 3; N300: 2; N1000: -0.1")  # sizes in numeric order


# each case: a change to the supported numbers and the verdict of the one finding it flips
CASES = {
    "power_law": [({"scaling.alpha.test_vit": seeds(-0.2, 0.01)}, "contradicted"),
                  ({"scaling.alpha.test_vit": seeds(0.02, 0.01)}, "unresolved")],
    "same_floor": [({"scaling.aleatoric.test_vit": mc(0.07, 0.003)}, "contradicted"),
                   ({"scaling.aleatoric.test_vit": mc(0.055, 0.003)}, "supported")],
    "exponents_differ": [({"scaling.alpha.test_vit": seeds(0.8, 0.01)}, "contradicted"),
                         ({"scaling.alpha.test_vit": seeds(0.48, 0.01)}, "unresolved")],
    "soft_labels": [({"labels.gain.N100": seeds(-3.0, 0.1), "labels.gain.N300": seeds(-2.0, 0.1)}, "contradicted"),
                    ({"labels.gain.N300": seeds(0.1, 0.1)}, "unresolved")],
    "soft_calibration": [({"labels.ece_soft_max_n": seeds(0.08, 0.002)}, "contradicted"),
                         ({"labels.ece_soft_max_n": seeds(0.03, 0.002)}, "unresolved")],
    "ece_rate": [({"scaling.ece_alpha.test_resnet": seeds(0.5, 0.001), "scaling.alpha.test_resnet": seeds(0.5, 0.001),
                   "scaling.ece_alpha.test_vit": seeds(0.2, 0.001), "scaling.alpha.test_vit": seeds(0.2, 0.001)},
                  "contradicted"),
                 ({"scaling.ece_alpha.test_resnet": seeds(0.55, 0.05), "scaling.ece_alpha.test_vit": seeds(0.25, 0.05)},
                  "unresolved")],
    "shift_type": [({"shift.r2_drop_vs_exact_kl": {"value": 0.9}}, "contradicted"),
                   ({"shift.r2_drop_vs_exact_kl": {"value": 0.5}}, "unresolved")],
    "active_learning": [({"active.gain_ratio.test_resnet": seeds(0.7, 0.02)}, "contradicted"),
                        ({"active.fewer_labels.test_resnet": seeds(-0.2, 0.02)}, "contradicted"),
                        ({"active.gain_ratio.test_resnet": seeds(1.1, 0.1)}, "unresolved")],
    # gap(tau 1.5) - gap(tau 0.9) = 0.08 - 0.01 with half-width 4.30 * hypot(0.005, 0.005) = 0.030
    "learner_bayes_gap": [({"difficulty.gap.hard": seeds(-0.05, 0.005)}, "contradicted"),
                          ({"difficulty.gap.hard": seeds(0.03, 0.005)}, "unresolved"),
                          ({"difficulty.gap.tau0.9": seeds(0.15, 0.005)}, "contradicted"),
                          # the base world's gap is not the one compared: no change in the verdict
                          ({"difficulty.gap.base": seeds(0.5, 0.005)}, "supported")],
    "bayes_bound": [({"scaling.accuracy_max_n.test_vit": seeds(0.3, 0.01)}, "contradicted"),
                    ({"scaling.accuracy_max_n.test_vit": seeds(0.995, 0.001)}, "contradicted"),
                    ({"scaling.accuracy_max_n.test_vit": seeds(0.42, 0.01)}, "unresolved")],
}


@pytest.mark.parametrize("fid,change,expected", [(f, c, v) for f, cases in CASES.items() for c, v in cases])
def test_each_verdict_on_constructed_numbers(fid, change, expected):
    got = verdicts({**base_numbers(), **change})
    assert got[fid] == expected
    # the change moves that finding only
    assert {k: v for k, v in got.items() if k != fid and v != "supported"} == {}


def test_kinds_not_in_the_config_are_not_run_and_missing_numbers_unresolved():
    got = verdicts(base_numbers(), {"scaling": {"kind": "scaling"}})
    assert {got[k] for k in ("soft_labels", "soft_calibration", "shift_type", "active_learning")} == {"not run"}
    assert got["power_law"] == "supported"
    # an experiment of another name is found by its kind
    renamed = {k.replace("labels.", "lab2.", 1): v for k, v in base_numbers().items()}
    assert verdicts(renamed, {**EXPERIMENTS, "labels": {"kind": "x"}, "lab2": {"kind": "labels"}})["soft_labels"] \
        == "supported"
    numbers = base_numbers()
    del numbers["scaling.aleatoric.test_vit"], numbers["labels.ece_soft_max_n"]
    rows = {r["id"]: r for r in cl.claims(numbers, EXPERIMENTS)}
    assert rows["same_floor"]["verdict"] == "unresolved" and "missing number" in rows["same_floor"]["this run"]
    assert rows["soft_calibration"]["this run"] == "missing number labels.ece_soft_max_n"


def test_intervals_use_student_t_over_seeds_and_normal_over_a_test_set():
    n = {"a": seeds(1.0, 0.1, n=2), "b": mc(2.0, 0.1), "c": {"value": 3.0}}
    assert cl.estimate(n, "a").half == pytest.approx(stats.t.ppf(0.975, 1) * 0.1, rel=1e-15)
    assert cl.estimate(n, "a").half == pytest.approx(1.2706204736174704, rel=1e-12)
    assert cl.estimate(n, "b").half == pytest.approx(1.959963984540054 * 0.1, rel=1e-15)
    assert cl.estimate(n, "c").half is None and cl.estimate(n, "c").side(0.0) == 0
    d = cl.difference(n, "b", "a")
    assert d.value == 1.0 and d.half == pytest.approx(stats.t.ppf(0.975, 1) * math.hypot(0.1, 0.1), rel=1e-15)
    with pytest.raises(cl.Missing):
        cl.estimate(n, "nope")


def test_learner_gap_orders_worlds_by_tau_and_needs_two_worlds():
    row = next(r for r in cl.claims(base_numbers(), EXPERIMENTS) if r["id"] == "learner_bayes_gap")
    assert row["this run"].startswith("tau 0.9: gap 0.01; tau 1: gap 0.03; tau 1.5: gap 0.08;")
    assert "gap(tau 1.5) - gap(tau 0.9) = 0.07" in row["this run"]
    half = stats.t.ppf(0.975, 2) * math.hypot(0.005, 0.005)
    assert f"difference 95% CI [{0.07 - half:.4g}, {0.07 + half:.4g}]" in row["uncertainty"]
    assert "difficulty.gap.hard" in row["numbers"].split()
    numbers = {k: v for k, v in base_numbers().items() if not k.startswith("difficulty.gap.") or k.endswith("base")}
    row = next(r for r in cl.claims(numbers, EXPERIMENTS) if r["id"] == "learner_bayes_gap")
    assert row["verdict"] == "unresolved" and "missing number" in row["this run"]
    assert verdicts(base_numbers(), {"scaling": {"kind": "scaling"}})["learner_bayes_gap"] == "not run"


def test_the_default_judges_labels_and_active_in_the_papers_regime():
    """The claims read the first experiment of a kind in the config's order; for labels and
    active the embedded default's is on its noisiest world (the paper poses both questions under
    substantial aleatoric noise, ImageNet-64's Bayes error of 4%), and the active one starts
    warm and runs rounds enough to see whether an early dip recovers."""
    from pathlib import Path

    import yaml

    from oracle.world_specs import world_specs

    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "config.yaml").read_text())
    worlds = world_specs(config)
    experiments = config["experiments"]
    numbers = base_numbers()
    for name, e in experiments.items():  # every labels and active experiment has its numbers
        if e["kind"] in ("labels", "active"):
            numbers.update({f"{name}.{k.split('.', 1)[1]}": v for k, v in base_numbers().items()
                            if k.startswith(f"{e['kind']}.")})
    rows = {r["id"]: r for r in cl.claims(numbers, {k: {"kind": v["kind"]} for k, v in experiments.items()})}
    for fid, kind in (("soft_labels", "labels"), ("soft_calibration", "labels"), ("active_learning", "active")):
        judged = rows[fid]["numbers"].split(".")[0]  # the numbers' prefix names the experiment
        same_kind = [name for name, e in experiments.items() if e["kind"] == kind]
        temperature = {name: worlds[experiments[name]["world"]]["base_temperature"] for name in same_kind}
        assert experiments[judged]["world"] != "base"
        assert temperature[judged] == max(temperature.values()) > 1.0, (fid, judged, temperature)
    active = experiments[rows["active_learning"]["numbers"].split(".")[0]]
    assert active["initial_size"] >= 100 and active["rounds"] >= 5
