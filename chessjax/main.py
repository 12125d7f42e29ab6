r"""Training entry point.

    python -m chessjax.main --config=configs/cwm.py:family=slice,size=d128 --workdir=runs/x \
        --config.data.train=data/real [--config.optim.lr=3e-4 ...]

Multi-host: on a Cloud TPU VM slice or in a multi-task SLURM job `jax.distributed.initialize()`
finds its peers by itself; elsewhere set CHESSJAX_COORDINATOR (host:port),
CHESSJAX_NUM_PROCESSES and CHESSJAX_PROCESS_ID on every process (`chessjax.processes`: time
limits, and how one failing process stops the others). Rerunning the same command resumes from
the workdir. SIGTERM or SIGINT saves a checkpoint at the step every process agrees on and exits
with status 75 (`chessjax.preemption`); rerunning resumes there. A wrong config key or value is
reported as `error: ...` (exit status 1) before anything starts (`chessjax.entry`), and so is
a run the non-finite guard aborted (its summary says why; the checkpoints stay). Compiled
programs are cached per host (`chessjax.runtime`, `--config.train.compilation_cache=DIR`, ""
for none).
"""

from absl import app

from chessjax import entry, init_from, train
from chessjax.spec import TrainSpec

FLAGS = entry.FLAGS  # --config and --workdir (`chessjax.entry`).


def main(argv) -> None:
  config = FLAGS.config

  def check() -> TrainSpec:  # A wrong key or value stops here.
    if FLAGS.member:
      raise ValueError("--member trains a population: python -m chessjax.population")
    return TrainSpec.from_config(config)

  entry.run(
    argv,
    check=check,
    train=lambda: train.train_and_evaluate(config, FLAGS.workdir),
    # A source that does not fit (refused before step 1); a run the non-finite guard aborted.
    input_errors=(init_from.InitError, train.NonFiniteError),
  )


if __name__ == "__main__":
  app.run(main, flags_parser=entry.parse_flags)
