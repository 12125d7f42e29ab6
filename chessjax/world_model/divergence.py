"""Where atomic and standard chess part: each atomic game's first divergent ply, the scores from
it on (`AfterDivergence`, an evaluation's `after_divergence`), and each atomic test game beside
its chess twin (`twin_summary`).

Step t is the state after ply t (t = 0: the initial position), as everywhere in the world-model
track; ply t + 1 is played from the position of step t. Replayed with python-chess, the position
of step t of an atomic game *diverges* when the two rule sets disagree on it:
  * its legal moves differ: `set(chess.variant.AtomicBoard(P).legal_moves)` against
    `set(chess.Board(P).legal_moves)`, P the same placement, side to move, castling rights, e.p.
    square and clocks (e.g. a king beside the enemy king, a capture that would explode the own
    king, a king that standard rules let capture the other), or
  * the game's next move (ply t + 1) leaves different labels under the two rule sets
    (`encoding.snapshot` in the dataset's e.p. mode: an explosion; in the `legal` mode also an
    e.p. square that only one rule set lets be taken).
The game's *first divergent ply* is k = t + 1 for the first diverging position t that a move
follows. Every ply before k was played from a position where the rules agree and leaves the same
labels under both, so steps 0 .. k - 1 are states standard chess rules produce from the same
moves; step k (the state after ply k) is the first whose state, or the move that led to it, the
rule change can touch. This is not the `rule_divergent` stratum (`chessjax.world_model.strata`),
which flags the steps whose own move is illegal in standard chess, wherever they come.

`after_divergence` scores the steps t >= k of each game (up to its scored length); a game whose
first divergent ply is not among its scored steps (k >= the steps scored, or none at all)
contributes no step and is counted in `games_without_divergence`.

An atomic test game's *chess twin* is the random-uniform chess game generated from the same
per-game seed (`data_prep.random_uniform`'s default mode seeds game n, skipped games counted,
from (seed, n), and names it by n: the manifests' `generator.id_format`). The two play the same
moves while their legal-move lists agree, order included (in some positions python-chess lists
the same moves in another order under atomic rules); `twin_summary` says how many steps they
share.
"""

import hashlib
import inspect
import os
import re
from pathlib import Path

import chess
import chess.variant
import numpy as np

from chessjax import encoding, labels, runtime
from chessjax.data import pipeline
from chessjax.data.source import GameSource, read_manifest, resolve_split, variant_of_manifest
from chessjax.files import as_path

QUANTILES = ("mean", "min", "q1", "median", "q3", "max")


def _move(move_id) -> chess.Move:
  return chess.Move.from_uci(encoding.id_to_move(int(move_id)))


def position_diverges(atomic: chess.variant.AtomicBoard, move: chess.Move, ep_mode: str) -> bool:
  """Whether the rule sets disagree on `atomic`'s position: its legal moves, or the labels `move`
  (played next, legal in atomic chess) leaves under each."""
  standard = chess.Board(atomic.fen(en_passant="fen"))  # The e.p. square even when not takeable.
  if set(atomic.legal_moves) != set(standard.legal_moves):
    return True
  after = atomic.copy(stack=False)
  after.push(move)
  standard.push(move)
  return encoding.snapshot(after, ep_mode) != encoding.snapshot(standard, ep_mode)


def first_divergent_ply(moves, ep_mode: str = "pseudo", steps: int | None = None) -> int | None:
  """The first divergent ply k of an atomic game (move ids, START first) among its first `steps`
  steps (default: all): 1 <= k < min(len(moves), steps), or None when no position before one of
  those steps diverges."""
  n = len(moves) if steps is None else min(len(moves), int(steps))
  board = chess.variant.AtomicBoard()
  for t in range(n - 1):
    move = _move(moves[t + 1])
    if position_diverges(board, move, ep_mode):
      return t + 1
    board.push(move)
  return None


def dataset_first_plies(path, split: str, num_games: int, steps) -> list[int | None]:
  """`first_divergent_ply` of the first `num_games` games of an atomic dataset split, in stored
  order, each among its first `steps[g]` steps, under the split's labels' e.p. mode.

  About 7 ms a game, so the plies of a local dataset are cached per user beside the strata's
  flags (`$XDG_CACHE_HOME/chessjax/divergence`, keyed by the split's manifest and lengths, the
  steps and this module's definitions): every run scored on the same test set replays it once.
  """
  manifest = as_path(path).joinpath("manifest.json").read_bytes()
  ep_mode = read_manifest(path).get("encoding", {}).get("ep_mode", "pseudo")
  steps = np.asarray(steps, np.int64)[:num_games]
  key = hashlib.sha256(manifest)
  key.update(np.asarray(pipeline.game_lengths(path, split)).tobytes())
  key.update(steps.tobytes())
  source_code = inspect.getsource(position_diverges) + inspect.getsource(first_divergent_ply)
  key.update(f"{split}:{num_games}:{ep_mode}:{source_code}".encode())
  cache = Path(runtime.default_cache_dir()).parent / "divergence" / f"{key.hexdigest()[:32]}.npy"
  if cache.exists():
    return [None if k < 0 else int(k) for k in np.load(cache)]
  games = GameSource(path, split)
  out = [first_divergent_ply(games[g]["moves"], ep_mode, int(steps[g])) for g in range(num_games)]
  cache.parent.mkdir(parents=True, exist_ok=True)
  tmp = cache.with_name(f".{cache.stem}.{os.getpid()}.tmp.npy")
  np.save(tmp, np.array([-1 if k is None else k for k in out], np.int64))
  os.replace(tmp, cache)
  return out


class AfterDivergence:
  """Sums, over the steps t >= k of each game (k its first divergent ply), the steps, exact steps,
  right labels and cross-entropy, game by game (`add`), and turns them into the evaluation's
  `after_divergence` (`result`)."""

  def __init__(self, first_plies: list[int | None]):
    self.first = first_plies
    self.games = self.without = self.steps = self.exact = self.exact_games = 0
    self.correct = 0
    self.ce = 0.0

  def add(self, game: int, exact: np.ndarray, correct: np.ndarray, step_ce: np.ndarray) -> None:
    """Game `game`'s scored steps: exact bool[T], right labels int[T], summed cross-entropy
    float[T] (over the 75 labels), step t at ply t."""
    k = self.first[game]
    if k is None or k >= len(exact):
      self.without += 1
      return
    self.games += 1
    self.steps += len(exact) - k
    self.exact += int(exact[k:].sum())
    self.exact_games += bool(exact[k:].all())
    self.correct += int(np.asarray(correct[k:], np.int64).sum())
    self.ce += float(np.asarray(step_ce[k:], np.float64).sum())

  def result(self) -> dict:
    """{games, games_without_divergence, steps, loss, labelwise, exact_state, trajectory}: the
    metrics of `chessjax.world_model.metrics` over the steps from each game's first divergent ply
    on (trajectory: the share of those games exact on every such step); None with no step."""
    n = self.steps
    return {
      "games": self.games,
      "games_without_divergence": self.without,
      "steps": n,
      "loss": self.ce / (labels.NUM_LABELS * n) if n else None,
      "labelwise": self.correct / (labels.NUM_LABELS * n) if n else None,
      "exact_state": self.exact / n if n else None,
      "trajectory": self.exact_games / self.games if self.games else None,
    }


# ------------------------------------------------------------------------------------------------
# Twins


def _quantiles(xs: list[int]) -> dict:
  """mean, min, quartiles (numpy's linear interpolation) and max; None each without values."""
  if not xs:
    return dict.fromkeys(QUANTILES)
  a = np.asarray(xs, np.float64)
  q1, median, q3 = np.percentile(a, [25, 50, 75])
  return {
    "mean": float(a.mean()), "min": int(a.min()), "q1": float(q1), "median": float(median),
    "q3": float(q3), "max": int(a.max()),
  }  # fmt: skip


def _index_pattern(manifest: dict) -> re.Pattern:
  """The per-game index n in a default-mode random-uniform dataset's example ids."""
  gen = manifest.get("generator", {})
  if manifest.get("kind") != "random_uniform" or gen.get("mode") != "default":
    raise ValueError("twins need random-uniform datasets of the default mode (per-game seeds)")
  fmt = gen["id_format"].replace("{seed}", str(gen["seed"]))
  head, _, tail = fmt.partition("{index:05d}")
  return re.compile(re.escape(head) + r"(\d+)" + re.escape(tail) + "$")


def _game_index(pattern: re.Pattern, example_id: str) -> int:
  m = pattern.match(example_id)
  if m is None:
    raise ValueError(f"example id {example_id!r} does not follow its manifest's id_format")
  return int(m.group(1))


def shared_steps(a: dict, b: dict, max_len: int) -> int:
  """How many leading steps two games (dicts with `moves` and `states`) share, the same move and
  the same labels at each, within `max_len` steps."""
  n = min(len(a["moves"]), len(b["moves"]), int(max_len))
  same = (a["moves"][:n] == b["moves"][:n]) & (a["states"][:n] == b["states"][:n]).all(-1)
  return int(n if same.all() else np.argmin(same))


def twin_summary(atomic_dataset_dir, chess_dataset_dir, max_len: int, split=None) -> dict:
  """Each atomic test game beside its chess twin (the chess game of the same per-game seed), over
  the first `max_len` steps of each.

  Returns {games: atomic games, with_twin: those whose twin is in the chess split, diverged: those
  with a first divergent ply among their first `max_len` steps, max_len, shared_steps: quantiles
  (mean, min, q1, median, q3, max) of the steps each atomic game with a twin shares with it (the
  same moves and labels from step 0 on), divergence_ply: the same quantiles of the first divergent
  ply of the diverged games (`first_divergent_ply`)}. Both datasets must be random-uniform sets
  of the default mode with the same seed; `split` as `chessjax.data.source.resolve_split`.
  """
  manifests = {d: read_manifest(d) for d in (atomic_dataset_dir, chess_dataset_dir)}
  ma, mc = manifests[atomic_dataset_dir], manifests[chess_dataset_dir]
  if (variant_of_manifest(ma), variant_of_manifest(mc)) != ("atomic", "chess"):
    raise ValueError("twin_summary takes an atomic dataset, then a chess dataset")
  if ma.get("generator", {}).get("seed") != mc.get("generator", {}).get("seed"):
    raise ValueError("the atomic and chess datasets were generated from different seeds")
  ids = {d: _index_pattern(m) for d, m in manifests.items()}
  ep_mode = ma.get("encoding", {}).get("ep_mode", "pseudo")
  atomic = GameSource(atomic_dataset_dir, resolve_split(atomic_dataset_dir, split))
  chess_games = GameSource(chess_dataset_dir, resolve_split(chess_dataset_dir, split))
  by_index = {}
  for g in range(len(chess_games)):
    game = chess_games[g]
    by_index[_game_index(ids[chess_dataset_dir], game["example_id"])] = game
  shared, plies = [], []
  for g in range(len(atomic)):
    game = atomic[g]
    twin = by_index.get(_game_index(ids[atomic_dataset_dir], game["example_id"]))
    if twin is not None:
      shared.append(shared_steps(game, twin, max_len))
    k = first_divergent_ply(game["moves"], ep_mode, max_len)
    if k is not None:
      plies.append(k)
  return {
    "games": len(atomic),
    "with_twin": len(shared),
    "diverged": len(plies),
    "max_len": int(max_len),
    "shared_steps": _quantiles(shared),
    "divergence_ply": _quantiles(plies),
  }
