#!/usr/bin/env bash
# Stop the one-node SLURM started by scripts/ci/start_slurm.sh: slurmd, slurmctld,
# and munged if that script started it. Removes /etc/slurm/slurm.conf only when
# start_slurm.sh wrote it. Stops processes by the pids it recorded, nothing else.
#
#   sudo scripts/ci/stop_slurm.sh            # keep $ORACLE_SLURM_DIR (logs) for inspection
#   sudo scripts/ci/stop_slurm.sh --purge    # also delete $ORACLE_SLURM_DIR
set -euo pipefail

STATE=${ORACLE_SLURM_DIR:-/tmp/oracle-slurm}
CONF=/etc/slurm/slurm.conf
MARK="# written by scripts/ci/start_slurm.sh (oracle one-node cluster)"

stop_pid() {  # stop_pid NAME PID
    local name=$1 pid=$2
    [ -n "$pid" ] || return 0
    kill -0 "$pid" 2>/dev/null || return 0
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || { echo "stop_slurm: stopped $name ($pid)"; return 0; }; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
    echo "stop_slurm: killed $name ($pid) after 10 s"
}

if [ -f "$CONF" ] && grep -qF "$MARK" "$CONF" && [ -s "$STATE/slurmctld.pid" ]; then
    # Cancel what is left so no job step outlives its slurmd.
    timeout 10 scancel --partition="$(sed -n 's/^PartitionName=\([^ ]*\).*/\1/p' "$CONF")" 2>/dev/null || true
fi
for d in slurmd slurmctld; do
    if [ -s "$STATE/$d.pid" ]; then
        stop_pid "$d" "$(cat "$STATE/$d.pid")"
        rm -f "$STATE/$d.pid"
    fi
done
if [ -s "$STATE/munged.started" ]; then
    while read -r pid; do stop_pid munged "$pid"; done < "$STATE/munged.started"
    rm -f "$STATE/munged.started"
fi
if [ -f "$CONF" ] && grep -qF "$MARK" "$CONF"; then
    rm -f "$CONF"
fi
if [ "${1:-}" = "--purge" ]; then
    rm -rf "$STATE"
fi
echo "stop_slurm: done"
