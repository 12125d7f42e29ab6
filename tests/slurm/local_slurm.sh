#!/usr/bin/env bash
# A single-node SLURM in one directory, for the cluster tests (tests/cluster): Debian's slurmctld,
# slurmd and munge (22.05), run as root.
#
#   tests/slurm/local_slurm.sh start DIR    # writes DIR/slurm.conf, starts munged, slurmctld, slurmd
#   tests/slurm/local_slurm.sh start DIR 1  # the same, its daemons and every task on CPU 1 only
#   tests/slurm/local_slurm.sh stop DIR     # cancels DIR's jobs, stops the daemons by their pids
#   SLURM_CONF=DIR/slurm.conf sinfo         # the clients read the configuration from SLURM_CONF
#
# Everything lives in DIR (configuration, munge key and socket, state, spool, logs, pid files),
# so it runs beside another SLURM or munge; DIR must be traversable by the user munge (not under a
# 0700 directory). The node has the machine's CPUs; memory is not a scheduled resource
# (CR_Core). Processes are tracked by their parent ids (proctrack/linuxproc) and each task is bound
# to the CPUs SLURM gave it (task/affinity: sched_setaffinity), as a cluster's would be: no
# cgroups needed, so it runs in a container.
#
# With a CPU list (taskset's form, e.g. 1), the daemons run on those CPUs and every task inherits
# them (task/none: SLURM binds nothing) while the node keeps the machine's CPU count for
# scheduling: the test suite gives its SLURM the one core of the pytest worker that runs the
# cluster tests, where task/affinity would bind tasks to the lowest free core, often the core of
# the other worker (its tests and the SLURM tasks then shared one core while the other idled).
set -euo pipefail

PROG="local_slurm.sh"
die() { echo "$PROG: error: $*" >&2; exit 1; }
[[ ( $# -eq 2 || ( $# -eq 3 && "$1" == start ) ) && ( "$1" == start || "$1" == stop ) ]] || {
  echo "Usage: $PROG start DIR [CPUS] | stop DIR" >&2; exit 2; }
CPUS="${3:-}"
ACTION="$1"
DIR="$(mkdir -p "$2" && cd "$2" && pwd)"
CONF="$DIR/slurm.conf"

free_port() {  # A TCP port nothing listens on, from $1 upwards.
  local port="$1"
  while (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
  echo "$port"
}

# Sends SIGTERM to the processes of the pid files given, at once, and waits up to 20 s for them
# to end (then SIGKILL): each daemon takes a second or two to stop, so together they take the
# longest one's time, not the sum (1.5 s against 5.4 s one after another, 2026-11-29).
stop_pids() {
  local file pid pids=() files=()
  for file in "$@"; do
    [[ -s "$file" ]] || continue
    pid="$(cat "$file")"
    if kill -TERM "$pid" 2>/dev/null; then pids+=("$pid"); files+=("$file"); else rm -f "$file"; fi
  done
  for _ in $(seq 1 100); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for i in "${!pids[@]}"; do
    if kill -0 "${pids[$i]}" 2>/dev/null; then
      echo "$PROG: pid ${pids[$i]} (${files[$i]}) ignored SIGTERM; killing it" >&2
      kill -KILL "${pids[$i]}" 2>/dev/null || true
    fi
    rm -f "${files[$i]}"
  done
}

if [[ "$ACTION" == stop ]]; then
  if [[ -s "$DIR/slurmctld.pid" ]] && kill -0 "$(cat "$DIR/slurmctld.pid")" 2>/dev/null; then
    # Jobs first: their slurmstepd processes would outlive slurmd.
    SLURM_CONF="$CONF" scancel --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 1 60); do
      [[ -z "$(SLURM_CONF="$CONF" squeue -h -o %i 2>/dev/null)" ]] && break
      sleep 0.5
    done
  fi
  stop_pids "$DIR/slurmd.pid" "$DIR/slurmctld.pid" "$DIR/munge/munged.pid"
  exit 0
fi

[[ "$(id -u)" == 0 ]] || die "needs root (munged runs as user munge, slurmd as root)"
for tool in munged mungekey slurmctld slurmd sbatch taskset; do
  command -v "$tool" >/dev/null || die "$tool missing: apt-get install slurmctld slurmd slurm-client munge"
done
id munge >/dev/null 2>&1 || die "no user munge (Debian's munge package makes it)"

# munged wants its key private and its socket's folder open to all (execute permission).
mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/munge" "$DIR/munge-key"
chmod 755 "$DIR" "$DIR/munge"
chown munge: "$DIR/munge" "$DIR/munge-key"
chmod 700 "$DIR/munge-key"
[[ -s "$DIR/munge-key/munge.key" ]] \
  || su -s /bin/sh munge -c "mungekey --create --keyfile='$DIR/munge-key/munge.key'"
# Every daemon's standard streams go to its log folder, never to this script's caller: a daemon
# holding a caller's pipe open would keep a caller that reads to the end (the tests) waiting.
su -s /bin/sh munge -c "munged --socket='$DIR/munge/munge.socket' --key-file='$DIR/munge-key/munge.key' \
  --pid-file='$DIR/munge/munged.pid' --log-file='$DIR/munge/munged.log' \
  --seed-file='$DIR/munge/munged.seed'" </dev/null >>"$DIR/munge/munged.out" 2>&1

HOST="$(hostname -s)"
CTLD_PORT="$(free_port 16817)"
SLURMD_PORT="$(free_port $((CTLD_PORT + 1)))"
cat >"$CONF" <<CONF
ClusterName=chessjax-test
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=$([[ -n "$CPUS" ]] && echo task/none || echo task/affinity)
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobRequeue=1
KillWait=5
MinJobAge=600
SlurmdTimeout=600
SlurmctldTimeout=120
InactiveLimit=0
SchedulerType=sched/backfill
# A job starts as soon as another ends (batch_sched_delay=0; default 3 s): the toy transfer plan
# (tests/cluster) idled 0.7 s on average between one job's end and the next one's start, against
# about 1.2 s with the default (14 stage changes; 2026-11-29).
SchedulerParameters=sched_interval=5,batch_sched_delay=0,sched_min_interval=0
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
# Every CPU of the machine, not this process's affinity (a pinned pytest worker sees one).
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$(nproc --all) State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF

export SLURM_CONF="$CONF"
# The daemons, and so the jobs, run on the CPUs given, else on every CPU: a pinned caller (a
# pytest-xdist worker holds one core) would otherwise pass its one core on to them.
taskset -cp "${CPUS:-0-$(($(nproc --all) - 1))}" $$ >/dev/null
slurmctld -f "$CONF" </dev/null >>"$DIR/log/slurmctld.out" 2>&1
slurmd -f "$CONF" </dev/null >>"$DIR/log/slurmd.out" 2>&1
for _ in $(seq 1 150); do
  if [[ "$(sinfo -h -o %t 2>/dev/null)" =~ ^(idle|mix|alloc) ]]; then
    echo "$PROG: SLURM up in $DIR (SLURM_CONF=$CONF)"
    exit 0
  fi
  sleep 0.2
done
echo "$PROG: the node did not come up within 30 s; logs in $DIR/log" >&2
tail -n 20 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
exit 1
