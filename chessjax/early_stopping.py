"""Early stopping: the best validation metric so far and the validations since, persisted in
the workdir (`chessjax.workdir.EARLY_STOPPING`) so that a resumed run continues the count and a
run that stopped early stays stopped. The training loop (`chessjax.train`) keeps one per run.
"""

import json

from chessjax import workdir as workdir_lib
from chessjax.files import write_json


class EarlyStopping:
  """One run's best validation metric so far and whether it stops: read back from WORKDIR at
  start, `update`d after each validation, `write`n once that step's checkpoints are started (a
  rerun sees the early stopping of the saved state)."""

  def __init__(self, workdir, patience: int):
    self.path, self.patience = workdir_lib.early_stopping_path(workdir), int(patience)
    saved_at = workdir_lib.early_stopping_path(workdir, existing=True)
    saved = json.loads(saved_at.read_text()) if saved_at.exists() else {}
    self.best = saved.get("best", float("inf"))
    self.best_step = saved.get("best_step")
    self.since_best = saved.get("since_best", 0)
    self.stopped = bool(saved.get("stopped", False))

  def update(self, step: int, metric: float) -> bool:
    """Records a validation result; returns whether it is the best so far."""
    if metric < self.best:
      self.best, self.best_step, self.since_best = metric, step, 0
      return True
    self.since_best += 1
    self.stopped = self.patience > 0 and self.since_best >= self.patience
    return False

  def write(self) -> None:
    state = {
      "best": self.best,
      "best_step": self.best_step,
      "since_best": self.since_best,
      "stopped": self.stopped,
    }
    write_json(self.path, state)
