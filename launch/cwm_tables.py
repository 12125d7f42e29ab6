"""The tables and figures of `launch.cwm_mini` (the paper's d128 ranking at CPU scale), from its
rows: one run per row (`cwm_mini.collect`, or a record's `runs`, docs/results/bench_cwm_*.json).

* `plan`: the sweep's runs, (family, seed), from its arguments (or a record's protocol);
* `tables_markdown`: the Table 8 layout per split (mean and min-max over seeds beside the paper's
  d128 row), the ablation pairs, seed-by-seed comparisons (`paired`) and the time per run;
* `long_tables_markdown`: with the long-game outputs, length generalisation per run and split and
  the strata (each beside the same plies' other steps, `matched`, when the evaluation has them);
* `curves_png` (validation loss against steps) and `length_png` (ExactState and Labelwise per
  20 plies).
"""

import os
import statistics
import sys
from pathlib import Path

from chessjax.models import FAMILIES
from chessjax.world_model import grid

# The grid's families in the registry's order (the README's d128 table: Gated DeltaNet before
# Mamba-3), each ablation with its main family.
MAIN = tuple(f for f in FAMILIES if f in grid.MAIN)
ABLATIONS = grid.ABLATIONS
METRICS = ("loss", "labelwise", "exact_state", "trajectory")
BIN = 20  # Plies per bin of the long-game curves
SPLITS = ("real", "random")


def plan(args) -> list[tuple[str, int]]:
  """(family, seed) in seed-major order: seed 0 of every family first."""
  families = [f for f in args.families.split(",") if f]
  unknown = sorted(set(families) - set(MAIN) - set(ABLATIONS))
  if unknown:
    sys.exit(f"unknown families {unknown}; expected some of {list(MAIN) + list(ABLATIONS)}")
  main_seeds = [int(s) for s in args.seeds.split(",") if s]
  ablation_seeds = [int(s) for s in args.ablation_seeds.split(",") if s]
  out = []
  for seed in sorted(set(main_seeds) | set(ablation_seeds)):
    for family in families:
      if seed in (main_seeds if family in MAIN else ablation_seeds):
        out.append((family, seed))
  return out


def paper_d128() -> dict:
  """family -> split -> (loss, Labelwise %, ExactState %, Trajectory %) at d128: Walker & Lyons,
  Table 8 (main families) and Tables 9-10 (ablations), from the repository's data file."""
  from chessjax.world_model.report import paper_results

  out = {}
  for table in ("table8", "table9", "table10"):
    for row in paper_results()["tables"][table]["rows"]:
      if row["size"] == "d128":
        out.setdefault(row["family"], {})[row["split"]] = tuple(row[m] for m in METRICS)
  return out


def half_value_ply(long: dict, trained: int, min_steps: int = 100) -> int | None:
  """The first bin start at or beyond the training length whose ExactState is below half the
  ExactState of the last bin before it ([trained - 20, trained)); None when none falls that far
  (bins with fewer than `min_steps` steps are too noisy to count)."""
  b = long["bins"]
  before = [e for s, e in zip(b["start"], b["exact_state"], strict=True) if s == trained - BIN]
  if not before or before[0] == 0:
    return None
  for start, n, e in zip(b["start"], b["steps"], b["exact_state"], strict=True):
    if start >= trained and n >= min_steps and e < before[0] / 2:
      return start
  return None


def _pct(x: float) -> float:
  return 100.0 * x


def _cell(values: list[float], digits: int) -> str:
  if not values:
    return "-"
  mean = statistics.fmean(values)
  if len(values) == 1:
    return f"{mean:.{digits}f}"
  return f"{mean:.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def _paper_cell(value: float, digits: int) -> str:
  return f"{value:.{digits}f}"


def summarize(rows: list[dict]) -> dict:
  """Per family and split: the seeds' values of each metric (percent for accuracies)."""
  out = {}
  for row in rows:
    empty = {"seeds": [], **{split: {m: [] for m in METRICS} for split in SPLITS}}
    fam = out.setdefault(row["family"], empty)
    fam["seeds"].append(row["seed"])
    for split in SPLITS:
      for m in METRICS:
        v = row[split][m]
        fam[split][m].append(v if m == "loss" else _pct(v))
  return out


def paired(rows: list[dict], base: str, other: str, split: str, metric: str) -> tuple:
  """`other` against `base` on the seeds both have: (seeds where `other` is better, seeds where
  it is worse, seeds, mean of other - base). Better: lower loss, higher accuracy (percent)."""
  by = {(r["family"], r["seed"]): r[split][metric] for r in rows}
  seeds = sorted(seed for fam, seed in by if fam == other and (base, seed) in by)
  scale = 1.0 if metric == "loss" else 100.0
  diffs = [scale * (by[other, seed] - by[base, seed]) for seed in seeds]
  up = sum(d > 0 for d in diffs)
  down = sum(d < 0 for d in diffs)
  better, worse = (down, up) if metric == "loss" else (up, down)
  return better, worse, len(seeds), statistics.fmean(diffs) if diffs else float("nan")


def _paired_table(rows: list[dict], pairs: list[tuple[str, str]], title: str, word: str) -> list:
  metrics = {"loss": ("loss", 4), "labelwise": ("Labelwise", 2), "exact_state": ("ExactState", 2)}
  lines = [
    title,
    "",
    "| pair | split | " + " | ".join(name for name, _ in metrics.values()) + " |",
    "|---|---|" + "---|" * len(metrics),
  ]
  for base, other in pairs:
    for split in SPLITS:
      cells = []
      for m, (_, digits) in metrics.items():
        better, worse, n, diff = paired(rows, base, other, split, m)
        if n == 0:
          break
        k = better if word == "better" else worse
        cells.append(f"{word} in {k}/{n}, {diff:+.{digits}f}")
      if cells:
        lines.append(f"| {other} vs {base} | {split} | " + " | ".join(cells) + " |")
  return lines + [""]


def _train(args) -> str:
  pgn = getattr(args, "train_pgn", "")
  return Path(pgn).name if pgn else "master games parts 01-02"


def _real(args) -> str:
  pgn = getattr(args, "test_pgn", "")
  return Path(pgn).name if pgn else "part 08"


def tables_markdown(args, rows: list[dict], machine: str) -> str:
  s = summarize(rows)
  paper = paper_d128()
  digits = {"loss": 4, "labelwise": 2, "exact_state": 2, "trajectory": 2}
  lines = [
    "# Chess-World-Model d128 ranking at CPU scale",
    "",
    f"`python -m launch.cwm_mini` on {machine}. d128, batch {args.batch_size}, "
    f"{args.steps} steps, games cut at {args.max_len} steps in training and at "
    f"{args.eval_max_len or args.max_len} in scoring, the paper's "
    f"Table 7 d128 hyperparameters with the warmup scaled to the run. Train: {_train(args)}; "
    f"real test: first {args.test_games:,} games of {_real(args)}; random-uniform test: the "
    f"paper's seed-0 set, first {args.test_games:,} games. Ours: mean [min-max] over seeds; "
    "paper: Walker & Lyons, Tables 8-10 (whole games, four epochs of about 10M games: 310,944 "
    "steps of batch 128).",
    "",
  ]
  for split, title in (("real", "Held-out real games"), ("random", "Random-uniform games")):
    lines += [
      f"## {title} (Table 8 layout)",
      "",
      "| family | seeds | loss | paper | Labelwise % | paper | ExactState % | paper | "
      "Trajectory % | paper |",
      "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for family in (*MAIN, *ABLATIONS):
      if family not in s:
        continue
      cells = []
      for i, m in enumerate(METRICS):
        cells.append(_cell(s[family][split][m], digits[m]))
        cells.append(_paper_cell(paper[family][split][i], digits[m]))
      seeds = ",".join(str(x) for x in s[family]["seeds"])
      lines.append(f"| {family} | {seeds} | " + " | ".join(cells) + " |")
    lines.append("")
  lines += [
    "## Ablation pairs (ExactState %, mean over seeds; paper in brackets)",
    "",
    "| main -> ablation | real | random-uniform |",
    "|---|---|---|",
  ]
  for ablation, main in ABLATIONS.items():
    if ablation not in s or main not in s:
      continue
    cells = []
    for split in SPLITS:
      a = statistics.fmean(s[main][split]["exact_state"])
      b = statistics.fmean(s[ablation][split]["exact_state"])
      pa, pb = paper[main][split][2], paper[ablation][split][2]
      cells.append(f"{a:.2f} -> {b:.2f} ({b - a:+.2f}) [paper {pa:.2f} -> {pb:.2f}]")
    lines.append(f"| {main} -> {ablation} | " + " | ".join(cells) + " |")
  lines.append("")
  lines += _paired_table(
    rows,
    [("transformer", f) for f in MAIN[1:]],
    "## Seed by seed: each recurrent family against the Transformer (same seed; mean difference)",
    "better",
  )
  lines += _paired_table(
    rows,
    [(main, ablation) for ablation, main in ABLATIONS.items()],
    "## Seed by seed: each ablation against its main family (same seed; mean difference)",
    "worse",
  )
  lines += [
    "## Time per run (one core each)",
    "",
    "| run | params | train wall | train CPU | eval wall | non-finite batches |",
    "|---|---:|---:|---:|---:|---:|",
  ]
  for row in rows:
    cpu = "-" if row["train_cpu_s"] is None else f"{row['train_cpu_s'] / 60:.1f} min"
    lines.append(
      f"| {row['workdir'].rsplit('/', 1)[-1]} | {row['params']:,} | "
      f"{row['train_wall_s'] / 60:.1f} min | {cpu} | {row['eval_wall_s'] / 60:.1f} min | "
      f"{row['bad_batches']} |"
    )
  return "\n".join(lines) + "\n"


def long_tables_markdown(args, rows: list[dict]) -> str:
  """The long-game sections: length generalisation and strata, per family and split (runs whose
  evaluation has the long-game outputs; one line per run)."""
  rows = [r for r in rows if all("long" in r[split] for split in SPLITS)]
  if not rows:
    return ""
  trained = args.max_len
  scored = rows[0]["real"]["long"]["scored_max_len"]
  lines = [
    f"## Length generalisation: trained on {trained} steps, scored to {scored}",
    "",
    f"ExactState % on the steps before ply {trained} and from it on (Labelwise likewise); at the "
    "training length: the "
    f"20 plies before it; half: the first 20-ply bin from ply {trained} on whose ExactState is "
    "below half that (bins of at least 100 steps; '-': none); the first wrong ply of each game "
    "(quartiles; games never wrong); the largest and the median per-game loss (mean "
    f"cross-entropy of a game). Games longer than {scored} steps are cut (count per split).",
    "",
    "| run | split | within % | beyond % (steps) | at training length % | half at ply | "
    "Labelwise within / beyond % | first wrong ply q25/q50/q75 | never wrong | max game loss | "
    "median game loss | cut |",
    "|---|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|",
  ]
  for row in rows:
    for split in SPLITS:
      g = row[split]["long"]
      at = [e for st, e in zip(g["bins"]["start"], g["bins"]["exact_state"], strict=True)
            if st == trained - BIN]  # fmt: skip
      half = half_value_ply(g, trained)
      q = g["first_wrong"]["quartiles"]
      beyond = "-" if g["exact_beyond"] is None else f"{100 * g['exact_beyond']:.2f}"
      lw_beyond = "-" if g["labelwise_beyond"] is None else f"{100 * g['labelwise_beyond']:.2f}"
      lines.append(
        f"| {row['family']}_s{row['seed']} | {split} | {100 * g['exact_within']:.2f} | "
        f"{beyond} ({g['steps_beyond']:,}) | {100 * at[0]:.2f} | "
        f"{'-' if half is None else half} | {100 * g['labelwise_within']:.2f} / {lw_beyond} | "
        f"{'-' if q is None else '/'.join(f'{x:g}' for x in q)} | "
        f"{g['first_wrong']['never']} | {g['max_game_loss']:.4g} | {g['median_game_loss']:.4g} | "
        f"{g['truncated_games']} |"
      )
  return "\n".join(lines + [""] + strata_lines(rows)) + "\n"


def has_matched(row: dict) -> bool:
  """Whether a run's evaluation has the ply-matched strata (`matched`, and with a newer
  evaluation `transition_error`: `chessjax.world_model.strata`) on both splits."""
  return all("matched" in st for split in SPLITS for st in row[split]["long"]["strata"].values())


def strata_names(rows: list[dict]) -> list[str]:
  """Every stratum any run has, in the first order met (later evaluations add `ep_label`)."""
  return list(dict.fromkeys(n for r in rows for n in r["real"]["long"]["strata"]))


def _p(x: float | None, digits: int = 2) -> str:
  return "-" if x is None else f"{100 * x:.{digits}f}"


def strata_cell(row: dict, split: str, name: str) -> str:
  """One run's stratum: with the matched numbers 'ExactState / matched (transition_error /
  matched)', else 'ExactState (minus the run's overall)'; '-' where it has no step."""
  st = row[split]["long"]["strata"].get(name)
  if st is None or st["exact_state"] is None:
    return "-"
  e = st["exact_state"]
  if has_matched(row):
    te = st.get("transition_error")
    t = "" if te is None else f" ({_p(te['error'], 1)} / {_p(te['matched']['error'], 1)})"
    return f"{_p(e)} / {_p(st['matched']['exact_state'])}{t}"
  return f"{_p(e)} ({100 * (e - row[split]['exact_state']):+.2f})"


def strata_lines(rows: list[dict]) -> list[str]:
  """The strata table: per run and split, each stratum's ExactState % beside the same run's on
  the other steps at the same plies and its transition error beside theirs, for the runs whose
  evaluation has them (`has_matched`); for the others (evaluated before those existed), beside the
  run's overall ExactState."""
  names = strata_names(rows)
  some = [r for r in rows if has_matched(r)]
  older = [r for r in rows if not has_matched(r)]
  lines = [
    "## Strata: ExactState % on the hard steps",
    "",
    "Steps where ply t captures, gives check (the side to move is in check), moves the king, "
    "promotes, loses a castling right, or leaves a legal en-passant capture"
    + (", or where the e.p. label is set, cleared or moved" if "ep_label" in names else "")
    + "; `after_`: the step right after (`chessjax.world_model.strata`)."
    + (
      " Runs with the ply-matched numbers: `E / M (T / TM)`, the stratum's ExactState E against "
      "M, the run's ExactState on the other steps at the same plies (each ply weighted by the "
      "stratum's steps), and its transition error T (of its steps whose previous step was exact, "
      "the share not exact) against TM, the same share on the other such steps at the same "
      "plies (no T / TM: an evaluation made before the transition error)."
      if some
      else ""
    )
    + (
      " Runs evaluated before those numbers existed: `E (D)`, D the difference to the run's "
      "overall ExactState."
      if older
      else ""
    ),
    "",
    "| run | split | overall | " + " | ".join(names) + " |",
    "|---|---|---:|" + "---:|" * len(names),
  ]
  for row in rows:
    for split in SPLITS:
      cells = [strata_cell(row, split, n) for n in names]
      lines.append(
        f"| {row['family']}_s{row['seed']} | {split} | {100 * row[split]['exact_state']:.2f} | "
        + " | ".join(cells)
        + " |"
      )
  return lines


def length_png(args, rows: list[dict], path: Path) -> None:
  """ExactState and Labelwise against ply (20-ply bins), both splits, one line per run, the
  training length marked."""
  from chessjax import plotting

  rows = [r for r in rows if all("long" in r[split] for split in SPLITS)]
  if not rows:
    return
  colors = {f: plotting.tab10(i) for i, f in enumerate((*MAIN, *ABLATIONS))}
  fig, axes = plotting.subplots(2, 2, figsize=(11, 7), sharex="col")
  for j, split in enumerate(SPLITS):
    for i, metric in enumerate(("exact_state", "labelwise")):
      ax = axes[i, j]
      for row in rows:
        b = row[split]["long"]["bins"]
        x = [st + BIN / 2 for st in b["start"]]
        style = "-" if row["family"] in MAIN else "--"
        y = [100 * v for v in b[metric]]
        ax.plot(x, y, style, color=colors[row["family"]], lw=1.4, label=row["family"])
      ax.axvline(args.max_len, color="k", lw=0.8, ls=":")
      ax.set_title(f"{split}: {'ExactState' if i == 0 else 'Labelwise'} % per 20 plies")
      if i == 1:
        ax.set_xlabel("ply")
  axes[0, 0].legend(fontsize=7)
  fig.suptitle(f"trained on {args.max_len} steps (dotted line), scored on whole games")
  fig.tight_layout()
  tmp = path.with_name(path.name + ".tmp.png")
  fig.savefig(tmp, dpi=100)
  os.replace(tmp, path)


def curves_png(rows: list[dict], path: Path) -> None:
  from chessjax import plotting

  fig, ax = plotting.subplots(figsize=(8, 5))
  colors = {f: plotting.tab10(i) for i, f in enumerate((*MAIN, *ABLATIONS))}
  by_family = {}
  for row in rows:
    if row["curve"]:
      by_family.setdefault(row["family"], []).append(row["curve"])
  for family, curves in by_family.items():
    style = "-" if family in MAIN else "--"
    for curve in curves:
      ax.plot(*zip(*curve, strict=True), style, color=colors[family], lw=0.6, alpha=0.5)
    steps = sorted(set.intersection(*(set(dict(c)) for c in curves)))
    mean = [statistics.fmean(dict(c)[t] for c in curves) for t in steps]
    ax.plot(steps, mean, style, color=colors[family], lw=2, label=f"{family} ({len(curves)})")
  ax.set_yscale("log")
  ax.set_xlabel("step")
  ax.set_ylabel("validation loss (master games)")
  ax.set_title("d128 validation loss; thin: seeds, thick: mean")
  ax.legend(fontsize=8)
  fig.tight_layout()
  tmp = path.with_name(path.name + ".tmp.png")
  fig.savefig(tmp, dpi=110)
  os.replace(tmp, path)
