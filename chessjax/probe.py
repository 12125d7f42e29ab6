"""Linear probes of a frozen model's hidden states for the board (linear classifier probes, Alain
and Bengio 2016), for any task that says where to read them (`Task.probe_positions`).

    positions = read_positions(path, split, task, max_games=500, max_len=config.data.max_len)
    feats = extract_features(graphdef, params, model_state, positions, pad_id=task.pad_id, ...)
    probe = fit_probe(feats[layer], positions["labels"])
    accuracies(predict_probe(probe, test_feats[layer]), test["labels"], test["changed"])

At the input token that ends each move (the task's `probe_positions`: a world model's step, a
language model's to-square token or promotion letter) every layer's hidden state (the embedding
output, then each block's output: `model(..., return_hiddens=True)`) is a feature vector for the
board after that move. One linear classifier per layer maps the standardised features to the 64
squares a8..h1, 13 classes each (empty, PNBRQK, pnbrqk; `chessjax.labels`): weights
[D, 64 * 13], 64 independent softmaxes, fitted with optax (AdamW, mini-batch steps, small weight
decay). It is scored on all squares, on non-empty squares (true class not empty) and on squares
that changed in the last move (label differs from the previous step's): `SUBSETS`. The report
and command line of a workdir are `chessjax.lm.linear_probe`.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from chessjax.data.plan import bucket_length
from chessjax.data.source import GameSource
from chessjax.labels import NUM_PIECE_CLASSES

SQUARES = 64
SUBSETS = ("all", "nonempty", "changed")


# ------------------------------------------------------------------------------------------------
# Features: the hidden states at the probed positions


def read_positions(path, split: str, task, *, max_games: int, max_len: int) -> dict:
  """The first `max_games` games of a split as model rows and probe positions
  (`task.probe_positions`).

  Returns `rows` (list of int32[L] input ids, cut to `max_len`), `where` list of int[P] (index of
  each probed position in its row), `labels` uint8[N, 64] (the board after each probed move),
  `changed` bool[N, 64] (the square's label differs from the step before) and `games`.
  """
  source = GameSource(path, split)
  n = min(len(source), max_games)
  rows, where, labels, changed = [], [], [], []
  for g in range(n):
    game = source[g]
    ids, ends = task.probe_positions(game)
    keep = ends < max_len
    ends = ends[keep]
    boards = np.asarray(game["states"])[:, :SQUARES]
    steps = np.nonzero(keep)[0] + 1  # move t (0-based) gives the board at step t + 1
    rows.append(np.asarray(ids[:max_len], np.int32))
    where.append(ends)
    labels.append(boards[steps])
    changed.append(boards[steps] != boards[steps - 1])
  if not n or not sum(len(w) for w in where):
    raise ValueError(f"{path}:{split} has no positions to probe")
  return {
    "rows": rows,
    "where": where,
    "labels": np.concatenate(labels).astype(np.uint8),
    "changed": np.concatenate(changed),
    "games": n,
  }


@partial(jax.jit, static_argnums=0)
def _hiddens(graphdef, params, model_state, tokens):
  model = nnx.merge(graphdef, params, model_state)
  _, hiddens = model(tokens, train=False, return_hiddens=True)
  return [h.astype(jnp.float32) for h in hiddens]


def extract_features(
  graphdef,
  params,
  model_state,
  positions: dict,
  *,
  pad_id: int,
  buckets=(),
  max_len: int,
  batch_size: int = 16,
) -> list[np.ndarray]:
  """Per layer (embedding output, then each block's), the hidden states float32[N, D_l] at the
  probed positions of `read_positions`, in its order. Rows go in batches of `batch_size`, padded
  with `pad_id` to the smallest of `buckets` that fits (`data.plan.bucket_length`: one
  compilation per bucket); rows are cut to `max_len`, which bounds the longest bucket."""
  rows, where = positions["rows"], positions["where"]
  buckets = tuple(sorted(buckets))
  if not buckets or buckets[-1] < max_len:
    buckets += (max_len,)
  out = None
  for start in range(0, len(rows), batch_size):
    chunk = rows[start : start + batch_size]
    length = bucket_length(max(len(r) for r in chunk), buckets)
    tokens = np.full((batch_size, length), pad_id, np.int32)
    for r, ids in enumerate(chunk):
      tokens[r, : len(ids)] = ids
    hiddens = jax.device_get(_hiddens(graphdef, params, model_state, tokens))
    ends = where[start : start + batch_size]
    b_idx = np.concatenate([np.full(len(w), r) for r, w in enumerate(ends)])
    t_idx = np.concatenate(ends)
    out = out or [[] for _ in hiddens]
    for parts, h in zip(out, hiddens, strict=True):
      parts.append(np.asarray(h)[b_idx, t_idx])
  return [np.concatenate(parts).astype(np.float32) for parts in out]


# ------------------------------------------------------------------------------------------------
# The probe: fit and score


def _logits(params, x):
  z = x @ params["w"] + params["b"]
  return z.reshape(*x.shape[:-1], SQUARES, NUM_PIECE_CLASSES)


@partial(jax.jit, static_argnames=("steps", "batch_size", "lr", "weight_decay"))
def _fit(x, y, key, *, steps: int, batch_size: int, lr: float, weight_decay: float):
  n, d = x.shape
  params = {
    "w": jnp.zeros((d, SQUARES * NUM_PIECE_CLASSES), jnp.float32),
    "b": jnp.zeros((SQUARES * NUM_PIECE_CLASSES,), jnp.float32),
  }
  tx = optax.adamw(optax.cosine_decay_schedule(lr, steps, alpha=0.1), weight_decay=weight_decay)

  def loss_fn(p, xb, yb):
    return optax.softmax_cross_entropy_with_integer_labels(_logits(p, xb), yb).mean()

  def step(carry, k):
    p, opt = carry
    idx = jax.random.randint(k, (batch_size,), 0, n)
    loss, grads = jax.value_and_grad(loss_fn)(p, x[idx], y[idx])
    updates, opt = tx.update(grads, opt, p)
    return (optax.apply_updates(p, updates), opt), loss

  (params, _), losses = jax.lax.scan(step, (params, tx.init(params)), jax.random.split(key, steps))
  return params, losses


@jax.jit
def _predict(params, x):
  return jnp.argmax(_logits(params, x), axis=-1).astype(jnp.uint8)


def fit_probe(
  x: np.ndarray,
  y: np.ndarray,
  *,
  steps: int = 500,
  batch_size: int = 1024,
  lr: float = 1e-2,
  weight_decay: float = 1e-4,
  seed: int = 0,
) -> dict:
  """A softmax-regression probe of features float[N, D] for labels int[N, 64] (13 classes each):
  features standardised with the training mean and standard deviation, then weights [D, 64 * 13]
  and biases fitted by AdamW on mini-batches of `batch_size` rows drawn with replacement (cosine
  learning-rate decay to 10%). Returns {"w", "b", "mean", "std", "loss"} (the last step's loss)."""
  x = np.asarray(x, np.float32)
  mean = x.mean(0)
  std = x.std(0) + 1e-6
  params, losses = _fit(
    jnp.asarray((x - mean) / std),
    jnp.asarray(y, jnp.int32),
    jax.random.key(seed),
    steps=int(steps),
    batch_size=int(min(batch_size, len(x))),
    lr=float(lr),
    weight_decay=float(weight_decay),
  )
  return {**jax.device_get(params), "mean": mean, "std": std, "loss": float(losses[-1])}


def predict_probe(probe: dict, x: np.ndarray) -> np.ndarray:
  """Predicted class uint8[N, 64] of every square from features float[N, D]."""
  x = (np.asarray(x, np.float32) - probe["mean"]) / probe["std"]
  params = {"w": probe["w"], "b": probe["b"]}
  return np.asarray(_predict(params, jnp.asarray(x)))


def accuracies(pred: np.ndarray, labels: np.ndarray, changed: np.ndarray) -> dict:
  """Accuracy of predicted boards uint8[N, 64] on all squares, non-empty squares (true class not
  0) and squares whose label changed in the last move (None where a subset is empty)."""
  hit = np.asarray(pred) == np.asarray(labels)
  masks = {"all": np.ones_like(hit), "nonempty": labels != 0, "changed": np.asarray(changed)}
  return {k: (float(hit[m].mean()) if m.any() else None) for k, m in masks.items()}


def majority_classes(labels: np.ndarray) -> np.ndarray:
  """Most frequent class uint8[64] of each square over boards int[N, 64] (ties: lowest class)."""
  counts = np.stack([np.bincount(labels[:, s], minlength=NUM_PIECE_CLASSES) for s in range(64)])
  return counts.argmax(1).astype(np.uint8)


def probe_layers(train_feats, test_feats, train_pos, test_pos, **fit_kwargs) -> list[dict]:
  """Per layer: a probe fitted on the training features, its held-out `accuracies` and its
  accuracy on all training squares (`train_all`, to see overfitting)."""
  out = []
  for layer, (xtr, xte) in enumerate(zip(train_feats, test_feats, strict=True)):
    probe = fit_probe(xtr, train_pos["labels"], **fit_kwargs)
    acc = accuracies(predict_probe(probe, xte), test_pos["labels"], test_pos["changed"])
    train_hit = predict_probe(probe, xtr) == train_pos["labels"]
    out.append({"layer": layer, **acc, "train_all": float(train_hit.mean()), "loss": probe["loss"]})
  return out
