"""UCI tokens of the blindfolded chess language model (Toshniwal et al. 2022, section 2,
section 3.1, appendix B, Table 8).

Vocabulary (77 tokens): `<pad> <s> </s>` (ids 0-2), the piece letters `P N R B Q K` (ids 3-8), then
chessjax's own order for ids 9-76: the 64 squares in python-chess order `a1 b1 ... h1 a2 ... h8`
(id 9 + python-chess square index) and the promotion letters `q r b n` (ids 73-76). The authors
number ids 9-76 by first appearance in their training file; `Vocab.from_file` reads such a file
(one token per line, id = line index), and every function here takes the vocab as an argument.

A move is 2 tokens (from, to) or 3 with a promotion letter (`a7a8q` -> `a7 a8 q`); castling is the
king's move (`e1g1`); there is no move delimiter; a game is `<s> ... </s>`. With piece letters
(RAP / AP, section 3.1) the letter goes right before the move's from-square; castling never gets
one. The piece letter of a move is read from the stored states (the piece on the from-square in
the state row before the move), which equals SAN's first letter for non-pawn moves and `P` for
pawn moves and promotions.

Training rows (`lm_row`): RAP p draws one Bernoulli(p) per move from
`np.random.default_rng([seed, epoch, game_index])`, a pure function of those three numbers, so a
resumed run sees the same tokens and every epoch sees new ones. AP always inserts the letters.
Evaluation rows (`eval_row`) carry piece letters only for AP. Every non-AP model has the six piece
logits masked at evaluation (`chessjax.lm.task.eval_logits`, section 4 "perplexity evaluation");
per-move loss is the summed NLL over scored tokens divided by the number of moves plus one
(`</s>` counts as a move), perplexity its exponential (`chessjax.lm.task.Sums`).
"""

import functools
from collections.abc import Sequence
from pathlib import Path

import chess
import numpy as np

from chessjax.encoding import NUM_MOVE_IDS, START_ID

SPECIAL_TOKENS = ("<pad>", "<s>", "</s>")
PIECE_LETTERS = "PNRBQK"  # piece index 0..5, token ids 3..8 in the default vocab
PROMO_LETTERS = "qrbn"  # chessjax.encoding promotion index 1..4
DEFAULT_TOKENS = (*SPECIAL_TOKENS, *PIECE_LETTERS, *chess.SQUARE_NAMES, *PROMO_LETTERS)
VOCAB_SIZE = len(DEFAULT_TOKENS)  # 77
NOTATIONS = ("uci", "rap", "ap")

# State label classes (chessjax.labels: empty, PNBRQK, pnbrqk) -> piece index in PIECE_LETTERS.
_CLASS_TO_PIECE = np.array([-1, 0, 1, 3, 2, 4, 5, 0, 1, 3, 2, 4, 5], dtype=np.int8)
_KING = PIECE_LETTERS.index("K")

assert VOCAB_SIZE == 77


class Vocab:
  """A 77-token vocabulary: `tokens[i]` is the token of id i.

  Lookup tables (numpy, -1 where absent): `square_ids[s]` (python-chess square s), `piece_ids[k]`
  (PIECE_LETTERS[k]), `promo_ids[k]` (encoding promotion index k, 0 = none), and the inverse maps
  `square_of_id`, `piece_of_id`.
  """

  def __init__(self, tokens: Sequence[str]):
    tokens = tuple(tokens)
    seen: dict[str, int] = {}
    for i, tok in enumerate(tokens):
      if tok not in DEFAULT_TOKENS:
        raise ValueError(f"unknown token {tok!r} at id {i} (expected one of the 77 UCI tokens)")
      if tok in seen:
        raise ValueError(f"token {tok!r} appears twice (ids {seen[tok]} and {i})")
      seen[tok] = i
    missing = [t for t in DEFAULT_TOKENS if t not in seen]
    if missing:
      raise ValueError(f"vocab lacks {len(missing)} token(s): {' '.join(missing)}")
    self.tokens = tokens
    self.index = seen
    self.pad_id, self.bos_id, self.eos_id = (seen[t] for t in SPECIAL_TOKENS)
    self.piece_ids = np.array([seen[t] for t in PIECE_LETTERS], dtype=np.int32)
    self.square_ids = np.array([seen[t] for t in chess.SQUARE_NAMES], dtype=np.int32)
    self.promo_ids = np.array([-1] + [seen[t] for t in PROMO_LETTERS], dtype=np.int32)
    self.square_of_id = np.full(len(tokens), -1, dtype=np.int32)
    self.square_of_id[self.square_ids] = np.arange(64)
    self.piece_of_id = np.full(len(tokens), -1, dtype=np.int32)
    self.piece_of_id[self.piece_ids] = np.arange(6)

  def __len__(self) -> int:
    return len(self.tokens)

  def __eq__(self, other) -> bool:
    return isinstance(other, Vocab) and self.tokens == other.tokens

  def __hash__(self) -> int:
    return hash(self.tokens)

  def __repr__(self) -> str:
    return f"Vocab({len(self)} tokens, {' '.join(self.tokens[:12])} ...)"

  def id(self, token: str) -> int:
    try:
      return self.index[token]
    except KeyError:
      raise ValueError(f"unknown token {token!r}") from None

  @classmethod
  def default(cls) -> "Vocab":
    """chessjax's order: specials, P N R B Q K, squares a1..h8 (python-chess order), q r b n."""
    return cls(DEFAULT_TOKENS)

  @classmethod
  def from_file(cls, path) -> "Vocab":
    """Reads a vocab file: one token per line, id = line index (blank trailing lines ignored).

    Raises ValueError naming the file and line of an unknown or repeated token, or the tokens
    the file lacks.
    """
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    while lines and not lines[-1].strip():
      lines.pop()
    tokens = [line.strip() for line in lines]
    for i, tok in enumerate(tokens):
      if tok not in DEFAULT_TOKENS:
        raise ValueError(f"{path}, line {i + 1}: unknown token {tok!r}")
    try:
      return cls(tokens)
    except ValueError as e:
      raise ValueError(f"{path}: {e}") from None

  def to_file(self, path) -> None:
    """Writes the vocab, one token per line (atomically)."""
    from chessjax.files import write_text

    write_text(path, "\n".join(self.tokens) + "\n")


def decode_moves(moves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(from squares, to squares, promotion index) int64[T] of stored move ids int[T+1] (START first,
  chessjax.encoding packing)."""
  moves = np.asarray(moves, dtype=np.int64)
  if len(moves) == 0 or moves[0] != START_ID:
    raise ValueError("stored moves must start with START")
  squares, promo = np.divmod(moves[1:], 5)
  frm, to = np.divmod(squares, 64)
  return frm, to, promo


def move_pieces(moves: np.ndarray, states: np.ndarray) -> np.ndarray:
  """Piece index (into PIECE_LETTERS) of every move int8[T], -1 for castling, read from the piece
  on the from-square in the state row before the move (states uint8[T+1, 75])."""
  frm, to, _ = decode_moves(moves)
  n = len(frm)
  states = np.asarray(states)
  if states.shape[0] != n + 1:
    raise ValueError(f"{n} moves need {n + 1} state rows, got {states.shape[0]}")
  classes = states[np.arange(n), frm ^ 56]  # label index of python-chess square s is s ^ 56
  piece = _CLASS_TO_PIECE[classes]
  if (piece < 0).any():
    ply = int(np.argmax(piece < 0)) + 1
    raise ValueError(f"ply {ply}: no piece on {chess.SQUARE_NAMES[frm[ply - 1]]} in the states")
  castle = (piece == _KING) & (np.abs((frm & 7) - (to & 7)) == 2)
  return np.where(castle, -1, piece).astype(np.int8)


def tokenize(
  ucis: Sequence[str],
  vocab: Vocab,
  *,
  pieces: Sequence[str | None] | None = None,
  add_special: bool = True,
) -> np.ndarray:
  """Token ids int32[L] of UCI moves: `<s>`, per move [piece] from to [promo], `</s>`.

  `pieces[i]` (a letter of `P N R B Q K` or None) is inserted right before move i's from-square.
  """
  if pieces is not None and len(pieces) != len(ucis):
    raise ValueError(f"{len(pieces)} piece letters for {len(ucis)} moves")
  out = [vocab.bos_id] if add_special else []
  for i, uci in enumerate(ucis):
    if len(uci) not in (4, 5):
      raise ValueError(f"move {i + 1}: {uci!r} is not a UCI move")
    if pieces is not None and pieces[i] is not None:
      if pieces[i] not in PIECE_LETTERS:
        raise ValueError(f"move {i + 1}: {pieces[i]!r} is not a piece letter")
      out.append(vocab.index[pieces[i]])
    try:
      out.append(vocab.index[uci[:2]])
      out.append(vocab.index[uci[2:4]])
      if len(uci) == 5:
        if uci[4] not in PROMO_LETTERS:
          raise KeyError(uci[4])
        out.append(vocab.index[uci[4]])
    except KeyError:
      raise ValueError(f"move {i + 1}: {uci!r} is not a UCI move") from None
  if add_special:
    out.append(vocab.eos_id)
  return np.array(out, dtype=np.int32)


def game_token_ids(
  moves: np.ndarray,
  vocab: Vocab,
  *,
  pieces: np.ndarray | None = None,
  insert: np.ndarray | None = None,
  add_special: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
  """Token ids int32[L] and an is-piece-token mask bool[L] of a stored game, vectorised.

  `pieces` int[T] from `move_pieces`; `insert` bool[T] says where a piece letter goes (ignored for
  castling, whose piece is -1). Same ids as `tokenize` of the game's UCI moves.
  """
  frm, to, promo = decode_moves(moves)
  grid = np.full((len(frm), 4), -1, dtype=np.int32)
  grid[:, 1] = vocab.square_ids[frm]
  grid[:, 2] = vocab.square_ids[to]
  grid[:, 3] = vocab.promo_ids[promo]
  if insert is not None:
    if pieces is None:
      raise ValueError("insert needs pieces")
    put = np.asarray(insert, dtype=bool) & (np.asarray(pieces) >= 0)
    grid[put, 0] = vocab.piece_ids[np.asarray(pieces)[put]]
  flat = grid.ravel()
  keep = flat >= 0
  ids = flat[keep]
  is_piece = np.broadcast_to(np.arange(4) == 0, grid.shape).ravel()[keep]
  if add_special:
    ids = np.concatenate([[vocab.bos_id], ids, [vocab.eos_id]]).astype(np.int32)
    is_piece = np.concatenate([[False], is_piece, [False]])
  return ids, is_piece


def rap_draws(num_moves: int, p: float, *, seed: int, epoch: int, game_index: int) -> np.ndarray:
  """bool[num_moves]: one Bernoulli(p) draw per move from `default_rng([seed, epoch, game_index])`
  (RAP, Toshniwal et al. 2022 section 3.1), a pure function of its arguments."""
  if not 0.0 <= p <= 1.0:
    raise ValueError(f"RAP probability must be in [0, 1], got {p}")
  rng = np.random.default_rng([int(seed), int(epoch), int(game_index)])
  return rng.random(num_moves) < p


def lm_row(
  moves: np.ndarray,
  states: np.ndarray,
  *,
  vocab: Vocab,
  notation: str = "uci",
  rap_p: float = 0.0,
  seed: int = 0,
  epoch: int = 0,
  game_index: int = 0,
  score_piece_tokens: bool = True,
) -> dict[str, np.ndarray]:
  """One training row of a stored game (moves int[T+1], states uint8[T+1, 75]).

  notation "uci": plain UCI; "rap": a piece letter before each non-castling move whose
  `rap_draws(T, rap_p, seed=, epoch=, game_index=)` draw is 1; "ap": before every non-castling
  move (Toshniwal et al. 2022, section 3.1, Table 1). Piece tokens are prediction targets unless
  `score_piece_tokens=False`.

  Returns numpy arrays: `tokens` int32[L] (`<s>` ... `</s>`), `inputs` = tokens[:-1], `targets` =
  tokens[1:], `weights` float32[L-1] (1 for a scored target), `target_is_piece` bool[L-1], and
  `num_moves` int32 scalar = T + 1 (the per-move loss denominator).
  """
  if notation not in NOTATIONS:
    raise ValueError(f"notation must be one of {NOTATIONS}, got {notation!r}")
  plies = len(moves) - 1
  if notation == "uci":
    ids, is_piece = game_token_ids(moves, vocab)
  else:
    pieces = move_pieces(moves, states)
    if notation == "ap":
      insert = np.ones(plies, dtype=bool)
    else:
      insert = rap_draws(plies, rap_p, seed=seed, epoch=epoch, game_index=game_index)
    ids, is_piece = game_token_ids(moves, vocab, pieces=pieces, insert=insert)
  target_is_piece = is_piece[1:]
  weights = np.ones(len(ids) - 1, dtype=np.float32)
  if not score_piece_tokens:
    weights[target_is_piece] = 0.0
  return {
    "tokens": ids,
    "inputs": ids[:-1],
    "targets": ids[1:],
    "weights": weights,
    "target_is_piece": target_is_piece,
    "num_moves": np.int32(plies + 1),
  }


def eval_row(moves: np.ndarray, states: np.ndarray, *, vocab: Vocab, notation: str):
  """A dev/test row: no piece letters except for AP, whose letters are always present and scored
  (Toshniwal et al. 2022, Table 1, "Inference" column). Same fields as `lm_row`."""
  if notation not in NOTATIONS:
    raise ValueError(f"notation must be one of {NOTATIONS}, got {notation!r}")
  return lm_row(moves, states, vocab=vocab, notation="ap" if notation == "ap" else "uci")


# At most 16 promotions a game (one per pawn).
MAX_PROMOTIONS = 16


def move_token_counts(
  moves: np.ndarray, states: np.ndarray | None = None, *, letters: bool
) -> np.ndarray:
  """int64[T]: the tokens each move of a stored game takes in a row, the one statement of the
  layout (`game_token_ids` writes it): from- and to-square, a promotion letter, and with `letters`
  a piece letter before the move (none for castling; needs the states)."""
  _, _, promo = decode_moves(moves)
  n = 2 + (promo > 0).astype(np.int64)
  if letters:
    if states is None:
      raise ValueError("piece letters need the states (castling has no letter)")
    n += move_pieces(moves, states) >= 0
  return n


def token_length(moves: np.ndarray, states: np.ndarray | None = None, *, notation: str) -> int:
  """Token count of a game's row with `<s>` and `</s>`: exact for "uci" and "ap"; for "rap" the
  AP length, an upper bound reached when every draw is 1. ("uci" ignores `states`.)"""
  if notation not in NOTATIONS:
    raise ValueError(f"notation must be one of {NOTATIONS}, got {notation!r}")
  return 2 + int(move_token_counts(moves, states, letters=notation != "uci").sum())


def token_length_bound(plies, *, letters: bool):
  """The longest row (`<s>` ... `</s>`) any game of `plies` moves can have, from the move count
  alone (`move_token_counts` at its largest): 2 tokens a move, a letter a move with `letters`,
  and at most `MAX_PROMOTIONS` promotion letters. Works on arrays."""
  plies = np.asarray(plies, dtype=np.int64)
  return 2 + 2 * plies + np.minimum(plies, MAX_PROMOTIONS) + (plies if letters else 0)


def _xp(x):
  if isinstance(x, np.ndarray | np.generic):
    return np
  import jax.numpy as jnp

  return jnp


def token_nll(logits, targets):
  """Negative log-likelihood [...] of `targets` int[...] under `logits` [..., V] (numpy or jax)."""
  xp = _xp(logits)
  logits = logits.astype(xp.float32) if xp is np else logits.astype("float32")
  mx = xp.max(logits, axis=-1, keepdims=True)
  lse = xp.log(xp.sum(xp.exp(logits - mx), axis=-1)) + mx[..., 0]
  picked = xp.take_along_axis(logits, xp.asarray(targets)[..., None].astype(xp.int32), axis=-1)
  return lse - picked[..., 0]


@functools.cache
def _uci_table() -> tuple[str, ...]:
  return tuple(
    chess.SQUARE_NAMES[(i // 5) // 64] + chess.SQUARE_NAMES[(i // 5) % 64] + " qrbn"[i % 5].strip()
    for i in range(NUM_MOVE_IDS)
  )


def ucis_of_moves(moves: np.ndarray) -> list[str]:
  """UCI strings of stored move ids int[T+1] (START first)."""
  moves = np.asarray(moves)
  if len(moves) == 0 or moves[0] != START_ID:
    raise ValueError("stored moves must start with START")
  table = _uci_table()
  return [table[i] for i in moves[1:].tolist()]
