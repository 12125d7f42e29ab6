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
# (chessjax.processes), so no coordinator address is set here. --kill-on-bad-exit ends the whole
# job step when one task fails. The workdir must be shared by every node (NFS, Lustre, a mounted
# bucket): every process writes its part of each checkpoint there. Rerunning the same command
# resumes.
#SBATCH --job-name=chessjax
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=8
#SBATCH --output=runs/logs/%x-%j.log
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

# As gpu_host.sh: most of each GPU's memory for the trainer, collectives overlapped with compute,
# a persistent compilation cache (each task reads it; process 0 writes it).
run_cmd srun --kill-on-bad-exit=1 --chdir="$REPO_ROOT" env \
  "XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.90}" \
  "XLA_FLAGS=${XLA_FLAGS:---xla_gpu_enable_latency_hiding_scheduler=true}" \
  "JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-$HOME/.cache/chessjax-jax}" \
  "$VENV/bin/python" -m chessjax.main "--config=configs/cwm.py:family=$FAMILY,size=$SIZE" \
  "--workdir=$WORKDIR" "${EXTRA[@]+"${EXTRA[@]}"}"
