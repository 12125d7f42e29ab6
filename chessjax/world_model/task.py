"""The world-model task for the training loop: batch rows, loss and evaluation statistics.

From the move tokens of a game (START first) the model predicts, at every step t = 0..plies, the
75 labels of the state after move t; the loss is the mean per-label cross-entropy over valid
steps (Walker & Lyons, Chess-World-Model, sections 2.4 and 3.1). Batches are the stored games as
they are (`chessjax.data.rows.GameRows`: moves, states, mask).
"""

import jax.numpy as jnp
import numpy as np

from chessjax.data.rows import GameRows
from chessjax.encoding import PAD_ID
from chessjax.world_model import metrics


class WorldModelTask:
  head = "state"
  model_kwargs: dict = {}
  rows = eval_rows = GameRows()
  selection_metric = "loss"
  batch_keys = GameRows.keys  # moves int32[B, T], states uint8[B, T, 75], mask bool[B, T]
  pad_id = PAD_ID

  def loss(self, model, batch: dict, *, train: bool):
    logits = model(batch["moves"], train=train)
    return metrics.loss_fn(logits, batch["states"], batch["mask"])

  def loss_weight(self, batch: dict):
    """The loss pools over the batch's valid steps (`metrics.loss_fn`): their number (the 75
    labels of each step are a constant factor, which the weighting cancels)."""
    return jnp.sum(batch["mask"].astype(jnp.float32))

  def eval_stats(self, model, batch: dict) -> dict:
    logits = model(batch["moves"], train=False)
    return metrics.batch_stats(logits, batch["states"], batch["mask"])

  def accumulator(self) -> metrics.Accumulator:
    return metrics.Accumulator()

  def probe_positions(self, game: dict) -> tuple[np.ndarray, np.ndarray]:
    """The stored moves (START first) as the model reads them; move t is read at step t."""
    moves = np.asarray(game["moves"])
    return moves.astype(np.int32), np.arange(1, len(moves))

  def summarize(self, result: dict):
    """(log line, TensorBoard scalars, TensorBoard images) of a validation result."""
    line = (
      f"loss {result['loss']:.4f}  labelwise {result['labelwise']:.4f}  "
      f"exact {result['exact_state']:.4f}  trajectory {result['trajectory']:.4f}"
    )
    scalars = {
      f"validation/{key}": result[key]
      for key in ("loss", "labelwise", "exact_state", "trajectory", "nonfinite_logits")
    }
    scalars.update({f"validation_groups/{name}": acc for name, acc in result["groups"].items()})
    # Imported here: matplotlib (about 0.25 s) only in a process that validates.
    from chessjax.world_model import plots

    images = {"validation/prefix_bins": plots.prefix_bins_image(result, "validation")}
    return line, scalars, images


def make_task(config=None) -> WorldModelTask:
  del config  # The world-model task has no options beyond the config's data and model blocks.
  return WorldModelTask()
