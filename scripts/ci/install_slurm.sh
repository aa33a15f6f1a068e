#!/usr/bin/env bash
# Install a one-node SLURM (slurmctld + slurmd + client tools) and munge on a
# Debian/Ubuntu machine. Idempotent: does nothing when the binaries are present.
# Used by CI before the test suite; tests/test_slurm.py skips when SLURM is absent.
#
#   scripts/ci/install_slurm.sh          # needs root (or passwordless sudo)
#
# Exit status: 0 installed or already present; 2 cannot install (scripts/ci/apt_install.sh).
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

"$(dirname "$0")/apt_install.sh" install_slurm slurm-wlm munge
echo "install_slurm: installed $(slurmd -V)"
