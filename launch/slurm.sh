#!/usr/bin/env bash
# Multi-node GPU training under SLURM: one process per GPU, every one running chessjax.main.
#
#   sbatch launch/slurm.sh --family slice --size d512 --workdir /shared/runs/slice_d512 \
#       -- --config.data.train=data/lichess_2025-03
#   sbatch --nodes=4 --ntasks-per-node=4 launch/slurm.sh ...    # another shape of job
#   DRY_RUN=1 bash launch/slurm.sh ...                           # print the srun command only
#
# Submit from the repository root (its .venv, made by `launch/gpu_host.sh setup` on a shared
# filesystem, runs every task). srun starts one task per GPU with the same command; in each task
# `jax.distributed.initialize()` finds the job's other tasks from SLURM's variables by itself
# (chessjax.processes), so no coordinator address is set here; chessjax.processes stops every
# task when one fails or is lost (so srun need not kill the step on the first non-zero exit). The
# workdir must be shared by every node (NFS, Lustre, a mounted bucket): every process writes its
# part of each checkpoint there. Rerunning the same command resumes.
#
# Time limit and preemption: SLURM sends SIGTERM to every task 120 s before the job's end
# (--signal=TERM@120) or when it preempts the job; the tasks agree on a step, save a checkpoint
# there and exit with status 75 (chessjax.preemption), and this script then requeues the job
# (--requeue), whose rerun resumes from that checkpoint.
#SBATCH --job-name=chessjax
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=8
#SBATCH --output=runs/logs/%x-%j.log
#SBATCH --signal=TERM@120
#SBATCH --requeue
set -euo pipefail

PROG="slurm.sh"
# sbatch runs a copy of this file from its spool directory: the repository is where it was submitted.
REPO_ROOT="${SLURM_SUBMIT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
# shellcheck source=launch/common.sh
source "$REPO_ROOT/launch/common.sh"

usage() {
  cat <<EOF
Usage: sbatch [SBATCH OPTIONS] launch/$PROG --family F --size S --workdir DIR [--venv DIR] [-- EXTRA...]
  EXTRA: chessjax.main flags, e.g. --config.data.train=data/lichess_2025-03
  DRY_RUN=1 (or --dry-run) prints the srun command instead of running it.
EOF
}

DRY_RUN="${DRY_RUN:-0}"
SUBCOMMAND="run"
FAMILY=""
SIZE=""
WORKDIR=""
VENV="$REPO_ROOT/.venv"
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --) shift; EXTRA=("$@"); break ;;
    --dry-run) DRY_RUN=1; shift ;;
    --family) need_value "$@"; FAMILY="$2"; shift 2 ;;
    --size) need_value "$@"; SIZE="$2"; shift 2 ;;
    --workdir) need_value "$@"; WORKDIR="$2"; shift 2 ;;
    --venv) need_value "$@"; VENV="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die_usage "unknown option '$1'" ;;
  esac
done
[[ -n "$FAMILY" && -n "$SIZE" && -n "$WORKDIR" ]] || die_usage "needs --family, --size and --workdir"

PREEMPTED=75  # chessjax.preemption.EXIT_STATUS: saved at a step on SIGTERM; a rerun resumes.
# The trainer's environment (memory fraction, XLA flags, compilation cache) is chessjax.runtime's:
# its defaults where unset, so a value exported before sbatch (srun passes it on) wins.
status=0
run_cmd srun --kill-on-bad-exit=0 --chdir="$REPO_ROOT" \
  "$VENV/bin/python" -m chessjax.main "--config=configs/cwm.py:family=$FAMILY,size=$SIZE" \
  "--workdir=$WORKDIR" "${EXTRA[@]+"${EXTRA[@]}"}" || status=$?
if [[ "$status" == "$PREEMPTED" && -n "${SLURM_JOB_ID:-}" ]]; then
  echo "$PROG: preempted; checkpoint saved; requeueing job $SLURM_JOB_ID to resume" >&2
  run_cmd scontrol requeue "$SLURM_JOB_ID"
fi
exit "$status"
