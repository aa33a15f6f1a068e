#!/usr/bin/env bash
# Install a one-node SLURM (slurmctld + slurmd + client tools) and munge on a
# Debian/Ubuntu machine. Idempotent: does nothing when the binaries are present.
# Used by CI before the test suite; tests/test_slurm.py skips when SLURM is absent.
#
#   scripts/ci/install_slurm.sh          # needs root (or passwordless sudo)
#
# Exit status: 0 installed or already present; 2 cannot install (not root, no apt).
set -euo pipefail

need=(slurmctld slurmd sbatch squeue sinfo scontrol srun munged munge)
missing=()
for b in "${need[@]}"; do
    command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || missing+=("$b")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install_slurm: SLURM and munge already installed ($(slurmd -V 2>/dev/null || echo "version unknown"))"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
else
    echo "install_slurm: cannot install ${missing[*]}: not root and no passwordless sudo" >&2
    exit 2
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_slurm: cannot install ${missing[*]}: apt-get not found (Debian/Ubuntu only)" >&2
    exit 2
fi

export DEBIAN_FRONTEND=noninteractive
# Retry once: apt mirrors in CI occasionally fail transiently.
for attempt in 1 2; do
    if "${SUDO[@]}" apt-get update -qq \
        && "${SUDO[@]}" apt-get install -y -qq --no-install-recommends slurm-wlm munge; then
        break
    fi
    if [ "$attempt" -eq 2 ]; then
        echo "install_slurm: apt-get install slurm-wlm munge failed" >&2
        exit 2
    fi
    sleep 5
done
echo "install_slurm: installed $(slurmd -V)"
