"""docs/findings.md is generated from a run's artifacts: the claims table's verdict counts, the
captions and the time come from the files, and a missing artifact is named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from oracle.errors import DataError
from oracle.tools.findings_doc import claims_section, findings_page, write_findings_page

REPO = Path(__file__).resolve().parents[1]
BENCH_HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _claims() -> pd.DataFrame:
    return pd.DataFrame([
        {"id": "power_law", "finding": "KL follows a power law", "paper": "alpha > 0", "this run": "alpha 0.25",
         "uncertainty": "95% CI [0.1, 0.4]", "rule": "supported if the CI lies above 0", "verdict": "supported",
         "numbers": "scaling.alpha.a"},
        {"id": "soft_labels", "finding": "soft | hard", "paper": "soft > hard", "this run": "+1 pp",
         "uncertainty": "95% CI [-1, 3]", "rule": "per N ...", "verdict": "unresolved", "numbers": ""},
        {"id": "active_learning", "finding": "max epistemic gains more", "paper": "1.6x", "this run": "",
         "uncertainty": "", "rule": "...", "verdict": "not run", "numbers": ""},
    ])


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "results" / "study"
    figs = run / "scaling" / "scaling" / "figures"
    figs.mkdir(parents=True)
    (figs / "scaling_panels.png").write_bytes(b"\x89PNG fake")
    (figs / "scaling_panels.caption.rst").write_text("Loss against N. This run: alpha\\_ResNet 0.25.\n")
    (run / "config.yaml").write_text(yaml.safe_dump({
        "run": "study", "experiments": {"scaling": {"kind": "scaling", "world": "cold"},
                                        "difficulty": {"kind": "difficulty", "worlds": ["cold", "base"]}},
        "worlds": {"base": {"prior": None, "label_temperature": 1.0, "base_temperature": 1.0},
                   "cold": {"base_temperature": 0.7}, "noisy": {"base_temperature": 0.7, "label_temperature": 4.0}},
        "validation": {"enabled": True},
        "paper": {"table1": "scaling/accuracy_vs_bayes", "fig2": "scaling/scaling_panels"}}))
    _claims().to_csv(run / "claims.csv", index=False)
    (run / "numbers.json").write_text(json.dumps({
        "world.cold.bayes_error": {"value": 0.0021, "se": 0.0004}, "world.cold.aleatoric_floor": {"value": 0.0046},
        "world.base.bayes_error": {"value": 0.021, "se": 0.002}}))
    (run / "claims.csv.prov.json").write_text(json.dumps({
        "created_utc": "2026-11-24T04:00:00Z", "device": "cpu: x86_64 x2", "hostname": "vm",
        "code": {"commit": "abc123", "dirty": False}, "packages": {"torch": "2.14.1"}}))
    bench = run / "benchmarks"
    (bench / "train_classifier").mkdir(parents=True)
    # two jobs: 60 s ending at t=1000 and 120 s ending at t=1300 -> span 1300 - 940 = 360 s
    for path, seconds, end in ((bench / "data.tsv", 60.0, 1000.0),
                               (bench / "train_classifier" / "a.tsv", 120.0, 1300.0)):
        path.write_text(BENCH_HEADER + f"{seconds}\t0:01:00\t10\t10\t1\t1\t0\t0\t0\t1\n")
        os.utime(path, (end, end))
    return run


def test_claims_section_counts_verdicts_and_numbers_rules():
    text = claims_section(_claims())
    assert "Verdicts: supported 1, contradicted 0, unresolved 1, not posed 0, not run 1." in text
    assert "soft \\| hard" in text  # a pipe inside a cell does not split the row
    assert "1. `power_law`: supported if the CI lies above 0" in text
    assert text.count("\n| ") == 3


def test_page_reads_time_captions_and_record(tmp_path):
    run = _run(tmp_path)
    text, copies = findings_page(run, tmp_path / "docs" / "findings.md", "snakemake --configfile x.yaml")
    assert "6.0 min from the first job's start" in text  # 360 s, from the benchmark files
    assert "2 jobs, 3.0 job-minutes" in text
    assert "2026-11-24T04:00:00Z" in text and "commit abc123" in text and "uncommitted" not in text
    assert "alpha\\_ResNet 0.25" in text and "![fig2](findings/fig2-scaling_panels.png)" in text
    assert list(copies.values()) == [tmp_path / "docs" / "findings" / "fig2-scaling_panels.png"]


def test_write_copies_figures_and_missing_file_is_named(tmp_path):
    run = _run(tmp_path)
    doc = tmp_path / "docs" / "findings.md"
    written = write_findings_page(run, doc, "cmd")
    assert doc.read_text().startswith("# Findings of the run `study`")
    assert (tmp_path / "docs" / "findings" / "fig2-scaling_panels.png").read_bytes() == b"\x89PNG fake"
    assert doc in written
    (run / "scaling" / "scaling" / "figures" / "scaling_panels.png").unlink()
    with pytest.raises(DataError, match="scaling_panels.png: paper fig2's file is missing"):
        findings_page(run, doc, "cmd")


def test_script_exits_1_with_one_line_on_a_run_without_claims(tmp_path):
    run = _run(tmp_path)
    (run / "claims.csv").unlink()
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "tools" / "findings_doc.py"), str(run), "--command", "c",
                           "--doc", str(tmp_path / "f.md")], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0 and "claims.csv: missing" in proc.stderr
    assert not (tmp_path / "f.md").exists()


def test_worlds_section_says_which_world_poses_which_question(tmp_path):
    from oracle.tools.findings_doc import readme_worlds

    run = _run(tmp_path)
    text, _ = findings_page(run, tmp_path / "docs" / "findings.md", "cmd")
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| `")}
    assert "0.21 ± 0.04" in rows["`cold`"] and "0.0046" in rows["`cold`"]   # percent and nats from numbers.json
    assert "`difficulty`, `scaling`" in rows["`cold`"] and "`power_law` (supported)" in rows["`cold`"]
    assert rows["`base`"].split("|")[7].strip() == "validation, `difficulty`"
    assert "| 0.7 | 4 | uniform | -- | -- |" in rows["`noisy`"]                # a variant inherits, no numbers: --
    assert readme_worlds(text) == {"base": (1.0, 1.0, "uniform"), "cold": (0.7, 1.0, "uniform"),
                                   "noisy": (0.7, 4.0, "uniform")}


def test_readme_block_is_written_between_its_markers(tmp_path):
    from oracle.tools.findings_doc import README_BEGIN, README_END

    run = _run(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{README_BEGIN}\nOLD-BLOCK\n{README_END}\n\nafter\n")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "tools" / "findings_doc.py"), str(run), "--readme",
                           str(readme)], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    text = readme.read_text()
    assert "OLD-BLOCK" not in text and text.endswith(f"{README_END}\n\nafter\n")
    assert "Verdicts: supported 1, contradicted 0, unresolved 1, not posed 0, not run 1" in text
    assert "| `power_law`: KL follows a power law | alpha 0.25 | **supported** |" in text


def test_the_readme_default_run_block_matches_config_yaml():
    """The README's account of the default run is generated from a run; when the default's
    worlds change, the block is stale and this fails (rerun `make demo` and
    `python scripts/tools/findings_doc.py results/default --readme README.md`)."""
    from oracle.tools.findings_doc import README_BEGIN, README_END, readme_worlds
    from oracle.report.generated_text import generated_part
    from oracle.world_specs import world_specs

    block = readme_worlds(generated_part(REPO / "README.md", README_BEGIN, README_END))
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    want = {name: (float(w["base_temperature"]), float(w["label_temperature"]), "skewed" if w["prior"] else "uniform")
            for name, w in world_specs(config).items()}
    assert block == want


def test_the_claims_figure_heads_the_claims_section_when_the_run_has_it(tmp_path):
    run = _run(tmp_path)
    text, copies = findings_page(run, tmp_path / "docs" / "findings.md", "cmd")
    assert "![claims]" not in text
    (run / "claims.png").write_bytes(b"\x89PNG claims")
    text, copies = findings_page(run, tmp_path / "docs" / "findings.md", "cmd")
    assert "![claims](findings/claims.png)" in text
    assert copies[run / "claims.png"] == tmp_path / "docs" / "findings" / "claims.png"


def test_claims_section_shows_an_uncounted_row_and_leaves_it_out_of_the_counts():
    frame = _claims()
    extra = {**frame.iloc[0].to_dict(), "id": "floor_exact", "verdict": "supported",
             "counted": "a check of the world, not a finding"}
    frame = pd.concat([frame.assign(counted="yes"), pd.DataFrame([extra])], ignore_index=True)
    text = claims_section(frame)
    assert ("Verdicts: supported 1, contradicted 0, unresolved 1, not posed 0, not run 1 (not counted: floor_exact)."
            in text)
    assert "**supported (not counted)**" in text


def test_claims_section_shows_the_papers_verdict_what_would_decide_and_the_world_conditional_rows():
    frame = _claims()
    frame["paper verdict"] = ["unresolved", "not printed", "supported"]
    frame["margin"] = [2.5, 0.4, None]
    frame["to decide"] = ["", "soft - hard accuracy at N300 (pp): about 6 seeds (now 2)", ""]
    frame.loc[0, "numbers"] = "scaling.alpha.a world.cold.bayes_error"
    text = claims_section(frame)
    assert "| paper's numbers |" in text and "| unresolved | alpha 0.25 |" in text
    assert "**supported** (2.5 SE)" in text and "**unresolved** (0.4 SE)" in text
    assert "- `soft_labels`: soft - hard accuracy at N300 (pp): about 6 seeds (now 2)" in text
    # only the row that reads a world constant is named conditional on the world
    conditional = next(line for line in text.splitlines() if line.startswith("Conditional on the trained world"))
    assert "`power_law`" in conditional and "`soft_labels`" not in conditional
    # without the columns (an older claims.csv) the table keeps its shape and says nothing it cannot
    older = claims_section(_claims())
    assert "paper's numbers" not in older and "What would decide" in older and "Conditional" not in older
