"""The end-of-run summary (oracle.report.summary)."""

import json

from oracle.report.summary import headline_numbers, run_summary


def test_headlines_by_key_base_world_first_absent_keys_left_out():
    numbers = {
        "world.shifted.bayes_accuracy": {"value": 0.5, "unit": "fraction"},
        "world.base.bayes_accuracy": {"value": 0.93533, "unit": "fraction"},
        "world.base.aleatoric_floor": {"value": 0.1628, "unit": "nats"},
        "scaling.alpha.resnet": {"value": 0.41, "unit": "1"},
        "scaling.alpha.vit": {"value": 0.37, "unit": "1"},
        "scaling.alpha.zzz": {"value": 0.1, "unit": "1"},
        "scaling.ece_alpha.resnet": {"value": 9.0, "unit": "1"},  # not a headline
        "scaling.bayes_gap_min": {"value": None, "unit": "percentage points"},  # no value: left out
    }
    assert headline_numbers(numbers) == ["world.base.bayes_accuracy = 0.9353 fraction",
                                         "world.base.aleatoric_floor = 0.1628 nats",
                                         "scaling.alpha.resnet = 0.41", "scaling.alpha.vit = 0.37"]
    assert headline_numbers({}) == []


def test_run_summary(tmp_path):
    run = tmp_path / "results" / "r"
    run.mkdir(parents=True)
    text = run_summary(run, 946.4)
    assert text.splitlines()[0] == "Run finished in 15m46s (946 s wall time)."
    assert f"results: {run}/" in text and f"report:  {run}/report.html" in text
    assert "timings:" not in text and "numbers:" not in text  # a partial run made neither
    (run / "timings.md").write_text("Table\n")
    (run / "numbers.json").write_text(json.dumps({"world.base.bayes_accuracy": {"value": 0.9, "unit": "fraction"}}))
    text = run_summary(run, 5.0)
    assert f"timings: {run / 'timings.md'}" in text
    assert text.splitlines()[-1] == "    world.base.bayes_accuracy = 0.9 fraction"
    assert "paper:" not in text  # no `snakemake paper` yet


def test_the_summary_names_the_paper_pdf(tmp_path):
    """After `snakemake paper` the end-of-run summary names paper.pdf with its pages (the job's
    log), and says so when the claims are newer than it."""
    import os

    run = tmp_path / "results" / "r"
    (run / "logs").mkdir(parents=True)
    (run / "paper.pdf").write_bytes(b"%PDF-1.5")
    (run / "logs" / "paper_pdf.log").write_text(f"{run}/paper.pdf: 31 pages, 40 tables and figures in 9 sections\n")
    (run / "claims.csv").write_text("id,verdict\n")
    os.utime(run / "claims.csv", (1, 1))
    line = next(ln for ln in run_summary(run, 5.0).splitlines() if ln.startswith("  paper:"))
    assert line == f"  paper:   {run / 'paper.pdf'}  (31 pages, every figure at its drawn size)"
    os.utime(run / "paper.pdf", (0, 0))
    assert "older than claims.csv" in run_summary(run, 5.0)


def test_the_main_experiment_heads_its_variants_and_the_verdicts_are_counted(tmp_path):
    numbers = {"scaling-floor.alpha.resnet": {"value": 0.05, "unit": "1"},
               "scaling-floor.alpha.vit": {"value": 0.04, "unit": "1"},
               "scaling.alpha.resnet": {"value": 0.41, "unit": "1"}, "scaling.alpha.vit": {"value": 0.37, "unit": "1"}}
    assert headline_numbers(numbers) == ["scaling.alpha.resnet = 0.41", "scaling.alpha.vit = 0.37"]
    run = tmp_path / "r"
    run.mkdir()
    (run / "claims.csv").write_text("id,verdict,counted\nd,not posed,yes\na,supported,yes\nb,contradicted,yes\n"
                                    "c,supported,yes\ne,supported,a check of the world\n")
    # the one count of every output (claims.md, the report, the forest plot): the check named, not counted
    assert (f"claims:  supported 2, contradicted 1, unresolved 0, not posed 1, not run 0 (not counted: e)  "
            f"({run}/claims.md)") in run_summary(run, 1.0)
    (run / "claims.csv").write_text("id\na\n")  # no verdict column: no line rather than a wrong one
    assert "claims:" not in run_summary(run, 1.0)
