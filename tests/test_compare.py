"""Two runs compared number by number (oracle.tools.comparison and `python -m oracle.tools.compare`)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from oracle.errors import DataError
from oracle.tools.comparison import (compare_claims, compare_numbers, entry_spread, expected_by_chance, flags,
                                   format_comparison, read_run, z_scores)


def test_z_is_the_difference_over_the_combined_standard_error():
    diff, z = z_scores([1.0, 2.0, 5.0, 1.0], [0.3, 0.0, np.nan, 0.0], [1.5, 2.0, 6.0, 3.0], [0.4, 0.0, 1.0, 0.5])
    assert np.allclose(diff, [0.5, 0.0, 1.0, 2.0])
    assert z[0] == pytest.approx(0.5 / 0.5) and z[3] == pytest.approx(4.0)
    assert np.isnan(z[1]) and np.isnan(z[2])  # no spread at all; one spread unknown


@pytest.mark.parametrize(("a", "b", "z", "flag"), [
    (1.0, 1.1, 0.5, "within"),
    (1.0, 2.0, -3.5, "moved"),
    (1.0, 2.0, 3.0, "within"),     # at the threshold: not beyond it
    (5.0, 5.0, np.nan, "same"),
    (5.0, 5.0 * (1 + 1e-12), np.nan, "same"),
    (5.0, 6.0, np.nan, "changed"),
    (np.nan, 6.0, np.nan, "undefined"),
])
def test_flags(a, b, z, flag):
    assert flags(np.array([a]), np.array([b]), np.array([z]), z_max=3.0)[0] == flag


def entry(value, **spread):
    return {"value": value, "unit": "nats", "artifact": "x", "description": "d", **spread}


def test_compare_numbers_flags_sorts_and_keeps_keys_of_either_run():
    a = {"k.moved": entry(1.0, se=0.1, se_over="seeds"), "k.within": entry(1.0, se=0.1, se_over="seeds"),
         "k.count": entry(3), "k.same": entry(2), "k.std_only": entry(10.0, std=1.0, std_over="splits"),
         "k.none": entry(None), "k.gone": entry(1.0)}
    b = {"k.moved": entry(2.0, se=0.1, se_over="seeds"), "k.within": entry(1.1, se=0.1, se_over="seeds"),
         "k.count": entry(4), "k.same": entry(2), "k.std_only": entry(12.0, std=1.0, std_over="splits"),
         "k.none": entry(1.0), "k.new": entry(1.0)}
    df = compare_numbers(a, b, z_max=3.0).set_index("key")
    assert df.loc["k.moved", "z"] == pytest.approx(1.0 / math.hypot(0.1, 0.1)) and df.loc["k.moved", "flag"] == "moved"
    assert df.loc["k.within", "flag"] == "within" and df.loc["k.within", "diff"] == pytest.approx(0.1)
    assert df.loc["k.count", "flag"] == "changed" and df.loc["k.same", "flag"] == "same"
    # a std without an se: the std itself (larger than the se: a conservative z)
    assert df.loc["k.std_only", "z"] == pytest.approx(2.0 / math.sqrt(2.0))
    assert df.loc["k.std_only", "spread"] == "std over splits"
    assert df.loc["k.none", "flag"] == "undefined"
    assert df.loc["k.gone", "flag"] == "only_a" and df.loc["k.new", "flag"] == "only_b"
    order = list(compare_numbers(a, b)["flag"])
    assert order == sorted(order, key=["moved", "changed", "undefined", "only_a", "only_b", "within", "same"].index)
    assert df.loc["k.moved", "rel"] == pytest.approx(1.0)


def test_entry_spread_prefers_the_standard_error():
    assert entry_spread(entry(1.0, se=0.2, std=0.4, se_over="seeds")) == (0.2, "se over seeds")
    assert entry_spread(entry(1.0, std=0.4)) == (0.4, "std over seeds")
    assert math.isnan(entry_spread(entry(1.0))[0])


def test_expected_by_chance_is_the_two_sided_normal_tail():
    assert expected_by_chance(1000, 3.0) == pytest.approx(1000 * 0.0026998, rel=1e-4)
    assert expected_by_chance(100, 1.959964) == pytest.approx(5.0, rel=1e-4)


def test_compare_claims_and_the_text():
    ca = pd.DataFrame({"id": ["p", "q", "r"], "verdict": ["supported", "unresolved", "not run"]})
    cb = pd.DataFrame({"id": ["p", "q", "s"], "verdict": ["supported", "contradicted", "supported"]})
    c = compare_claims(ca, cb).set_index("id")
    assert not c.loc["p", "changed"] and c.loc["q", "changed"] and c.loc["r", "verdict_b"] == ""
    a = {"x": entry(1.0, se=0.1, se_over="seeds"), "y": entry(2.0)}
    b = {"x": entry(1.05, se=0.1, se_over="seeds"), "y": entry(2.0)}
    text = format_comparison(compare_numbers(a, b), compare_claims(ca, cb), ("runA", "runB"), 3.0)
    assert "2 numbers: 0 moved, 0 changed, 0 undefined, 0 only_a, 0 only_b, 1 within, 1 same" in text
    assert "claims: 3 of 4 verdicts changed" in text and "q: unresolved -> contradicted" in text
    assert "within  x" in text and "0.05" in text
    assert "within  x" not in format_comparison(compare_numbers(a, b), None, ("a", "b"), 3.0, flagged_only=True)


def write_run(folder, numbers, verdicts=None):
    folder.mkdir(parents=True)
    (folder / "numbers.json").write_text(json.dumps(numbers))
    if verdicts:
        pd.DataFrame({"id": list(verdicts), "verdict": list(verdicts.values())}).to_csv(folder / "claims.csv",
                                                                                     index=False)
    return folder


def test_read_run_names_the_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"numbers\.json: cannot read"):
        read_run(tmp_path)
    numbers, claims = read_run(write_run(tmp_path / "r", {"x": entry(1.0)}))
    assert numbers["x"]["value"] == 1.0 and claims is None


def compare_cli(*args):
    return subprocess.run([sys.executable, "-m", "oracle.tools.compare", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_the_command_lists_every_number_and_fails_when_asked(tmp_path):
    a = write_run(tmp_path / "a", {"x": entry(1.0, se=0.1, se_over="seeds"), "n": entry(5)}, {"f": "supported"})
    b = write_run(tmp_path / "b", {"x": entry(2.0, se=0.1, se_over="seeds"), "n": entry(5)}, {"f": "unresolved"})
    ok = compare_cli(a, b)
    assert ok.returncode == 0, ok.stderr
    assert "moved  x" in ok.stdout and "same   n" in ok.stdout and "f: supported -> unresolved" in ok.stdout
    moved = compare_cli(a, b, "--fail-on", "moved")
    assert moved.returncode == 1 and "1 number(s) flagged moved" in moved.stderr
    assert compare_cli(a, b, "--fail-on", "changed").returncode == 0
    assert compare_cli(a, b, "--fail-on", "verdict").returncode == 1
    assert compare_cli(a, b, "--z", "20", "--fail-on", "moved").returncode == 0
    out = tmp_path / "cmp.csv"
    assert compare_cli(a, b, "--csv", out).returncode == 0
    assert list(pd.read_csv(out)["key"]) == ["x", "n"]
    bad = compare_cli(a, tmp_path / "nowhere")
    assert bad.returncode == 2 and "nowhere/numbers.json" in bad.stderr and "Traceback" not in bad.stderr
    assert compare_cli(a, b, "--fail-on", "nonsense").returncode == 2


def write_config(folder, **sections):
    import yaml

    (folder / "config.yaml").write_text(yaml.safe_dump({"seed": 0, "worlds": {"base": {"tau": 0.7}},
                                                       "classifiers": {"epochs": 40}, **sections}))


def test_config_differences_key_by_key_and_the_world_warning():
    from oracle.tools.comparison import config_differences, world_warning

    a = {"seed": 0, "worlds": {"base": {"tau": 0.7}}, "classifiers": {"epochs": 40, "seeds": [0, 1]}}
    b = {"seed": 0, "worlds": {"base": {"tau": 1.0}}, "classifiers": {"epochs": 2, "seeds": [0, 1]}, "extra": 1}
    diff = config_differences({"A": a, "B": b}).set_index("key")
    assert list(diff.index) == ["classifiers.epochs", "extra", "worlds.base.tau"]  # seeds, seed: the same
    assert diff.loc["classifiers.epochs", "A"] == "40" and diff.loc["extra", "A"] == "" and diff["world"].sum() == 1
    assert "different worlds" in world_warning(config_differences({"A": a, "B": b})) and "worlds.base.tau" in \
        world_warning(config_differences({"A": a, "B": b}))
    same_world = {**b, "worlds": a["worlds"]}
    assert world_warning(config_differences({"A": a, "B": same_world})) == ""


def test_the_command_shows_runs_configs_claims_and_more_than_two_runs(tmp_path):
    runs = []
    for i, (tau, x, verdict) in enumerate(((0.7, 1.0, "supported"), (0.7, 1.02, "supported"), (1.5, 3.0, "contradicted"))):
        r = write_run(tmp_path / f"r{i}", {"x": entry(x, se=0.1, se_over="seeds")}, {"power_law": verdict})
        write_config(r, worlds={"base": {"tau": tau}})
        (r / "numbers.json.prov.json").write_text(json.dumps(
            {"code": {"commit": f"{i}" * 40, "dirty": i == 1}, "created_utc": f"2026-11-2{i}T00:00:00Z",
             "hostname": f"host{i}", "device": "cpu", "config_sha256": "ab" * 32}))
        runs.append(r)
    two = compare_cli(runs[0], runs[1], "--markdown", tmp_path / "two.md")
    assert two.returncode == 0, two.stderr
    assert "0000000000000" not in two.stdout and "000000000000 " in two.stdout and "111111111111+dirty" in two.stdout
    assert "host1 (cpu)" in two.stdout and "2026-11-21T00:00:00Z" in two.stdout
    assert "The effective configs are the same." in two.stdout and "different worlds" not in two.stderr
    md = (tmp_path / "two.md").read_text()
    assert md.startswith("## Runs") and "| within | x" in md.replace("  ", " ").replace("  ", " ")
    world = compare_cli(runs[0], runs[2])
    assert "WARNING: the runs are different worlds" in world.stderr and "worlds.base.tau" in world.stdout
    assert "| power_law | supported" in world.stdout.replace("  ", " ").replace("  ", " ")  # claims side by side
    many = compare_cli(*runs, "--markdown", tmp_path / "many.md")
    assert many.returncode == 0, many.stderr
    table = read_markdown_table_text((tmp_path / "many.md").read_text().split("## Numbers")[1])
    assert table[0][:4] == ["key", str(runs[0]), str(runs[1]), str(runs[2])]
    assert table[1][:4] == ["x", "1 ± 0.1", "1.02 ± 0.1", "3 ± 0.1"]
    assert compare_cli(*runs, "--fail-on", "moved").returncode == 2  # A and B: two runs only


def read_markdown_table_text(text):
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[:1] + lines[2:]]


def test_identical_values_are_the_same_even_with_a_spread():
    assert flags(np.array([1.0]), np.array([1.0]), np.array([0.0]))[0] == "same"
    df = compare_numbers({"b": entry(True), "n": entry(None)}, {"b": entry(True), "n": entry(None)}).set_index("key")
    assert list(df["flag"]) == ["same", "same"]  # a value that is no number, alike in both runs
    assert compare_numbers({"n": entry(None)}, {"n": entry(2.0)})["flag"].iloc[0] == "undefined"


def test_a_run_compared_with_itself_reports_that_nothing_moved(tmp_path):
    import shutil

    numbers = {"x": entry(1.0, se=0.1, se_over="seeds"), "n": entry(5), "flag": entry(True), "gone": entry(None)}
    a = write_run(tmp_path / "a", numbers, {"power_law": "supported", "plateau": "unresolved"})
    copy = shutil.copytree(a, tmp_path / "copy")
    for b in (a, copy):
        out = compare_cli(a, b, "--fail-on", "moved,changed,undefined,verdict", "--markdown", tmp_path / "self.md")
        assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
        assert "4 numbers: 0 moved, 0 changed, 0 undefined, 0 only_a, 0 only_b, 0 within, 4 same; nothing moved" in \
            out.stdout
        assert "claims: 0 of 2 verdicts changed" in out.stdout
        assert "nothing moved: every number is within or the same and every verdict is the same" in \
            (tmp_path / "self.md").read_text()
    assert f"B = {a} (again)" in compare_cli(a, a).stdout  # one folder twice: two columns, told apart
    b = write_run(tmp_path / "b", {**numbers, "x": entry(1.05, se=0.1, se_over="seeds")}, {"power_law": "supported"})
    assert "nothing moved" not in compare_cli(a, b).stdout  # a verdict is missing in B


FULL_CONFIG = {"seed": 0, "oracle": {}, "samples": {"n_total": 100, "n_shards": 1}, "splits": {"test_size": 50},
               "worlds": {"base": {"prior": None, "label_temperature": 1.0, "base_temperature": 1.0},
                          "tau0.7": {"base_temperature": 0.7}, "tau0.7-T4": {"base_temperature": 0.7,
                                                                             "label_temperature": 4.0}}}


def world_run(folder, flow_bytes, seed=0, recorded_sha=None, taus=None, wall_s=None, torch="2.4.1"):
    """A finished run as compare reads it: numbers.json (two world constants, a classifier number),
    config.yaml, oracle/flow.pt (with a provenance record stating `recorded_sha` when given), the
    numbers' record (packages) and timings.md."""
    import copy

    import yaml

    numbers = {"world.base.bayes_error": entry(0.10 + 0.01 * seed, se=0.01, se_over="samples"),
               "world.tau0.7-T4.bayes_error": entry(0.20, se=0.01, se_over="samples"),
               "scaling.alpha.r": entry(0.5 + 0.01 * seed, se=0.05, se_over="seeds")}
    run = write_run(folder, numbers, {"power_law": "supported"})
    config = copy.deepcopy(FULL_CONFIG) | {"seed": seed}
    for world, tau in (taus or {}).items():
        config["worlds"][world]["base_temperature"] = tau
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    (run / "oracle").mkdir()
    (run / "oracle" / "flow.pt").write_bytes(flow_bytes)
    if recorded_sha:
        (run / "oracle" / "flow.pt.prov.json").write_text(json.dumps({"artifact": {"sha256": recorded_sha}}))
    (run / "numbers.json.prov.json").write_text(json.dumps(
        {"code": {"commit": "a" * 40}, "packages": {"python": "3.11.7", "torch": torch, "numpy": "2.1.0",
                                                    "snakemake": "9.1.0", "h5py": "3.12.0"}}))
    if wall_s is not None:
        (run / "timings.md").write_text(f"| rule |\n|---|\n| total |\n\n- Wall time: {wall_s:.1f} s, the jobs of ...\n")
    return run


def test_runs_whose_flow_checkpoints_differ_are_warned_of_and_their_world_constants_flagged(tmp_path):
    a = world_run(tmp_path / "seed0", b"flow weights of seed 0", seed=0, wall_s=699.4)
    b = world_run(tmp_path / "seed1", b"flow weights of seed 1", seed=1, wall_s=712.0, torch="2.5.0")
    out = compare_cli(a, b)
    assert out.returncode == 0, out.stderr
    warning = "WARNING: the runs' worlds differ: base, tau0.7, tau0.7-T4: flow checkpoint differs (sha256 "
    assert warning in out.stderr and warning in out.stdout.split("## Runs")[0]  # at the top
    assert "between worlds, not a reproduction check" in out.stderr
    # the world constants are the difference of two worlds (z 0.7: "within" before), the rest as before
    assert "between_worlds  world.base.bayes_error" in out.stdout
    assert "same            world.tau0.7-T4.bayes_error" in out.stdout  # equal values stay the same
    assert "within          scaling.alpha.r" in out.stdout and "1 between_worlds" in out.stdout
    assert compare_cli(a, b, "--fail-on", "between_worlds").returncode == 1
    # the runs table: wall time and package versions (torch named, and h5py nowhere: it is the same)
    rows = {r[0]: r for r in read_markdown_table_text(out.stdout.split("## Worlds")[0])}
    header = read_markdown_table_text(out.stdout.split("## Worlds")[0])[0]
    assert rows[str(a)][header.index("wall time")] == "699 s" and rows[str(b)][header.index("wall time")] == "712 s"
    assert rows[str(a)][header.index("packages")] == "python 3.11.7, torch 2.4.1, numpy 2.1.0, snakemake 9.1.0"
    assert "torch 2.5.0" in rows[str(b)][header.index("packages")]


def test_one_checkpoint_is_the_same_world_and_a_changed_temperature_another(tmp_path):
    # a recorded sha256 is the file's identity (no rehash): different bytes, one recorded hash
    sha = "c0ffee" * 10 + "cafe"
    a = world_run(tmp_path / "a", b"weights", recorded_sha=sha)
    b = world_run(tmp_path / "b", b"weights, copied", seed=1, recorded_sha=sha)  # one imported flow, two seeds
    same = compare_cli(a, b)
    assert same.returncode == 0 and "WARNING" not in same.stderr, same.stderr
    assert "Same worlds: 3 world(s) (base, tau0.7, tau0.7-T4) with identical flow checkpoint (sha256 c0ffeec0ffee)" \
        in same.stdout
    assert "between_worlds" not in same.stdout and "within  world.base.bayes_error" in same.stdout
    # more samples of the same world: its config settings differ, the world does not
    import yaml

    config = yaml.safe_load((b / "config.yaml").read_text())
    config["worlds"]["base"]["n_total"] = 5000
    (b / "config.yaml").write_text(yaml.safe_dump(config))
    more = compare_cli(a, b)
    assert "worlds.base.n_total" in more.stdout and "WARNING" not in more.stderr + more.stdout, more.stderr
    c = world_run(tmp_path / "c", b"weights", recorded_sha=sha, taus={"tau0.7": 0.8})
    other = compare_cli(a, c)
    assert "WARNING: the runs' worlds differ: tau0.7: base_temperature 0.7 / 0.8" in other.stderr
    table = {r[0]: r[1] for r in read_markdown_table_text(other.stdout.split("## Worlds")[1].split("##")[0])}
    assert table["base"] == "same" and table["tau0.7"] == "differs" and table["tau0.7-T4"] == "same"


def test_the_world_check_by_world():
    from oracle.tools.world_check import compare_worlds, constants_world, worlds_text

    spec = {"prior": None, "label_temperature": 1.0, "base_temperature": 1.0}
    ident = {"sha256": "a" * 64, "checkpoint": "oracle/flow.pt", "worlds": {"base": spec, "extra": spec}}
    unknown = compare_worlds({"A": ident, "B": {**ident, "sha256": None, "worlds": {"base": spec}}}).set_index("world")
    assert unknown.loc["base", "status"] == "unknown" and "no oracle file recorded in B" in unknown.loc["base", "why"]
    assert unknown.loc["extra", "status"] == "only some runs" and "World check:" in worlds_text(unknown.reset_index())
    gauss = {**ident, "checkpoint": "oracle/gaussian_world.pt", "worlds": {"base": spec}}
    two = compare_worlds({"A": gauss, "B": {**gauss, "sha256": "b" * 64}})
    assert list(two["status"]) == ["differs"] and two["why"].iloc[0].startswith(
        f"oracle file (oracle/gaussian_world.pt) differs (sha256 {'a' * 12} / {'b' * 12})")
    assert compare_worlds({"A": gauss, "B": gauss})["status"].tolist() == ["same"]
    # dotted world names: the longest that matches
    assert constants_world("world.tau0.7-T4.bayes_error", ["tau0.7", "tau0.7-T4"]) == "tau0.7-T4"
    assert constants_world("world.tau0.7.bayes_error", ["tau0.7", "tau0.7-T4"]) == "tau0.7"
    assert constants_world("scaling.tau0.7.x", ["tau0.7"]) is None


def test_the_html_page_shows_the_claims_side_by_side(tmp_path):
    a = world_run(tmp_path / "seed0", b"flow weights of seed 0", seed=0)
    b = world_run(tmp_path / "seed1", b"flow weights of seed 1", seed=1)
    pd.DataFrame({"id": ["power_law"], "verdict": ["unresolved"], "this run": ["alpha 0.41 (95% CI [0.3, 0.5])"]}).to_csv(
        b / "claims.csv", index=False)
    out = compare_cli(a, b, "--html", tmp_path / "cmp.html")
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "cmp.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    head, claims = page.split("<h2>Claims</h2>")
    assert "WARNING: the runs&#x27; worlds differ" in head.split("<table>")[0]  # above the runs table
    row = claims.split("<tr>")[2]  # header, then power_law
    assert '<td class="verdict-supported">supported</td>' in row and '<td class="verdict-unresolved">unresolved</td>' \
        in row and "alpha 0.41 (95% CI [0.3, 0.5])" in row and "verdict changed" in row
    assert "between_worlds" in claims.split("<h2>Numbers</h2>")[1]  # the numbers that did not agree
