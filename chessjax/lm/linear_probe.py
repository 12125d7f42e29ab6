"""Linear probes of every layer's hidden state for the board (linear classifier probes, Alain and
Bengio 2016; README, "State-tracking backbones as UCI language models").

    python -m chessjax.lm.linear_probe --workdir runs/gpt2_uci_s [--data PATH] [--which best]
        [--train-split train] [--test-split test] [--max-games 500] [--steps 500] [--out DIR]

For a trained workdir (language model or world model) the model is frozen and run once over
held-out and training games; at the last token of each move (the world model: the move's step;
the language model: the move's to-square token, or its promotion letter) every layer's hidden
state (the embedding output, then each block's output: `model(..., return_hiddens=True)`) is a
feature vector for the board after that move. One linear classifier per layer maps the
standardised features to the 64 squares a8..h1, 13 classes each (empty, PNBRQK, pnbrqk;
`chessjax.labels`): weights [D, 64 * 13], 64 independent softmaxes, fitted with optax (AdamW,
`steps` mini-batch steps, small weight decay) on the training games' positions and scored on the
test games' positions: accuracy on all squares, on non-empty squares (true class not empty) and
on squares that changed in the last move (label differs from the previous step's).

Two references: the same probe on a randomly initialised model of the same architecture
(`chessjax.step.build(config)`, the control: what the architecture and token identities give
without training) and the majority-class baseline (per square, the most frequent class on the
training positions).

Writes OUT/linear_probe.json (everything), OUT/linear_probe.md (a table layer x {all, non-empty,
changed} for the model, the control and the majority baseline) and OUT/linear_probe.png
(accuracy by layer), atomically. The conventions of every evaluation of a workdir
(`chessjax.workdir`): OUT defaults to WORKDIR/eval, the checkpoint (`--which`) to the best one
when the workdir has WORKDIR/best, else the latest (`default_checkpoint`).
"""

import argparse
import logging
import sys
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from chessjax import processes, runtime
from chessjax.data import read_manifest
from chessjax.data.source import GameSource
from chessjax.encoding import PAD_ID
from chessjax.files import as_path, write_figure, write_json, write_text
from chessjax.labels import NUM_PIECE_CLASSES
from chessjax.lm import tokens as tk
from chessjax.step import build
from chessjax.workdir import CHECKPOINTS, EVAL_DIR

log = logging.getLogger(__name__)

SQUARES = 64
SUBSETS = ("all", "nonempty", "changed")
SUBSET_NAMES = {"all": "all squares", "nonempty": "non-empty squares", "changed": "changed squares"}


# ------------------------------------------------------------------------------------------------
# Positions: the token row of a game and where each move ends


def move_end_positions(game: dict, task) -> tuple[np.ndarray, np.ndarray]:
  """(model input ids int32[L], index int[T] of the last input token of each of the T moves).

  World model (`task.head == "state"`): the stored moves, START first, move t at step t. Language
  model: the task's evaluation row (`tokens.eval_row`, `<s>` first; AP rows carry piece letters)
  without `</s>`, and a move ends at its to-square token or promotion letter. The hidden state at
  index k of move t has read the whole move, so it is probed for `states[t + 1]`.
  """
  moves = np.asarray(game["moves"])
  plies = len(moves) - 1
  if task.head == "state":
    return moves.astype(np.int32), np.arange(1, plies + 1)
  row = tk.eval_row(moves, game["states"], vocab=task.vocab, notation=task.notation)
  per_move = tk.move_token_counts(moves, game["states"], letters=task.notation == "ap")
  return row["inputs"], np.cumsum(per_move)  # `<s>` is index 0.


def _pad_id(task) -> int:
  return PAD_ID if task.head == "state" else task.vocab.pad_id


def _bucket(length: int, buckets, max_len: int) -> int:
  for b in sorted(buckets):
    if b >= length:
      return int(b)
  return int(max(length, max_len))


def read_positions(path, split: str, task, *, max_games: int, max_len: int) -> dict:
  """The first `max_games` games of a split as model rows and probe positions.

  Returns `rows` (list of int32[L] input ids, cut to `max_len`), `where` list of int[P] (index of
  each probed position in its row), `labels` uint8[N, 64] (the board after each probed move),
  `changed` bool[N, 64] (the square's label differs from the step before) and `games`.
  """
  source = GameSource(path, split)
  n = min(len(source), max_games)
  rows, where, labels, changed = [], [], [], []
  for g in range(n):
    game = source[g]
    ids, ends = move_end_positions(game, task)
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
  to the smallest of `buckets` that fits (one compilation per bucket)."""
  rows, where = positions["rows"], positions["where"]
  out = None
  for start in range(0, len(rows), batch_size):
    chunk = rows[start : start + batch_size]
    length = _bucket(max(len(r) for r in chunk), buckets, max_len)
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
# The probe


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


# ------------------------------------------------------------------------------------------------
# A workdir


def _default_test_split(path, config) -> str:
  splits = read_manifest(path)["splits"]
  for name in ("test", config.data.get("val_split", "validation"), "validation", "dev"):
    if name in splits:
      return name
  raise ValueError(f"{path} has no test, validation or dev split; pass --test-split")


def layer_names(count: int) -> list[str]:
  return ["embedding"] + [f"block {i}" for i in range(1, count)]


def probe_workdir(
  workdir,
  *,
  data=None,
  train_split: str | None = None,
  test_split: str | None = None,
  max_games: int = 500,
  max_train_positions: int = 8000,
  which: str | None = None,
  steps: int = 500,
  batch_size: int = 1024,
  lr: float = 1e-2,
  weight_decay: float = 1e-4,
  control_seed: int | None = None,
  seed: int = 0,
) -> dict:
  """Probes of every layer of a workdir's model and of its untrained control; see the module
  docstring. `max_games` bounds the games read from each split; the training positions are then
  subsampled (fixed seed) to at most `max_train_positions`. The control is the architecture
  initialised with `control_seed` (default the config's seed, i.e. the trained model's own
  initialisation). `which`: "best", "latest" or None (`default_checkpoint`)."""
  from chessjax import workdir as wd

  t0 = time.time()
  restored = wd.restore(workdir, which)
  config, task = restored.config, restored.task
  data = data or config.data.train
  train_split = train_split or config.data.train_split
  test_split = test_split or _default_test_split(data, config)
  max_len = int(config.data.max_len)
  buckets = tuple(config.data.get("bucket_lengths", ()) or ())
  read = partial(read_positions, data, task=task, max_games=max_games, max_len=max_len)
  train_pos, test_pos = read(train_split), read(test_split)
  keep = None
  n_train = len(train_pos["labels"])
  if n_train > max_train_positions:
    keep = np.sort(np.random.default_rng(seed).choice(n_train, max_train_positions, replace=False))
    train_pos = {**train_pos, "labels": train_pos["labels"][keep]}
    train_pos["changed"] = train_pos["changed"][keep]
  control_config = config.copy_and_resolve_references()
  if control_seed is not None:
    control_config.seed = int(control_seed)
  _, control_state, _ = build(control_config, task)
  extract = partial(extract_features, pad_id=_pad_id(task), buckets=buckets, max_len=max_len)
  fit = {"steps": steps, "batch_size": batch_size, "lr": lr, "weight_decay": weight_decay}
  graphdef = restored.fns.graphdef
  results = {}
  for name, state in (("model", restored.state), ("control", control_state)):
    p, ms = state["params"], state["model_state"]
    ftr = extract(graphdef, p, ms, train_pos)
    if keep is not None:
      ftr = [f[keep] for f in ftr]
    fte = extract(graphdef, p, ms, test_pos)
    results[name] = probe_layers(ftr, fte, train_pos, test_pos, seed=seed, **fit)
    log.info("%s: last layer %s", name, results[name][-1])
  majority = majority_classes(train_pos["labels"])
  maj_pred = np.broadcast_to(majority, test_pos["labels"].shape)
  counts = {
    "all": int(test_pos["labels"].size),
    "nonempty": int(np.count_nonzero(test_pos["labels"])),
    "changed": int(test_pos["changed"].sum()),
  }
  return {
    "workdir": str(workdir),
    "checkpoint": restored.checkpoint,
    "step": int(restored.step),
    "task": config.get("task", "world_model"),
    "family": config.get("family"),
    "size": config.get("size"),
    "data": str(data),
    "train_split": train_split,
    "test_split": test_split,
    "train_games": train_pos["games"],
    "test_games": test_pos["games"],
    "train_positions": int(len(train_pos["labels"])),
    "test_positions": int(len(test_pos["labels"])),
    "test_squares": counts,
    "probe": {**fit, "seed": seed, "control_seed": control_config.seed},
    "layers": layer_names(len(results["model"])),
    "model": results["model"],
    "control": results["control"],
    "majority": accuracies(maj_pred, test_pos["labels"], test_pos["changed"]),
    "seconds": round(time.time() - t0, 1),
  }


# ------------------------------------------------------------------------------------------------
# Report


def _pct(value) -> str:
  return "-" if value is None else f"{100 * value:.2f}"


def markdown(result: dict) -> str:
  """The report: held-out accuracy (%) by layer of the model's probe and the control's, and the
  majority baseline, on all squares, non-empty squares and squares changed by the last move."""
  r = result
  lines = [
    f"# Linear probes: {r['family']} {r['size']} ({r['task']}), step {r['step']}",
    "",
    f"Probes fitted on {r['train_positions']:,} positions of `{r['data']}:{r['train_split']}` "
    f"({r['train_games']} games), scored on {r['test_positions']:,} positions of "
    f"`{r['test_split']}` ({r['test_games']} games; {r['test_squares']['nonempty']:,} non-empty "
    f"and {r['test_squares']['changed']:,} changed squares). Control: the same architecture, "
    f"randomly initialised (seed {r['probe']['control_seed']}). Accuracy in %.",
    "",
    "| layer | all: model | all: control | non-empty: model | non-empty: control "
    "| changed: model | changed: control |",
    "|---|---:|---:|---:|---:|---:|---:|",
  ]
  for name, m, c in zip(r["layers"], r["model"], r["control"], strict=True):
    cells = [f"{_pct(m[k])} | {_pct(c[k])}" for k in SUBSETS]
    lines.append(f"| {name} | " + " | ".join(cells) + " |")
  maj = r["majority"]
  lines.append("| majority class | " + " | ".join(f"{_pct(maj[k])} | " for k in SUBSETS) + " |")
  p = r["probe"]
  lines += [
    "",
    f"Probe: softmax regression on standardised features, AdamW lr {p['lr']:g}, weight decay "
    f"{p['weight_decay']:g}, {p['steps']} steps of {p['batch_size']} positions.",
  ]
  return "\n".join(lines) + "\n"


def figure(result: dict):
  """Accuracy by layer (model, control, majority) for each square subset: a matplotlib figure."""
  from chessjax.plotting import plt

  fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True)
  x = np.arange(len(result["layers"]))
  for ax, k in zip(axes, SUBSETS, strict=True):
    for name, style in (("model", "o-"), ("control", "s--")):
      ys = [np.nan if row[k] is None else 100 * row[k] for row in result[name]]
      ax.plot(x, ys, style, label=name)
    if result["majority"][k] is not None:
      ax.axhline(100 * result["majority"][k], color="gray", ls=":", label="majority class")
    ax.set_title(SUBSET_NAMES[k])
    ax.set_xticks(x, result["layers"], rotation=30, ha="right")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
  axes[0].set_ylabel("held-out accuracy (%)")
  axes[0].legend(loc="lower right")
  fig.suptitle(
    f"Linear probes of the board: {result['family']} {result['size']} ({result['task']})"
  )
  fig.tight_layout()
  return fig


def write_report(result: dict, out_dir) -> None:
  """OUT/linear_probe.json, .md and .png, each written atomically."""
  out = as_path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  write_json(out / "linear_probe.json", result)
  write_text(out / "linear_probe.md", markdown(result))
  fig = figure(result)
  try:
    write_figure(out / "linear_probe.png", fig)
  finally:
    from chessjax.plotting import plt

    plt.close(fig)


# ------------------------------------------------------------------------------------------------
# Command line


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(
    prog="python -m chessjax.lm.linear_probe", description=__doc__.split("\n")[0]
  )
  ap.add_argument("--workdir", required=True, help="training workdir (config.json, checkpoints/)")
  ap.add_argument(
    "--which",
    choices=CHECKPOINTS,
    default=None,
    help="checkpoint (default: best if the workdir has WORKDIR/best, else latest)",
  )
  ap.add_argument("--data", default=None, help="prepared dataset (default: the config's)")
  ap.add_argument("--train-split", default=None, help="default: the config's training split")
  ap.add_argument("--test-split", default=None, help="default: test, else validation or dev")
  ap.add_argument("--max-games", type=int, default=500, help="games read from each split")
  ap.add_argument("--max-train-positions", type=int, default=8000)
  ap.add_argument("--steps", type=int, default=500, help="probe optimisation steps")
  ap.add_argument("--batch-size", type=int, default=1024, help="probe mini-batch (positions)")
  ap.add_argument("--lr", type=float, default=1e-2)
  ap.add_argument("--weight-decay", type=float, default=1e-4)
  ap.add_argument("--control-seed", type=int, default=None, help="default: the config's seed")
  ap.add_argument("--out", default=None, help="output directory (default: WORKDIR/eval)")
  args = ap.parse_args(argv)
  runtime.setup_for_workdir(args.workdir)  # Joins the other processes of a multi-host run.
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
  logging.getLogger("absl").setLevel(logging.WARNING)
  if min(args.max_games, args.max_train_positions, args.steps, args.batch_size) < 1:
    ap.error("--max-games, --max-train-positions, --steps and --batch-size must be positive")
  try:
    with processes.fail_together():  # Several processes: one's error stops them all.
      result = probe_workdir(
        args.workdir,
        data=args.data,
        train_split=args.train_split,
        test_split=args.test_split,
        max_games=args.max_games,
        max_train_positions=args.max_train_positions,
        which=args.which,
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        weight_decay=args.weight_decay,
        control_seed=args.control_seed,
      )
  except (ValueError, FileNotFoundError, KeyError) as e:
    ap.error(str(e))
  out = args.out or as_path(args.workdir) / EVAL_DIR
  if jax.process_index() == 0:
    write_report(result, out)
    print(markdown(result))
    print(f"written: {as_path(out) / 'linear_probe.json'}, .md, .png")
  return 0


if __name__ == "__main__":
  sys.exit(main())
