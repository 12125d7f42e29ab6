#!/usr/bin/env bash
# Cloud TPU VM lifecycle for chessjax: create, setup, sync-data, mount-bucket, run, tail, status,
# stop, ssh, delete.
#
# Every local gcloud command is built by gcloud_tpu() below and goes through run_cmd(), so
# --dry-run (or DRY_RUN=1) prints each command, shell-quoted on one line, instead of running it.
# Commands on the workers are one-line bash scripts passed with --command (sync-data's script calls
# the workers' own gcloud). Nothing here names a project, zone, bucket or credentials: they come
# from flags or the environment (or gcloud's own default project). Walkthrough: launch/README.md.
#
# Preemption (spot VMs, `stop`): SIGTERM to the trainer on any worker makes every worker save a
# checkpoint at one agreed step and exit with status 75 (chessjax.preemption); running the same
# `run` again (on a recreated VM after a spot preemption: the workdir must be a gs:// bucket)
# resumes from it. A notice too short for the step and the save leaves the last periodic one.
set -euo pipefail

PROG="${0##*/}"
# shellcheck source=launch/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
  cat <<EOF
Usage: $PROG [--dry-run] SUBCOMMAND [OPTIONS] [-- EXTRA...]

Subcommands:
  create   Create the TPU VM (or a queued resource that becomes one).
             --accelerator-type T (e.g. v4-32) [--version V] [--spot]
             [--queued [--queued-id ID] [--valid-until-duration D]]   EXTRA: more gcloud flags
  setup    On every worker: fetch the code, create the venv, pip install -e . 'jax[tpu]' (idempotent).
             --repo URL [--ref REF] | --copy (ship this working tree)
             [--python python3.11] [--extra-pip "PKG ..."]
  sync-data  On every worker: gcloud storage rsync a prepared dataset to local disk.
             --from gs://BUCKET/PATH --to DIR (relative to --remote-dir, or absolute)
  mount-bucket  On every worker: mount a bucket with Cloud Storage FUSE (gcsfuse), for a shared
             workdir as a path.   --bucket NAME [--at DIR (default runs/gcs)]
  run      Start training on every worker (nohup, background, log to runs/logs/NAME.log).
             --family F --size S --workdir DIR|gs://BUCKET/PATH [--log-name NAME]
             EXTRA: chessjax.main flags. A gs:// workdir is written straight to the bucket (needs
             gcsfs: setup --extra-pip gcsfs). DIR is relative to --remote-dir; on a multi-host
             slice it must be shared storage (e.g. under the mount-bucket directory).
  tail     Show a log.             [--worker N (default 0)] [--log-name NAME] [--lines N] [--no-follow]
  status   Describe the TPU VM.    [--queued [--queued-id ID]] [--runs]
  stop     Stop a run everywhere.  --log-name NAME | --all
  ssh      Run EXTRA in the repo directory with the venv active.  [--worker N|all (default 0)]
  delete   Delete the TPU VM.      [--queued [--queued-id ID]] [--yes]

Options for every subcommand (environment variable in brackets):
  --name NAME        TPU VM name [TPU_NAME] (required)
  --zone ZONE        zone, e.g. one where you have TPU quota [TPU_ZONE] (required)
  --project PROJECT  [TPU_PROJECT]; default: gcloud's configured project
  --remote-dir DIR   repository directory on the workers, relative to \$HOME [TPU_REMOTE_DIR]
                     (default: chessjax)
  --dry-run          print the gcloud commands instead of running them [DRY_RUN=1]

Examples:
  $PROG create --name cwm --zone ZONE --accelerator-type v4-32 --spot --queued
  $PROG setup --name cwm --zone ZONE --repo https://github.com/OWNER/chessjax.git
  $PROG run --name cwm --zone ZONE --family slice --size d512 --workdir gs://BUCKET/runs/slice_d512 \\
      -- --config.data.train=data/lichess_2025-03
EOF
}

DRY_RUN="${DRY_RUN:-0}"
NAME="${TPU_NAME:-}"
ZONE="${TPU_ZONE:-}"
PROJECT="${TPU_PROJECT:-}"
REMOTE_DIR="${TPU_REMOTE_DIR:-chessjax}"
ACCELERATOR_TYPE="${TPU_ACCELERATOR_TYPE:-}"
VERSION=""
SPOT=0
QUEUED=0
QUEUED_ID=""
VALID_UNTIL=""
REPO_URL=""
REF="HEAD"
COPY=0
PYTHON="python3.11"
EXTRA_PIP=""
BUCKET=""
MOUNT_AT="runs/gcs"
DATA_FROM=""
DATA_TO=""
FAMILY=""
SIZE=""
WORKDIR=""
LOG_NAME=""
WORKER=""
LINES=100
FOLLOW=1
RUNS=0
ALL=0
YES=0
SUBCOMMAND=""
SEEN=()
ALWAYS_ALLOWED=(--name --zone --project --remote-dir)  # Options every subcommand takes (allow_only).
SHIFT=0
EXTRA=()

# Every gcloud invocation: `gcloud compute tpus ARGS --zone=Z [--project=P]`.
gcloud_tpu() {
  if [[ "$DRY_RUN" != 1 ]] && ! command -v gcloud >/dev/null; then
    die "gcloud not found; install the Google Cloud CLI (or pass --dry-run to print the commands)"
  fi
  local -a cmd=(gcloud compute tpus "$@" "--zone=$ZONE")
  if [[ -n "$PROJECT" ]]; then
    cmd+=("--project=$PROJECT")
  fi
  run_cmd "${cmd[@]}"
}

# Runs a one-line bash script on the given workers ("all" or an index).
ssh_workers() {
  local worker="$1" script="$2"
  gcloud_tpu tpu-vm ssh "$NAME" "--worker=$worker" "--command=$script"
}

# One option of parse_args (common.sh): sets its variable and SHIFT.
set_option() {
  case "$1" in
    --name) need_value "$@"; NAME="$2"; SHIFT=2 ;;
    --zone) need_value "$@"; ZONE="$2"; SHIFT=2 ;;
    --project) need_value "$@"; PROJECT="$2"; SHIFT=2 ;;
    --remote-dir) need_value "$@"; REMOTE_DIR="$2"; SHIFT=2 ;;
    --accelerator-type) need_value "$@"; ACCELERATOR_TYPE="$2"; SHIFT=2 ;;
    --version) need_value "$@"; VERSION="$2"; SHIFT=2 ;;
    --spot) SPOT=1; SHIFT=1 ;;
    --queued) QUEUED=1; SHIFT=1 ;;
    --queued-id) need_value "$@"; QUEUED_ID="$2"; SHIFT=2 ;;
    --valid-until-duration) need_value "$@"; VALID_UNTIL="$2"; SHIFT=2 ;;
    --repo) need_value "$@"; REPO_URL="$2"; SHIFT=2 ;;
    --ref) need_value "$@"; REF="$2"; SHIFT=2 ;;
    --copy) COPY=1; SHIFT=1 ;;
    --python) need_value "$@"; PYTHON="$2"; SHIFT=2 ;;
    # May be empty (install nothing extra), so no need_value.
    --extra-pip) [[ $# -ge 2 ]] || die_usage "option $1 needs a value"; EXTRA_PIP="$2"; SHIFT=2 ;;
    --from) need_value "$@"; DATA_FROM="$2"; SHIFT=2 ;;
    --bucket) need_value "$@"; BUCKET="$2"; SHIFT=2 ;;
    --at) need_value "$@"; MOUNT_AT="$2"; SHIFT=2 ;;
    --to) need_value "$@"; DATA_TO="$2"; SHIFT=2 ;;
    --family) need_value "$@"; FAMILY="$2"; SHIFT=2 ;;
    --size) need_value "$@"; SIZE="$2"; SHIFT=2 ;;
    --workdir) need_value "$@"; WORKDIR="$2"; SHIFT=2 ;;
    --log-name) need_value "$@"; LOG_NAME="$2"; SHIFT=2 ;;
    --worker) need_value "$@"; WORKER="$2"; SHIFT=2 ;;
    --lines) need_value "$@"; LINES="$2"; SHIFT=2 ;;
    --no-follow) FOLLOW=0; SHIFT=1 ;;
    --runs) RUNS=1; SHIFT=1 ;;
    --all) ALL=1; SHIFT=1 ;;
    --yes) YES=1; SHIFT=1 ;;
    *) die_usage "unknown option '$1'" ;;
  esac
}

require_common() {
  [[ -n "$NAME" ]] || die_usage "missing --name (or TPU_NAME)"
  [[ -n "$ZONE" ]] || die_usage "missing --zone (or TPU_ZONE); pick a zone where your project has TPU quota"
  [[ "$NAME" =~ ^[a-z]([-a-z0-9]*[a-z0-9])?$ ]] ||
    die_usage "--name '$NAME' must be lowercase letters, digits and hyphens, starting with a letter"
}

# Runtime image per TPU generation (cloud.google.com/tpu/docs/runtimes); --version overrides.
default_version() {
  case "$1" in
    v2-* | v3-* | v4-*) echo "tpu-ubuntu2204-base" ;;
    v5litepod-* | v5e-*) echo "v2-alpha-tpuv5-lite" ;;
    v5p-*) echo "v2-alpha-tpuv5" ;;
    v6e-*) echo "v2-alpha-tpuv6e" ;;
    *) die_usage "no default runtime version for accelerator type '$1'; pass --version" ;;
  esac
}

cmd_create() {
  allow_only --accelerator-type --version --spot --queued --queued-id --valid-until-duration
  require_common
  [[ -n "$ACCELERATOR_TYPE" ]] || die_usage "missing --accelerator-type (e.g. v4-32)"
  local version="$VERSION"
  if [[ -z "$version" ]]; then
    version="$(default_version "$ACCELERATOR_TYPE")"
  fi
  local -a flags=("--accelerator-type=$ACCELERATOR_TYPE")
  if [[ "$SPOT" == 1 ]]; then
    flags+=(--spot)
  fi
  if [[ "$QUEUED" == 1 ]]; then
    if [[ -n "$VALID_UNTIL" ]]; then
      flags+=("--valid-until-duration=$VALID_UNTIL")
    fi
    gcloud_tpu queued-resources create "${QUEUED_ID:-$NAME-qr}" "--node-id=$NAME" \
      "--runtime-version=$version" "${flags[@]}" "${EXTRA[@]+"${EXTRA[@]}"}"
    echo "Queued; wait for state ACTIVE: $PROG status --name $NAME --zone $ZONE --queued" >&2
  else
    [[ -z "$VALID_UNTIL" && -z "$QUEUED_ID" ]] || die_usage "--queued-id and --valid-until-duration need --queued"
    gcloud_tpu tpu-vm create "$NAME" "--version=$version" "${flags[@]}" "${EXTRA[@]+"${EXTRA[@]}"}"
  fi
}

cmd_setup() {
  allow_only --repo --ref --copy --python --extra-pip
  no_extra
  require_common
  [[ -n "$REPO_URL" || "$COPY" == 1 ]] || die_usage "setup needs --repo URL or --copy"
  [[ -z "$REPO_URL" || "$COPY" == 0 ]] || die_usage "--repo and --copy are exclusive"
  local dir
  dir="$(q "$REMOTE_DIR")"
  local s="set -euo pipefail"
  # TPU images ship Ubuntu 22.04, whose default python3 (3.10) is older than chessjax needs.
  s+="; if ! command -v $(q "$PYTHON") >/dev/null; then sudo apt-get update -qq"
  s+=" && sudo DEBIAN_FRONTEND=noninteractive apt-get install -yqq $(q "$PYTHON") $(q "$PYTHON-venv"); fi"
  if [[ "$COPY" == 1 ]]; then
    local tarball="chessjax-src.tar.gz"
    local tmp="${TMPDIR:-/tmp}/$tarball"
    # Tracked and untracked-but-not-ignored files: the working tree as it is, uncommitted edits too.
    if [[ "$DRY_RUN" == 1 ]]; then
      echo "# git -C $(q "$REPO_ROOT") ls-files -z -co --exclude-standard | tar --null -T - -czf $(q "$tmp")"
    else
      git -C "$REPO_ROOT" ls-files -z -co --exclude-standard |
        tar -C "$REPO_ROOT" --null --ignore-failed-read -T - -czf "$tmp"
    fi
    gcloud_tpu tpu-vm scp "$tmp" "$NAME:$tarball" --worker=all
    s+="; mkdir -p $dir && tar -xzf $tarball -C $dir && rm -f $tarball"
  else
    # Fetching REF and checking out FETCH_HEAD works for a branch, a tag or a commit, and again on
    # every later setup (idempotent).
    s+="; if [ ! -d $dir/.git ]; then git clone -q $(q "$REPO_URL") $dir; fi"
    s+="; git -C $dir fetch -q origin $(q "$REF") && git -C $dir checkout -q --detach FETCH_HEAD"
  fi
  s+="; cd $dir; [ -x .venv/bin/python ] || $(q "$PYTHON") -m venv .venv"
  s+="; .venv/bin/pip install -q --upgrade pip"
  # shellcheck disable=SC2086  # EXTRA_PIP is a space-separated package list on purpose.
  s+="; .venv/bin/pip install -q -e . 'jax[tpu]'$( [[ -z "$EXTRA_PIP" ]] || printf ' %q' $EXTRA_PIP)"
  s+="; echo \"\$(hostname): \$(.venv/bin/python -c 'import jax; print(\"jax\", jax.__version__)')\""
  ssh_workers all "$s"
}

cmd_sync_data() {
  allow_only --from --to
  no_extra
  require_common
  [[ "$DATA_FROM" == gs://* ]] || die_usage "sync-data needs --from gs://BUCKET/PATH"
  [[ -n "$DATA_TO" ]] || die_usage "sync-data needs --to DIR"
  # ArrayRecord shards are read with local file APIs, so every worker keeps its own copy.
  ssh_workers all "set -euo pipefail; cd $(q "$REMOTE_DIR"); mkdir -p $(q "$DATA_TO");\
 gcloud storage rsync --recursive $(q "$DATA_FROM") $(q "$DATA_TO")"
}

cmd_mount_bucket() {
  allow_only --bucket --at
  no_extra
  require_common
  local bucket="${BUCKET#gs://}"
  bucket="${bucket%/}"
  [[ "$bucket" =~ ^[a-z0-9][-a-z0-9_.]*[a-z0-9]$ ]] || die_usage "mount-bucket needs --bucket NAME"
  local at
  at="$(q "$MOUNT_AT")"
  # Orbax commits a checkpoint by renaming its temporary directory; gcsfuse renames directories
  # only below --rename-dir-limit descendants.
  ssh_workers all "set -euo pipefail; cd $(q "$REMOTE_DIR"); mkdir -p $at; if mountpoint -q $at;\
 then echo \"\$(hostname): $at already mounted\"; else command -v gcsfuse >/dev/null ||\
 { echo \"\$(hostname): gcsfuse missing; see\
 https://cloud.google.com/storage/docs/cloud-storage-fuse/install\" >&2; exit 1; };\
 gcsfuse --implicit-dirs --rename-dir-limit=200000 $(q "$bucket") $at; fi"
}

cmd_run() {
  allow_only --family --size --workdir --log-name
  require_common
  [[ -n "$FAMILY" ]] || die_usage "run needs --family (e.g. slice)"
  [[ -n "$SIZE" ]] || die_usage "run needs --size (e.g. d512)"
  [[ -n "$WORKDIR" ]] || die_usage "run needs --workdir DIR"
  # A gs:// workdir goes to chessjax as it is (etils.epath + gcsfs; orbax writes the bucket).
  [[ "$WORKDIR" != *://* || "$WORKDIR" =~ ^gs://[a-z0-9][-a-z0-9_.]*[a-z0-9]/[^/] ]] ||
    die_usage "--workdir must be a path or gs://BUCKET/PATH, not '$WORKDIR'"
  local name="${LOG_NAME:-$(basename "${WORKDIR%/}")}"
  check_log_name "$name"
  local -a train=(.venv/bin/python -m chessjax.main
    "--config=configs/cwm.py:family=$FAMILY,size=$SIZE" "--workdir=$WORKDIR"
    "${EXTRA[@]+"${EXTRA[@]}"}")
  local log="runs/logs/$name.log" pid="runs/logs/$name.pid"
  local s
  s="set -euo pipefail; cd $(q "$REMOTE_DIR"); mkdir -p runs/logs"
  if [[ "$WORKDIR" == gs://* ]]; then  # etils.epath reads and writes gs:// through gcsfs.
    s+="; .venv/bin/python -c 'import gcsfs' 2>/dev/null ||"
    s+=" { echo \"\$(hostname): a gs:// workdir needs gcsfs: setup --extra-pip gcsfs\" >&2; exit 1; }"
  fi
  s+="; if [ -f $pid ] && kill -0 \"\$(cat $pid)\" 2>/dev/null;"
  s+=" then echo \"\$(hostname): $name is already running (pid \$(cat $pid))\" >&2; exit 1; fi"
  # The trainer's environment (XLA flags, compilation cache) is chessjax.runtime's, as on a GPU.
  # setsid: the run survives the ssh session and `stop` can signal its whole process group.
  # Appending (>>) keeps the log of earlier attempts when a run is resumed.
  s+="; setsid nohup $(q "${train[@]}") >> $log 2>&1 < /dev/null & echo \$! > $pid"
  s+="; echo \"\$(hostname): started $name, pid \$(cat $pid), log \$PWD/$log\""
  ssh_workers all "$s"
}

cmd_tail() {
  allow_only --worker --log-name --lines --no-follow
  no_extra
  require_common
  [[ "$LINES" =~ ^[0-9]+$ ]] || die_usage "--lines must be a number"
  local worker="${WORKER:-0}"
  [[ "$worker" =~ ^[0-9]+$ ]] || die_usage "tail needs one worker index, not '$worker'"
  local file
  if [[ -n "$LOG_NAME" ]]; then
    check_log_name "$LOG_NAME"
    file="runs/logs/$LOG_NAME.log"
  else
    file="\$(ls -t runs/logs/*.log | head -n 1)"
  fi
  local follow=""
  if [[ "$FOLLOW" == 1 ]]; then
    follow=" -F"
  fi
  ssh_workers "$worker" "cd $(q "$REMOTE_DIR") && f=$file && echo \"==> \$f\" && tail -n $LINES$follow \"\$f\""
}

cmd_status() {
  allow_only --queued --queued-id --runs
  no_extra
  require_common
  if [[ "$QUEUED" == 1 ]]; then
    gcloud_tpu queued-resources describe "${QUEUED_ID:-$NAME-qr}"
  fi
  gcloud_tpu tpu-vm describe "$NAME"
  if [[ "$RUNS" == 1 ]]; then
    ssh_workers all "cd $(q "$REMOTE_DIR") && for p in runs/logs/*.pid; do [ -e \"\$p\" ] || continue;\
 if kill -0 \"\$(cat \"\$p\")\" 2>/dev/null; then st=running; else st=stopped; fi;\
 echo \"\$(hostname) \$(basename \"\$p\" .pid) \$st\"; done"
  fi
}

cmd_stop() {
  allow_only --log-name --all
  no_extra
  require_common
  local glob
  if [[ "$ALL" == 1 ]]; then
    glob="runs/logs/*.pid"
  elif [[ -n "$LOG_NAME" ]]; then
    check_log_name "$LOG_NAME"
    glob="runs/logs/$LOG_NAME.pid"
  else
    die_usage "stop needs --log-name NAME or --all"
  fi
  # Signals the process group recorded at start (setsid), so helper processes stop too. The
  # trainer saves a checkpoint at one step agreed by every worker before it exits (status 75).
  ssh_workers all "cd $(q "$REMOTE_DIR") && for p in $glob; do [ -e \"\$p\" ] || continue;\
 id=\$(cat \"\$p\"); if kill -0 \"\$id\" 2>/dev/null; then kill -TERM -- -\"\$id\" 2>/dev/null || kill -TERM \"\$id\";\
 echo \"\$(hostname): stopped \$p (pid \$id)\"; fi; done"
}

cmd_ssh() {
  allow_only --worker
  require_common
  [[ ${#EXTRA[@]} -gt 0 ]] || die_usage "ssh needs a command after --"
  local worker="${WORKER:-0}"
  [[ "$worker" == all || "$worker" =~ ^[0-9]+$ ]] || die_usage "--worker must be an index or 'all'"
  ssh_workers "$worker" "cd $(q "$REMOTE_DIR") && source .venv/bin/activate && $(q "${EXTRA[@]}")"
}

cmd_delete() {
  allow_only --queued --queued-id --yes
  no_extra
  require_common
  local -a quiet=()
  if [[ "$YES" == 1 ]]; then
    quiet=(--quiet)
  fi
  if [[ "$QUEUED" == 1 ]]; then
    # --force also deletes the TPU VM the queued resource created.
    gcloud_tpu queued-resources delete "${QUEUED_ID:-$NAME-qr}" --force "${quiet[@]+"${quiet[@]}"}"
  else
    gcloud_tpu tpu-vm delete "$NAME" "${quiet[@]+"${quiet[@]}"}"
  fi
}

main() {
  parse_args "$@"
  [[ "$DRY_RUN" == 0 || "$DRY_RUN" == 1 ]] || die_usage "DRY_RUN must be 0 or 1"
  case "$SUBCOMMAND" in
    create) cmd_create ;;
    setup) cmd_setup ;;
    sync-data) cmd_sync_data ;;
    mount-bucket) cmd_mount_bucket ;;
    run) cmd_run ;;
    tail) cmd_tail ;;
    status) cmd_status ;;
    stop) cmd_stop ;;
    ssh) cmd_ssh ;;
    delete) cmd_delete ;;
    "") die_usage "missing subcommand" ;;
    *) die_usage "unknown subcommand '$SUBCOMMAND'" ;;
  esac
}

main "$@"
