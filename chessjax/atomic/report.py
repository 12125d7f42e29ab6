"""The scoring report of the atomic-chess track (Co & Konuganti 2026, section 4).

    python -m chessjax.atomic.report --positions P.jsonl --answers A.jsonl [B.jsonl ...] \
        --out DIR [--depth D] [--thresholds paper|lichess] [--workers N] [--cache PATH|none]

Scores every answer (see `chessjax.atomic.scoring` for the answer format and the scores) with the
cached engine pools of its variant at the positions' depth. DIR receives `scored.jsonl` (every
answer with its analysis), `report.json`, `report.md` (per model and condition: mean Win% loss
with a 95% bootstrap CI stratified by position source, category rates as in the paper's Table 1,
the atomic/standard ratio of section 4.1) and `win_loss.png` (the paper's Figure 1). Raw Stockfish
and Fairy-Stockfish centipawns are not on the same scale: compare variants through Win% loss and
categories, and read absolute differences with that caveat.
"""

import argparse
import json
import logging
import sys
import textwrap
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from chessjax.atomic.engines import EngineMissingError, cache_arg, variant_pools
from chessjax.atomic.prompts import CONDITION_VARIANT
from chessjax.atomic.scoring import (
  CATEGORIES,
  FAILURES,
  THRESHOLDS,
  bootstrap_ci,
  condition_of,
  normalise_answer,
  score_answers,
)
from chessjax.files import read_jsonl, write_figure, write_json, write_text

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
        "variant": CONDITION_VARIANT[condition],
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
    "Raw Stockfish and Fairy-Stockfish centipawns are scaled differently; compare variants through "
    "Win% loss and categories.",
  ]
  return "\n".join(lines) + "\n"


def save_figure(report: dict, path: Path) -> None:
  """Mean Win% loss per model and condition with 95% CI error bars (the paper's Figure 1)."""
  from matplotlib.figure import Figure  # no pyplot: no backend or global figure state

  rows = report["summary"]["groups"]
  models = sorted({(r["model"], r["reasoning_effort"]) for r in rows})
  conditions = [
    c for c in ("standard", "atomic", "atomic_no_rules") if any(r["condition"] == c for r in rows)
  ]
  width = 0.8 / max(1, len(conditions))
  fig = Figure(figsize=(max(5, 1.8 * len(models) + 2), 3.8), dpi=100)
  ax = fig.subplots()
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
  write_figure(path, fig)


# ------------------------------------------------------------------------------------------------
# Command line


def parse_args(argv=None) -> argparse.Namespace:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--positions", required=True, help="JSONL from data_prep.atomic_positions")
  p.add_argument("--answers", required=True, nargs="+", help="answer JSONL file(s)")
  p.add_argument("--out", required=True, help="output directory")
  p.add_argument("--depth", type=int, help="engine depth (default: the positions' depth)")
  p.add_argument("--thresholds", choices=sorted(THRESHOLDS), default="paper")
  p.add_argument("--workers", type=int, default=1, help="engine processes per variant")
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
    found, bad = read_jsonl(path, ("fen", "move"))
    problems += bad
    for a in found:
      try:
        condition_of(a)  # also checks `variant` (or the old `ruleset`)
      except ValueError as e:
        problems.append(f"{path}: {e}")
        continue
      if a["fen"] not in positions:
        problems.append(f"{path}: answer for a FEN not in {args.positions}: {a['fen']}")
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
  answers = [normalise_answer(a) for a in answers]
  variants = sorted({a["variant"] for a in answers})
  thresholds = THRESHOLDS[args.thresholds]
  try:
    with variant_pools(
      variants, workers=args.workers, hash_mb=args.hash_mb, cache_path=cache_arg(args.cache)
    ) as pools:
      scored = score_answers(answers, positions, pools, depth=depth, thresholds=thresholds)
      report = {
        "n_answers": len(scored),
        "n_positions": len({s["fen"] for s in scored}),
        "skipped_inputs": len(problems),
        "depth": depth,
        "engines": {v: pools[v].info.name for v in variants},
        "cache": {v: pools[v].stats for v in variants},
      }
  except EngineMissingError as e:
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
