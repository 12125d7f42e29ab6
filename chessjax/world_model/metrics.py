"""Loss and state-tracking metrics of the Chess-World-Model benchmark (Walker & Lyons,
section 2.4).

Shapes: logits [B, T, 1878] in the head layout of `chessjax.labels`, states uint8/int [B, T, 75],
mask bool [B, T] (True on a game's steps, t = 0 included).

* Loss: sum of the 75 per-label cross-entropies over valid steps / (75 x valid steps).
* Labelwise: mean fraction of the 75 labels right per step. ExactState: fraction of steps with
  all 75 right. Trajectory: fraction of games whose every step is exact. Pooled over all valid
  steps of a split (long games weigh more), as the paper does.
* Prefix bins: ExactState and Labelwise per bin `t // 20`.
* Beyond the paper: accuracy per label group, the first step at which each game goes wrong, and
  the number of non-finite logits (unstable models must be scored, not crash the evaluation).

Everything is computed from additive sufficient statistics (`batch_stats`, jittable) summed by
`Accumulator`, so metrics over a whole split streamed batch by batch equal `state_metrics` on
the concatenated arrays. `GameScores` keeps what an evaluation reports per game (and per step
and stratum) beside them.
"""

import jax
import jax.numpy as jnp
import numpy as np

from chessjax import labels
from chessjax.world_model import strata

BIN_WIDTH = 20
GROUP_NAMES = tuple(name for name, *_ in labels.GROUPS)


_groups = labels.group_logits


def _float(logits):
  return logits.astype(jnp.promote_types(logits.dtype, jnp.float32))  # float32 or float64


def _cross_entropy_fwd(logits, states):
  states = states.astype(jnp.int32)
  ces, lses = [], []
  for group, first, count, classes in _groups(_float(logits)):
    target = states[..., first : first + count, None]
    lse = jax.nn.logsumexp(group, axis=-1)
    picked = jnp.sum(jnp.where(jnp.arange(classes) == target, group, 0.0), axis=-1)
    ces.append(lse - picked)
    lses.append(lse)
  return jnp.concatenate(ces, axis=-1), (logits, states, jnp.concatenate(lses, axis=-1))


def _cross_entropy_bwd(residuals, g):
  logits, states, lse = residuals
  grads = []
  for group, first, count, classes in _groups(_float(logits)):
    target = states[..., first : first + count, None]
    probs = jnp.exp(group - lse[..., first : first + count, None])
    onehot = (jnp.arange(classes) == target).astype(probs.dtype)
    grad = g[..., first : first + count, None] * (probs - onehot)
    grads.append(grad.reshape(*grad.shape[:-2], count * classes))
  return jnp.concatenate(grads, axis=-1).astype(logits.dtype), None


@jax.custom_vjp
def label_cross_entropy(logits: jax.Array, states: jax.Array) -> jax.Array:
  """Per-label cross-entropy [..., 75] (float32, or float64 for float64 logits) of head-layout
  logits [..., 1878] against class ids [..., 75].

  `logsumexp(group) - group[target]` per label. The gradient is written out (softmax minus
  one-hot, from the saved log-normalisers) instead of autodiff's gather and scatter-add, which
  XLA:CPU runs slowly: the train step is 8-10% faster (benchmarks/bench_train_step, d128).
  """
  return _cross_entropy_fwd(logits, states)[0]


label_cross_entropy.defvjp(_cross_entropy_fwd, _cross_entropy_bwd)


# Jitted: inside a jitted step this costs nothing; called eagerly (tests, `state_metrics`) it runs
# as one program instead of hundreds of op-by-op dispatches.
@jax.jit
def per_label(logits: jax.Array, states: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Per-label cross-entropy float32[B, T, 75] and argmax correctness bool[B, T, 75]."""
  hits = [
    jnp.argmax(group, axis=-1) == states[..., first : first + count]
    for group, first, count, _ in _groups(logits)
  ]
  return label_cross_entropy(logits, states), jnp.concatenate(hits, axis=-1)


def loss_fn(logits: jax.Array, states: jax.Array, mask: jax.Array) -> jax.Array:
  """The training loss: mean per-label cross-entropy over valid steps (token-pooled)."""
  ce = label_cross_entropy(logits, states)
  m = mask.astype(jnp.float32)
  return jnp.sum(ce.sum(-1) * m) / (labels.NUM_LABELS * jnp.maximum(m.sum(), 1.0))


@jax.jit
def batch_stats(logits: jax.Array, states: jax.Array, mask: jax.Array) -> dict[str, jax.Array]:
  """Additive statistics of one batch (jittable; bins cover the batch's T steps)."""
  ce, hit = per_label(logits, states)
  m = mask.astype(jnp.float32)
  n_bins = -(-logits.shape[1] // BIN_WIDTH)
  correct = hit.sum(-1).astype(jnp.float32)  # [B, T]
  exact = (hit.all(-1) & mask).astype(jnp.float32)
  wrong_step = ~hit.all(-1) & mask
  t = jnp.arange(logits.shape[1])
  first_error = jnp.min(jnp.where(wrong_step, t, jnp.iinfo(jnp.int32).max), axis=1)
  games = mask.any(axis=1)
  bin_of = t // BIN_WIDTH

  def per_bin(x):  # [B, T] -> [n_bins]
    return jax.ops.segment_sum(x.sum(0), bin_of, num_segments=n_bins)

  group_hits = []
  for _, first, count, _ in labels.GROUPS:
    group_hits.append((hit[..., first : first + count].sum(-1) * m).sum())
  return {
    "ce_sum": jnp.sum(jnp.where(mask, ce.sum(-1), 0.0)),
    "steps": m.sum(),
    "correct_labels": (correct * m).sum(),
    "exact_steps": exact.sum(),
    "games": games.sum().astype(jnp.float32),
    "exact_games": (games & ~wrong_step.any(axis=1)).sum().astype(jnp.float32),
    "bin_steps": per_bin(m),
    "bin_exact": per_bin(exact),
    "bin_correct": per_bin(correct * m),
    "group_correct": jnp.stack(group_hits),
    "first_error": jnp.where(games, first_error, -1),  # per game; -1 pad row, int32 max exact
    "nonfinite_logits": jnp.sum(~jnp.isfinite(logits) & mask[..., None]).astype(jnp.float32),
  }


class Accumulator:
  """Sums `batch_stats` over batches (on the host) and turns them into metrics."""

  def __init__(self):
    self.totals: dict[str, np.ndarray] = {}
    self.first_errors: list[np.ndarray] = []

  def add(self, stats: dict) -> None:
    stats = jax.device_get(stats)
    first = np.asarray(stats["first_error"])
    self.first_errors.append(first[first >= 0])
    for k, v in stats.items():
      if k == "first_error":
        continue
      v = np.asarray(v, dtype=np.float64)
      old = self.totals.get(k)
      if old is None:
        self.totals[k] = v.copy()
      elif v.ndim and len(v) != len(old):  # Bins: batches differ in length.
        size = max(len(v), len(old))
        grown = np.zeros(size)
        grown[: len(old)] += old
        grown[: len(v)] += v
        self.totals[k] = grown
      else:
        self.totals[k] = old + v

  def result(self) -> dict:
    t = self.totals
    if not t or t["steps"] == 0:
      raise ValueError("no valid steps were accumulated")
    steps = t["steps"]
    group_sizes = np.array([count for _, _, count, _ in labels.GROUPS], dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
      bin_exact = t["bin_exact"] / t["bin_steps"]
      bin_labelwise = t["bin_correct"] / (labels.NUM_LABELS * t["bin_steps"])
    first = np.concatenate(self.first_errors) if self.first_errors else np.zeros(0, np.int64)
    failed = first[first != np.iinfo(np.int32).max]
    return {
      "loss": float(t["ce_sum"] / (labels.NUM_LABELS * steps)),
      "labelwise": float(t["correct_labels"] / (labels.NUM_LABELS * steps)),
      "exact_state": float(t["exact_steps"] / steps),
      "trajectory": float(t["exact_games"] / t["games"]),
      "steps": int(steps),
      "games": int(t["games"]),
      "bins": {
        "width": BIN_WIDTH,
        "start": [i * BIN_WIDTH for i in range(len(t["bin_steps"]))],
        "steps": t["bin_steps"].astype(int).tolist(),
        "exact_state": [None if np.isnan(x) else float(x) for x in bin_exact],
        "labelwise": [None if np.isnan(x) else float(x) for x in bin_labelwise],
      },
      "groups": {
        name: float(c / (n * steps))
        for name, c, n in zip(GROUP_NAMES, t["group_correct"], group_sizes, strict=True)
      },
      "first_error": {
        "games_with_error": int(len(failed)),
        "median_step": float(np.median(failed)) if len(failed) else None,
        "histogram_bins_of_20": np.bincount(failed // BIN_WIDTH).astype(int).tolist(),
      },
      "nonfinite_logits": int(t["nonfinite_logits"]),
    }


class GameScores:
  """Per-game scores of a split, added one batch at a time (`add`) and read at the end (`result`),
  as `strata.StrataAccumulator` sums its strata (which it feeds, game by game).

  `scored` int[N]: the steps scored of each of the split's N games (its length, cut to the
  evaluation's max_len); `flags`: each game's `strata.game_flags`, in the same order, whose
  columns are `names` (`strata.names` of the games' rules); `after`: for atomic games, a
  `divergence.AfterDivergence` fed each game's steps (None: no `after_divergence` in `result`).
  """

  def __init__(self, scored: np.ndarray, flags: list[np.ndarray], names=strata.NAMES, after=None):
    n = len(scored)
    self.scored, self.flags = scored, flags
    self.first_steps = np.full(n, -2, dtype=np.int64)  # -2: not seen yet.
    self.exact_steps = np.zeros(n, dtype=np.int64)
    self.game_loss = np.zeros(n, dtype=np.float64)
    self.ply = {k: np.zeros(int(scored.max()), np.int64) for k in ("steps", "exact", "correct")}
    self.failures: dict[int, tuple[int, np.ndarray]] = {}
    self.strata = strata.StrataAccumulator(names)  # The flags' columns (`strata.names`).
    self.after = after

  def add(self, stats: dict, extras: dict) -> None:
    """One batch's `batch_stats` (its `first_error`) and per-game extras (host arrays): `index`
    int[B] (game in the split, -1 pad rows), `pred_first` [B, 75] (argmax labels at the first
    wrong step), `group_hits` [B, T, G] (right labels per label group), `game_ce` [B] (summed
    cross-entropy) and, for `after`, `step_ce` [B, T] (cross-entropy summed over each step's
    labels)."""
    step_ces = extras["step_ce"] if self.after is not None else [None] * len(extras["index"])
    rows = zip(
      extras["index"],
      stats["first_error"],
      extras["pred_first"],
      extras["group_hits"],
      extras["game_ce"],
      step_ces,
      strict=True,
    )
    for g, first, pred, hits, ce, step_ce in rows:
      if g < 0:
        continue
      self.game_loss[g] = ce / (labels.NUM_LABELS * self.scored[g])
      n = self.scored[g]
      hits = hits[:n]
      exact = (hits == strata.GROUP_SIZES).all(-1)
      self.exact_steps[g] = exact.sum()
      self.ply["steps"][:n] += 1
      self.ply["exact"][:n] += exact
      self.ply["correct"][:n] += hits.sum(-1, dtype=np.int64)
      self.strata.add(self.flags[g][:n], exact, hits)
      if self.after is not None:
        self.after.add(g, exact, hits.sum(-1, dtype=np.int64), step_ce[:n])
      if first == np.iinfo(np.int32).max:
        self.first_steps[g] = -1
      else:
        self.first_steps[g] = first
        self.failures[int(g)] = (int(first), np.array(pred))

  @property
  def unseen(self) -> int:
    """How many games no batch has held yet."""
    return int((self.first_steps == -2).sum())

  def result(self) -> dict:
    """`first_error_steps` (int per game, -1 when never wrong), `exact_steps` (exact steps per
    game), `game_loss` (each game's mean per-label cross-entropy) and `max_game_loss`, `per_ply`
    (steps scored, exact steps and right labels at each step t), `strata`
    (`strata.StrataAccumulator.result`) and `failures` (game -> (first wrong step, predicted labels
    there); not JSON); with `after`, `after_divergence` (`divergence.AfterDivergence.result`)."""
    out = {
      "first_error_steps": self.first_steps.tolist(),
      "exact_steps": self.exact_steps.tolist(),
      "game_loss": self.game_loss.tolist(),
      "per_ply": {k: v.tolist() for k, v in self.ply.items()},
      "max_game_loss": float(self.game_loss.max()),
      "strata": self.strata.result(),
      "failures": self.failures,
    }
    if self.after is not None:
      out["after_divergence"] = self.after.result()
    return out


def state_metrics(logits, states, mask) -> dict:
  """All metrics of one set of predictions (numpy or jax arrays [B,T,1878], [B,T,75], [B,T])."""
  acc = Accumulator()
  acc.add(batch_stats(jnp.asarray(logits), jnp.asarray(states), jnp.asarray(mask, dtype=bool)))
  return acc.result()


def majority_labels(games) -> np.ndarray:
  """The majority-class baseline: each label's most frequent class over all steps of `games`
  (dicts with `states`), the same row for every step. Returns uint8[75]."""
  counts = np.zeros((labels.NUM_LABELS, labels.MAX_CLASSES), dtype=np.int64)
  cols = np.arange(labels.NUM_LABELS)
  for game in games:
    np.add.at(counts, (np.broadcast_to(cols, game["states"].shape), game["states"]), 1)
  return counts.argmax(axis=1).astype(np.uint8)


def constant_prediction_metrics(row: np.ndarray, games) -> dict:
  """Labelwise, ExactState and Trajectory of predicting `row` at every step of `games`."""
  steps = correct = exact = n_games = exact_games = 0
  for game in games:
    hit = game["states"] == row[None]
    steps += len(hit)
    correct += int(hit.sum())
    all_hit = hit.all(axis=1)
    exact += int(all_hit.sum())
    n_games += 1
    exact_games += int(all_hit.all())
  return {
    "labelwise": correct / (labels.NUM_LABELS * steps),
    "exact_state": exact / steps,
    "trajectory": exact_games / n_games,
    "steps": steps,
    "games": n_games,
  }
