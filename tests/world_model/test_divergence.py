"""Where atomic and standard chess part (`chessjax.world_model.divergence`): each atomic game's
first divergent ply on hand-built games whose divergence is known, checked position by position
against python-chess's two rule sets; the scores from that ply on; and each atomic test game
beside its chess twin on small generated sets."""

import random

import chess
import chess.variant
import numpy as np
import pytest

from chessjax import encoding, labels
from chessjax.data import GameSource
from chessjax.world_model import divergence
from data_prep import random_uniform

# (moves, the first divergent ply: the ply played from the first position where the rule sets
# disagree; step k is the state after it).
GAMES = {
  # exd5: the pawn that captures explodes with the pawn it takes; under standard rules it stays.
  "a capture explodes": ("e2e4 d7d5 e4d5 d8d5", 3),
  # Nxf7 explodes the king on e8 beside f7: the game ends there.
  "a king explodes": ("g1f3 e7e6 f3e5 d7d6 e5f7", 5),
  # After Kf3 and ...a6 the white king stands beside the undefended pawn on f4: standard rules
  # let it take the pawn, atomic rules let no king capture. No capture is played.
  "a king may not capture": ("e2e4 f7f5 e1e2 f5f4 e2f3 a7a6 h2h3", 7),
  # With the kings on c4 and d6, ...Kc5 (and ...Kd5) steps next to the enemy king: legal only in
  # atomic chess (where the kings also may not take each other).
  "a move legal only in atomic": ("e2e4 e7e5 e1e2 e8e7 e2e3 e7e6 e3d3 e6d6 d3c4 d6c5 c4b5", 10),
  # exd6 e.p. explodes too; the e.p. square itself is the same under both rules.
  "en passant": ("e2e4 a7a6 e4e5 d7d5 e5d6", 5),
  # No capture, no king near another piece: the rules never disagree.
  "no divergence": ("e2e4 e7e5 g1f3 b8c6 f1c4 g8f6", None),
}


def _moves(ucis: str) -> np.ndarray:
  return encoding.encode_game(ucis.split(), variant="atomic")[0]


def _disagree_at(ucis: str, t: int) -> bool:
  """Straight from python-chess: do the rule sets disagree on the position after ply t (legal
  moves, or the board after ply t + 1)?"""
  played = ucis.split()
  atomic = chess.variant.AtomicBoard()
  for u in played[:t]:
    atomic.push_uci(u)
  standard = chess.Board(atomic.fen(en_passant="fen"))
  if {m.uci() for m in atomic.legal_moves} != {m.uci() for m in standard.legal_moves}:
    return True
  atomic.push_uci(played[t])
  standard.push_uci(played[t])
  return atomic.fen(en_passant="fen") != standard.fen(en_passant="fen")


@pytest.mark.parametrize("name", sorted(GAMES))
@pytest.mark.parametrize("ep_mode", encoding.EP_MODES)
def test_first_divergent_ply_of_hand_built_games(name, ep_mode):
  ucis, want = GAMES[name]
  moves = _moves(ucis)
  assert divergence.first_divergent_ply(moves, ep_mode) == want
  plies = len(ucis.split())
  # python-chess itself: the rule sets agree before the divergent position, not at it.
  agree = [not _disagree_at(ucis, t) for t in range(plies)]
  k = plies + 1 if want is None else want
  assert all(agree[: k - 1]) and (want is None or not agree[k - 1])
  # Only the steps scored count: a limit at or before the divergent ply hides it.
  if want is not None:
    assert divergence.first_divergent_ply(moves, ep_mode, steps=want) is None
    assert divergence.first_divergent_ply(moves, ep_mode, steps=want + 1) == want


def test_after_divergence_counts_the_steps_from_the_divergent_ply_on():
  after = divergence.AfterDivergence([2, None, 5, 1])
  n = labels.NUM_LABELS
  exact = np.array([1, 1, 0, 1, 1], bool)
  correct = np.where(exact, n, n - 3)
  ce = np.arange(5, dtype=np.float32)
  after.add(0, exact, correct, ce)  # Steps 2-4: one wrong.
  after.add(1, exact, correct, ce)  # Never diverges.
  after.add(2, exact, correct, ce)  # Diverges at ply 5: beyond its 5 scored steps.
  after.add(3, exact[3:], correct[3:], ce[3:])  # Steps 1 of 2 scored: exact.
  r = after.result()
  assert r["games"] == 2 and r["games_without_divergence"] == 2 and r["steps"] == 4
  assert r["exact_state"] == 3 / 4 and r["trajectory"] == 1 / 2
  assert r["labelwise"] == pytest.approx((4 * n - 3) / (4 * n))
  assert r["loss"] == pytest.approx((2 + 3 + 4 + 4) / (4 * n))
  empty = divergence.AfterDivergence([None]).result()
  assert empty["steps"] == 0 and empty["exact_state"] is None and empty["trajectory"] is None


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
  root = tmp_path_factory.mktemp("twins")
  out = {}
  for variant, games, seed in (("atomic", 20, 0), ("chess", 20, 0), ("other", 5, 1)):
    rules = "chess" if variant == "other" else variant
    random_uniform.generate(
      root / variant, games=games, seed=seed, variant=rules, workers=1, progress=False
    )
    out[variant] = root / variant
  return out


def test_twin_summary_pairs_each_game_with_the_chess_game_of_its_seed(twins):
  max_len = 64
  got = divergence.twin_summary(twins["atomic"], twins["chess"], max_len)
  atomic, chess_games = GameSource(twins["atomic"], "test"), GameSource(twins["chess"], "test")
  chess_ids = {chess_games[i]["example_id"]: chess_games[i] for i in range(len(chess_games))}
  shared, plies = [], []
  for i in range(len(atomic)):
    game = atomic[i]
    n = int(game["example_id"].rsplit("_", 1)[1])
    # The game is the one its per-game seed plays under atomic rules.
    moves, _, _ = random_uniform.play_random_game(
      random.Random(random_uniform.game_seed(0, n)).randrange, variant="atomic"
    )
    np.testing.assert_array_equal(game["moves"], moves)
    twin = chess_ids.get(random_uniform.DEFAULT_ID.format(seed=0, index=n))
    if twin is not None:
      m = min(len(game["moves"]), len(twin["moves"]), max_len)
      same = [
        game["moves"][t] == twin["moves"][t] and (game["states"][t] == twin["states"][t]).all()
        for t in range(m)
      ]
      shared.append(same.index(False) if False in same else m)
    k = divergence.first_divergent_ply(game["moves"], "pseudo", max_len)
    if k is not None:
      plies.append(k)
  assert got["games"] == 20 and got["with_twin"] == len(shared) > 0
  assert got["diverged"] == len(plies) and got["max_len"] == max_len
  for key, xs in (("shared_steps", shared), ("divergence_ply", plies)):
    q = got[key]
    assert (q["min"], q["max"], q["mean"]) == (min(xs), max(xs), pytest.approx(np.mean(xs)))
    assert q["median"] == np.median(xs) and q["q1"] <= q["median"] <= q["q3"]
  # Every game shares its first step (the initial position) with its twin.
  assert got["shared_steps"]["min"] >= 1


def test_twin_summary_refuses_sets_that_are_not_twins(twins):
  with pytest.raises(ValueError, match="different seeds"):
    divergence.twin_summary(twins["atomic"], twins["other"], 64)
  with pytest.raises(ValueError, match="an atomic dataset, then a chess dataset"):
    divergence.twin_summary(twins["chess"], twins["atomic"], 64)
