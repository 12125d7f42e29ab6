"""Win%-loss scoring of chess moves under atomic and chess rules (Co & Konuganti 2026, section 3).

An answer is one position's move under one variant: `fen`, `variant` ("chess" or "atomic"; rows
written before the rename carry `ruleset`, "standard" or "atomic", instead, and read the same),
`move` (UCI), and optionally `model`, `reasoning_effort`, `prompt` (`rules`, the default, or
`no_rules`, the paper's Table 2 ablation; atomic only), `tokens`. Every answer is analysed by its
variant's engine (Stockfish for chess, Fairy-Stockfish for atomic), an `engines.EnginePool`:

  best     the engine's best line (multipv 1) of the position
  played   the same root searched with only the answer's move allowed (python-chess root_moves),
           or the best line itself when the answer is the best move

Scores are centipawns from the mover's view clamped to +-1000, a mate is +-1000 (the paper's
section 3 cap); `Win%(cp)` is the paper's Equation (2), lichess's accuracy metric;
`win_loss = max(0, Win%(best) - Win%(played))` (the clamp absorbs the rare restricted search that
scores deeper than the free one); categories in order BLUNDER, MISTAKE, INACCURACY, else GOOD, with
the paper's Equation (3) thresholds (30/20/10 Win% points) or lichess's (15/10/5). BEST means the
answer is the engine's best move. An answer that is not a UCI move (`unparsable`) or not legal
under its variant (`illegal`) is counted apart and scored as a failure: its played score is -1000
(it loses outright), so it weighs in the mean loss like the worst move. Raw Stockfish and
Fairy-Stockfish centipawns are not on the same scale: compare variants through Win% loss and
categories.
"""

import re
from collections.abc import Sequence

import numpy as np

from chessjax.atomic.engines import EnginePool, Request
from chessjax.atomic.prompts import VARIANTS, board_of, variant_of

CP_LIMIT = 1000
WIN_SLOPE = 0.00368208
THRESHOLDS = {"paper": (30.0, 20.0, 10.0), "lichess": (15.0, 10.0, 5.0)}
CATEGORIES = ("BLUNDER", "MISTAKE", "INACCURACY", "GOOD")
FAILURES = ("illegal", "unparsable")
_UCI = re.compile(r"[a-h][1-8][a-h][1-8][qrbn]?")


# ------------------------------------------------------------------------------------------------
# Formulas


def win_percent(cp):
  """Win% of a centipawn score from the mover's view: 50 + 50 * (2 / (1 + exp(-k cp)) - 1).

  Co & Konuganti (2026), Equation (2), k = 0.00368208 (lichess's accuracy metric).

  Works on scalars and arrays; callers clamp to +-1000 first (`clamp_cp`).
  """
  cp = np.asarray(cp, dtype=np.float64)
  out = 50.0 + 50.0 * (2.0 / (1.0 + np.exp(-WIN_SLOPE * cp)) - 1.0)
  return float(out) if out.ndim == 0 else out


def clamp_cp(cp: int | None, mate: int | None, limit: int = CP_LIMIT) -> int:
  """An engine score as clamped centipawns: cp clipped to +-limit, a mate for the mover +limit."""
  if mate is not None:
    return limit if mate > 0 else -limit
  if cp is None:
    raise ValueError("a score needs cp or mate")
  return int(max(-limit, min(limit, cp)))


def classify(delta: float, thresholds: Sequence[float] = THRESHOLDS["paper"]) -> str:
  """BLUNDER / MISTAKE / INACCURACY / GOOD of a Win% drop, largest threshold first.

  Co & Konuganti (2026), Equation (3), with the paper's thresholds by default.
  """
  blunder, mistake, inaccuracy = thresholds
  if not blunder >= mistake >= inaccuracy:
    raise ValueError(f"thresholds must be decreasing (blunder, mistake, inaccuracy): {thresholds}")
  if delta >= blunder:
    return "BLUNDER"
  if delta >= mistake:
    return "MISTAKE"
  if delta >= inaccuracy:
    return "INACCURACY"
  return "GOOD"


def bootstrap_ci(
  values, strata=None, *, n_boot: int = 10_000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
  """Percentile bootstrap CI of the mean, resampling positions with replacement within strata.

  Stratifying by source keeps every resample as source-balanced as the set itself. The same seed
  gives the same interval.
  """
  values = np.asarray(values, dtype=np.float64)
  if values.size == 0:
    return float("nan"), float("nan")
  strata = np.zeros(values.size, dtype=np.int64) if strata is None else np.asarray(strata)
  rng = np.random.default_rng(seed)
  totals = np.zeros(n_boot)
  for stratum in np.unique(strata):
    group = values[strata == stratum]
    totals += group[rng.integers(0, group.size, size=(n_boot, group.size))].sum(axis=1)
  lo, hi = np.quantile(totals / values.size, [(1 - level) / 2, (1 + level) / 2])
  return float(lo), float(hi)


# ------------------------------------------------------------------------------------------------
# Answers


def answer_variant(answer: dict) -> str:
  """The variant an answer is scored under: its `variant`, else its old `ruleset` field.

  Raises ValueError when it has neither, an unknown name, or two fields that disagree.
  """
  names = {k: answer[k] for k in ("variant", "ruleset") if k in answer}
  if not names:
    raise ValueError("missing variant")
  found = {k: variant_of(v) for k, v in names.items()}
  if len(set(found.values())) > 1:
    raise ValueError(f"variant and ruleset disagree: {names}")
  return next(iter(found.values()))


def normalise_answer(answer: dict) -> dict:
  """The answer with `variant` (and no old `ruleset` field) and its prompt `condition`."""
  out = {k: v for k, v in answer.items() if k != "ruleset"}
  out["variant"] = answer_variant(answer)
  out["condition"] = condition_of(out)
  return out


def condition_of(answer: dict) -> str:
  """Prompt condition of an answer: `atomic`, `atomic_no_rules` or `chess`."""
  variant, prompt = answer_variant(answer), answer.get("prompt", "rules")
  if prompt not in ("rules", "no_rules") or (prompt == "no_rules" and variant != "atomic"):
    raise ValueError(f"prompt must be 'rules' or (atomic only) 'no_rules', got {prompt!r}")
  if prompt == "no_rules":
    return "atomic_no_rules"
  return "atomic" if variant == "atomic" else "chess"


def move_status(fen: str, variant: str, move) -> str:
  """`ok`, `illegal` (a UCI move the variant's rules forbid here) or `unparsable`."""
  text = move.strip().lower() if isinstance(move, str) else ""
  if not _UCI.fullmatch(text):
    return "unparsable"
  legal = {m.uci() for m in board_of(fen, variant).legal_moves}
  return "ok" if text in legal else "illegal"


def score_answers(
  answers: Sequence[dict],
  positions: dict[str, dict],
  pools: dict[str, EnginePool],
  *,
  depth: int,
  thresholds: Sequence[float] = THRESHOLDS["paper"],
) -> list[dict]:
  """Each answer with its analysis and scores (see the module docstring).

  `positions` maps FEN to its position record (for `source`); `pools` maps variant to an analyser
  with `analyse_many(requests)` (an `EnginePool` of that variant's engine). Answers may carry the
  old `ruleset` field; scored rows carry `variant`.
  """
  answers = [normalise_answer(a) for a in answers]
  for a in answers:
    a["status"] = move_status(a["fen"], a["variant"], a["move"])
    a["move"] = a["move"].strip().lower() if a["status"] == "ok" else a["move"]
  best = _analyse(pools, {(a["fen"], a["variant"], None) for a in answers}, depth)
  played = _analyse(
    pools,
    {
      (a["fen"], a["variant"], a["move"])
      for a in answers
      if a["status"] == "ok" and a["move"] != best[a["fen"], a["variant"], None].best.move
    },
    depth,
  )
  scored = []
  for a in answers:
    top = best[a["fen"], a["variant"], None]
    best_cp = clamp_cp(top.best.cp, top.best.mate)
    if a["status"] != "ok":
      played_cp, is_best = -CP_LIMIT, False
    elif a["move"] == top.best.move:
      played_cp, is_best = best_cp, True
    else:
      line = played[a["fen"], a["variant"], a["move"]].best
      played_cp, is_best = clamp_cp(line.cp, line.mate), False
    win_loss = max(0.0, win_percent(best_cp) - win_percent(played_cp))
    scored.append(
      {
        **a,
        "source": positions.get(a["fen"], {}).get("source", "unknown"),
        "best_move": top.best.move,
        "best_cp": best_cp,
        "played_cp": played_cp,
        "cp_loss": max(0, best_cp - played_cp),
        "win_loss": win_loss,
        "category": classify(win_loss, thresholds) if a["status"] == "ok" else a["status"].upper(),
        "best": is_best,
        "engine": top.engine,
        "engine_version": top.version,
        "depth": depth,
      }
    )
  return scored


def _analyse(pools, keys, depth: int) -> dict:
  """Analyses of (fen, variant, move-or-None) keys, batched per variant."""
  out = {}
  for variant in VARIANTS:
    mine = sorted(k for k in keys if k[1] == variant)
    if not mine:
      continue
    requests = [
      Request(fen=fen, variant=variant, depth=depth, root_moves=None if move is None else (move,))
      for fen, _, move in mine
    ]
    out.update(zip(mine, pools[variant].analyse_many(requests), strict=True))
  return out
