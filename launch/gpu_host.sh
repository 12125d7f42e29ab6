#!/usr/bin/env bash
# Single GPU host: set up a CUDA venv and run chessjax training in the background, resume-safe.
#
# Run it on the GPU machine itself, from any directory; it works in the repository that holds it.
# Resuming is the trainer's job (it restores the newest checkpoint in --workdir); this script makes
# re-running the same command safe: one run per log name at a time (flock), logs appended, optional
# retries after a crash, and an optional periodic `gcloud storage rsync` of the workdir to a bucket.
# Every external command goes through run_cmd(), so --dry-run (or DRY_RUN=1) prints instead.
set -euo pipefail

PROG="${0##*/}"
# shellcheck source=launch/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
SCRIPT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/${BASH_SOURCE[0]##*/}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
  cat <<EOF
Usage: $PROG [--dry-run] SUBCOMMAND [OPTIONS] [-- EXTRA...]

Subcommands:
  setup   Create the venv and pip install -e . 'jax[cuda12]' (idempotent).
            [--python python3.11] [--venv DIR (default: .venv in the repo)]
            [--wheels DIR: offline, from the wheels of \`make wheels EXTRAS=cuda12 DIR=...\`]
  run     Train in the background (nohup), log to runs/logs/NAME.log; re-run the same command to resume.
            --family F --size S --workdir DIR [--log-name NAME] [--foreground] [--venv DIR]
            [--retries N (after a crash; default 0) [--retry-delay SECONDS (default 30)]]
            [--sync-to gs://BUCKET/PATH [--sync-every SECONDS (default 900)]]
            EXTRA: chessjax.main flags, e.g. --config.data.train=data/lichess_2025-03
  tail    Show a log.               [--log-name NAME (default: newest)] [--lines N] [--no-follow]
  status  List runs and whether they are alive.
  stop    Stop a run (SIGTERM to its process group).   --log-name NAME

Options:
  --dry-run      print the commands instead of running them [DRY_RUN=1]
  --log-dir DIR  where logs and pid files live (run, tail, status, stop; default: runs/logs)

Environment: CUDA_VISIBLE_DEVICES picks the GPUs; the trainer sets its own defaults for
XLA_PYTHON_CLIENT_MEM_FRACTION, XLA_FLAGS and the compilation cache where unset
(chessjax.runtime), so a value you export wins.
EOF
}

DRY_RUN="${DRY_RUN:-0}"
PYTHON="python3.11"
VENV="$REPO_ROOT/.venv"
WHEELS=""
FAMILY=""
SIZE=""
WORKDIR=""
LOG_NAME=""
RETRIES=0
RETRY_DELAY=30
LOG_DIR="$REPO_ROOT/runs/logs"
FOREGROUND=0
SYNC_TO=""
SYNC_EVERY=900
LINES=100
FOLLOW=1
SUBCOMMAND=""
SEEN=()
ALWAYS_ALLOWED=()  # Options every subcommand takes (allow_only).
SHIFT=0
EXTRA=()
ORIG_ARGS=()

# Every gcloud invocation (only `gcloud storage rsync` here).
gcloud_storage() {
  if [[ "$DRY_RUN" != 1 ]] && ! command -v gcloud >/dev/null; then
    die "gcloud not found; install the Google Cloud CLI or drop --sync-to"
  fi
  run_cmd gcloud storage "$@"
}

# One option of parse_args (common.sh): sets its variable and SHIFT.
set_option() {
  case "$1" in
    --python) need_value "$@"; PYTHON="$2"; SHIFT=2 ;;
    --venv) need_value "$@"; VENV="$2"; SHIFT=2 ;;
    --wheels) need_value "$@"; WHEELS="$2"; SHIFT=2 ;;
    --family) need_value "$@"; FAMILY="$2"; SHIFT=2 ;;
    --size) need_value "$@"; SIZE="$2"; SHIFT=2 ;;
    --workdir) need_value "$@"; WORKDIR="$2"; SHIFT=2 ;;
    --log-name) need_value "$@"; LOG_NAME="$2"; SHIFT=2 ;;
    --retries) need_value "$@"; RETRIES="$2"; SHIFT=2 ;;
    --retry-delay) need_value "$@"; RETRY_DELAY="$2"; SHIFT=2 ;;
    --log-dir) need_value "$@"; LOG_DIR="$2"; SHIFT=2 ;;
    --foreground) FOREGROUND=1; SHIFT=1 ;;
    --sync-to) need_value "$@"; SYNC_TO="$2"; SHIFT=2 ;;
    --sync-every) need_value "$@"; SYNC_EVERY="$2"; SHIFT=2 ;;
    --lines) need_value "$@"; LINES="$2"; SHIFT=2 ;;
    --no-follow) FOLLOW=0; SHIFT=1 ;;
    *) die_usage "unknown option '$1'" ;;
  esac
}

cmd_setup() {
  allow_only --python --venv --wheels
  no_extra
  if [[ -n "$WHEELS" && "$DRY_RUN" != 1 && ! -d "$WHEELS" ]]; then
    die "no wheel folder $WHEELS; make one with: make wheels EXTRAS=cuda12 DIR=$WHEELS"
  fi
  if [[ ! -x "$VENV/bin/python" ]]; then
    if [[ "$DRY_RUN" != 1 ]] && ! command -v "$PYTHON" >/dev/null; then
      die "$PYTHON not found; install Python >= 3.11 or pass --python"
    fi
    run_cmd "$PYTHON" -m venv "$VENV"
  fi
  if [[ -n "$WHEELS" ]]; then
    # No network: chessjax's own wheel (not editable: that needs setuptools from an index) and
    # every dependency from the folder, the index disabled.
    run_cmd "$VENV/bin/python" -m pip install -q --no-index --find-links "$WHEELS" chessjax "jax[cuda12]"
  else
    run_cmd "$VENV/bin/python" -m pip install -q --upgrade pip
    # The CUDA 12 wheels bring their own CUDA and cuDNN; only an NVIDIA driver is needed on the host.
    run_cmd "$VENV/bin/python" -m pip install -q -e "$REPO_ROOT" "jax[cuda12]"
  fi
  run_cmd "$VENV/bin/python" -c "import jax; print(jax.__version__, jax.devices())"
}

# Mirrors the workdir to --sync-to; old checkpoints the trainer dropped are dropped there too.
sync_workdir() {
  gcloud_storage rsync --recursive --delete-unmatched-destination-objects "$WORKDIR" "$SYNC_TO"
}

cmd_run() {
  allow_only --family --size --workdir --log-name --retries --retry-delay --foreground --sync-to \
    --sync-every --log-dir --venv
  [[ -n "$FAMILY" ]] || die_usage "run needs --family (e.g. slice)"
  [[ -n "$SIZE" ]] || die_usage "run needs --size (e.g. d256)"
  [[ -n "$WORKDIR" ]] || die_usage "run needs --workdir (a local directory)"
  # chessjax writes its workdir with local file APIs (pathlib): a URL would become a local path.
  [[ "$WORKDIR" != *://* ]] || die_usage "--workdir must be a local path; copy it out with --sync-to"
  [[ "$RETRIES" =~ ^[0-9]+$ ]] || die_usage "--retries must be a number"
  [[ "$RETRY_DELAY" =~ ^[0-9]+$ ]] || die_usage "--retry-delay must be a number of seconds"
  [[ "$SYNC_EVERY" =~ ^[1-9][0-9]*$ ]] || die_usage "--sync-every must be a positive number of seconds"
  # The sync mirrors the workdir (deleting what the trainer deleted), so never a bucket's root.
  [[ -z "$SYNC_TO" || "$SYNC_TO" =~ ^gs://[^/]+/[^/]+ ]] ||
    die_usage "--sync-to must be a gs://BUCKET/PATH for this run alone"
  local name="${LOG_NAME:-$(basename "${WORKDIR%/}")}"
  check_log_name "$name"
  local logs="$LOG_DIR"
  if [[ "$DRY_RUN" != 1 ]]; then
    logs="$(mkdir -p "$LOG_DIR" && cd "$LOG_DIR" && pwd)"
  fi
  local log="$logs/$name.log" pidfile="$logs/$name.pid" lock="$logs/$name.lock"
  # The trainer's environment (memory fraction, XLA flags, compilation cache) is chessjax.runtime's.
  local -a train=("$VENV/bin/python" -m chessjax.main
    "--config=configs/cwm.py:family=$FAMILY,size=$SIZE" "--workdir=$WORKDIR"
    "${EXTRA[@]+"${EXTRA[@]}"}")

  if [[ "$DRY_RUN" == 1 ]]; then
    echo "# cd $(q "$REPO_ROOT"); log: $(q "$log"); retries: $RETRIES"
    run_cmd "${train[@]}"
    if [[ -n "$SYNC_TO" ]]; then
      sync_workdir
    fi
    return
  fi

  [[ -x "$VENV/bin/python" ]] || die "no venv at $VENV; run: $PROG setup"
  if [[ -n "$SYNC_TO" ]] && ! command -v gcloud >/dev/null; then
    die "--sync-to needs gcloud; install the Google Cloud CLI"
  fi
  if [[ "$FOREGROUND" == 0 ]]; then
    # Fail now, not in the background, when the same run is already going.
    if ! (exec 9>>"$lock" && flock -n 9); then
      die "run '$name' is already running (pid $(cat "$pidfile" 2>/dev/null || echo '?'))"
    fi
    # setsid: the run survives logout and `stop` can signal its whole process group.
    setsid nohup bash "$SCRIPT" --foreground --log-dir "$logs" "${ORIG_ARGS[@]}" \
      >>"$log" 2>&1 </dev/null &
    echo "started $name (pid $!); log: $log"
    echo "follow with: $PROG tail --log-name $name"
    return
  fi

  # The lock lives as long as this process: a crashed or killed run never blocks the next one.
  exec 9>>"$lock"
  flock -n 9 || die "run '$name' is already running (pid $(cat "$pidfile" 2>/dev/null || echo '?'))"
  echo $$ >"$pidfile.tmp" && mv -f "$pidfile.tmp" "$pidfile"  # Atomic: readers never see it empty.
  # `stop` signals the whole group; the trainer exits and the loop below must not retry it.
  local stopped=0
  trap 'stopped=1' TERM INT
  cd "$REPO_ROOT"
  local sync_pid=""
  if [[ -n "$SYNC_TO" ]]; then
    (while sleep "$SYNC_EVERY"; do
      sync_workdir || echo "$PROG: sync failed; will retry"
    done) &
    sync_pid=$!
  fi
  echo "$(date -u +%FT%TZ) $PROG: start $name: $(q "${train[@]}")"
  local attempt=0 rc=0
  while true; do
    rc=0
    "${train[@]}" || rc=$?
    if [[ "$rc" == 0 || "$stopped" == 1 || "$attempt" -ge "$RETRIES" ]]; then
      break
    fi
    attempt=$((attempt + 1))
    echo "$(date -u +%FT%TZ) $PROG: exit status $rc; resuming from the last checkpoint (retry $attempt/$RETRIES)"
    sleep "$RETRY_DELAY"
  done
  if [[ -n "$sync_pid" ]]; then
    kill "$sync_pid" 2>/dev/null || true
    sync_workdir || echo "$PROG: final sync failed"
  fi
  echo "$(date -u +%FT%TZ) $PROG: $name finished with exit status $rc"
  return "$rc"
}

cmd_tail() {
  allow_only --log-name --lines --no-follow --log-dir
  no_extra
  [[ "$LINES" =~ ^[0-9]+$ ]] || die_usage "--lines must be a number"
  local file
  if [[ -n "$LOG_NAME" ]]; then
    check_log_name "$LOG_NAME"
    file="$LOG_DIR/$LOG_NAME.log"
  else
    file="$(find "$LOG_DIR" -maxdepth 1 -name '*.log' -printf '%T@ %p\n' 2>/dev/null |
      sort -rn | head -n 1 | cut -d' ' -f2-)"
  fi
  [[ -n "$file" && ( -f "$file" || "$DRY_RUN" == 1 ) ]] || die "no log found under $LOG_DIR"
  if [[ "$FOLLOW" == 1 ]]; then
    run_cmd tail -n "$LINES" -F "$file"
  else
    run_cmd tail -n "$LINES" "$file"
  fi
}

cmd_status() {
  allow_only --log-dir
  no_extra
  local p state
  for p in "$LOG_DIR"/*.pid; do
    [[ -e "$p" ]] || continue
    state=stopped
    if kill -0 "$(cat "$p")" 2>/dev/null; then
      state=running
    fi
    echo "$(basename "$p" .pid) $state (pid $(cat "$p"))"
  done
}

cmd_stop() {
  allow_only --log-name --log-dir
  no_extra
  [[ -n "$LOG_NAME" ]] || die_usage "stop needs --log-name NAME"
  check_log_name "$LOG_NAME"
  local pidfile="$LOG_DIR/$LOG_NAME.pid" pid
  [[ -f "$pidfile" || "$DRY_RUN" == 1 ]] || die "no pid file $pidfile"
  pid="$(cat "$pidfile" 2>/dev/null || echo PID)"
  if [[ "$DRY_RUN" != 1 ]] && ! kill -0 "$pid" 2>/dev/null; then
    echo "$LOG_NAME is not running"
    return
  fi
  # The run was started with setsid, so its pid is also its process group: stop the trainer too.
  run_cmd kill -TERM -- "-$pid" 2>/dev/null || run_cmd kill -TERM "$pid"
  [[ "$DRY_RUN" != 1 ]] || return 0
  # Give the trainer time to exit cleanly (it may be finishing a checkpoint).
  local i
  for ((i = 0; i < 600; i++)); do
    kill -0 "$pid" 2>/dev/null || { echo "stopped $LOG_NAME (pid $pid)"; return; }
    sleep 0.1
  done
  die "$LOG_NAME (pid $pid) still running 60 s after SIGTERM"
}

main() {
  ORIG_ARGS=("$@")
  parse_args "$@"
  [[ "$DRY_RUN" == 0 || "$DRY_RUN" == 1 ]] || die_usage "DRY_RUN must be 0 or 1"
  case "$SUBCOMMAND" in
    setup) cmd_setup ;;
    run) cmd_run ;;
    tail) cmd_tail ;;
    status) cmd_status ;;
    stop) cmd_stop ;;
    "") die_usage "missing subcommand" ;;
    *) die_usage "unknown subcommand '$SUBCOMMAND'" ;;
  esac
}

main "$@"
