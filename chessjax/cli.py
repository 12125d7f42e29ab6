"""The shared prologue of every command that evaluates a training workdir.

    ap = cli.workdir_parser("chessjax.world_model.evaluate", __doc__, datasets="required",
                            batch_size=64)
    ap.add_argument("--boards", type=int, default=5)
    args = ap.parse_args(argv)
    run = lambda: evaluate(args.workdir, cli.datasets(args), which=args.checkpoint,
                           **cli.other_flags(args, "data"))
    return cli.run_workdir_command(ap, args, run, report=print_summary, logs=True)

`workdir_parser` gives the flags every evaluator spells the same way: `--workdir`, `--checkpoint`
(best or latest; by default best when the workdir has WORKDIR/best, else latest:
`chessjax.workdir.restore`'s own choice), and as asked `--data NAME=PATH[:SPLIT]` and
`--batch-size`. `run_workdir_command` runs the evaluation as every one of them does: the run's
compilation cache (`runtime.setup_for_workdir`, which also joins the other processes of a
multi-host run), one process's error stopping them all (`processes.fail_together`), a bad input
reported as argparse's `error: ...` with exit status 2, and the report printed by process 0 only.
"""

import argparse
import logging
import sys

import jax

from chessjax import processes, runtime, workdir

WORKDIR_HELP = "training workdir (config.json, checkpoints/)"
CHECKPOINT_HELP = "default: best if the workdir has WORKDIR/best, else latest"
# The errors of a bad input (a missing workdir, a split or dataset that is not there): a one-line
# `error: ...`, not a traceback.
INPUT_ERRORS = (ValueError, FileNotFoundError, KeyError)


class _DeprecatedCheckpoint(argparse.Action):
  """An old spelling of `--checkpoint`: sets it and says so on stderr."""

  def __call__(self, parser, namespace, values, option_string=None):
    print(
      f"warning: {option_string} is deprecated; use --checkpoint {values}",
      file=sys.stderr,
      flush=True,
    )
    setattr(namespace, self.dest, values)


def workdir_parser(
  module: str,
  doc: str,
  *,
  workdir_help: str = WORKDIR_HELP,
  datasets: str | None = None,
  batch_size: int | None = None,
  batch_help: str | None = None,
  deprecated_checkpoint: tuple[str, ...] = (),
) -> argparse.ArgumentParser:
  """A parser for `python -m MODULE` (description: the first line of `doc`) with `--workdir` and
  `--checkpoint`, plus `--data NAME=PATH[:SPLIT]...` when `datasets` is "required" or "optional"
  (default None; `datasets(args)` reads it) and `--batch-size` when `batch_size` is given (its
  default). `deprecated_checkpoint`: old names of `--checkpoint` still read, with a warning."""
  ap = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.split("\n")[0])
  ap.add_argument("--workdir", required=True, help=workdir_help)
  ap.add_argument("--checkpoint", choices=workdir.CHECKPOINTS, default=None, help=CHECKPOINT_HELP)
  for name in deprecated_checkpoint:
    ap.add_argument(
      name,
      dest="checkpoint",
      choices=workdir.CHECKPOINTS,
      action=_DeprecatedCheckpoint,
      help="deprecated: --checkpoint",
    )
  if datasets is not None:
    if datasets not in ("required", "optional"):
      raise ValueError(f"datasets must be 'required' or 'optional', got {datasets!r}")
    required = datasets == "required"
    ap.add_argument(
      "--data",
      nargs="+" if required else "*",
      required=required,
      default=None,
      metavar="NAME=PATH[:SPLIT]",
      help="datasets to score" if required else "datasets to score (default: the run's)",
    )
  if batch_size is not None:
    ap.add_argument("--batch-size", type=int, default=batch_size, help=batch_help)
  return ap


def datasets(args) -> dict | None:
  """`--data` as {name: (path, split or None)} (`workdir.parse_datasets`), None when not given."""
  return workdir.parse_datasets(args.data) if args.data else None


def other_flags(args, *skip: str) -> dict:
  """The parsed flags other than `--workdir`, `--checkpoint` and `skip`, by name: for an
  evaluation function whose parameters they are."""
  return {k: v for k, v in vars(args).items() if k not in ("workdir", "checkpoint", *skip)}


def run_workdir_command(ap, args, evaluate, *, report=None, logs: bool = False) -> int:
  """`evaluate()` for the workdir `args.workdir`, then `report(result)` on process 0; returns the
  exit status 0. A bad input (`INPUT_ERRORS`) exits through `ap.error`. `logs`: INFO logging to
  stderr with times (absl's only from warnings up)."""
  runtime.setup_for_workdir(args.workdir)  # Joins the other processes of a multi-host run.
  if logs:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("absl").setLevel(logging.WARNING)
  try:
    with processes.fail_together():  # Several processes: one's error stops them all.
      result = evaluate()
  except INPUT_ERRORS as e:
    ap.error(str(e))
  if report is not None and jax.process_index() == 0:
    report(result)
  return 0
