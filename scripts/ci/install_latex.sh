#!/usr/bin/env bash
# Install pdflatex with booktabs (Debian's texlive-latex-base and -recommended, no docs or
# fonts beyond them). Idempotent: does nothing when pdflatex finds booktabs.sty.
# Used by CI before the test suite; the table tests compile every generated .tex with it
# (tests/table_formats.py) and skip without it unless ORACLE_REQUIRE_LATEX=1.
#
#   scripts/ci/install_latex.sh          # needs root (or passwordless sudo)
#
# Exit status: 0 installed or already present; 2 cannot install (scripts/ci/apt_install.sh).
set -euo pipefail

if command -v pdflatex >/dev/null 2>&1 && kpsewhich booktabs.sty >/dev/null 2>&1; then
    echo "install_latex: pdflatex and booktabs already installed"
    exit 0
fi
"$(dirname "$0")/apt_install.sh" install_latex texlive-latex-base texlive-latex-recommended
command -v pdflatex >/dev/null 2>&1 && kpsewhich booktabs.sty >/dev/null 2>&1
echo "install_latex: installed $(pdflatex --version | head -1)"
