#!/usr/bin/env bash
# One task of a chessjax job array (launch.cluster, launch/slurm_jobs.py): runs line
# $SLURM_ARRAY_TASK_ID of a manifest (launch/manifest.py: index -> one command) as one srun step.
#
#   sbatch --array=0-99%8 --requeue --signal=TERM@120 launch/slurm_array.sh \
#       --manifest ROOT/slurm/manifests/stage1-001.jsonl --python .venv/bin/python
#   DRY_RUN=1 SLURM_ARRAY_TASK_ID=3 bash launch/slurm_array.sh --manifest M  # print srun only
#
# srun starts the job's tasks (one per GPU for a multi-process run), each replacing itself with
# the manifest's command (`launch.cluster exec`), so SLURM's signals reach the trainer itself.
# The conventions of slurm.sh: SIGTERM before the time limit (--signal=TERM@120) or on preemption
# makes the trainer save and exit 75, and this task is then requeued; its rerun resumes. Only this
# task is requeued: ARRAYID_TASKID (an array's first task shares the array's id, which names
# every task). A task that crashed (any other status) is run again in its allocation, at most
# --retries times, unless every run of it has ended (a population whose member the non-finite
# guard aborted finishes the others and exits non-zero: rerunning it would change nothing), nor when
# its manifest line cannot be read (`launch.cluster ended` says neither "ended" nor "not ended").
# With --task-dir, "start TIME TASK" and "exit TIME TASK STATUS" lines go to DIR/MANIFEST_INDEX
# (launch.cluster status reads them).
# The trainer's environment (memory fraction, XLA flags, compilation cache) is set by the trainer
# itself where unset (chessjax.runtime), as under slurm.sh and gpu_host.sh.
#SBATCH --requeue
#SBATCH --signal=TERM@120
#SBATCH --open-mode=append
set -euo pipefail

PROG="slurm_array.sh"
# sbatch runs a copy of this file from its spool directory: the repository is where it was submitted.
REPO_ROOT="${SLURM_SUBMIT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
# shellcheck source=launch/common.sh
source "$REPO_ROOT/launch/common.sh"

usage() {
  cat <<EOF
Usage: sbatch --array=0-N [SBATCH OPTIONS] launch/$PROG --manifest FILE [--python PY]
           [--retries N] [--retry-delay S] [--task-dir DIR]
  DRY_RUN=1 (or --dry-run) prints the srun command instead of running it.
EOF
}

DRY_RUN="${DRY_RUN:-0}"
SUBCOMMAND="task"
EXTRA=()
MANIFEST=""
PYTHON="$REPO_ROOT/.venv/bin/python"
RETRIES=2
RETRY_DELAY=10
TASK_DIR=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) DRY_RUN=1; shift ;;
    --manifest) need_value "$@"; MANIFEST="$2"; shift 2 ;;
    --python) need_value "$@"; PYTHON="$2"; shift 2 ;;
    --retries) need_value "$@"; RETRIES="$2"; shift 2 ;;
    --retry-delay) need_value "$@"; RETRY_DELAY="$2"; shift 2 ;;
    --task-dir) need_value "$@"; TASK_DIR="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die_usage "unknown option '$1'" ;;
  esac
done
no_extra
[[ -n "$MANIFEST" ]] || die_usage "needs --manifest"
[[ "$RETRIES" =~ ^[0-9]+$ ]] || die_usage "--retries must be a number"
INDEX="${SLURM_ARRAY_TASK_ID:-0}"
TASK="${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-local}}_$INDEX"

mark() {  # mark start|exit [STATUS]
  if [[ -n "$TASK_DIR" && "$DRY_RUN" != 1 ]]; then
    printf '%s %s %s %s\n' "$1" "$(date +%s)" "$TASK" "${2:-}" \
      >>"$TASK_DIR/$(basename "$MANIFEST" .jsonl)_$INDEX"
  fi
}

PREEMPTED=75  # chessjax.preemption.EXIT_STATUS: saved at a step on SIGTERM; a rerun resumes.
attempt=0
while :; do
  mark start
  echo "$PROG: task $TASK: $MANIFEST line $INDEX, attempt $((attempt + 1)) on $(hostname)" >&2
  status=0
  run_cmd srun --kill-on-bad-exit=0 --chdir="$REPO_ROOT" \
    "$PYTHON" -m launch.cluster exec "$MANIFEST" "$INDEX" || status=$?
  mark exit "$status"
  if [[ "$status" == 0 || "$DRY_RUN" == 1 ]]; then
    exit 0
  fi
  if [[ "$status" == "$PREEMPTED" ]]; then
    echo "$PROG: preempted; checkpoint saved; requeueing task $TASK to resume" >&2
    run_cmd scontrol requeue "$TASK"
    exit "$status"
  fi
  # "ended" or "not ended"; anything else (an unreadable manifest: one error line) is not worth
  # a retry, which would read the same file.
  verdict="$("$PYTHON" -m launch.cluster ended "$MANIFEST" "$INDEX")" || true
  if [[ "$verdict" == "ended" ]]; then
    echo "$PROG: exit status $status, but every run of the task has ended (see launch.cluster status)" >&2
    exit "$status"
  fi
  if [[ "$verdict" != "not ended" ]]; then
    echo "$PROG: exit status $status, and the task cannot be read (above); not retrying" >&2
    exit "$status"
  fi
  if (( attempt >= RETRIES )); then
    echo "$PROG: exit status $status after $((attempt + 1)) attempt(s); giving up" >&2
    exit "$status"
  fi
  attempt=$((attempt + 1))
  echo "$PROG: exit status $status; retrying in ${RETRY_DELAY}s (retry $attempt of $RETRIES)" >&2
  sleep "$RETRY_DELAY"
done
