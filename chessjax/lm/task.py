"""The blindfolded language-model task for the training loop (Toshniwal et al. 2022, section 3).

A game is a row of UCI tokens (`chessjax.lm.tokens`): `<s>`, 2-3 tokens a move, `</s>`, with
piece letters inserted for RAP (a fresh Bernoulli(p) draw per move and epoch) and AP (always).
The model reads `inputs` = tokens[:-1] and is scored on `targets` = tokens[1:] with per-token
`weights` (inserted piece letters are targets unless `score_piece_tokens` is off). Training loss:
the mean NLL over scored tokens. Evaluation rows carry no piece letters except for AP; every
non-AP model has the six piece logits masked there (`eval_logits`: the one statement of that rule,
which perplexity, the probes, the token roles and the atomic track's LM picker all go through);
the reported loss is per move, summed NLL
over (moves + 1) per game (`</s>` counts as a move), and perplexity its exponential.

Batches (`b` rows, `T` tokens): inputs int32[b, T] (`<pad>` after the row), targets int32[b, T],
weights float32[b, T] (0 on padding and unscored targets), mask bool[b, T] (weights > 0),
moves float32[b] (moves + 1 of the game; 0 on pad rows).
"""

import logging

import jax.numpy as jnp
import numpy as np

from chessjax.data.source import read_manifest
from chessjax.lm import tokens as tk
from chessjax.spec import TrainSpec

log = logging.getLogger(__name__)


def eval_logits(logits, vocab, notation: str):
  """Logits [..., V] as evaluation scores them (Toshniwal et al. 2022, section 4): every non-AP
  model has its six piece-letter logits set to -inf, since its evaluation rows hold no letter.
  A numpy array comes back as a new numpy array (the input untouched), a jax array as a jax
  array; `LanguageModelTask.eval_logits` is this rule for a task's vocab and notation."""
  if notation == "ap":
    return logits
  if isinstance(logits, np.ndarray):
    out = np.array(logits, copy=True)
    out[..., vocab.piece_ids] = -np.inf
    return out
  return jnp.asarray(logits).at[..., vocab.piece_ids].set(-jnp.inf)


class TokenRows:
  """Rows of the LM task from stored games (`chessjax.data.rows.RowFormat`).

  `train=True`: training rows (`tokens.lm_row`, RAP redrawn per epoch from (seed, epoch, game
  index)); `train=False`: evaluation rows (`tokens.eval_row`).
  """

  def __init__(self, vocab, notation: str, *, rap_p: float, seed: int, train: bool,
               score_piece_tokens: bool = True):  # fmt: skip
    if notation not in tk.NOTATIONS:
      raise ValueError(f"notation must be one of {tk.NOTATIONS}, got {notation!r}")
    self.vocab, self.notation, self.rap_p, self.seed = vocab, notation, rap_p, seed
    self.train, self.score_piece_tokens = train, score_piece_tokens
    self.letters = notation == "ap" or (notation == "rap" and train)

  def lengths(self, steps: np.ndarray) -> np.ndarray:
    """Input length bound per game (tokens - 1) from its steps (plies + 1)."""
    plies = np.asarray(steps, dtype=np.int64) - 1
    return (tk.token_length_bound(plies, letters=self.letters) - 1).astype(np.int32)

  def row(self, game: dict, index: int, epoch: int) -> dict:
    moves, states = game["moves"], game["states"]
    if self.train:
      return tk.lm_row(
        moves,
        states,
        vocab=self.vocab,
        notation=self.notation,
        rap_p=self.rap_p,
        seed=self.seed,
        epoch=epoch,
        game_index=index,
        score_piece_tokens=self.score_piece_tokens,
      )
    return tk.eval_row(moves, states, vocab=self.vocab, notation=self.notation)

  def batch(self, games, length: int, *, max_len: int | None, epoch: int) -> dict:
    b = len(games)
    inputs = np.full((b, length), self.vocab.pad_id, np.int32)
    targets = np.full((b, length), self.vocab.pad_id, np.int32)
    weights = np.zeros((b, length), np.float32)
    moves = np.zeros(b, np.float32)
    for r, item in enumerate(games):
      if item is None:
        continue
      index, game = item
      row = self.row(game, index, epoch)
      n = len(row["inputs"])
      if n > length or (max_len is not None and n > max_len):
        raise ValueError(
          f"game {index} has {n} input tokens, more than the batch's {length} (max_len "
          f"{max_len}): raise data.max_len or drop long games when preparing the data"
        )
      inputs[r, :n], targets[r, :n], weights[r, :n] = row["inputs"], row["targets"], row["weights"]
      moves[r] = row["num_moves"]
    return {
      "inputs": inputs,
      "targets": targets,
      "weights": weights,
      "mask": weights > 0,
      "moves": moves,
    }


class LanguageModelTask:
  head = "tokens"
  batch_keys = ("inputs", "targets", "weights", "moves")
  selection_metric = "loss"

  def __init__(self, vocab, notation: str, *, rap_p: float, seed: int, tie_embeddings: bool,
               score_piece_tokens: bool = True):  # fmt: skip
    self.vocab, self.notation, self.pad_id = vocab, notation, vocab.pad_id
    self.model_kwargs = {"vocab_size": len(vocab.tokens), "tie_embeddings": tie_embeddings}
    common = {"rap_p": rap_p, "seed": seed, "score_piece_tokens": score_piece_tokens}
    self.rows = TokenRows(vocab, notation, train=True, **common)
    self.eval_rows = TokenRows(vocab, notation, train=False, **common)

  def loss(self, model, batch: dict, *, train: bool):
    logits = model(batch["inputs"], train=train)
    nll = tk.token_nll(logits, batch["targets"])
    w = batch["weights"]
    return jnp.sum(nll * w) / jnp.maximum(jnp.sum(w), 1.0)

  def loss_weight(self, batch: dict):
    """The loss pools over the scored targets: the sum of their `weights`."""
    return jnp.sum(batch["weights"].astype(jnp.float32))

  def eval_logits(self, logits):
    """Logits as evaluation scores them: piece letters masked for every non-AP model (the
    module-level `eval_logits`)."""
    return eval_logits(logits, self.vocab, self.notation)

  def probe_positions(self, game: dict) -> tuple[np.ndarray, np.ndarray]:
    """The game's evaluation row (`tokens.eval_row`, `<s>` first; AP rows carry piece letters)
    without `</s>`; a move ends at its to-square token or its promotion letter."""
    moves, states = np.asarray(game["moves"]), game["states"]
    row = tk.eval_row(moves, states, vocab=self.vocab, notation=self.notation)
    per_move = tk.move_token_counts(moves, states, letters=self.notation == "ap")
    return row["inputs"], np.cumsum(per_move)  # `<s>` is index 0.

  def eval_stats(self, model, batch: dict) -> dict:
    logits = self.eval_logits(model(batch["inputs"], train=False))
    nll = tk.token_nll(logits, batch["targets"])
    w = batch["weights"]
    hit = (jnp.argmax(logits, -1) == batch["targets"]).astype(jnp.float32)
    return {
      "nll": jnp.sum(nll * w),
      "tokens": jnp.sum(w),
      "correct": jnp.sum(hit * w),
      "moves": jnp.sum(batch["moves"]),
    }

  def accumulator(self) -> "Sums":
    return Sums()

  def summarize(self, result: dict):
    line = (
      f"per-move loss {result['loss']:.4f}  perplexity {result['perplexity']:.3f}  "
      f"token loss {result['token_loss']:.4f}  top-1 {result['token_accuracy']:.4f}"
    )
    scalars = {f"validation/{k}": v for k, v in result.items() if k != "games"}
    return line, scalars, {}


class Sums:
  """Sums of `eval_stats` over batches -> per-move loss (the selection metric), perplexity."""

  def __init__(self):
    self.totals = {}

  def add(self, stats: dict) -> None:
    for k, v in stats.items():
      self.totals[k] = self.totals.get(k, 0.0) + float(np.asarray(v, np.float64))

  def result(self) -> dict:
    t = self.totals
    if not t or t["moves"] == 0:
      raise ValueError("no games were accumulated")
    loss = t["nll"] / t["moves"]
    return {
      "loss": loss,
      "perplexity": float(np.exp(loss)),
      "token_loss": t["nll"] / t["tokens"],
      "token_accuracy": t["correct"] / t["tokens"],
      "scored_tokens": int(t["tokens"]),
      "moves": int(t["moves"]),
    }


def check_config(config) -> None:
  """Warns, with both numbers, when the training split holds fewer games than the `lm.train`
  subset asks for (`data.max_train_games`: Train-S/M/L, Toshniwal et al. 2022, section 4): the
  run then trains on the whole, smaller split. (The run's length, epochs or steps, is checked
  for every task by `chessjax.spec.TrainSpec`.)"""
  data = TrainSpec.from_config(config).data
  if not data.max_train_games or not data.train:
    return
  try:
    have = read_manifest(data.train)["splits"][data.train_split]["games"]
  except (OSError, ValueError, KeyError):
    return  # No readable data here (e.g. evaluating elsewhere): nothing to compare.
  if have < data.max_train_games:
    log.warning(
      "lm.train=%s asks for the first %s training games but %s:%s holds %s: training on all %s",
      config.lm.train,
      f"{data.max_train_games:,}",
      data.train,
      data.train_split,
      f"{have:,}",
      f"{have:,}",
    )


def make_task(config) -> LanguageModelTask:
  """The task of an LM config's `lm` block (configs/lm.py), after `check_config`."""
  check_config(config)
  lm = config.lm
  vocab = tk.Vocab.from_file(lm.vocab) if lm.get("vocab") else tk.Vocab.default()
  return LanguageModelTask(
    vocab,
    lm.notation,
    rap_p=lm.rap_p,
    seed=config.seed,
    tie_embeddings=lm.tie_embeddings,
    score_piece_tokens=lm.get("score_piece_tokens", True),
  )
