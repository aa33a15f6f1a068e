#!/usr/bin/env bash
# Install pdflatex with booktabs (Debian's texlive-latex-base and -recommended, no docs or
# fonts beyond them). Idempotent: does nothing when pdflatex finds booktabs.sty.
# Used by CI before the test suite; the table tests compile every generated .tex with it
# (tests/table_formats.py) and skip without it unless ORACLE_REQUIRE_LATEX=1.
#
#   scripts/ci/install_latex.sh          # needs root (or passwordless sudo)
#
# Exit status: 0 installed or already present; 2 cannot install (not root, no apt).
set -euo pipefail

if command -v pdflatex >/dev/null 2>&1 && kpsewhich booktabs.sty >/dev/null 2>&1; then
    echo "install_latex: pdflatex and booktabs already installed"
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
else
    echo "install_latex: cannot install pdflatex: not root and no passwordless sudo" >&2
    exit 2
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_latex: cannot install pdflatex: apt-get not found (Debian/Ubuntu only)" >&2
    exit 2
fi
"${SUDO[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends \
    texlive-latex-base texlive-latex-recommended >/dev/null
command -v pdflatex >/dev/null 2>&1 && kpsewhich booktabs.sty >/dev/null 2>&1
echo "install_latex: installed $(pdflatex --version | head -1)"
