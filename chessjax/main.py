r"""Training entry point.

    python -m chessjax.main --config=configs/cwm.py:family=slice,size=d128 --workdir=runs/x \
        --config.data.train=data/real [--config.optim.lr=3e-4 ...]

Multi-host: on a Cloud TPU VM slice or in a multi-task SLURM job `jax.distributed.initialize()`
finds its peers by itself; elsewhere set CHESSJAX_COORDINATOR (host:port),
CHESSJAX_NUM_PROCESSES and CHESSJAX_PROCESS_ID on every process (`chessjax.processes`: time
limits, and how one failing process stops the others). Rerunning the same command resumes from
the workdir. SIGTERM or SIGINT saves a checkpoint at the step every process agrees on and exits
with status 75 (`chessjax.preemption`); rerunning resumes there. Compiled programs are cached per
host (`chessjax.runtime`, `--config.train.compilation_cache=DIR`, "" for none).
"""

import logging
import sys

from absl import app, flags
from ml_collections import config_flags

from chessjax import init_from, memory, preemption, processes, runtime, train
from chessjax.spec import TrainSpec

FLAGS = flags.FLAGS
config_flags.DEFINE_config_file("config", None, "Config file (configs/cwm.py:family=...,size=...)")
flags.DEFINE_string("workdir", None, "Where checkpoints, logs and summaries go.")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
  logging.getLogger("absl").setLevel(logging.WARNING)
  config = FLAGS.config
  spec = TrainSpec.from_config(config)  # A wrong key or value stops here, before any set-up.
  # Before any compilation (and before backends start, which logs the probe it quiets); joins
  # the other processes of a multi-host run.
  runtime.setup(spec.train.compilation_cache)
  runtime.set_matmul_precision(spec.dtype)
  config.lock()
  preempted = None
  with processes.fail_together():
    try:
      train.train_and_evaluate(config, FLAGS.workdir)
    except preemption.Preempted as e:
      preempted = e  # Every process saved the same step; none has failed.
    except (init_from.InitError, memory.StepTooLarge) as e:
      raise SystemExit(f"error: {e}") from None
  if preempted is not None:
    print(preempted, file=sys.stderr, flush=True)
    sys.exit(preemption.EXIT_STATUS)


if __name__ == "__main__":
  app.run(main)
