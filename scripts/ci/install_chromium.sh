#!/usr/bin/env bash
# Install headless Chromium (Debian's `chromium` package, no recommends). Idempotent: does
# nothing when a chromium binary is on the PATH. Used by CI before the test suite; the report
# test (tests/test_html_report.py) renders a smoke run's report.html in it and skips without it
# unless ORACLE_REQUIRE_CHROMIUM=1.
#
#   scripts/ci/install_chromium.sh          # needs root (or passwordless sudo)
#
# Exit status: 0 installed or already present; 2 cannot install (scripts/ci/apt_install.sh).
set -euo pipefail

for name in chromium chromium-browser; do
    if command -v "$name" >/dev/null 2>&1; then
        echo "install_chromium: $name already installed"
        exit 0
    fi
done
"$(dirname "$0")/apt_install.sh" install_chromium chromium
command -v chromium >/dev/null 2>&1
echo "install_chromium: installed $(chromium --version 2>/dev/null | head -1)"
