"""A pytest plugin (``-p narrow_print_widths``, tests/ on the path) that runs every test with the
figures drawn and checked at the print widths of ``ORACLE_TEST_PRINT_WIDTHS`` ("<page>,<column>"
inches), and appends each PDF a test wrote under its tmp_path to ``ORACLE_TEST_PRINT_LOG`` as
"<nodeid>\t<width_in>": tests/test_figure_widths.py runs the figure tests of every kind under it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oracle.report.figures import PrintWidths, pdf_facts, use_print_widths


@pytest.fixture(autouse=True)
def _narrow_print_widths(request, tmp_path):
    page, column = (float(v) for v in os.environ["ORACLE_TEST_PRINT_WIDTHS"].split(","))
    with use_print_widths(PrintWidths(page, column)):
        yield
    lines = [f"{request.node.nodeid}\t{pdf_facts(p.read_bytes())['width_in']:.3f}\n"
             for p in sorted(tmp_path.rglob("*.pdf")) if p.read_bytes().startswith(b"%PDF")]
    with open(os.environ["ORACLE_TEST_PRINT_LOG"], "a") as log:
        log.writelines(lines)
