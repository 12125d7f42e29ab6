"""Orbax checkpoints of a training run: train state and input-iterator state, step by step.

A checkpoint holds two items: `state` (parameters, optimizer state, RNG counters, step, the
non-finite guard's snapshot) and `data` (the batch iterator's JSON state), so a resumed run sees
exactly the batches an uninterrupted one would. Orbax writes each step to a temporary directory
and renames it when complete, so a process killed mid-save leaves nothing that `restore_latest`
would read. A checkpoint that exists but cannot be read (corrupt or partial files) is skipped with
a warning in favour of the one before it.
"""

import hashlib
import logging

import jax
import orbax.checkpoint as ocp

from chessjax.files import as_path

log = logging.getLogger(__name__)


class Checkpointer:
  """Saves and restores (train state, data state) pairs under `workdir/checkpoints` (a local path
  or a URL such as `gs://bucket/run`: orbax writes straight to the bucket)."""

  def __init__(self, workdir, *, max_to_keep: int = 3, subdir: str = "checkpoints"):
    self.directory = as_path(workdir) / subdir
    self.manager = ocp.CheckpointManager(
      self.directory,
      options=ocp.CheckpointManagerOptions(
        max_to_keep=max_to_keep,
        create=True,
        # Several processes agree through barriers named after the step; a run saves `best`
        # and `checkpoints` at the same step, and a population's members all save at one step,
        # so each manager needs barrier names of its own (the same in every process).
        multiprocessing_options=ocp.options.MultiprocessingOptions(
          barrier_sync_key_prefix=_barrier_prefix(self.directory)
        ),
      ),
      item_names=("state", "data"),
    )

  def save(self, step: int, state, data_state: dict, *, force: bool = False) -> bool:
    """Starts saving (asynchronously); returns whether a checkpoint was started."""
    return self.manager.save(
      step,
      args=ocp.args.Composite(
        state=ocp.args.StandardSave(state), data=ocp.args.JsonSave(data_state)
      ),
      force=force,
    )

  def steps(self) -> list[int]:
    """The steps of the checkpoints on disk, oldest first."""
    return sorted(self.manager.all_steps())

  def restore(self, step: int, abstract_state):
    """(state, data state) of the checkpoint at `step` (raises if it is missing or unreadable).

    `abstract_state` gives the structure, shapes, dtypes and shardings to restore into.
    """
    restored = self.manager.restore(
      step,
      args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract_state), data=ocp.args.JsonRestore()
      ),
    )
    return restored.state, restored.data

  def restore_latest(self, abstract_state):
    """(step, state, data state) of the newest readable checkpoint, or None if there is none."""
    for step in reversed(self.steps()):
      try:
        state, data = self.restore(step, abstract_state)
      except Exception as e:  # noqa: BLE001 - any unreadable checkpoint falls back to the previous.
        log.warning(
          "checkpoint at step %d is unreadable (%s: %s); trying an older one",
          step,
          type(e).__name__,
          str(e).splitlines()[0][:200],
        )
        continue
      return step, state, data
    return None

  def close(self) -> None:
    self.manager.wait_until_finished()
    self.manager.close()


def _barrier_prefix(directory) -> str:
  """A name of a checkpoint directory's own for orbax's barriers: its last part and a hash of its
  whole path (every process names the directory alike)."""
  digest = hashlib.sha256(str(directory).encode()).hexdigest()[:12]
  return f"{as_path(directory).name}_{digest}"


def abstract_like(tree):
  """ShapeDtypeStructs (with shardings) of a pytree of arrays."""
  return jax.tree.map(
    lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None)), tree
  )
