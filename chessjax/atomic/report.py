"""The scoring report of the atomic-chess track (Co & Konuganti 2026, section 4).

    python -m chessjax.atomic.report --positions P.jsonl --answers A.jsonl [B.jsonl ...] \
        --out DIR [--depth D] [--thresholds paper|lichess] [--workers N] [--cache PATH|none] \
        [--price MODEL=INPUT,OUTPUT ...] [--usage-only]

Scores every answer (see `chessjax.atomic.scoring` for the answer format and the scores) with the
cached engine pools of its variant at the positions' depth. DIR receives `scored.jsonl` (every
answer with its analysis), `report.json`, `report.md` (per model and condition: mean Win% loss
with a 95% bootstrap CI stratified by position source, category rates as in the paper's Table 1,
and the atomic - chess difference of section 4.1 with the ratio where it means something: only
when the chess loss is at least `RATIO_MIN_LOSS` Win% points, below which a ratio mostly measures
how close to zero the chess loss is) and `win_loss.png` (the paper's Figure 1). Raw Stockfish and
Fairy-Stockfish centipawns are not on the same scale: compare variants through Win% loss and
categories, and read absolute differences with that caveat.

Answers written by the API pickers (`chessjax.atomic.llm`) also carry latency and token counts:
the report adds the paper's Table 4 (mean latency per move, per model and effort) and Table 5
(mean output tokens per move, per model, effort and condition), and a cost line per model when
`--price MODEL=INPUT,OUTPUT` gives its US dollars per million input and output tokens (reasoning
tokens are billed as output; both APIs count them in the output). `--usage-only` writes just
those tables (`usage.md`, `usage.json`) from the answer files, with no engine and no positions.
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
from chessjax.atomic.prompts import CONDITION_VARIANT, CONDITIONS
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

RATIO_MIN_LOSS = 1.0  # Win% points of chess loss below which no atomic/chess ratio is shown

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
    tokens = [t for t in map(_output_tokens, items) if t is not None]
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
  """Atomic (rules stated) against chess mean Win% loss, per model and reasoning effort: the
  difference always, the ratio only when the chess loss is at least `RATIO_MIN_LOSS`."""
  by_key = {(r["model"], r["reasoning_effort"], r["condition"]): r for r in rows}
  out = []
  for (model, effort, condition), row in by_key.items():
    chess = by_key.get((model, effort, "chess"))
    if condition != "atomic" or chess is None:
      continue
    base = chess["mean_win_loss"]
    out.append(
      {
        "model": model,
        "reasoning_effort": effort,
        "atomic_minus_chess": row["mean_win_loss"] - base,
        "atomic_over_chess": row["mean_win_loss"] / base if base >= RATIO_MIN_LOSS else None,
        "chess_loss": base,
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
      "| Model | Effort | Atomic - chess mean Win% loss | Atomic / chess |",
      "|---|---|---|---|",
    ]
    for r in report["summary"]["ratios"]:
      ratio = (
        f"{r['atomic_over_chess']:.2f}x"
        if r["atomic_over_chess"] is not None
        else f"- (chess loss {r['chess_loss']:.1f} < {RATIO_MIN_LOSS:g})"
      )
      lines.append(
        f"| {r['model']} | {r['reasoning_effort']} | {r['atomic_minus_chess']:+.1f} | {ratio} |"
      )
  if report.get("usage") and (report["usage"]["latency"] or report["usage"]["tokens"]):
    lines += ["", usage_markdown(report["usage"]).rstrip("\n")]
  lines += [
    "",
    "Raw Stockfish and Fairy-Stockfish centipawns are scaled differently; compare variants through "
    "Win% loss and categories.",
  ]
  return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# Latency, tokens and cost (the paper's Tables 4 and 5)


def _number(value) -> float | None:
  return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _output_tokens(answer: dict) -> float | None:
  """Output tokens of an answer: `output_tokens`, or the older `tokens` field."""
  found = _number(answer.get("output_tokens"))
  return found if found is not None else _number(answer.get("tokens"))


def usage_summary(answers: Sequence[dict], prices: dict | None = None) -> dict:
  """Table 4 (mean latency per model and effort), Table 5 (mean output tokens per model, effort
  and condition) and, for models in `prices` ({model: (USD per 1M input, per 1M output)}), the
  cost of the recorded tokens. Answers without the numbers are left out of each table."""
  latency, tokens, spent = defaultdict(list), defaultdict(list), defaultdict(lambda: [0.0, 0.0, 0])
  for a in answers:
    model, effort = a.get("model", "") or "?", a.get("reasoning_effort", "") or "-"
    seconds, out_tokens = _number(a.get("latency_s")), _output_tokens(a)
    if seconds is not None:
      latency[model, effort].append(seconds)
    if out_tokens is not None:
      try:
        condition = condition_of(a)
      except ValueError:
        continue
      tokens[model, effort, condition].append(out_tokens)
      used = spent[model]
      used[0] += _number(a.get("input_tokens")) or 0.0
      used[1] += out_tokens
      used[2] += 1
  order = {c: i for i, c in enumerate(CONDITIONS)}
  prices = prices or {}
  return {
    "latency": [
      {"model": m, "reasoning_effort": e, "n": len(v), "mean_latency_s": float(np.mean(v))}
      for (m, e), v in sorted(latency.items())
    ],
    "tokens": [
      {
        "model": m,
        "reasoning_effort": e,
        "condition": c,
        "n": len(v),
        "mean_output_tokens": float(np.mean(v)),
      }
      for (m, e, c), v in sorted(tokens.items(), key=lambda kv: (*kv[0][:2], order[kv[0][2]]))
    ],
    "cost": [
      {
        "model": m,
        "answers": spent[m][2],
        "input_tokens": spent[m][0],
        "output_tokens": spent[m][1],
        "usd_per_mtok": list(prices[m]),
        "usd": (spent[m][0] * prices[m][0] + spent[m][1] * prices[m][1]) / 1e6,
      }
      for m in sorted(spent)
      if m in prices
    ],
  }


def usage_markdown(usage: dict) -> str:
  lines = [
    "Table 4: mean latency per move (seconds of the answered request).",
    "",
    "| Model | Effort | n | Mean latency (s) |",
    "|---|---|---|---|",
  ]
  lines += [
    f"| {r['model']} | {r['reasoning_effort']} | {r['n']} | {r['mean_latency_s']:.2f} |"
    for r in usage["latency"]
  ]
  lines += [
    "",
    "Table 5: mean output tokens per move (reasoning included), by condition.",
    "",
    "| Model | Effort | Condition | n | Mean output tokens |",
    "|---|---|---|---|---|",
  ]
  lines += [
    f"| {r['model']} | {r['reasoning_effort']} | {r['condition']} | {r['n']} | "
    f"{r['mean_output_tokens']:.1f} |"
    for r in usage["tokens"]
  ]
  for r in usage["cost"]:
    lines += [
      "",
      f"Cost of {r['model']}: ${r['usd']:.4f} for {r['answers']} answers "
      f"({r['input_tokens']:.0f} input, {r['output_tokens']:.0f} output tokens at "
      f"${r['usd_per_mtok'][0]:g} / ${r['usd_per_mtok'][1]:g} per million).",
    ]
  return "\n".join(lines) + "\n"


def save_figure(report: dict, path: Path) -> None:
  """Mean Win% loss per model and condition with 95% CI error bars (the paper's Figure 1)."""
  from chessjax import plotting

  rows = report["summary"]["groups"]
  models = sorted({(r["model"], r["reasoning_effort"]) for r in rows})
  conditions = [
    c for c in ("chess", "atomic", "atomic_no_rules") if any(r["condition"] == c for r in rows)
  ]
  width = 0.8 / max(1, len(conditions))
  fig, ax = plotting.subplots(figsize=(max(5, 1.8 * len(models) + 2), 3.8), dpi=100)
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


def _price(text: str) -> tuple[str, tuple[float, float]]:
  model, sep, rest = text.rpartition("=")
  try:
    inp, out = (float(x) for x in rest.split(","))
  except ValueError:
    raise argparse.ArgumentTypeError(
      f"expected MODEL=INPUT,OUTPUT (USD per 1M), got {text!r}"
    ) from None
  if not sep or not model:
    raise argparse.ArgumentTypeError(f"expected MODEL=INPUT,OUTPUT (USD per 1M), got {text!r}")
  return model, (inp, out)


def parse_args(argv=None) -> argparse.Namespace:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--positions", help="JSONL from data_prep.atomic_positions (not for --usage-only)")
  p.add_argument("--answers", required=True, nargs="+", help="answer JSONL file(s)")
  p.add_argument("--out", required=True, help="output directory")
  p.add_argument("--depth", type=int, help="engine depth (default: the positions' depth)")
  p.add_argument("--thresholds", choices=sorted(THRESHOLDS), default="paper")
  p.add_argument("--workers", type=int, default=1, help="engine processes per variant")
  p.add_argument("--hash-mb", type=int, default=16)
  p.add_argument("--cache", default=None, help="sqlite cache path, or 'none' (default: per user)")
  p.add_argument("--bootstrap", type=int, default=10_000, help="bootstrap resamples")
  p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
  p.add_argument(
    "--price",
    type=_price,
    action="append",
    default=[],
    metavar="MODEL=IN,OUT",
    help="USD per million input and output tokens of a model (repeatable): adds a cost line",
  )
  p.add_argument(
    "--usage-only", action="store_true", help="only Tables 4 and 5 (and cost), no scoring"
  )
  args = p.parse_args(argv)
  if not args.usage_only and not args.positions:
    p.error("--positions is required (except with --usage-only)")
  return args


def _missing_inputs(args) -> list[str]:
  paths = ([args.positions] if args.positions else []) + list(args.answers)
  return [path for path in paths if not Path(path).is_file()]


def load_inputs(args) -> tuple[dict, list[dict], list[str]]:
  """Positions by FEN, answers whose FEN is a known position, and every problem found.

  Positions written before the rule set was named "chess" carry source "standard": read as
  "chess"."""
  rows, problems = read_jsonl(args.positions, ("fen", "source"))
  positions = {r["fen"]: {**r, "source": variant_name(r["source"])} for r in rows}
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


def variant_name(name: str) -> str:
  """A source or rule-set name with the old "standard" read as "chess"; others unchanged."""
  return "chess" if name == "standard" else name


def usage_only(args) -> int:
  answers, problems = [], []
  for path in args.answers:
    found, bad = read_jsonl(path)
    answers += found
    problems += bad
  for p in problems:
    logging.warning("skipped: %s", p)
  usage = usage_summary(answers, dict(args.price))
  if not usage["latency"] and not usage["tokens"]:
    print("the answers record no latency or tokens (written by an API picker?)", file=sys.stderr)
    return 1
  out = Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  write_json(out / "usage.json", usage)
  text = usage_markdown(usage)
  write_text(out / "usage.md", text)
  print(text)
  print(f"wrote {out}/usage.md, usage.json")
  return 0


def main(argv=None) -> int:
  logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
  args = parse_args(argv)
  missing = _missing_inputs(args)
  if missing:
    print(f"no such file: {', '.join(missing)}", file=sys.stderr)
    return 1
  if args.usage_only:
    return usage_only(args)
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
  report["usage"] = usage_summary(answers, dict(args.price))
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
