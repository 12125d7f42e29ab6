"""Where a chess language model's per-move loss goes, by the role of each target token, and how
much probability it puts on piece letters before each kind of square.

    python -m chessjax.lm.token_roles --workdir runs/lm_gpt2_rap_S [--data dev=data/lm:dev] \\
        [--max-games 2000] [--checkpoint best|latest] [--batch-size 64]

A move is `[letter] from to [promotion]` (`chessjax.lm.tokens`), a game `<s> ... </s>`, so every
target of an evaluation row has one role: `piece` (a piece letter: AP rows only), `from`, `to`,
`promotion`, `end` (`</s>`). Per role, over the first `--max-games` games of each split (default:
the run's dev split):
* `loss_per_move`: the scored NLL of those targets (logits as evaluation scores them,
  `task.eval_logits`: piece letters masked for every non-AP model) summed and divided by
  moves + 1, so the roles add up to the per-move loss of `chessjax.lm.evaluate` (Toshniwal et al.
  2022, section 4);
* `loss_per_token`: the same NLL per target of the role;
* `piece_mass`: the mean probability the model puts on the six piece letters before the target,
  unmasked. A RAP model saw a letter before a from-square with probability p in training and
  never after a from-square, so a model that knows where each move starts puts about p at `from`
  targets and about 0 at `to` targets; a model that cannot tell the two apart puts similar mass
  at both.
Writes WORKDIR/eval/token_roles.json (atomically, process 0) and prints a table.
"""

import sys
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from chessjax import cli, workdir
from chessjax.batches import eval_batches
from chessjax.data.source import resolve_split
from chessjax.files import as_path, write_json
from chessjax.lm import tokens as tk

ROLES = ("piece", "from", "to", "promotion", "end")


def target_roles(targets: np.ndarray, weights: np.ndarray, vocab: tk.Vocab) -> np.ndarray:
  """int8[B, T]: the index in `ROLES` of each target token of rows starting after `<s>` (a row's
  targets are its tokens[1:]), -1 where the weight is 0 (padding). A square is a `from` when the
  previous square of the row was a `to` (or there was none), else a `to`."""
  targets = np.asarray(targets)
  out = np.full(targets.shape, -1, dtype=np.int8)
  is_piece = np.isin(targets, vocab.piece_ids)
  is_square = vocab.square_of_id[targets] >= 0
  is_promo = np.isin(targets, vocab.promo_ids[1:])
  out[is_piece] = ROLES.index("piece")
  out[is_promo] = ROLES.index("promotion")
  out[targets == vocab.eos_id] = ROLES.index("end")
  # Squares alternate from, to, from, to, ... within a row: the k-th square is a `from` when k is
  # even. Letters and promotions sit between squares and do not change the count.
  square_index = np.cumsum(is_square, axis=-1) - 1
  out[is_square & (square_index % 2 == 0)] = ROLES.index("from")
  out[is_square & (square_index % 2 == 1)] = ROLES.index("to")
  out[np.asarray(weights) <= 0] = -1
  return out


def _stats(predict, eval_logits, params, model_state, inputs, targets, piece_ids):
  logits = predict(params, model_state, inputs).astype(jnp.float32)
  piece_mass = jnp.sum(jax.nn.softmax(logits, axis=-1)[..., piece_ids], axis=-1)
  return tk.token_nll(eval_logits(logits), targets), piece_mass


class RoleSums:
  """Per-role sums over batches -> the module docstring's numbers."""

  def __init__(self):
    self.nll = np.zeros(len(ROLES))
    self.mass = np.zeros(len(ROLES))
    self.count = np.zeros(len(ROLES), dtype=np.int64)
    self.moves = 0

  def add(self, roles, nll, piece_mass, weights, moves) -> None:
    for r in range(len(ROLES)):
      m = roles == r
      self.nll[r] += float(np.sum(np.asarray(nll, np.float64)[m] * np.asarray(weights)[m]))
      self.mass[r] += float(np.sum(np.asarray(piece_mass, np.float64)[m]))
      self.count[r] += int(m.sum())
    self.moves += int(np.sum(moves))

  def result(self) -> dict:
    if self.moves == 0:
      raise ValueError("no games were accumulated")
    out = {"moves": self.moves, "loss": float(self.nll.sum() / self.moves), "roles": {}}
    for r, name in enumerate(ROLES):
      n = int(self.count[r])
      out["roles"][name] = {
        "targets": n,
        "loss_per_move": float(self.nll[r] / self.moves),
        "loss_per_token": float(self.nll[r] / n) if n else None,
        "piece_mass": float(self.mass[r] / n) if n else None,
      }
    return out


def analyse(restored, path, split: str, *, max_games: int, batch_size: int) -> dict:
  """The module docstring's numbers for one split of a restored language model."""
  task = restored.task
  vocab = task.vocab
  fn = jax.jit(partial(_stats, restored.fns.predict, task.eval_logits))
  state = restored.state
  sums = RoleSums()
  batches = eval_batches(
    restored.spec,
    task.eval_rows,
    path,
    split,
    batch_size=batch_size,
    max_games=max_games,
    # Every process reads every row and computes the same sums (host-side role counts need all
    # of them): with several processes the work is repeated, not split.
    process_index=0,
    process_count=1,
  )
  piece_ids = jnp.asarray(vocab.piece_ids)
  try:
    for batch in batches:
      batch = jax.device_get(batch)
      nll, mass = fn(
        state["params"], state["model_state"], batch["inputs"], batch["targets"], piece_ids
      )
      roles = target_roles(batch["targets"], batch["weights"], vocab)
      sums.add(roles, np.asarray(nll), np.asarray(mass), batch["weights"], batch["moves"])
  finally:
    batches.close()
  return {**sums.result(), "dataset": {"path": str(path), "split": split, "max_games": max_games}}


def table(result: dict) -> str:
  lines = [
    f"{result['family']} {result['size']} ({result['notation'].upper()}), step {result['step']}",
  ]
  for name, r in result["splits"].items():
    lines += [
      "",
      f"{name}: {r['moves']:,} moves (+1 per game), per-move loss {r['loss']:.4f}",
      "| role | targets | loss per move | loss per token | piece-letter mass |",
      "|---|---:|---:|---:|---:|",
    ]
    for role, x in r["roles"].items():
      if not x["targets"]:
        continue
      lines.append(
        f"| {role} | {x['targets']:,} | {x['loss_per_move']:.4f} | {x['loss_per_token']:.4f} "
        f"| {x['piece_mass']:.4f} |"
      )
  return "\n".join(lines) + "\n"


def run(run_dir, *, data=None, which=None, max_games=2000, batch_size=64) -> dict:
  restored = workdir.restore(run_dir, which)
  config = restored.config
  if data is None:
    data = {"dev": (config.data.train, "dev")}
  result = {
    "family": config.family,
    "size": config.size,
    "notation": restored.task.notation,
    "rap_p": float(config.lm.rap_p),
    "step": int(restored.step),
    "checkpoint": restored.checkpoint,
    "splits": {
      name: analyse(
        restored, path, resolve_split(path, split), max_games=max_games, batch_size=batch_size
      )
      for name, (path, split) in data.items()
    },
  }
  if jax.process_index() == 0:
    out = as_path(run_dir) / workdir.EVAL_DIR
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "token_roles.json", result)
  return result


def main(argv=None) -> int:
  ap = cli.workdir_parser("chessjax.lm.token_roles", __doc__, datasets="optional", batch_size=64)
  ap.add_argument("--max-games", type=int, default=2000, help="games per split")
  args = ap.parse_args(argv)

  def go():
    return run(
      args.workdir,
      data=cli.datasets(args),
      which=args.checkpoint,
      max_games=args.max_games,
      batch_size=args.batch_size,
    )

  return cli.run_workdir_command(ap, args, go, report=lambda result: print(table(result)))


if __name__ == "__main__":
  sys.exit(main())
