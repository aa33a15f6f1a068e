#!/usr/bin/env bash
# Install Debian packages for CI, the one way the install_*.sh scripts do it: as root or with
# passwordless sudo, `apt-get update` then `apt-get install --no-install-recommends`, retried
# once (apt mirrors in CI occasionally fail transiently).
#
#   scripts/ci/apt_install.sh WHO PACKAGE...     # WHO names the caller in its messages
#
# Exit status: 0 installed; 2 cannot install (not root and no passwordless sudo, no apt-get,
# or apt-get failed twice).
set -euo pipefail
who=$1
shift
if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
else
    echo "$who: cannot install $*: not root and no passwordless sudo" >&2
    exit 2
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "$who: cannot install $*: apt-get not found (Debian/Ubuntu only)" >&2
    exit 2
fi
export DEBIAN_FRONTEND=noninteractive
for attempt in 1 2; do
    if "${SUDO[@]}" apt-get update -qq \
        && "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null; then
        exit 0
    fi
    if [ "$attempt" -eq 2 ]; then
        echo "$who: apt-get install $* failed" >&2
        exit 2
    fi
    sleep 5
done
