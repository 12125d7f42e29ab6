"""Tokens, piece letters, RAP/AP rows, masking and per-move perplexity of the blindfolded chess LM
(Toshniwal et al. 2022, sections 2-4)."""

import chess
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import REPO
from token_helpers import detokenize, per_move_loss, per_move_perplexity, piece_letters

from chessjax import encoding
from chessjax.lm import tokens as tk
from chessjax.lm.task import eval_logits

VOCAB = tk.Vocab.default()


@pytest.fixture(scope="module")
def encoded(sample_games_uci):
  """(ucis, moves, states) of the first 300 sample games."""
  out = []
  for ucis in sample_games_uci[:300]:
    moves, states = encoding.encode_game(ucis)
    out.append((ucis, moves, states))
  return out


def test_default_vocab_layout():
  assert (REPO / "chessjax" / "lm" / "tokens.py").is_file()
  assert len(VOCAB) == 77
  assert VOCAB.tokens[:9] == ("<pad>", "<s>", "</s>", "P", "N", "R", "B", "Q", "K")
  assert VOCAB.tokens[9] == "a1" and VOCAB.tokens[10] == "b1" and VOCAB.tokens[72] == "h8"
  assert VOCAB.tokens[73:] == ("q", "r", "b", "n")
  assert VOCAB.square_ids[chess.E4] == 9 + chess.E4
  assert (VOCAB.piece_ids == np.arange(3, 9)).all()


def test_tokenize_example_from_table1():
  ids = tk.tokenize(["e2e4", "e7e5", "g1f3"], VOCAB, pieces=["P", None, "N"])
  assert [VOCAB.tokens[i] for i in ids] == [
    "<s>",
    "P",
    "e2",
    "e4",
    "e7",
    "e5",
    "N",
    "g1",
    "f3",
    "</s>",
  ]
  promo = tk.tokenize(["a7a8q", "e1g1"], VOCAB, add_special=False)
  assert [VOCAB.tokens[i] for i in promo] == ["a7", "a8", "q", "e1", "g1"]


def test_round_trip_on_real_games(encoded):
  for ucis, moves, states in encoded:
    letters = piece_letters(moves, states)
    for pieces in (None, letters):
      ids = tk.tokenize(ucis, VOCAB, pieces=pieces)
      back, back_pieces = detokenize(ids, VOCAB)
      assert back == ucis
      assert back_pieces == (pieces or [None] * len(ucis))
    assert tk.ucis_of_moves(moves) == ucis


def test_vectorised_tokens_equal_tokenize(encoded):
  rng = np.random.default_rng(0)
  for ucis, moves, states in encoded[:100]:
    pieces = tk.move_pieces(moves, states)
    insert = rng.random(len(ucis)) < 0.5
    ids, is_piece = tk.game_token_ids(moves, VOCAB, pieces=pieces, insert=insert)
    letters = [
      tk.PIECE_LETTERS[p] if ins and p >= 0 else None for p, ins in zip(pieces, insert, strict=True)
    ]
    assert (ids == tk.tokenize(ucis, VOCAB, pieces=letters)).all()
    assert (is_piece == np.isin(ids, VOCAB.piece_ids)).all()


def test_piece_letters_from_states_equal_san(encoded):
  checked = 0
  for ucis, moves, states in encoded:
    board = chess.Board()
    for uci, letter in zip(ucis, piece_letters(moves, states), strict=True):
      move = chess.Move.from_uci(uci)
      san = board.san(move)
      if san.startswith("O"):
        expected = None
      elif san[0].isupper():
        expected = san[0]
      else:
        expected = "P"
      assert letter == expected, (uci, san)
      board.push(move)
      checked += 1
  assert checked > 15_000


def test_move_pieces_rejects_states_that_do_not_match():
  moves, states = encoding.encode_game(["e2e4", "e7e5"])
  bad = states.copy()
  bad[0, chess.E2 ^ 56] = 0
  with pytest.raises(ValueError, match="ply 1: no piece on e2"):
    tk.move_pieces(moves, bad)


def test_rap_is_deterministic_per_seed_epoch_game_and_resampled(encoded):
  _, moves, states = encoded[0]
  kw = {"vocab": VOCAB, "notation": "rap", "rap_p": 0.25, "seed": 3}
  a = tk.lm_row(moves, states, **kw, epoch=0, game_index=7)
  b = tk.lm_row(moves, states, **kw, epoch=0, game_index=7)
  assert (a["tokens"] == b["tokens"]).all()
  other_epoch = [tk.lm_row(moves, states, **kw, epoch=e, game_index=7)["tokens"] for e in (1, 2, 3)]
  assert any(len(t) != len(a["tokens"]) or (t != a["tokens"]).any() for t in other_epoch)
  other_game = tk.lm_row(moves, states, **kw, epoch=0, game_index=8)["tokens"]
  assert len(other_game) != len(a["tokens"]) or (other_game != a["tokens"]).any()
  draws = tk.rap_draws(len(moves) - 1, 0.25, seed=3, epoch=0, game_index=7)
  assert (draws == (np.random.default_rng([3, 0, 7]).random(len(moves) - 1) < 0.25)).all()


def test_rap_extremes_castling_and_loss_option(encoded):
  ucis, moves, states = next(e for e in encoded if "e1g1" in e[0] or "e8g8" in e[0])
  uci = tk.lm_row(moves, states, vocab=VOCAB, notation="uci")
  rap0 = tk.lm_row(moves, states, vocab=VOCAB, notation="rap", rap_p=0.0)
  rap1 = tk.lm_row(moves, states, vocab=VOCAB, notation="rap", rap_p=1.0)
  ap = tk.lm_row(moves, states, vocab=VOCAB, notation="ap")
  assert (uci["tokens"] == rap0["tokens"]).all() and (rap1["tokens"] == ap["tokens"]).all()
  castles = sum(1 for p in piece_letters(moves, states) if p is None)
  assert castles >= 1
  assert int(np.isin(ap["tokens"], VOCAB.piece_ids).sum()) == len(ucis) - castles
  assert ap["weights"].sum() == len(ap["targets"])
  no_piece_loss = tk.lm_row(moves, states, vocab=VOCAB, notation="ap", score_piece_tokens=False)
  assert (no_piece_loss["weights"][no_piece_loss["target_is_piece"]] == 0).all()
  assert no_piece_loss["weights"].sum() == len(uci["targets"])
  assert (ap["inputs"] == ap["tokens"][:-1]).all() and (ap["targets"] == ap["tokens"][1:]).all()
  assert int(ap["num_moves"]) == len(ucis) + 1
  ev = tk.eval_row(moves, states, vocab=VOCAB, notation="rap")
  assert (ev["tokens"] == uci["tokens"]).all()
  assert (tk.eval_row(moves, states, vocab=VOCAB, notation="ap")["tokens"] == ap["tokens"]).all()


def test_token_lengths(encoded):
  for _, moves, states in encoded[:50]:
    plies = len(moves) - 1
    n_uci = tk.token_length(moves, notation="uci")
    n_ap = tk.token_length(moves, states, notation="ap")
    assert n_uci == len(tk.lm_row(moves, states, vocab=VOCAB)["tokens"])
    assert n_ap == len(tk.lm_row(moves, states, vocab=VOCAB, notation="ap")["tokens"])
    rap = tk.lm_row(moves, states, vocab=VOCAB, notation="rap", rap_p=0.5, game_index=1)
    assert len(rap["tokens"]) <= tk.token_length(moves, states, notation="rap") == n_ap
    assert n_ap <= tk.token_length_bound(plies, letters=True)
    assert n_uci <= tk.token_length_bound(plies, letters=False)
    counts = tk.move_token_counts(moves, states, letters=True)
    assert counts.shape == (plies,) and 2 + counts.sum() == n_ap
  m, s = encoding.encode_game(
    ["a2a4", "b7b5", "a4b5", "a7a6", "b5a6", "c8b7", "a6b7", "b8c6", "b7a8q"]
  )
  assert tk.token_length(m, s, notation="ap") == 2 + 9 * 3 + 1  # one promotion letter


def test_vocab_from_file(tmp_path):
  order = list(tk.DEFAULT_TOKENS)
  order[9:73] = sorted(order[9:73], key=lambda s: (s[1], s[0]), reverse=True)
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(order) + "\n")
  vocab = tk.Vocab.from_file(path)
  assert vocab.tokens == tuple(order) and vocab != VOCAB
  ids = tk.tokenize(["e2e4"], vocab)
  assert [vocab.tokens[i] for i in ids] == ["<s>", "e2", "e4", "</s>"]
  assert detokenize(ids, vocab) == (["e2e4"], [None])
  bad = order.copy()
  bad[20] = "z9"
  path.write_text("\n".join(bad) + "\n")
  with pytest.raises(ValueError, match=r"line 21: unknown token 'z9'"):
    tk.Vocab.from_file(path)
  path.write_text("\n".join(order[:-1]) + "\n")
  with pytest.raises(ValueError, match="lacks 1 token"):
    tk.Vocab.from_file(path)
  path.write_text("\n".join([*order[:-1], "a1"]) + "\n")
  with pytest.raises(ValueError, match="appears twice"):
    tk.Vocab.from_file(path)
  VOCAB.to_file(tmp_path / "out.txt")
  assert tk.Vocab.from_file(tmp_path / "out.txt") == VOCAB


def test_detokenize_rejects_malformed():
  with pytest.raises(ValueError, match="expected two squares"):
    detokenize([VOCAB.bos_id, VOCAB.id("e2"), VOCAB.id("N"), VOCAB.eos_id], VOCAB)
  with pytest.raises(ValueError, match="not a UCI move"):
    tk.tokenize(["e2e9"], VOCAB)


def test_eval_logits_mask_piece_letters_numpy_and_jax():
  logits = np.arange(2 * 77, dtype=np.float32).reshape(2, 77)
  masked = eval_logits(logits, VOCAB, "uci")
  assert np.isneginf(masked[:, 3:9]).all() and (masked[:, 9:] == logits[:, 9:]).all()
  assert (logits[:, 3:9] > 0).all()  # input untouched
  jm = eval_logits(jnp.asarray(logits), VOCAB, "rap")
  assert np.array_equal(np.asarray(jm), masked)
  assert eval_logits(logits, VOCAB, "ap") is logits  # AP models are scored on their letters.


def test_per_move_perplexity_on_crafted_logits():
  # Two games: 1 ply (4 tokens) and 2 plies with one piece token. Uniform logits: NLL log 77.
  logits = np.zeros((2, 6, 77), dtype=np.float32)
  targets = np.zeros((2, 6), dtype=np.int32)
  weights = np.array([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=np.float32)
  nll = tk.token_nll(logits, targets)
  assert np.allclose(nll, np.log(77))
  num_moves = np.array([2, 3])
  loss = per_move_loss(nll, weights, num_moves)
  assert np.isclose(loss, 9 * np.log(77) / 5)
  assert np.isclose(per_move_perplexity(nll, weights, num_moves), 77 ** (9 / 5), rtol=1e-5)
  # A confident correct logit: NLL log(1 + 76 e^-10).
  sharp = np.zeros((1, 1, 77), dtype=np.float32)
  sharp[0, 0, 12] = 10.0
  assert np.isclose(
    tk.token_nll(sharp, np.array([[12]]))[0, 0], np.log1p(76 * np.exp(-10)), rtol=1e-3
  )
  jl = per_move_perplexity(
    tk.token_nll(jnp.asarray(logits), jnp.asarray(targets)), jnp.asarray(weights), num_moves
  )
  assert np.isclose(float(jl), 77 ** (9 / 5), rtol=1e-4)
  # Masking moves probability mass to the other 71 tokens.
  masked = eval_logits(logits[:, :1], VOCAB, "uci")
  assert np.allclose(tk.token_nll(masked, np.full((2, 1), 20)), np.log(71))
