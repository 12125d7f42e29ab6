"""The shared prologue of the training commands (`chessjax.main`, `chessjax.population`).

    def main(argv):
      entry.run(argv, check=lambda: TrainSpec.from_config(entry.FLAGS.config),
                train=lambda: train.train_and_evaluate(entry.FLAGS.config, entry.FLAGS.workdir))

The flags of both commands, `--config`, `--workdir` and the population's `--member`, are defined
here and nowhere else, once per process (absl refuses a flag defined twice, so both commands can
be imported together, and importing a command's functions defines no flag). `run` is what
each does around its training: INFO logging with times (absl's only from warnings up); the
config checked before any set-up (`check`, a wrong key or value reported as `error: ...` with
exit status 1); the compilation cache and matmul precision (`chessjax.runtime`, which also joins
the other processes of a multi-host run); the config locked; then the training, one process's
error stopping them all (`chessjax.processes.fail_together`). A preemption notice, once every
process saved, exits with `preemption.EXIT_STATUS`; a step too large for the memory
(`memory.StepTooLarge`) and the command's own named errors exit with `error: ...` (one line,
status 1): both commands' bad input (`init_from.InitError`; the population's `MemberError` and
`ResumeError`, `chessjax.members`) and a run the non-finite guard aborted (`chessjax.main`:
`train.NonFiniteError`; the population reports its aborted members by name). Any other error is
a traceback: a fault, not an input.
"""

import logging
import sys
from collections.abc import Callable
from typing import Any

from absl import app, flags
from ml_collections import config_flags

from chessjax import memory, preemption, processes, runtime
from chessjax.spec import TrainSpec

FLAGS = flags.FLAGS
config_flags.DEFINE_config_file("config", None, "Config file (configs/cwm.py:family=...,size=...)")
flags.DEFINE_string(
  "workdir",
  None,
  "Where checkpoints, logs and summaries go (a population's root: each member in ROOT/NAME).",
)
flags.DEFINE_multi_string(
  "member",
  [],
  "chessjax.population: NAME[:KEY=VALUE,...] (repeat), one member and its keys.",
)
flags.mark_flags_as_required(["config", "workdir"])


def parse_flags(argv: list[str]) -> list[str]:
  """absl's flag parsing (`app.run(main, flags_parser=entry.parse_flags)`), where an override
  naming no field of the config (`--config.optim.lrr=1`) is one line, `error: ...` with exit
  status 1, not ml_collections' traceback; other flag errors print absl's usage line as before."""
  try:
    return app.parse_flags_with_usage(argv)
  except (AttributeError, KeyError) as e:
    said = e  # ml_collections wraps the KeyError that holds its message in an AttributeError.
    while isinstance(said, BaseException) and said.args:
      said = said.args[0]
    said = str(said).replace("\n", " ")
    overrides = " ".join(a for a in argv[1:] if a.startswith("--config."))
    raise SystemExit(
      f"error: a --config override names no field of the config ({overrides}): {said}"
    ) from None


def run(
  argv,
  *,
  check: Callable[[], TrainSpec],
  train: Callable[[], Any],
  input_errors: tuple[type[Exception], ...] = (),
) -> Any:
  """`train()`'s result, after the prologue (module docstring). `check()` reads every config
  the command will train and returns the spec whose compilation cache and precision the process
  takes; a ValueError there stops the command before any set-up. `input_errors`: the errors of
  `train()` the command names (a one-line `error: ...`, not a traceback; module docstring)."""
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
  logging.getLogger("absl").setLevel(logging.WARNING)
  try:
    spec = check()
  except ValueError as e:
    raise SystemExit(f"error: {e}") from None
  # Before any compilation (and before backends start, which logs the probe it quiets); joins
  # the other processes of a multi-host run.
  runtime.setup(spec.train.compilation_cache)
  runtime.set_matmul_precision(spec.dtype)
  FLAGS.config.lock()
  preempted = None
  with processes.fail_together():
    try:
      result = train()
    except preemption.Preempted as e:
      preempted = e  # Every process saved the same step; none has failed.
    except (memory.StepTooLarge, *input_errors) as e:
      raise SystemExit(f"error: {e}") from None
  if preempted is not None:
    print(preempted, file=sys.stderr, flush=True)
    sys.exit(preemption.EXIT_STATUS)
  return result
