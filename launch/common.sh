#!/usr/bin/env bash
# Helpers shared by the launch scripts (sourced, not run): errors and usage exits, the command
# line of tpu_vm.sh and gpu_host.sh (parse_args, allow_only), option checks, shell quoting, and
# run_cmd(), the single place that runs or (dry run) prints a command. They read the caller's
# PROG, SUBCOMMAND, EXTRA, DRY_RUN and usage().
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

# Parses "SUBCOMMAND [--opt VALUE | --opt=VALUE | --switch]... [-- EXTRA...]": sets SUBCOMMAND,
# DRY_RUN (--dry-run), EXTRA (what follows --) and SEEN (every option given, for allow_only);
# each other option goes to the caller's set_option "$@" (the option first), which sets its
# variable and SHIFT, the words it took (1 for a switch, 2 with its value), or calls die_usage.
parse_args() {
  while [[ $# -gt 0 ]]; do
    local arg="$1"
    # Accept --opt=value as well as --opt value.
    if [[ "$arg" == --*=* ]]; then
      set -- "${arg%%=*}" "${arg#*=}" "${@:2}"
      arg="$1"
    fi
    case "$arg" in
      --) shift; EXTRA=("$@"); break ;;
      --dry-run) DRY_RUN=1; shift; continue ;;
      -h | --help) usage; exit 0 ;;
    esac
    if [[ "$arg" != -* ]]; then
      [[ -z "$SUBCOMMAND" ]] || die_usage "unexpected argument '$arg'"
      SUBCOMMAND="$arg"
      shift
      continue
    fi
    SEEN+=("$arg")
    SHIFT=0
    set_option "$@"
    shift "$SHIFT"
  done
}

# Fails unless every option given (SEEN) is one of "$@" or of the caller's ALWAYS_ALLOWED.
allow_only() {
  local seen ok allowed
  for seen in "${SEEN[@]+"${SEEN[@]}"}"; do
    ok=0
    for allowed in "${ALWAYS_ALLOWED[@]+"${ALWAYS_ALLOWED[@]}"}" "$@"; do
      [[ "$seen" == "$allowed" ]] && ok=1
    done
    [[ "$ok" == 1 ]] || die_usage "option $seen does not apply to '$SUBCOMMAND'"
  done
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
