#!/usr/bin/env bash
# Start a one-node SLURM cluster on this machine: munged, slurmctld and slurmd,
# one partition holding this host, no accounting database (no slurmdbd).
# Meant for CI and for trying `snakemake --profile slurm` on a workstation.
#
#   sudo scripts/ci/start_slurm.sh      # then: sinfo; snakemake --profile slurm ...
#   sudo scripts/ci/stop_slurm.sh
#
# Environment (all optional):
#   ORACLE_SLURM_DIR        state, spool, pid and log files   (default /tmp/oracle-slurm)
#   ORACLE_SLURM_PARTITION  name of the single partition       (default main)
#   ORACLE_SLURM_TIMEOUT    seconds to wait for an idle node   (default 60)
#   ORACLE_SLURM_FORCE=1    overwrite an /etc/slurm/slurm.conf this script did not write
#
# Writes /etc/slurm/slurm.conf (the path every SLURM client and job step reads;
# SLURM_CONF alone is not enough because job steps drop SLURM_* variables).
# Exit status: 0 the node is idle and accepts jobs; 2 not root / not installed /
# foreign slurm.conf; 1 a daemon failed to start (the last lines of its log are printed).
set -euo pipefail

STATE=${ORACLE_SLURM_DIR:-/tmp/oracle-slurm}
PARTITION=${ORACLE_SLURM_PARTITION:-main}
TIMEOUT=${ORACLE_SLURM_TIMEOUT:-60}
CONF=/etc/slurm/slurm.conf
MARK="# written by scripts/ci/start_slurm.sh (oracle one-node cluster)"

fail() {  # fail CODE MESSAGE: one clear line on stderr, then exit
    echo "start_slurm: FAILED: $2" >&2
    exit "$1"
}
show_log() {
    if [ -s "$1" ]; then
        echo "---- last lines of $1" >&2
        tail -n 15 "$1" >&2
    fi
}

[ "$(id -u)" -eq 0 ] || fail 2 "needs root (writes $CONF, starts munged/slurmctld/slurmd as root)"
for b in slurmctld slurmd munged munge sinfo scontrol; do
    command -v "$b" >/dev/null 2>&1 || fail 2 "'$b' not found; run scripts/ci/install_slurm.sh first"
done
if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF" && [ "${ORACLE_SLURM_FORCE:-0}" != 1 ]; then
    fail 2 "$CONF exists and was not written by this script (set ORACLE_SLURM_FORCE=1 to overwrite)"
fi

HOST=$(hostname -s)
[ -n "$HOST" ] || fail 2 "hostname -s is empty"

# Already up from an earlier call (our config, node answering)? Then nothing to do: a restart
# would drop the jobs it is running.
if [ -f "$CONF" ] && grep -qF "$MARK" "$CONF"; then
    up=$(timeout 10 sinfo -h -n "$HOST" -o %t 2>/dev/null | head -n1 || true)
    case "$up" in
        idle|mix|alloc|comp*)
            echo "start_slurm: already running: node $HOST $up in partition $(sed -n 's/^PartitionName=\([^ ]*\).*/\1/p' "$CONF") ($CONF)"
            exit 0 ;;
    esac
fi

mkdir -p "$STATE"/{ctld,spool,log}

# ---- munge: the authentication every SLURM RPC carries -----------------------
MUNGE_USER=root
getent passwd munge >/dev/null 2>&1 && MUNGE_USER=munge
install -d -m 0700 -o "$MUNGE_USER" /etc/munge /var/lib/munge /var/log/munge
install -d -m 0755 -o "$MUNGE_USER" /run/munge
if [ ! -s /etc/munge/munge.key ]; then
    if command -v mungekey >/dev/null 2>&1; then
        mungekey --create --keyfile=/etc/munge/munge.key
    else
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    fi
fi
chown "$MUNGE_USER" /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    if [ "$MUNGE_USER" = munge ]; then
        runuser -u munge -- munged || fail 1 "munged did not start (see /var/log/munge/munged.log)"
    else
        munged --force || fail 1 "munged did not start (see /var/log/munge/munged.log)"
    fi
    for _ in $(seq 1 20); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break
        sleep 0.5
    done
    # munged writes its pid here; stop_slurm.sh stops it only if we started it.
    cat /run/munge/munged.pid > "$STATE/munged.started" 2>/dev/null || true
    munge -n | unmunge >/dev/null 2>&1 || { show_log /var/log/munge/munged.log; fail 1 "munge credential round trip failed"; }
fi

# ---- slurm.conf for one node = this machine ----------------------------------
# The node line mirrors what slurmd detects (slurmd -C), so slurmd never drains the
# node for a CPU/memory mismatch; a slightly smaller RealMemory leaves room for the OS.
DETECTED=$(slurmd -C | head -n1)
field() { sed -n "s/.*\\b$1=\\([0-9]*\\).*/\\1/p" <<<"$DETECTED"; }
CPUS=$(field CPUs); BOARDS=$(field Boards); SOCKETS=$(field SocketsPerBoard)
CORES=$(field CoresPerSocket); THREADS=$(field ThreadsPerCore); MEM=$(field RealMemory)
[ -n "$CPUS" ] && [ -n "$MEM" ] || fail 1 "could not read CPUs/RealMemory from 'slurmd -C': $DETECTED"
MEM=$(( MEM * 95 / 100 ))

mkdir -p "$(dirname "$CONF")"
tmp=$(mktemp "$CONF.XXXXXX")
cat > "$tmp" <<CONF
$MARK
# One node, one partition, no accounting database. Regenerated on every start.
ClusterName=oracle
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# Finished jobs stay visible to squeue this long; the Snakemake SLURM plugin's
# squeue-based status check needs at least 3x its first poll interval (40 s).
MinJobAge=600
ReturnToService=2
InactiveLimit=0
KillWait=10
Waittime=0
DefMemPerCPU=1000
MailProg=/bin/true
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS Boards=${BOARDS:-1} SocketsPerBoard=${SOCKETS:-1} CoresPerSocket=${CORES:-$CPUS} ThreadsPerCore=${THREADS:-1} RealMemory=$MEM State=UNKNOWN
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
chmod 0644 "$tmp"
mv -f "$tmp" "$CONF"

# ---- daemons -----------------------------------------------------------------
stop_pidfile() {
    local f=$1
    if [ -s "$f" ]; then
        local pid; pid=$(cat "$f")
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        fi
        rm -f "$f"
    fi
}
# A restart (new config) must not talk to daemons started with the old one.
stop_pidfile "$STATE/slurmd.pid"
stop_pidfile "$STATE/slurmctld.pid"

# -c: start from an empty job list, so a previous run's jobs never come back.
slurmctld -c || { show_log "$STATE/log/slurmctld.log"; fail 1 "slurmctld did not start"; }
slurmd || { show_log "$STATE/log/slurmd.log"; fail 1 "slurmd did not start"; }

deadline=$(( $(date +%s) + TIMEOUT ))
state=""
while [ "$(date +%s)" -lt "$deadline" ]; do
    state=$(timeout 10 sinfo -h -n "$HOST" -o %t 2>/dev/null | head -n1 || true)
    case "$state" in
        idle) break ;;
        down*|drain*|drng*|fail*|unk*)
            # ReturnToService=2 normally clears this once slurmd registers.
            scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    sleep 1
done
if [ "$state" != idle ]; then
    show_log "$STATE/log/slurmctld.log"
    show_log "$STATE/log/slurmd.log"
    fail 1 "node $HOST not idle after ${TIMEOUT}s (state '${state:-no answer from slurmctld}'; logs in $STATE/log)"
fi
echo "start_slurm: OK: node $HOST idle in partition $PARTITION ($CPUS CPUs, ${MEM} MB, no accounting; logs in $STATE/log)"
