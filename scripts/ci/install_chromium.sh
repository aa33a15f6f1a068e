#!/usr/bin/env bash
# Install headless Chromium (Debian's `chromium` package, no recommends). Idempotent: does
# nothing when a chromium binary is on the PATH. Used by CI before the test suite; the report
# test (tests/test_html_report.py) renders a smoke run's report.html in it and skips without it
# unless ORACLE_REQUIRE_CHROMIUM=1.
#
#   scripts/ci/install_chromium.sh          # needs root (or passwordless sudo)
#
# Exit status: 0 installed or already present; 2 cannot install (not root, no apt).
set -euo pipefail

for name in chromium chromium-browser; do
    if command -v "$name" >/dev/null 2>&1; then
        echo "install_chromium: $name already installed"
        exit 0
    fi
done
if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
else
    echo "install_chromium: cannot install chromium: not root and no passwordless sudo" >&2
    exit 2
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_chromium: cannot install chromium: apt-get not found (Debian/Ubuntu only)" >&2
    exit 2
fi
"${SUDO[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium >/dev/null 2>&1
echo "install_chromium: installed $(chromium --version 2>/dev/null | head -1)"
