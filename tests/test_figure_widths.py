"""Figures drawn at the venue's widths of config `figures` (issue 48 item 5): the print widths are
read when a figure is drawn (`print_widths`), a figure job sets them from its params
(`use_print_widths`), `print_problems` checks against them, and every figure kind prints at the
ICLR text width (5.5 in) as it does at the default 6.8 in: its layout fits by construction."""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from matplotlib.figure import Figure

import test_preset_figures as presets
from oracle.errors import OracleError
from oracle.report.figures import PrintWidths, pdf_facts, print_widths, save_figure, style, use_print_widths

REPO = Path(__file__).resolve().parents[1]
ICLR = PrintWidths(page_in=5.5, column_in=3.3)

#: The tests that draw each figure kind (every experiment kind's, the validation's, the claims
#: forest, the shared reliability diagram and sample grid), run again at the ICLR widths.
FIGURE_TESTS = [
    "tests/test_experiment_scaling.py::test_calibration_figures",
    "tests/test_experiment_scaling.py::test_figures_write_pdf_and_png_and_rerun_identically",
    "tests/test_experiment_calibration.py::test_tables_figures_numbers",
    "tests/test_experiment_difficulty.py::test_collect_table_numbers_and_figure",
    "tests/test_experiment_difficulty.py::test_learner_against_brute_force",
    "tests/test_experiment_active.py::test_table_and_figures",
    "tests/test_experiment_estimators.py::test_sets_tables_numbers_and_figure",
    "tests/test_experiment_shift.py::test_drop_fits_and_numbers",
    "tests/test_experiment_labels.py::test_figures_write_pdf_and_png",
    "tests/test_claims_figure.py::test_figure_and_caption_from_a_claims_csv",
    "tests/test_figure_print.py::test_shared_figures_print",
    "tests/test_validation.py::test_flow_world_checks_and_tables",
]


def _figure(width: float) -> Figure:
    with style():
        fig = Figure(figsize=(width, 2.4), layout="constrained")
        ax = fig.subplots()
        ax.plot([1, 2, 3], [3, 1, 2])
        ax.set(xlabel="N", ylabel="error", title="a title")
    return fig


def test_the_widths_are_read_when_drawn_and_restored_after_the_block():
    assert print_widths() == PrintWidths(6.8, 3.3)  # the default: a two-column journal's
    with use_print_widths(ICLR) as widths:
        assert widths == ICLR and print_widths() == ICLR
    assert print_widths() == PrintWidths(6.8, 3.3)
    assert PrintWidths.from_config({"width_in": 5.5, "column_width_in": 3.0}) == PrintWidths(5.5, 3.0)
    assert PrintWidths.from_config({}) == PrintWidths(6.8, 3.3)
    with pytest.raises(OracleError, match="config figures: width_in.*'wide'"):
        PrintWidths.from_config({"width_in": "wide"})
    with pytest.raises(OracleError, match="column_width_in = 6 in must be > 0 and at most width_in = 5.5 in"):
        PrintWidths.from_config({"width_in": 5.5, "column_width_in": 6.0})


def test_the_print_check_takes_the_current_widths(tmp_path):
    """At 5.5 in a figure drawn at the journal's 6.8 in would be scaled down in the paper: refused."""
    with use_print_widths(ICLR):
        with pytest.raises(OracleError, match=r"width 6.80 in is neither one column \(3.3 in\) nor the text "
                                              r"width \(5.5 in\)"):
            save_figure(_figure(6.8), tmp_path / "wide")
        out = save_figure(_figure(print_widths().page_in), tmp_path / "fits")
    assert pdf_facts(out["pdf"].read_bytes())["width_in"] == pytest.approx(5.5, abs=0.01)
    with pytest.raises(OracleError, match=r"width 5.50 in is neither"):  # and back at 6.8 in after the block
        save_figure(_figure(5.5), tmp_path / "narrow")


def _run_at(widths: PrintWidths, tests: list[str], log: Path) -> subprocess.CompletedProcess:
    """`tests` run in a pytest of their own with every figure drawn at `widths`
    (tests/narrow_print_widths.py), the width of each PDF they wrote appended to `log`."""
    env = {**os.environ, "ORACLE_TEST_PRINT_WIDTHS": f"{widths.page_in},{widths.column_in}",
           "ORACLE_TEST_PRINT_LOG": str(log), "ORACLE_STRICT_FIGURES": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "narrow_print_widths", "-p", "no:cacheprovider",
                           *tests], cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)


def _widths_written(log: Path) -> dict[str, set[float]]:
    out: dict[str, set[float]] = {}
    for line in log.read_text().splitlines():
        node, width = line.split("\t")
        out.setdefault(node, set()).add(round(float(width), 2))
    return out


def _check_at_iclr(tests: list[str], tmp_path: Path) -> None:
    log = tmp_path / "widths.tsv"
    log.touch()
    done = _run_at(ICLR, tests, log)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]  # strict: every figure printed
    assert re.search(r"\b\d+ passed", done.stdout) and " failed" not in done.stdout, done.stdout[-2000:]
    written = _widths_written(log)
    # each test drew at least one figure, every one at the ICLR widths, full-width ones among them
    test_files = {t.split("::")[0] for t in tests}
    assert {n.split("::")[0] for n in written} == test_files, (sorted(written), tests)
    assert set().union(*written.values()) <= {ICLR.page_in, ICLR.column_in}, written
    assert ICLR.page_in in set().union(*written.values())


def test_every_figure_kind_prints_at_the_iclr_text_width(tmp_path):
    """Issue 48 item 5: `figures.width_in: 5.5` draws every figure 5.5 (or one column 3.3) in wide,
    each printing at >= 8 pt with nothing colliding or off the canvas (save_figure is strict)."""
    _check_at_iclr(FIGURE_TESTS, tmp_path)


#: The preset-shape tests run again at 5.5 in: the kinds whose full-width figures put a panel, a
#: legend entry or a tick label per architecture, size or strategy, so that a preset's shape sets
#: how crowded they are. The other kinds are drawn at 5.5 in by FIGURE_TESTS (one shape each) and
#: at every preset's shape at the default width (the whole file again at 5.5 in took 320 s of the
#: suite on a 2-core VM; the two kinds here are about 70% of its drawing, docs/benchmarks.md).
PRESET_TESTS_AT_ICLR = ["tests/test_preset_figures.py::test_every_scaling_figure_prints_at_the_presets_shapes",
                        "tests/test_preset_figures.py::test_every_active_figure_prints_at_the_presets_shapes"]


@pytest.mark.slow
def test_every_preset_shape_prints_at_the_iclr_text_width(tmp_path):
    """The scaling and active figures at every preset's architectures, sizes and strategies, at 5.5 in."""
    _check_at_iclr(PRESET_TESTS_AT_ICLR, tmp_path)


def test_the_figure_job_draws_at_the_config_width(tmp_path, monkeypatch):
    """scripts/experiment_figure.py with `figures.width_in: 5.5` in its params writes a 5.5 in PDF."""
    import oracle.workflow.jobs

    mains = []
    monkeypatch.setattr(oracle.workflow.jobs, "run_job", lambda job, main, **kw: mains.append(main))
    runpy.run_path(str(REPO / "scripts" / "experiment_figure.py"), init_globals={"snakemake": None})
    _, spec = next(iter(presets.SCALING.values()))
    data = presets.scaling_frames(spec)
    inputs = {}
    for name, frame in data.items():
        inputs[name] = str(tmp_path / f"{name}.csv")
        frame.to_csv(inputs[name], index=False)
    for artifact, width in (("scaling_panels", 5.5), ("epistemic_curves", None)):
        out = [str(tmp_path / f"{artifact}.{ext}") for ext in ("pdf", "png", "caption.rst")]
        job = SimpleNamespace(input=inputs, output=out, wildcards=SimpleNamespace(kind="scaling", artifact=artifact),
                              params=SimpleNamespace(spec=spec, caption="A caption.",
                                                     figures={"width_in": 5.5, "column_width_in": 3.0}))
        mains[0](job)
        drawn = pdf_facts(Path(out[0]).read_bytes())["width_in"]
        assert drawn == pytest.approx(width or drawn, abs=0.01) and round(drawn, 2) in (5.5, 3.0), (artifact, drawn)
    assert print_widths() == PrintWidths(6.8, 3.3)  # the job's widths held for its drawing only


def test_every_figure_rule_takes_the_widths_as_params():
    """A rule that draws a figure has config `figures` among its params, so that Snakemake's params
    trigger redraws it when the widths change (and its script sets them: `use_print_widths`)."""
    drawing = {}
    for path in sorted((REPO / "rules").glob("*.smk")):
        for block in re.split(r"\n(?=rule \w+:)", path.read_text())[1:]:
            name = re.match(r"rule (\w+):", block).group(1)
            script = re.search(r'script:\s*\n\s*"\.\./(scripts/\w+\.py)"', block)
            output = re.search(r"\n    output:\n(.*?)\n    \w+:", block, re.S)
            if script and output and ("figure_outputs(" in output.group(1) or "CLAIMS_FIGURE" in output.group(1)):
                drawing[name] = (block, (REPO / script.group(1)).read_text())
    assert {"experiment_figure", "validation_nn_distances", "validation_samples_grid", "claims"} <= set(drawing)
    for name, (block, script) in drawing.items():
        params = block.split("params:", 1)[-1].split("log:", 1)[0]
        assert 'figures=config["figures"]' in params, name
        assert "use_print_widths(PrintWidths.from_config(sm.params.figures))" in script, name
