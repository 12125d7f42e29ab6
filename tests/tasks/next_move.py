"""A task added without touching the training loop: next-move prediction on world-model shards.

Shows the seam a new track uses (`chessjax.task`): its own row format, head, loss and metrics,
in files of its own. Tokens are the stored move ids; the target at position t is move t + 1.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from chessjax.encoding import MOVE_VOCAB_SIZE, PAD_ID


class NextMoveRows:
  """tokens int32[b, T] (the game's move ids), targets int32[b, T] (the next id), mask bool[b, T]
  (True where a next move exists)."""

  def lengths(self, steps):
    return np.asarray(steps, dtype=np.int32)

  def batch(self, games, length, *, max_len, epoch):
    del epoch
    b = len(games)
    tokens = np.full((b, length), PAD_ID, np.int32)
    targets = np.full((b, length), PAD_ID, np.int32)
    mask = np.zeros((b, length), bool)
    for r, item in enumerate(games):
      if item is None:
        continue
      moves = item[1]["moves"][: max_len or None]
      n = len(moves)
      tokens[r, :n] = moves
      targets[r, : n - 1] = moves[1:]
      mask[r, : n - 1] = True
    return {"tokens": tokens, "targets": targets, "mask": mask}


class NextMoveTask:
  head = "tokens"
  model_kwargs = {"vocab_size": MOVE_VOCAB_SIZE, "tie_embeddings": True}
  rows = eval_rows = NextMoveRows()
  selection_metric = "loss"
  batch_keys = ("tokens", "targets", "mask")

  def _nll(self, model, batch, train):
    logits = model(batch["tokens"], train=train)
    nll = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"])
    return logits, nll, batch["mask"].astype(jnp.float32)

  def loss(self, model, batch, *, train):
    _, nll, m = self._nll(model, batch, train)
    return jnp.sum(nll * m) / jnp.maximum(m.sum(), 1.0)

  def loss_weight(self, batch):
    return jnp.sum(batch["mask"].astype(jnp.float32))

  def eval_stats(self, model, batch):
    logits, nll, m = self._nll(model, batch, False)
    hit = (jnp.argmax(logits, -1) == batch["targets"]).astype(jnp.float32)
    return {"nll": jnp.sum(nll * m), "correct": jnp.sum(hit * m), "tokens": m.sum()}

  def accumulator(self):
    return _Sums()

  def summarize(self, result):
    line = f"loss {result['loss']:.4f}  top-1 {result['accuracy']:.4f}"
    return line, {f"validation/{k}": v for k, v in result.items()}, {}


class _Sums:
  def __init__(self):
    self.totals = {}

  def add(self, stats):
    for k, v in jax.device_get(stats).items():
      self.totals[k] = self.totals.get(k, 0.0) + float(v)

  def result(self):
    t = self.totals
    return {"loss": t["nll"] / t["tokens"], "accuracy": t["correct"] / t["tokens"]}


def make_task(config):
  del config
  return NextMoveTask()
