"""Strata: the steps of a game where the chess state is hard to track, and the steps right after.

A model that tracks the board must apply every rule, not only the common ones: a capture removes a
piece, a king move may also move a rook, a promotion changes a piece's kind, castling rights and
en-passant squares come and go. Scoring ExactState and each label group's accuracy on the steps
where such an event happens (and on the step right after it, where a delayed update shows) says
which rule a model fails, where the pooled metrics cannot.

Step t is the state after ply t (t = 0: the initial position). A step belongs to a stratum when,
replayed with python-chess under the game's rules:
  capture        ply t captured a piece (en passant included; an atomic capture explodes too)
  check          the side to move at step t is in check
  king_move      ply t moved the king (castling included)
  promotion      ply t promoted a pawn
  castling_lost  ply t took away a castling right (king or rook moved, rook captured)
  ep_available   at step t an en-passant capture is a legal move
  ep_label       the e.p. label changes at step t: set, cleared or moved (in the labels' `pseudo`
                 mode it is set after every double push and cleared a ply later; in `legal` mode
                 only when the capture is legal; `chessjax.encoding.snapshot`)
`after_NAME` is the step right after a step of NAME (t + 1). A step can belong to several strata.

Atomic games (`variant="atomic"`, `names("atomic")`) have three strata more, where the rule change
itself acts (`ATOMIC_STRATA`; a chess game's flags and results have none of them, so chess
evaluations and their records are as before):
  explosion       ply t's capture removed more than the capturer and the captured piece (the
                  explosion took a piece on a square next to the capture's)
  king_exploded   ply t's explosion removed a king (the game ends there)
  rule_divergent  ply t's move, legal under the atomic rules (every move played is), is not legal
                  under the standard rules from the same position (the atomic position before
                  ply t read as a standard board: e.g. a king stepping next to the enemy king, or
                  a move that leaves the own king attacked by a piece whose capture of it would
                  explode both kings). The converse, a move legal in standard chess and not in
                  atomic (a king capture, a capture exploding the own king), is never played in
                  an atomic game, so it is not a stratum of one. Not the first divergent ply
                  (`chessjax.world_model.divergence`), from which on the rule sets may differ.

Events come at their own plies (castling early, promotions late), and ExactState depends mostly on
the ply: a stratum's score alone says as much about when its events happen as about the rule.
So beside each stratum's scores the accumulator gives `matched`: the same model's scores on the
other steps (those not in the stratum) at the same plies, each ply weighted by the stratum's
steps there. A stratum below its `matched` is a rule the model gets wrong, not a late ply.

ExactState at a step also carries every earlier error: once a game's state is wrong it tends to
stay wrong, so a stratum late in games scores low whatever its rule. `transition_error` isolates
the rule: of the stratum's steps t >= 1 whose previous step t - 1 was exact, the share that are
not exact at t (the model broke the state at this very step), beside the same share over the
other steps at the same plies whose previous step was exact (`matched`, weighted by the
stratum's such steps at each ply).
"""

import hashlib
import inspect
import json
import os
from pathlib import Path

import chess
import numpy as np

from chessjax import encoding, labels, runtime
from chessjax.data import pipeline
from chessjax.data.source import GameSource
from chessjax.files import as_path

STRATA = (
  "capture", "check", "king_move", "promotion", "castling_lost", "ep_available", "ep_label",
)  # fmt: skip
NAMES = (*STRATA, *(f"after_{s}" for s in STRATA))  # Of a chess game.
ATOMIC_STRATA = ("explosion", "king_exploded", "rule_divergent")


def names(variant: str = "chess") -> tuple[str, ...]:
  """The strata (and their `after_` steps) of a game under `variant`'s rules, in `game_flags`'s
  column order: `NAMES`, and for atomic games `ATOMIC_STRATA` too."""
  own = (*STRATA, *ATOMIC_STRATA) if variant == "atomic" else STRATA
  return (*own, *(f"after_{s}" for s in own))


GROUP_NAMES = tuple(name for name, *_ in labels.GROUPS)
GROUP_SIZES = np.array([count for _, _, count, _ in labels.GROUPS], dtype=np.int64)


def _ep_label(board: chess.Board, ep_mode: str):
  """The e.p. square the labels hold at this position (`encoding.snapshot`), or None."""
  if ep_mode == "legal" and not encoding.has_legal_ep(board):
    return None
  return board.ep_square


def game_flags(moves, variant: str = "chess", ep_mode: str = "pseudo") -> np.ndarray:
  """bool[T, len(names(variant))]: which strata each step of a game (move ids, START first)
  belongs to; `ep_mode` is the labels' (`chessjax.encoding.EP_MODES`)."""
  board = encoding.new_board(variant)
  atomic = variant == "atomic"
  flags = np.zeros((len(moves), len(STRATA) + atomic * len(ATOMIC_STRATA)), dtype=bool)
  ep = None
  for t in range(len(moves)):
    if t > 0:
      move = chess.Move.from_uci(encoding.id_to_move(int(moves[t])))
      rights = board.clean_castling_rights()
      flags[t, 0] = board.is_capture(move)
      flags[t, 2] = board.piece_type_at(move.from_square) == chess.KING
      flags[t, 3] = move.promotion is not None
      if atomic:
        pieces, kings = chess.popcount(board.occupied), chess.popcount(board.kings)
        flags[t, len(STRATA) + 2] = not chess.Board(board.fen()).is_legal(move)
      board.push(move)
      flags[t, 4] = board.clean_castling_rights() != rights
      if atomic:
        # The capturer and the captured piece, and any piece the explosion took beside them.
        flags[t, len(STRATA)] = flags[t, 0] and pieces - chess.popcount(board.occupied) > 2
        flags[t, len(STRATA) + 1] = chess.popcount(board.kings) < kings
    flags[t, 1] = board.is_check()
    flags[t, 5] = encoding.has_legal_ep(board)
    ep, before = _ep_label(board, ep_mode), ep
    flags[t, 6] = ep != before
  after = np.zeros_like(flags)
  after[1:] = flags[:-1]
  return np.concatenate([flags, after], axis=1)


class StrataAccumulator:
  """Sums, per stratum and ply, the steps, exact steps and each label group's right labels, and
  the same over all steps, from per-step results of a model (`add`, one game at a time); turns
  them into metrics (`result`), each stratum's beside its ply-matched other steps'."""

  def __init__(self, strata: tuple[str, ...] = NAMES):
    self.names = strata  # The columns of the flags `add` is given (`names(variant)`).
    s = len(strata)
    self.plies = 0
    self.steps = np.zeros((s, 0), np.int64)  # [S, P]
    self.exact = np.zeros((s, 0), np.int64)
    self.group_correct = np.zeros((s, 0, len(GROUP_NAMES)), np.int64)  # [S, P, G]
    self.all_steps = np.zeros(0, np.int64)  # [P]
    self.all_exact = np.zeros(0, np.int64)
    self.all_group_correct = np.zeros((0, len(GROUP_NAMES)), np.int64)
    # Steps t >= 1 whose step t - 1 was exact, and those of them not exact at t.
    self.kept = np.zeros((s, 0), np.int64)  # [S, P]
    self.broken = np.zeros((s, 0), np.int64)
    self.all_kept = np.zeros(0, np.int64)  # [P]
    self.all_broken = np.zeros(0, np.int64)

  def _grow(self, plies: int) -> None:
    if plies <= self.plies:
      return
    more = plies - self.plies
    pad = (
      lambda a, axis: np.concatenate(  # noqa: E731
        [a, np.zeros((*a.shape[:axis], more, *a.shape[axis + 1 :]), a.dtype)], axis=axis
      )
    )
    self.steps, self.exact = pad(self.steps, 1), pad(self.exact, 1)
    self.group_correct = pad(self.group_correct, 1)
    self.all_steps, self.all_exact = pad(self.all_steps, 0), pad(self.all_exact, 0)
    self.all_group_correct = pad(self.all_group_correct, 0)
    self.kept, self.broken = pad(self.kept, 1), pad(self.broken, 1)
    self.all_kept, self.all_broken = pad(self.all_kept, 0), pad(self.all_broken, 0)
    self.plies = plies

  def add(self, flags: np.ndarray, exact: np.ndarray, group_correct: np.ndarray) -> None:
    """flags bool[T, S] (`game_flags`), exact bool[T] and group_correct int[T, G] (right labels
    per group) of the same T steps of one game, step t at ply t."""
    t = len(flags)
    self._grow(t)
    f = flags.T.astype(np.int64)  # [S, T]
    exact = exact.astype(np.int64)
    group_correct = group_correct.astype(np.int64)
    self.steps[:, :t] += f
    self.exact[:, :t] += f * exact
    self.group_correct[:, :t] += f[:, :, None] * group_correct[None]
    self.all_steps[:t] += 1
    self.all_exact[:t] += exact
    self.all_group_correct[:t] += group_correct
    kept = np.r_[0, exact[:-1]]  # Step t - 1 exact (none before step 0).
    broken = kept * (1 - exact)
    self.kept[:, :t] += f * kept
    self.broken[:, :t] += f * broken
    self.all_kept[:t] += kept
    self.all_broken[:t] += broken

  def result(self) -> dict:
    """{stratum: {steps, exact_state, groups: {group: accuracy}, matched, transition_error}}:
    `matched` holds the other steps' exact_state and groups at the stratum's plies (each ply
    weighted by the stratum's steps there; plies without another step are left out) and `steps`,
    the stratum's steps so matched. `transition_error` is {steps, error, matched: {steps,
    error}}: of the stratum's steps whose previous step was exact, how many and the share not
    exact, and the same share over the other such steps at the same plies, weighted likewise.
    Metrics are None for a stratum with no step (e.g. no promotion in a short split) or none
    matched."""
    out = {}
    for i, name in enumerate(self.names):
      n = int(self.steps[i].sum())
      out[name] = _scores(n, self.exact[i].sum(), self.group_correct[i].sum(0))
      others = self.all_steps - self.steps[i]
      weight = np.where(others > 0, self.steps[i], 0).astype(np.float64)
      per = np.maximum(others, 1)
      matched = int(weight.sum())
      exact = weight @ ((self.all_exact - self.exact[i]) / per)
      groups = weight @ ((self.all_group_correct - self.group_correct[i]) / per[:, None])
      out[name]["matched"] = _scores(matched, exact, groups)
      out[name]["transition_error"] = self._transition_error(i)
    return out

  def _transition_error(self, i: int) -> dict:
    """Stratum i's share of broken steps among those whose previous step was exact, beside the
    other such steps' share at the same plies (each ply weighted by the stratum's kept steps)."""
    n = int(self.kept[i].sum())
    others = self.all_kept - self.kept[i]
    weight = np.where(others > 0, self.kept[i], 0).astype(np.float64)
    matched = int(weight.sum())
    error = weight @ ((self.all_broken - self.broken[i]) / np.maximum(others, 1))
    return {
      "steps": n,
      "error": float(self.broken[i].sum() / n) if n else None,
      "matched": {"steps": matched, "error": float(error / matched) if matched else None},
    }


def _scores(steps: int, exact: float, group_correct: np.ndarray) -> dict:
  """{steps, exact_state, groups} from `steps` steps' exact and right-label sums."""
  return {
    "steps": steps,
    "exact_state": float(exact / steps) if steps else None,
    "groups": {
      g: float(group_correct[j] / (steps * GROUP_SIZES[j])) if steps else None
      for j, g in enumerate(GROUP_NAMES)
    },
  }


def definitions() -> str:
  """What the flags depend on: the strata's names and the code that computes them (a cache of
  flags made by other definitions is not read back)."""
  return repr(NAMES) + inspect.getsource(_ep_label) + inspect.getsource(game_flags)


def dataset_flags(path, split: str, num_games: int, variant: str = "chess") -> list[np.ndarray]:
  """`game_flags` of the first `num_games` games of a dataset split, in stored order, under the
  split's labels' e.p. mode (its manifest's).

  Replaying a split with python-chess takes minutes (about 20,000 steps/s), so the flags of a
  local dataset are cached per user (`$XDG_CACHE_HOME/chessjax/strata`, keyed by the split's
  manifest and lengths, the game count, the rules and the strata's definitions): every run
  evaluated on the same test set replays it once.
  """
  manifest = as_path(path).joinpath("manifest.json").read_bytes()
  ep_mode = json.loads(manifest).get("encoding", {}).get("ep_mode", "pseudo")
  key = hashlib.sha256()
  key.update(manifest)
  key.update(np.asarray(pipeline.game_lengths(path, split)).tobytes())
  key.update(f"{split}:{num_games}:{variant}:{ep_mode}:{definitions()}".encode())
  cache = Path(runtime.default_cache_dir()).parent / "strata" / f"{key.hexdigest()[:32]}.npz"
  if cache.exists():
    with np.load(cache) as z:
      return np.split(z["flags"], z["offsets"][1:-1])
  source = GameSource(path, split)
  out = [game_flags(source[g]["moves"], variant, ep_mode) for g in range(num_games)]
  offsets = np.cumsum([0] + [len(f) for f in out])
  cache.parent.mkdir(parents=True, exist_ok=True)
  tmp = cache.with_name(f".{cache.stem}.{os.getpid()}.tmp.npz")
  np.savez_compressed(tmp, flags=np.concatenate(out), offsets=offsets)
  os.replace(tmp, cache)
  return out
