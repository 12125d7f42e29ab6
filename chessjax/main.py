r"""Training entry point.

    python -m chessjax.main --config=configs/cwm.py:family=slice,size=d128 --workdir=runs/x \
        --config.data.train=data/real [--config.optim.lr=3e-4 ...]

Multi-host: on a Cloud TPU VM slice or in a multi-task SLURM job `jax.distributed.initialize()`
finds its peers by itself; elsewhere set CHESSJAX_COORDINATOR (host:port),
CHESSJAX_NUM_PROCESSES and CHESSJAX_PROCESS_ID on every process. Rerunning the same command
resumes from the workdir. Compiled programs are cached per host (`chessjax.runtime`,
`--config.train.compilation_cache=DIR`, "" for none).
"""

import logging
import os

import jax
from absl import app, flags
from ml_collections import config_flags

from chessjax import memory, runtime, train

FLAGS = flags.FLAGS
config_flags.DEFINE_config_file("config", None, "Config file (configs/cwm.py:family=...,size=...)")
flags.DEFINE_string("workdir", None, "Where checkpoints, logs and summaries go.")
flags.mark_flags_as_required(["config", "workdir"])


def initialize_distributed() -> None:
  """Joins the other processes of a multi-host run, if this is one.

  Must run before anything touches a JAX backend. Explicit CHESSJAX_* settings win; otherwise a
  multi-worker Cloud TPU slice or a multi-task SLURM job is detected by JAX itself.
  """
  if "CHESSJAX_COORDINATOR" in os.environ:
    # Cross-process collectives on CPU devices need gloo; GPU and TPU runs ignore this setting.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
      coordinator_address=os.environ["CHESSJAX_COORDINATOR"],
      num_processes=int(os.environ["CHESSJAX_NUM_PROCESSES"]),
      process_id=int(os.environ["CHESSJAX_PROCESS_ID"]),
    )
  elif (
    os.environ.get("TPU_WORKER_HOSTNAMES", "").count(",") > 0
    or int(os.environ.get("SLURM_NTASKS", "1")) > 1
  ):
    jax.distributed.initialize()


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
  logging.getLogger("absl").setLevel(logging.WARNING)
  config = FLAGS.config
  # Before any compilation (and before backends start, which logs the probe it quiets).
  runtime.setup(config.train.get("compilation_cache", runtime.AUTO))
  runtime.set_matmul_precision(config.model.get("dtype", "float32"))
  initialize_distributed()
  config.lock()
  try:
    train.train_and_evaluate(config, FLAGS.workdir)
  except memory.StepTooLarge as e:
    raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
  app.run(main)
