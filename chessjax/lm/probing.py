"""Board-state probes of a chess language model and their scorer (Toshniwal et al. 2022, sections
3.2-3.4, section 5 "Board State Tracking", Tables 4-7, appendix D Table 11).

Rows are those of `data_prep.probing_sets` (`end.jsonl`, `start.jsonl`, row-aligned). Prompts are
`<s>` + the prefix tokens (AP models: `oracle_prefix`, piece letters included) + End: the start
square (AP: piece letter then square) / Start: the piece letter. Start tasks exist only for RAP and
AP models. The scorer needs only the model's next-token logits after each prompt, by one of two
paths that give the same logits:
* the reference (`reference_task_logits`): every prompt on its own, through a caller-supplied
  `next_token_logits(tokens int32[B, T], lengths int32[B]) -> float[B, V]` (logits at position
  `lengths - 1` of each padded row), in batches all padded to the set's longest prompt;
* shared prefixes (`task_logits`, what `chessjax.lm.evaluate` runs): the prompts of a row differ
  only after their common prefix (`<s>` + the game prefix; AP: also the piece letter when two
  tasks share it), so each row is one prefix and a few short continuations (`plan_row`: UCI and
  RAP, one token per task; AP, `letter square` for the End tasks, whose first token is the Start
  task's whole continuation). A caller-supplied `continuation_logits(prefixes int32[B, T],
  lengths int32[B], continuations int32[B, K, C]) -> float[B, K, C, V]` returns the logits after
  each continuation token (`chessjax.lm.continuations`: a causal model's logits at a position
  depend only on the tokens up to it). Rows are sorted by prefix length and each batch is padded
  to its own longest, rounded up to a multiple of `width_multiple` (few shapes to compile).

Metrics (in %, mean over rows): ExM (top-1 == the actual answer) and LgM (top-1 is a legal
answer), both from the top-1 token over the whole vocabulary (a non-square token is wrong), and
R-precision = |top-R ∩ legal| / R with R = number of legal answers. Every non-AP model has its six
piece logits masked first. Random-legal baseline: mean of 1/R over the Actual rows.

Error categories of End rows whose LgM top-1 is wrong (section 5, Table 7), checked in order:
unreachable (not a queen line or knight jump from the start square; includes the start square
itself and non-square tokens), syntax (a lone piece of the true type on an empty board cannot reach
it; a king's castling square lands here), pseudo-legal (a pseudo-legal move of the position,
illegal only because of the own king), path obstruction (the rest).

Finer breakdowns of those errors (appendix F), per End task: pseudo-legal errors by Table 13's
four cases (`pseudo_legal_case`: the side to move in check in the prefix position or not x the
prompt's piece, the one on its start square, a king or not) and path-obstruction errors by piece
type (Table 14), each beside its "total": the rows of that case or piece minus those with an error
of another category (the paper's note under both tables). Path length (Figure 8) is the Chebyshev
distance from the start square to the predicted one, the number of king moves between them
(constant for knights, 2, and kings, 1).
"""

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import chess
import numpy as np

from chessjax.lm import tokens as tk
from chessjax.lm.task import eval_logits

TASKS = ("end_actual", "end_other", "start_actual", "start_other")
ERROR_CATEGORIES = ("unreachable", "syntax", "pseudo_legal", "path_obstruction")
# Table 13's rows (appendix F.1): in check before the move or not x the king moved or another piece.
PSEUDO_LEGAL_CASES = ("check_king", "check_other", "no_check_king", "no_check_other")
TABLE11_PIECES = "RNBQK"  # the row order of Table 11

LogitsFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
ContinuationLogitsFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def read_rows(path) -> tuple[list[dict], list[dict]]:
  """(end rows, start rows) of a probing-set directory; checks they are row-aligned."""
  path = Path(path)
  end = [json.loads(line) for line in (path / "end.jsonl").read_text().splitlines() if line]
  start = [json.loads(line) for line in (path / "start.jsonl").read_text().splitlines() if line]
  if len(end) != len(start) or any(
    e["prefix"] != s["prefix"] for e, s in zip(end, start, strict=True)
  ):
    raise ValueError(f"{path}: end.jsonl and start.jsonl are not row-aligned")
  return end, start


def tasks_for(notation: str) -> tuple[str, ...]:
  """The probing tasks a model of `notation` can take (Start tasks need RAP or AP training)."""
  if notation not in tk.NOTATIONS:
    raise ValueError(f"notation must be one of {tk.NOTATIONS}, got {notation!r}")
  return TASKS if notation in ("rap", "ap") else TASKS[:2]


def _prefix_tokens(row: dict, vocab: tk.Vocab, notation: str) -> list[int]:
  if notation != "ap":
    ucis = row["prefix"].split()
    return tk.tokenize(ucis, vocab, add_special=False).tolist()
  ucis, pieces = [], []
  for m in row["oracle_prefix"].split():
    if m[0] in tk.PIECE_LETTERS:
      pieces.append(m[0])
      m = m[1:]
    else:
      pieces.append(None)
    ucis.append(m)
  return tk.tokenize(ucis, vocab, pieces=pieces, add_special=False).tolist()


def prompt(end_row: dict, start_row: dict, task: str, vocab: tk.Vocab, notation: str) -> np.ndarray:
  """Token ids int32[L] of one prompt (Toshniwal et al. 2022, Table 2)."""
  if task not in tasks_for(notation):
    raise ValueError(f"task {task!r} is not available for {notation!r} models")
  ids = [vocab.bos_id, *_prefix_tokens(end_row, vocab, notation)]
  if task == "end_actual":
    if notation == "ap":
      ids.append(vocab.id(end_row["piece_type"]))
    ids.append(vocab.id(end_row["starting_square"]))
  elif task == "end_other":
    if notation == "ap":
      ids.append(vocab.id(end_row["other_piece_type"]))
    ids.append(vocab.id(end_row["other_starting_square"]))
  elif task == "start_actual":
    ids.append(vocab.id(start_row["piece_type"]))
  else:
    ids.append(vocab.id(start_row["other_piece_type"]))
  return np.array(ids, dtype=np.int32)


def answers(end_row: dict, start_row: dict, task: str) -> tuple[str | None, list[str]]:
  """(the exact answer or None for Other tasks, the legal answers) of one row."""
  if task == "end_actual":
    return end_row["ending_square"], end_row["legal_ending_square"]
  if task == "end_other":
    return None, end_row["other_ending_square"]
  if task == "start_actual":
    return start_row["starting_square"], start_row["legal_starting_square"]
  if task == "start_other":
    return None, start_row["other_starting_square"]
  raise ValueError(f"unknown task {task!r}")


def pad_prompts(prompts: Sequence[np.ndarray], pad_id: int, width: int | None = None):
  """(tokens int32[N, width], lengths int32[N]), right-padded with `pad_id`."""
  lengths = np.array([len(p) for p in prompts], dtype=np.int32)
  width = int(lengths.max()) if width is None else width
  out = np.full((len(prompts), width), pad_id, dtype=np.int32)
  for i, p in enumerate(prompts):
    out[i, : len(p)] = p
  return out, lengths


def batched_logits(
  prompts: Sequence[np.ndarray], logits_fn: LogitsFn, vocab: tk.Vocab, batch_size: int = 64
) -> np.ndarray:
  """Next-token logits float32[N, V] after each prompt. Every batch has the same shape
  [batch_size, longest prompt] (the last is filled with copies of its first row, then dropped), so
  a jitted `logits_fn` compiles once."""
  if not prompts:
    return np.zeros((0, len(vocab)), dtype=np.float32)
  tokens, lengths = pad_prompts(prompts, vocab.pad_id)
  out = []
  for lo in range(0, len(prompts), batch_size):
    t, n = tokens[lo : lo + batch_size], lengths[lo : lo + batch_size]
    real = len(t)
    if real < batch_size:
      t = np.concatenate([t, np.repeat(t[:1], batch_size - real, axis=0)])
      n = np.concatenate([n, np.repeat(n[:1], batch_size - real)])
    logits = np.asarray(logits_fn(t, n), dtype=np.float32)
    if logits.shape != (batch_size, len(vocab)):
      raise ValueError(
        f"logits_fn returned shape {logits.shape}, expected {(batch_size, len(vocab))}"
      )
    out.append(logits[:real])
  return np.concatenate(out)


def score(
  logits: np.ndarray, exact: Sequence[str | None], legal: Sequence[Sequence[str]], vocab: tk.Vocab
) -> dict:
  """ExM (when exact answers are given), LgM and R-precision, in %, of logits float[N, V]."""
  logits = np.asarray(logits)
  order = np.argsort(-logits, axis=-1, kind="stable")
  top1 = order[:, 0]
  lgm, rprec, exm = [], [], []
  for i, answers_i in enumerate(legal):
    legal_ids = {vocab.id(s) for s in answers_i}
    r = len(legal_ids)
    lgm.append(int(top1[i]) in legal_ids)
    rprec.append(len(legal_ids.intersection(order[i, :r].tolist())) / r)
    if exact[i] is not None:
      exm.append(int(top1[i]) == vocab.id(exact[i]))
  out = {
    "rows": len(legal),
    "lgm": 100 * float(np.mean(lgm)),
    "r_precision": 100 * float(np.mean(rprec)),
  }
  if exm:
    out["exm"] = 100 * float(np.mean(exm))
  return out


def board_after(prefix: str) -> chess.Board:
  """The python-chess board after a space-separated UCI prefix (raises on an illegal move)."""
  board = chess.Board()
  for ply, uci in enumerate(prefix.split(), start=1):
    move = chess.Move.from_uci(uci)
    if not board.is_legal(move):
      raise ValueError(f"ply {ply}: illegal move {uci!r} in {board.fen()}")
    board.push(move)
  return board


def _queen_or_knight_reach(start: int) -> int:
  empty = chess.BaseBoard.empty()
  empty.set_piece_at(start, chess.Piece(chess.QUEEN, chess.WHITE))
  return int(empty.attacks_mask(start)) | chess.BB_KNIGHT_ATTACKS[start]


def _lone_piece_reach(start: int, piece_type: int) -> int:
  empty = chess.BaseBoard.empty()
  empty.set_piece_at(start, chess.Piece(piece_type, chess.WHITE))
  return int(empty.attacks_mask(start))


def error_category(board: chess.Board, start: str, piece: str, predicted_id: int, vocab) -> str:
  """Category of a wrong End prediction (`predicted_id` a token id, not a legal answer) for the
  piece `piece` (a letter) on square `start` of `board`."""
  start_sq = chess.parse_square(start)
  target = int(vocab.square_of_id[predicted_id])
  if target < 0 or target == start_sq or not _queen_or_knight_reach(start_sq) >> target & 1:
    return "unreachable"
  piece_type = chess.PIECE_SYMBOLS.index(piece.lower())
  if not _lone_piece_reach(start_sq, piece_type) >> target & 1:
    return "syntax"
  if board.is_pseudo_legal(chess.Move(start_sq, target)):
    return "pseudo_legal"
  return "path_obstruction"


def pseudo_legal_case(board: chess.Board, start: str) -> str:
  """Table 13's case of an End prompt (Toshniwal et al. 2022, appendix F.1), one of
  `PSEUDO_LEGAL_CASES`: whether the side to move is in check in `board` (the prefix position,
  before the move) and whether the piece on the prompt's start square is its king."""
  piece = board.piece_at(chess.parse_square(start))
  king = piece is not None and piece.piece_type == chess.KING
  return f"{'check' if board.is_check() else 'no_check'}_{'king' if king else 'other'}"


def path_length(start: str, predicted_id: int, vocab: tk.Vocab) -> int | None:
  """King moves from `start` to the predicted square (Chebyshev distance; Toshniwal et al. 2022,
  Figure 8 and footnote 15); None for a non-square token."""
  target = int(vocab.square_of_id[predicted_id])
  return None if target < 0 else chess.square_distance(chess.parse_square(start), target)


def boards_after(end_rows: Sequence[dict]) -> list[chess.Board]:
  """The prefix position of every row (`board_after`), replayed once for every End analysis."""
  return [board_after(row["prefix"]) for row in end_rows]


def _end_prompt(row: dict, task: str) -> tuple[str, str, list[str]]:
  """(start square, piece letter, legal answers) of an End task's prompt."""
  if task == "end_actual":
    return row["starting_square"], row["piece_type"], row["legal_ending_square"]
  if task == "end_other":
    return row["other_starting_square"], row["other_piece_type"], row["other_ending_square"]
  raise ValueError("error categories are defined for End tasks only")


def end_row_details(
  end_rows: Sequence[dict],
  task: str,
  logits: np.ndarray,
  vocab: tk.Vocab,
  boards: Sequence[chess.Board] | None = None,
) -> list[dict]:
  """Per End row, from the top-1 token of `logits` float[N, V] (masked as scored): the prompt's
  `start` square and `piece` letter, `error` (an `ERROR_CATEGORIES` name, None when the top-1 is a
  legal answer), Table 13's `pseudo_legal_case` and the top-1's `path_length`. `boards`: the
  rows' prefix positions when the caller has them (`boards_after`)."""
  if task not in ("end_actual", "end_other"):
    raise ValueError("error categories are defined for End tasks only")
  top1 = np.argmax(np.asarray(logits), axis=-1)
  boards = boards_after(end_rows) if boards is None else boards
  out = []
  for row, pred, board in zip(end_rows, top1, boards, strict=True):
    start, piece, legal = _end_prompt(row, task)
    pred = int(pred)
    ok = pred in {vocab.id(s) for s in legal}
    out.append(
      {
        "start": start,
        "piece": piece,
        "error": None if ok else error_category(board, start, piece, pred, vocab),
        "pseudo_legal_case": pseudo_legal_case(board, start),
        "path_length": path_length(start, pred, vocab),
      }
    )
  return out


def _breakdown(details: Sequence[dict], group: str, keys: Sequence[str], category: str) -> dict:
  """{key: {errors, total}} and "total": errors of `category` per value of the `group` field;
  total counts the rows of that value minus those with an error of another category."""
  out = {k: {"errors": 0, "total": 0} for k in (*keys, "total")}
  for d in details:
    if d["error"] not in (None, category):
      continue
    for k in (d[group], "total"):
      out[k]["total"] += 1
      out[k]["errors"] += d["error"] == category
  return out


def error_categories(
  end_rows: Sequence[dict],
  task: str,
  logits: np.ndarray,
  vocab: tk.Vocab,
  boards: Sequence[chess.Board] | None = None,
) -> dict:
  """Counts of the four error categories of the End rows whose LgM top-1 is wrong, in total and
  per piece type (Toshniwal et al. 2022, Table 7), and the appendix's breakdowns:
  `pseudo_legal_by_case` (Table 13) and `path_obstruction_by_piece` (Table 14), each
  {key: {errors, total}} with a "total" key (module docstring)."""
  details = end_row_details(end_rows, task, logits, vocab, boards)
  counts = dict.fromkeys(ERROR_CATEGORIES, 0)
  by_piece = {p: dict.fromkeys(ERROR_CATEGORIES, 0) for p in TABLE11_PIECES}
  for d in details:
    if d["error"] is not None:
      counts[d["error"]] += 1
      by_piece[d["piece"]][d["error"]] += 1
  return {
    "counts": counts,
    "by_piece": by_piece,
    "pseudo_legal_by_case": _breakdown(
      details, "pseudo_legal_case", PSEUDO_LEGAL_CASES, "pseudo_legal"
    ),
    "path_obstruction_by_piece": _breakdown(details, "piece", TABLE11_PIECES, "path_obstruction"),
  }


def plan_row(prompts: Sequence[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray], list]:
  """(shared prefix int32[S], continuations, reads) of the prompts of one row.

  The shared prefix is the prompts' longest common prefix, cut so that every prompt keeps at
  least one token after it. A prompt's remaining tokens (its tail) either are a continuation or
  start one (a longer tail beginning with them); `reads[i] = (k, j)`: prompt i's next-token logits
  are those after token j of continuation k."""
  if not prompts:
    raise ValueError("a row needs at least one prompt")
  prompts = [np.asarray(p, dtype=np.int32) for p in prompts]
  shortest = min(len(p) for p in prompts)
  if shortest < 1:
    raise ValueError("empty prompt")
  shared = 0
  while shared < shortest - 1 and all(p[shared] == prompts[0][shared] for p in prompts):
    shared += 1
  tails = [p[shared:] for p in prompts]
  continuations: list[np.ndarray] = []
  for i in sorted(range(len(tails)), key=lambda i: -len(tails[i])):
    t = tails[i]
    if not any(len(c) >= len(t) and np.array_equal(c[: len(t)], t) for c in continuations):
      continuations.append(t)
  reads = []
  for t in tails:
    k = next(
      k for k, c in enumerate(continuations) if len(c) >= len(t) and np.array_equal(c[: len(t)], t)
    )
    reads.append((k, len(t) - 1))
  return prompts[0][:shared], continuations, reads


def shared_prefix_logits(
  prompt_lists: Sequence[Sequence[np.ndarray]],
  continuation_logits: ContinuationLogitsFn,
  vocab: tk.Vocab,
  *,
  batch_size: int = 64,
  width_multiple: int = 32,
) -> list[np.ndarray]:
  """Next-token logits float32[len(prompts), V] after each prompt of each row, every row's
  shared prefix run once (module docstring). Batches hold `batch_size` rows of similar prefix
  length (the last is filled with copies of its first row, then dropped); a batch's prefixes are
  padded to width T with T + C (C: the longest continuation of the set) its longest prefix + C
  rounded up to `width_multiple`, so a jitted function compiles once per width."""
  if not prompt_lists:
    return []
  plans = [plan_row(prompts) for prompts in prompt_lists]
  n_cont = max(len(conts) for _, conts, _ in plans)
  c_len = max(len(c) for _, conts, _ in plans for c in conts)
  lengths = np.array([len(shared) for shared, _, _ in plans], dtype=np.int32)
  order = np.argsort(lengths, kind="stable")
  out: list[np.ndarray | None] = [None] * len(plans)
  for lo in range(0, len(plans), batch_size):
    idx = order[lo : lo + batch_size]
    real = len(idx)
    idx = np.concatenate([idx, np.repeat(idx[:1], batch_size - real)])
    width = -(-(int(lengths[idx].max()) + c_len) // width_multiple) * width_multiple - c_len
    prefixes = np.full((batch_size, width), vocab.pad_id, dtype=np.int32)
    conts = np.full((batch_size, n_cont, c_len), vocab.pad_id, dtype=np.int32)
    for r, i in enumerate(idx):
      shared, row_conts, _ = plans[i]
      prefixes[r, : len(shared)] = shared
      for k in range(n_cont):
        c = row_conts[k if k < len(row_conts) else 0]
        conts[r, k, : len(c)] = c
    logits = np.asarray(continuation_logits(prefixes, lengths[idx], conts), dtype=np.float32)
    want = (batch_size, n_cont, c_len, len(vocab))
    if logits.shape != want:
      raise ValueError(f"continuation_logits returned shape {logits.shape}, expected {want}")
    for r, i in enumerate(idx[:real]):
      out[i] = np.stack([logits[r, k, j] for k, j in plans[i][2]])
  return out


def task_logits(
  end_rows: Sequence[dict],
  start_rows: Sequence[dict],
  continuation_logits: ContinuationLogitsFn,
  vocab: tk.Vocab,
  *,
  notation: str,
  tasks: Sequence[str] | None = None,
  batch_size: int = 64,
  width_multiple: int = 32,
) -> dict[str, np.ndarray]:
  """{task: next-token logits float32[rows, V] after its prompts}, each row's prefix run once
  (`shared_prefix_logits`; `batch_size` counts rows). Unmasked."""
  if len(end_rows) != len(start_rows):
    raise ValueError("end and start rows are not row-aligned")
  tasks = tasks_for(notation) if tasks is None else tuple(tasks)
  prompt_lists = [
    [prompt(e, s, task, vocab, notation) for task in tasks]
    for e, s in zip(end_rows, start_rows, strict=True)
  ]
  per_row = shared_prefix_logits(
    prompt_lists,
    continuation_logits,
    vocab,
    batch_size=batch_size,
    width_multiple=width_multiple,
  )
  if not per_row:
    return {task: np.zeros((0, len(vocab)), dtype=np.float32) for task in tasks}
  stacked = np.stack(per_row)  # [rows, tasks, V]
  return {task: stacked[:, t] for t, task in enumerate(tasks)}


def reference_task_logits(
  end_rows: Sequence[dict],
  start_rows: Sequence[dict],
  logits_fn: LogitsFn,
  vocab: tk.Vocab,
  *,
  notation: str,
  tasks: Sequence[str] | None = None,
  batch_size: int = 64,
) -> dict[str, np.ndarray]:
  """The reference of `task_logits`: every prompt of every task on its own (`batched_logits`,
  `batch_size` counts prompts). Unmasked."""
  if len(end_rows) != len(start_rows):
    raise ValueError("end and start rows are not row-aligned")
  tasks = tasks_for(notation) if tasks is None else tuple(tasks)
  out = {}
  for task in tasks:
    prompts = [
      prompt(e, s, task, vocab, notation) for e, s in zip(end_rows, start_rows, strict=True)
    ]
    out[task] = batched_logits(prompts, logits_fn, vocab, batch_size)
  return out


def score_tasks(
  end_rows: Sequence[dict],
  start_rows: Sequence[dict],
  logits: dict[str, np.ndarray],
  vocab: tk.Vocab,
  *,
  notation: str,
  boards: Sequence[chess.Board] | None = None,
) -> dict:
  """{task: {rows, exm?, lgm, r_precision, errors?}} of per-task logits (masked here as
  evaluation scores them: `chessjax.lm.task.eval_logits`). `boards`:
  the rows' prefix positions if the caller has them (`boards_after`), else replayed once here."""
  results = {}
  for task, task_logits_ in logits.items():
    task_logits_ = eval_logits(task_logits_, vocab, notation)
    pairs = [answers(e, s, task) for e, s in zip(end_rows, start_rows, strict=True)]
    exact, legal = [a for a, _ in pairs], [b for _, b in pairs]
    results[task] = score(task_logits_, exact, legal, vocab)
    if task.startswith("end"):
      boards = boards_after(end_rows) if boards is None else boards
      results[task]["errors"] = error_categories(end_rows, task, task_logits_, vocab, boards)
  return results


def evaluate(
  end_rows: Sequence[dict],
  start_rows: Sequence[dict],
  logits_fn: LogitsFn,
  vocab: tk.Vocab,
  *,
  notation: str,
  batch_size: int = 64,
  tasks: Sequence[str] | None = None,
) -> dict:
  """Scores a model on every task it can take: {task: {rows, exm?, lgm, r_precision, errors?}},
  by the reference path (`reference_task_logits`). Non-AP models have their piece logits
  masked."""
  logits = reference_task_logits(
    end_rows, start_rows, logits_fn, vocab, notation=notation, tasks=tasks, batch_size=batch_size
  )
  return score_tasks(end_rows, start_rows, logits, vocab, notation=notation)


def random_legal_baseline(rows: Sequence[dict], kind: str) -> float:
  """Mean of 1/R over Actual rows, in % (an ExM baseline: guess a legal answer uniformly). `kind`
  is "end" (R = legal ending squares) or "start" (R = legal starting squares)."""
  key = {"end": "legal_ending_square", "start": "legal_starting_square"}[kind]
  if not rows:
    return float("nan")
  return 100 * float(np.mean([1 / len(r[key]) for r in rows]))


def piece_type_counts(end_rows: Sequence[dict], start_rows: Sequence[dict]) -> dict:
  """Piece-type counts of the prompts (Toshniwal et al. 2022, Table 11): End/Start-Actual,
  End-Other, Start-Other, each {R, N, B, Q, K, total}."""

  def count(letters):
    c = {p: 0 for p in TABLE11_PIECES}
    for x in letters:
      c[x] += 1
    c["total"] = sum(c.values())
    return c

  return {
    "actual": count(r["piece_type"] for r in end_rows),
    "end_other": count(r["other_piece_type"] for r in end_rows),
    "start_other": count(r["other_piece_type"] for r in start_rows),
  }


TABLE11 = {
  "actual": {"R": 358, "N": 144, "B": 164, "Q": 204, "K": 130, "total": 1000},
  "end_other": {"R": 273, "N": 136, "B": 170, "Q": 103, "K": 318, "total": 1000},
  "start_other": {"R": 197, "N": 126, "B": 161, "Q": 129, "K": 387, "total": 1000},
}


def piece_type_table(counts: dict, paper: dict | None = TABLE11) -> str:
  """Markdown table of `piece_type_counts`, with the paper's Table 11 beside it (ours / paper)."""
  head = "| piece | End/Start-Actual | End-Other | Start-Other |"
  rows = [head, "|---|---:|---:|---:|"]
  for p in [*TABLE11_PIECES, "total"]:
    cells = []
    for col in ("actual", "end_other", "start_other"):
      cell = str(counts[col][p])
      if paper is not None:
        cell += f" / {paper[col][p]}"
      cells.append(cell)
    rows.append(f"| {p} | " + " | ".join(cells) + " |")
  if paper is not None:
    rows.append("(ours / Toshniwal et al. 2022, Table 11)")
  return "\n".join(rows)
