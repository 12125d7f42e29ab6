"""Win%-loss scoring of chess moves under atomic and standard rules (paper 000, SPEC section 9).

    python -m chessjax.atomic_eval --positions P.jsonl --answers A.jsonl [B.jsonl ...] --out DIR \
        [--depth D] [--thresholds paper|lichess] [--workers N] [--cache PATH|none]

An answer is one JSON object per line: `fen`, `ruleset` (`atomic` or `standard`), `move` (UCI), and
optionally `model`, `reasoning_effort`, `prompt` (`rules`, the default, or `no_rules`, the paper's
Table 2 ablation; atomic only), `tokens`. Every answer is analysed by its ruleset's engine
(Stockfish for standard, Fairy-Stockfish for atomic) at the positions' depth, through the cached
`chessjax.engines` pool:

  best     the engine's best line (multipv 1) of the position
  played   the same root searched with only the answer's move allowed (python-chess root_moves),
           or the best line itself when the answer is the best move

Scores are centipawns from the mover's view clamped to +-1000, a mate is +-1000; `Win%(cp)` as in
lichess's accuracy metric; `win_loss = max(0, Win%(best) - Win%(played))` (the clamp absorbs the
rare restricted search that scores deeper than the free one); categories in order BLUNDER,
MISTAKE, INACCURACY, else GOOD, with the paper's thresholds (30/20/10 Win% points) or lichess's
(15/10/5). BEST means the answer is the engine's best move. An answer that is not a UCI move
(`unparsable`) or not legal under its ruleset (`illegal`) is counted apart and scored as a failure:
its played score is -1000 (it loses outright), so it weighs in the mean loss like the worst move.

DIR receives `scored.jsonl` (every answer with its analysis), `report.json`, `report.md` (per model
and condition: mean Win% loss with a 95% bootstrap CI stratified by position source, category
rates as in the paper's Table 1, the atomic/standard ratio) and `win_loss.png` (the paper's
Figure 1). Raw Stockfish and Fairy-Stockfish centipawns are not on the same scale: compare
rulesets through Win% loss and categories, and read absolute differences with that caveat.
"""

import argparse
import contextlib
import json
import logging
import re
import sys
import textwrap
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from chessjax import engines
from chessjax.atomic_prompts import CONDITION_RULESET, RULESET_VARIANT, RULESETS, board_of
from chessjax.files import write_json, write_text

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
  """BLUNDER / MISTAKE / INACCURACY / GOOD of a Win% drop, largest threshold first."""
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


def condition_of(answer: dict) -> str:
  """Prompt condition of an answer: `atomic`, `atomic_no_rules` or `standard`."""
  ruleset, prompt = answer["ruleset"], answer.get("prompt", "rules")
  if ruleset not in RULESETS:
    raise ValueError(f"ruleset must be one of {RULESETS}, got {ruleset!r}")
  if prompt not in ("rules", "no_rules") or (prompt == "no_rules" and ruleset != "atomic"):
    raise ValueError(f"prompt must be 'rules' or (atomic only) 'no_rules', got {prompt!r}")
  return "atomic_no_rules" if prompt == "no_rules" else ruleset


def move_status(fen: str, ruleset: str, move) -> str:
  """`ok`, `illegal` (a UCI move the ruleset forbids here) or `unparsable`."""
  text = move.strip().lower() if isinstance(move, str) else ""
  if not _UCI.fullmatch(text):
    return "unparsable"
  legal = {m.uci() for m in board_of(fen, ruleset).legal_moves}
  return "ok" if text in legal else "illegal"


def read_jsonl(path, required: Sequence[str]) -> tuple[list[dict], list[str]]:
  """Objects of a JSONL file and one message per line that is not an object with `required`."""
  rows, problems = [], []
  with open(path) as f:
    for number, line in enumerate(f, start=1):
      if not line.strip():
        continue
      try:
        row = json.loads(line)
      except json.JSONDecodeError as e:
        problems.append(f"{path}:{number}: not JSON ({e.msg})")
        continue
      missing = [k for k in required if not isinstance(row, dict) or k not in row]
      if missing:
        problems.append(f"{path}:{number}: missing {', '.join(missing)}")
        continue
      rows.append(row)
  return rows, problems


def score_answers(
  answers: Sequence[dict],
  positions: dict[str, dict],
  pools: dict[str, "engines.EnginePool"],
  *,
  depth: int,
  thresholds: Sequence[float] = THRESHOLDS["paper"],
) -> list[dict]:
  """Each answer with its analysis and scores (see the module docstring).

  `positions` maps FEN to its position record (for `source`); `pools` maps ruleset to an analyser
  with `analyse_many(requests)` (an `engines.EnginePool` of that ruleset's engine).
  """
  answers = [dict(a, condition=condition_of(a)) for a in answers]
  for a in answers:
    a["status"] = move_status(a["fen"], a["ruleset"], a["move"])
    a["move"] = a["move"].strip().lower() if a["status"] == "ok" else a["move"]
  best = _analyse(pools, {(a["fen"], a["ruleset"], None) for a in answers}, depth)
  played = _analyse(
    pools,
    {
      (a["fen"], a["ruleset"], a["move"])
      for a in answers
      if a["status"] == "ok" and a["move"] != best[a["fen"], a["ruleset"], None].best.move
    },
    depth,
  )
  scored = []
  for a in answers:
    top = best[a["fen"], a["ruleset"], None]
    best_cp = clamp_cp(top.best.cp, top.best.mate)
    if a["status"] != "ok":
      played_cp, is_best = -CP_LIMIT, False
    elif a["move"] == top.best.move:
      played_cp, is_best = best_cp, True
    else:
      line = played[a["fen"], a["ruleset"], a["move"]].best
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
  """Analyses of (fen, ruleset, move-or-None) keys, batched per ruleset."""
  out = {}
  for ruleset in RULESETS:
    mine = sorted(k for k in keys if k[1] == ruleset)
    if not mine:
      continue
    requests = [
      engines.Request(
        fen=fen,
        variant=RULESET_VARIANT[ruleset],
        depth=depth,
        root_moves=None if move is None else (move,),
      )
      for fen, _, move in mine
    ]
    out.update(zip(mine, pools[ruleset].analyse_many(requests), strict=True))
  return out


# ------------------------------------------------------------------------------------------------
# Report


def summarise(
  scored: Sequence[dict], *, n_boot: int = 10_000, seed: int = 0, thresholds=THRESHOLDS["paper"]
) -> dict:
  """Per (model, reasoning effort, condition): counts, rates, mean Win% loss and its CI."""
  groups = defaultdict(list)
  for s in scored:
    key = (s.get("model", "") or "?", s.get("reasoning_effort", "") or "-", s["condition"])
    groups[key].append(s)
  rows = []
  for (model, effort, condition), items in sorted(groups.items()):
    loss = np.array([s["win_loss"] for s in items])
    sources = np.array([s["source"] for s in items])
    counts = Counter(s["category"] for s in items)
    lo, hi = bootstrap_ci(loss, sources, n_boot=n_boot, seed=seed)
    tokens = [s["tokens"] for s in items if isinstance(s.get("tokens"), int | float)]
    rows.append(
      {
        "model": model,
        "reasoning_effort": effort,
        "condition": condition,
        "ruleset": CONDITION_RULESET[condition],
        "n": len(items),
        "mean_win_loss": float(loss.mean()),
        "ci95": [lo, hi],
        "mean_cp_loss": float(np.mean([s["cp_loss"] for s in items])),
        "rates": {c: counts[c] / len(items) for c in (*CATEGORIES, *(f.upper() for f in FAILURES))},
        "best_rate": float(np.mean([s["best"] for s in items])),
        "mean_win_loss_by_source": {
          str(src): float(loss[sources == src].mean()) for src in np.unique(sources)
        },
        "mean_tokens": float(np.mean(tokens)) if tokens else None,
      }
    )
  return {"groups": rows, "ratios": _ratios(rows), "thresholds": list(thresholds)}


def _ratios(rows: Sequence[dict]) -> list[dict]:
  """Atomic (rules stated) over standard mean Win% loss, per model and reasoning effort."""
  by_key = {(r["model"], r["reasoning_effort"], r["condition"]): r for r in rows}
  out = []
  for (model, effort, condition), row in by_key.items():
    standard = by_key.get((model, effort, "standard"))
    if condition != "atomic" or standard is None:
      continue
    ratio = row["mean_win_loss"] / standard["mean_win_loss"] if standard["mean_win_loss"] else None
    out.append(
      {
        "model": model,
        "reasoning_effort": effort,
        "atomic_over_standard": ratio,
        "atomic_minus_standard": row["mean_win_loss"] - standard["mean_win_loss"],
      }
    )
  return out


def markdown(report: dict) -> str:
  """The report as Markdown: the paper's Table 1 columns plus mean loss, CI and failures."""
  lines = [
    f"# Atomic-chess move quality ({report['n_answers']} answers, "
    f"{report['n_positions']} positions, depth {report['depth']})",
    "",
    "Engines: " + "; ".join(f"{k}: {v}" for k, v in report["engines"].items()),
    f"Categories use Win% drop thresholds {report['summary']['thresholds']} "
    "(BLUNDER, MISTAKE, INACCURACY).",
    "",
    "| Model | Effort | Condition | n | Mean Win% loss [95% CI] | BLUNDER | MISTAKE | INACC. | "
    "BEST | Illegal | Unparsable |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  for r in report["summary"]["groups"]:
    rates = r["rates"]
    lines.append(
      f"| {r['model']} | {r['reasoning_effort']} | {r['condition']} | {r['n']} | "
      f"{r['mean_win_loss']:.1f} [{r['ci95'][0]:.1f}, {r['ci95'][1]:.1f}] | "
      f"{100 * rates['BLUNDER']:.1f}% | {100 * rates['MISTAKE']:.1f}% | "
      f"{100 * rates['INACCURACY']:.1f}% | {100 * r['best_rate']:.1f}% | "
      f"{100 * rates['ILLEGAL']:.1f}% | {100 * rates['UNPARSABLE']:.1f}% |"
    )
  if report["summary"]["ratios"]:
    lines += [
      "",
      "| Model | Effort | Atomic / standard mean loss | Atomic - standard |",
      "|---|---|---|---|",
    ]
    for r in report["summary"]["ratios"]:
      ratio = "n/a" if r["atomic_over_standard"] is None else f"{r['atomic_over_standard']:.2f}x"
      lines.append(
        f"| {r['model']} | {r['reasoning_effort']} | {ratio} | {r['atomic_minus_standard']:+.1f} |"
      )
  lines += [
    "",
    "Raw Stockfish and Fairy-Stockfish centipawns are scaled differently; compare rulesets through "
    "Win% loss and categories.",
  ]
  return "\n".join(lines) + "\n"


def save_figure(report: dict, path: Path) -> None:
  """Mean Win% loss per model and condition with 95% CI error bars (the paper's Figure 1)."""
  from chessjax.plots import plt  # pyplot with the headless backend selected

  rows = report["summary"]["groups"]
  models = sorted({(r["model"], r["reasoning_effort"]) for r in rows})
  conditions = [
    c for c in ("standard", "atomic", "atomic_no_rules") if any(r["condition"] == c for r in rows)
  ]
  width = 0.8 / max(1, len(conditions))
  fig, ax = plt.subplots(figsize=(max(5, 1.8 * len(models) + 2), 3.8), dpi=100)
  for i, condition in enumerate(conditions):
    for j, key in enumerate(models):
      row = next(
        (
          r
          for r in rows
          if (r["model"], r["reasoning_effort"]) == key and r["condition"] == condition
        ),
        None,
      )
      if row is None:
        continue
      x, y = j + (i - (len(conditions) - 1) / 2) * width, row["mean_win_loss"]
      err = [[y - row["ci95"][0]], [row["ci95"][1] - y]]
      ax.bar(x, y, width, color=f"C{i}", label=condition if j == 0 else None)
      ax.errorbar(x, y, yerr=err, color="black", capsize=3, linewidth=1)
      ax.text(x, row["ci95"][1] + 0.5, f"{y:.1f}", ha="center", va="bottom", fontsize=8)
  names = [textwrap.fill(m, 20) + ("" if e == "-" else f"\n({e})") for m, e in models]
  ax.set_xticks(range(len(models)), names, fontsize=8)
  ax.set_ylabel("mean Win% loss per move")
  ax.legend(fontsize=8)
  ax.grid(axis="y", alpha=0.3)
  fig.tight_layout()
  tmp = path.with_name(f".{path.stem}.tmp.png")
  fig.savefig(tmp)
  plt.close(fig)
  tmp.replace(path)


# ------------------------------------------------------------------------------------------------
# Engines of the two rulesets


def cache_arg(value: str | None):
  """A `--cache` flag as an `EnginePool` cache: "none" disables it, no value is the user default."""
  return None if value == "none" else (value or engines.default_cache_path())


@contextlib.contextmanager
def ruleset_pools(rulesets, *, workers: int = 1, hash_mb: int = 16, cache=None):
  """{ruleset: EnginePool of its engine} (Stockfish for standard, Fairy-Stockfish for atomic),
  every pool closed on exit; raises `engines.EngineMissingError` naming `make engines`."""
  with contextlib.ExitStack() as stack:
    yield {
      ruleset: stack.enter_context(
        engines.EnginePool(
          engines.engine_for_variant(RULESET_VARIANT[ruleset]),
          workers=workers,
          hash_mb=hash_mb,
          cache=cache,
        )
      )
      for ruleset in rulesets
    }


# ------------------------------------------------------------------------------------------------
# Command line


def parse_args(argv=None) -> argparse.Namespace:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--positions", required=True, help="JSONL from data_prep.atomic_positions")
  p.add_argument("--answers", required=True, nargs="+", help="answer JSONL file(s)")
  p.add_argument("--out", required=True, help="output directory")
  p.add_argument("--depth", type=int, help="engine depth (default: the positions' depth)")
  p.add_argument("--thresholds", choices=sorted(THRESHOLDS), default="paper")
  p.add_argument("--workers", type=int, default=1, help="engine processes per ruleset")
  p.add_argument("--hash-mb", type=int, default=16)
  p.add_argument("--cache", default=None, help="sqlite cache path, or 'none' (default: per user)")
  p.add_argument("--bootstrap", type=int, default=10_000, help="bootstrap resamples")
  p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
  return p.parse_args(argv)


def load_inputs(args) -> tuple[dict, list[dict], list[str]]:
  """Positions by FEN, answers whose FEN is a known position, and every problem found."""
  rows, problems = read_jsonl(args.positions, ("fen", "source"))
  positions = {r["fen"]: r for r in rows}
  answers = []
  for path in args.answers:
    found, bad = read_jsonl(path, ("fen", "ruleset", "move"))
    problems += bad
    for a in found:
      if a["fen"] not in positions:
        problems.append(f"{path}: answer for a FEN not in {args.positions}: {a['fen']}")
        continue
      try:
        condition_of(a)
      except ValueError as e:
        problems.append(f"{path}: {e}")
        continue
      answers.append(a)
  return positions, answers, problems


def main(argv=None) -> int:
  logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
  args = parse_args(argv)
  positions, answers, problems = load_inputs(args)
  for p in problems:
    logging.warning("skipped: %s", p)
  if not answers:
    print("no answers to score", file=sys.stderr)
    return 1
  depths = {r.get("depth") for r in positions.values()} - {None}
  depth = args.depth or (depths.pop() if len(depths) == 1 else None)
  if depth is None:
    print("the positions record no single depth: pass --depth", file=sys.stderr)
    return 1
  rulesets = sorted({a["ruleset"] for a in answers})
  thresholds = THRESHOLDS[args.thresholds]
  try:
    with ruleset_pools(
      rulesets, workers=args.workers, hash_mb=args.hash_mb, cache=cache_arg(args.cache)
    ) as pools:
      scored = score_answers(answers, positions, pools, depth=depth, thresholds=thresholds)
      report = {
        "n_answers": len(scored),
        "n_positions": len({s["fen"] for s in scored}),
        "skipped_inputs": len(problems),
        "depth": depth,
        "engines": {r: pools[r].info.name for r in rulesets},
        "cache": {r: pools[r].stats for r in rulesets},
      }
  except engines.EngineMissingError as e:
    print(e, file=sys.stderr)
    return 1
  summary = summarise(scored, n_boot=args.bootstrap, seed=args.seed, thresholds=thresholds)
  report["summary"] = summary
  out = Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  write_text(out / "scored.jsonl", "".join(json.dumps(s) + "\n" for s in scored))
  write_json(out / "report.json", report)
  write_text(out / "report.md", markdown(report))
  save_figure(report, out / "win_loss.png")
  print(markdown(report))
  print(f"wrote {out}/report.md, report.json, scored.jsonl, win_loss.png")
  return 0


if __name__ == "__main__":
  sys.exit(main())
