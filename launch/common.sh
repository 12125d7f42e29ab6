#!/usr/bin/env bash
# Helpers shared by tpu_vm.sh and gpu_host.sh (sourced, not run): errors and usage exits, option
# checks, shell quoting, and run_cmd(), the single place that runs or (dry run) prints a command.
# They read the caller's PROG, SUBCOMMAND, EXTRA, DRY_RUN and usage().
set -euo pipefail

die_usage() {
  echo "$PROG: $*" >&2
  usage >&2
  exit 2
}

die() {
  echo "$PROG: error: $*" >&2
  exit 1
}

need_value() {
  [[ $# -ge 2 && -n "$2" && "$2" != --* ]] || die_usage "option $1 needs a value"
}

no_extra() {
  [[ ${#EXTRA[@]} -eq 0 ]] || die_usage "'$SUBCOMMAND' takes no arguments after --"
}

check_log_name() {
  [[ "$1" =~ ^[A-Za-z0-9._-]+$ ]] || die_usage "log name '$1' may only hold letters, digits, '.', '_', '-'"
}

# Quotes words like Python's shlex.quote, so printed commands read back as the same words.
q() {
  local out="" w
  for w in "$@"; do
    if [[ "$w" =~ ^[A-Za-z0-9_@%+=:,./-]+$ ]]; then
      out+=" $w"
    else
      out+=" '${w//\'/\'\\\'\'}'"
    fi
  done
  echo "${out# }"
}

# The single place that runs (or, in dry-run mode, prints) an external command.
run_cmd() {
  if [[ "$DRY_RUN" == 1 ]]; then
    q "$@"
  else
    "$@"
  fi
}
