r"""Populations: many runs of one model in one compiled program, so that small models fill an
accelerator.

    python -m chessjax.population --config=configs/cwm.py:family=slice,size=d128 \
        --workdir=runs/pop --config.data.train=data/real \
        --member lr3e-4:optim.lr=3e-4 --member lr1e-3:optim.lr=1e-3,optim.warmup_steps=500 \
        --member seed1:seed=1

Every member is a run of its own (`ROOT/NAME` is an ordinary workdir: its full `config.json`,
checkpoints, `best`, summary and TensorBoard, read by every evaluator, `launch.sweep --collect`
and the reports as a run trained alone, and continued alone by `chessjax.main`), but one train
step trains them all: `jax.vmap` over the members' parameters, optimizer state, dropout RNG and
the non-finite guard's counters, the batch sharded over the devices as for one run and the
members' states replicated. The `--config` overrides apply to every member; each `--member`
adds its own.

* Members may differ in `MEMBER_KEYS` (`chessjax.members`): the seed (initialisation, dropout
  and data order), the optimizer's numbers (learning rate, warmup, betas, epsilon, weight decay,
  the schedule's floor, clipping) and the run each starts from (`init.workdir`, `init.checkpoint`,
  `init.parts`: `chessjax.init_from`; parameters of the same shapes, so the program is the
  same). The numbers in which members differ are arrays of the population's state that the step
  reads (those they share stay constants of the program, as in a run alone).
  A key that changes the shapes or the program (family, size, model fields, batch size, lengths,
  task, schedule kind, micro-batches, remat) or the loop they share (data, cadence) is refused
  before anything starts, with a message naming it.
* A member is the run alone: after N steps its parameters equal those of `chessjax.main` with
  the same config within float rounding (its numbers are float32 arrays, not Python constants).
  Members with different seeds read different batches; a step pads them to the longest of its
  batches (the task's own padding, masked out). Where the model draws dropout, a padded draw is
  not the run alone's draw: such a member differs from its run alone as two dropout draws do
  (docs/world_model.md measures how much).
* Health per member: the non-finite guard stops a diverging member (its state frozen where it
  failed, its summary aborted, with why); early stopping per member; the others go on unchanged.
  The population ends when every member has; the command exits with status 1 when a member was
  aborted, after all the others finished.
* Resume: rerunning the command resumes every member, bitwise equal to a population never
  stopped; finished members stay as they ended. Preemption as for one run (`chessjax.train`).

The population itself (its stacked state and step, its training) is `chessjax.populations`.
"""

from absl import app

from chessjax import entry
from chessjax.init_from import InitError
from chessjax.members import MemberError, ResumeError, check_members, member_config, parse_member
from chessjax.populations import Population, train_population  # noqa: F401 - the command's API
from chessjax.spec import TrainSpec

FLAGS = entry.FLAGS  # --config, --workdir and --member (`chessjax.entry`).


def main(argv) -> None:
  config = FLAGS.config

  def check() -> TrainSpec:  # A wrong key or value, or a member's, stops here.
    spec = TrainSpec.from_config(config)
    members = [(n, member_config(config, n, o)) for n, o in map(parse_member, FLAGS.member)]
    check_members(members)
    for _, member in members:
      TrainSpec.from_config(member)
    return spec

  summaries = entry.run(
    argv,
    check=check,
    train=lambda: train_population(config, FLAGS.workdir, FLAGS.member),
    # Members that cannot share a program or resume together; an init source that does not fit.
    input_errors=(MemberError, ResumeError, InitError),
  )
  aborted = [n for n, s in zip(FLAGS.member, summaries, strict=True) if s.get("aborted")]
  if aborted:
    names = ", ".join(parse_member(n)[0] for n in aborted)
    raise SystemExit(f"error: the non-finite guard aborted member(s) {names}; the others finished")


if __name__ == "__main__":
  app.run(main, flags_parser=entry.parse_flags)
