"""`launch.transfer`'s record as Markdown tables and a figure: per family and N the four arms side
by side on the atomic test games (all steps, and the steps from each game's first divergent ply
on), the chess test games before and after, the atomic strata with their expected counts, and the
steps each atomic test game shares with its chess twin. Read by the command (WORK/transfer.md,
WORK/transfer.png) and by the docs renderer (docgen), from the record alone.

The record:
  args       the protocol; `arms` (of `ARMS`) and `grids` ([{families, seeds, train_games}]:
             every arm of every family, seed and N of a grid is planned)
  test_sets  {"twins": `chessjax.world_model.divergence.twin_summary` of the two test sets}
  families   FAMILY -> {"seeds": {SEED: {"source": SCORES, "runs": {N: {ARM: SCORES or None}}}}}
SCORES: per test set ("atomic", "chess") loss, labelwise, exact_state, trajectory, games, steps,
checkpoint_step, pieces; the atomic set's strata and `after_divergence` (the same metrics over
the steps from each game's first divergent ply on); params, steps, train_cpu_s, eval_cpu_s. A
None arm or a missing key is a run or a score not in the record yet: it shows as "-" and the
reading names it, nothing is filled in.
"""

import os
import statistics
from pathlib import Path

from chessjax.world_model import strata

ARMS = ("ft", "control", "scratch", "scratch_equal")
ARM_WORDS = {
  "ft": "fine-tuned",
  "control": "control",
  "scratch": "from scratch",
  "scratch_equal": "from scratch, equal compute",
}
ARM_PROTOCOL = {
  "ft": "the chess source fine-tuned on the first N atomic training games",
  "control": "the same source fine-tuned on N random-uniform chess games for the same steps",
  "scratch": "the same model from scratch on the N atomic games for the fine-tune's steps",
  "scratch_equal": "from scratch on the N atomic games for the source's steps plus the "
  "fine-tune's (equal compute)",
}
ARM_RUN = {  # One run of each arm, in words.
  "ft": "fine-tuned run",
  "control": "control run",
  "scratch": "run from scratch",
  "scratch_equal": "run from scratch at equal compute",
}
ARM_RUNS = {
  "ft": "fine-tuned runs",
  "control": "control runs",
  "scratch": "runs from scratch",
  "scratch_equal": "runs from scratch at equal compute",
}
STEPS = {"all": "all", "after": "after divergence"}


# ------------------------------------------------------------------------------------------------
# The record


def arms(record: dict) -> list[str]:
  """The arms the record's protocol runs, in `ARMS` order."""
  return [a for a in ARMS if a in record["args"].get("arms", ARMS)]


def planned(record: dict) -> list[tuple[str, int, int]]:
  """(family, seed, N) of every grid of the protocol, in order, each once."""
  out = {}
  for g in record["args"].get("grids", []):
    for f in g["families"]:
      for s in g["seeds"]:
        for n in g["train_games"]:
          out[(f, int(s), int(n))] = None
  return list(out)


def families(record: dict) -> list[str]:
  """The families of the record and of its grids, in order."""
  return list(dict.fromkeys([*record["families"], *(f for f, _, _ in planned(record))]))


def ns(record: dict, family: str | None = None) -> list[int]:
  """The Ns (of `family`) in the record or its grids, ascending."""
  found = {n for f, _, n in planned(record) if family in (None, f)}
  for f, row in record["families"].items():
    if family in (None, f):
      found |= {int(n) for seed in row["seeds"].values() for n in seed["runs"]}
  return sorted(found)


def seed_rows(record: dict, family: str) -> dict[int, dict]:
  """seed -> {source, runs} of `family` in the record, seeds ascending."""
  seeds = record["families"].get(family, {}).get("seeds", {})
  return {int(s): seeds[s] for s in sorted(seeds, key=int)}


def run(record: dict, family: str, seed: int, n: int, arm: str) -> dict | None:
  """One run's scores, or None when not in the record."""
  row = seed_rows(record, family).get(seed)
  return ((row or {}).get("runs", {}).get(str(n)) or {}).get(arm)


def source(record: dict, family: str, seed: int) -> dict | None:
  """The source's scores of `family` and `seed`; None when it is not scored yet."""
  s = (seed_rows(record, family).get(seed) or {}).get("source") or {}
  return s if "atomic" in s else None


def value(scores: dict | None, split: str, metric: str, steps: str = "all"):
  """A metric of a run's scores on `split`, over all its steps or (`steps="after"`) from each
  game's first divergent ply on; None where the record does not hold it."""
  part = (scores or {}).get(split) or {}
  if steps == "after":
    part = part.get("after_divergence") or {}
  return part.get(metric)


def has_after(record: dict) -> bool:
  """Whether any scored run of the record has its after-divergence scores."""
  return any(
    value(r, "atomic", "steps", "after") is not None
    for f in record["families"]
    for seed, row in seed_rows(record, f).items()
    for r in [row.get("source"), *(x for rs in row["runs"].values() for x in rs.values())]
  )


def missing(record: dict) -> list[tuple[str, int, int, str]]:
  """(family, seed, N, arm) of every planned run not scored in the record."""
  return [
    (f, s, n, a) for f, s, n in planned(record) for a in arms(record) if not run(record, f, s, n, a)
  ]


def row_seeds(record: dict, family: str, n: int) -> list[int]:
  """The seeds with any arm of `family` at N scored."""
  return [s for s in seed_rows(record, family) if any(run(record, family, s, n, a) for a in ARMS)]


def _seed_words(seeds: list[int]) -> str:
  """'seed 0' or 'seeds 0-2'."""
  return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds_text(seeds)}"


def seeds_text(seeds: list[int]) -> str:
  """Seeds as a table cell: '0', '0, 1', '0-2' (a run of three or more); '-' for none."""
  if not seeds:
    return "-"
  if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
    return f"{seeds[0]}-{seeds[-1]}"
  return ", ".join(map(str, seeds))


# ------------------------------------------------------------------------------------------------
# Cells


def _pct(x) -> str:
  return "-" if x is None else f"{100 * x:.2f}"


def _count(x) -> str:
  return "-" if x is None else f"{x:,}"


def _num(x) -> str:
  return "-" if x is None else f"{x:.4f}"


def spread(values: list[float], fmt, of: int) -> str:
  """The mean of one value per seed, its range where the seeds differ as printed, and how many
  of the `of` seeds of its row it has when fewer; "-" for none."""
  if not values:
    return "-"
  out = fmt(statistics.fmean(values))
  lo, hi = fmt(min(values)), fmt(max(values))
  if lo != hi:
    out += f" ({lo}-{hi})"
  if len(values) < of:
    out += f" [{len(values)} of {of} seeds]"
  return out


def _cell(record, family, n, arm, seeds, split, metric, steps, fmt) -> str:
  if arm == "source":
    vals = [value(source(record, family, s), split, metric, steps) for s in seeds]
  else:
    vals = [value(run(record, family, s, n, arm), split, metric, steps) for s in seeds]
  return spread([v for v in vals if v is not None], fmt, len(seeds))


# ------------------------------------------------------------------------------------------------
# Tables


def setup(record: dict) -> str:
  """The protocol in one paragraph: sizes, seeds, sources, arms, data, test sets."""
  p = record["args"]
  games = "a lichess export" if p["lichess_atomic"] else f"random-uniform, seed {p['train_seed']}"
  given = p.get("sources", {})
  trained = []
  for f in families(record):
    steps = sorted(
      {
        s["steps"]
        for s in map(lambda x: x.get("source") or {}, seed_rows(record, f).values())
        if s.get("steps")
      }
    )
    words = ", ".join(f"{x:,}" for x in steps) if steps else "-"
    trained.append(f"{f}: {given[f] + ', ' if isinstance(given.get(f), str) else ''}{words} steps")
  grids = "; ".join(
    f"{', '.join(g['families'])} at {_seed_words(sorted(map(int, g['seeds'])))} and N = "
    f"{', '.join(f'{int(n):,}' for n in g['train_games'])}"
    for g in p.get("grids", [])
  )
  arm_words = "; ".join(f"{ARM_WORDS[a]}: {ARM_PROTOCOL[a]}" for a in arms(record))
  not_run = [ARM_RUNS[a] for a in ARMS if a not in arms(record)]
  after = (
    "every atomic score also from each test game's first divergent ply on"
    if has_after(record)
    else "no scores from the first divergent ply on in this record"
  )
  return (
    f"d128; {grids}; sources trained on real chess games ({'; '.join(trained)}); arms "
    f"({arm_words}){'; no ' + ' and no '.join(not_run) + ' in its protocol' if not_run else ''}; "
    f"fine-tunes {p['steps']:,} steps on the first N training games (atomic: {games}), batch "
    f"{p['batch_size']}, {p['max_len']} steps per game; test sets: {p['test_games']:,} "
    f"random-uniform games of seed {p['test_seed']} under each rule set; {after}."
  )


def _head(record: dict, steps: bool) -> list[str]:
  cols = ["source", *(ARM_WORDS[a] for a in arms(record))]
  return [
    f"| family | N | seeds | {'steps | ' if steps else ''}" + " | ".join(cols) + " |",
    "|---|---:|---|" + ("---|" if steps else "") + "---:|" * len(cols),
  ]


def atomic_table(record: dict, metric: str = "exact_state") -> str:
  """`metric` (ExactState % or loss) on the atomic test games per family and N: the source and
  every arm side by side, over all steps and, when the record has them, over the steps from the
  first divergent ply on; each cell the mean over the row's seeds and their range."""
  fmt = _pct if metric != "loss" else _num
  after = has_after(record)
  lines = _head(record, after)
  kinds = ["all", "after"] if after else ["all"]
  for family in families(record):
    for n in ns(record, family):
      seeds = row_seeds(record, family, n)
      for kind in kinds:
        cells = [
          _cell(record, family, n, a, seeds, "atomic", metric, kind, fmt)
          for a in ("source", *arms(record))
        ]
        steps = f"{STEPS[kind]} | " if after else ""
        lines.append(
          f"| {family} | {n:,} | {seeds_text(seeds)} | {steps}" + " | ".join(cells) + " |"
        )
  return "\n".join(lines)


def chess_table(record: dict) -> str:
  """ExactState % / loss on the chess test games: the source, then every arm after its N."""
  lines = _head(record, False)
  for family in families(record):
    for n in ns(record, family):
      seeds = row_seeds(record, family, n)
      cells = [
        f"{_cell(record, family, n, a, seeds, 'chess', 'exact_state', 'all', _pct)} / "
        f"{_cell(record, family, n, a, seeds, 'chess', 'loss', 'all', _num)}"
        for a in ("source", *arms(record))
      ]
      lines.append(f"| {family} | {n:,} | {seeds_text(seeds)} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def expected_exact(st: dict) -> float | None:
  """A stratum's expected exact steps: the other steps' ExactState at the same plies x its
  steps (the count the claims' rule needs before it calls a stratum above or below)."""
  m = st.get("matched", {}).get("exact_state")
  return None if m is None else m * st["steps"]


def strata_cell(st: dict, run_pieces) -> str:
  """'observed / expected exact steps; squares' accuracy on its steps / on every step (steps)'."""
  obs = None if st["exact_state"] is None else round(st["exact_state"] * st["steps"])
  exp = expected_exact(st)
  return (
    f"{_count(obs)} / {'-' if exp is None else f'{exp:.1f}'}; {_pct(st.get('pieces'))} / "
    f"{_pct(run_pieces)} ({st['steps']:,})"
  )


def strata_table(record: dict, seeds: list[int] | None = None) -> str:
  """Per atomic stratum and scored run (of `seeds`, default all): its exact steps against the
  number the other steps at the same plies predict; the squares' accuracy on its steps against
  the run's over every step; its steps."""
  lines = [
    "| family | seed | run | " + " | ".join(strata.ATOMIC_STRATA) + " |",
    "|---|---:|---|" + "---:|" * len(strata.ATOMIC_STRATA),
  ]
  for family in families(record):
    for seed in seed_rows(record, family):
      if seeds is not None and seed not in seeds:
        continue
      named = [("source", source(record, family, seed))]
      for n in ns(record, family):
        named += [(f"{a} N={n:,}", run(record, family, seed, n, a)) for a in arms(record)]
      for label, r in named:
        if not r or "strata" not in r.get("atomic", {}):
          continue
        cells = [
          strata_cell(r["atomic"]["strata"][s], r["atomic"].get("pieces"))
          for s in strata.ATOMIC_STRATA
        ]
        lines.append(f"| {family} | {seed} | {label} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def twins_table(record: dict) -> str:
  """The steps each atomic test game shares with its chess twin and its first divergent ply:
  quantiles, from `test_sets.twins`; a line saying so when the record has none."""
  t = record.get("test_sets", {}).get("twins")
  if not t:
    return "The record holds no twin summary (`test_sets.twins`) yet."
  lines = [
    f"{t['with_twin']:,} of {t['games']:,} atomic test games have their chess twin in the chess "
    f"test set; {t['diverged']:,} diverge within their first {t['max_len']} steps.",
    "",
    "| per atomic test game | mean | min | q1 | median | q3 | max |",
    "|---|---:|---:|---:|---:|---:|---:|",
  ]
  for key, words in (("shared_steps", "steps shared with its twin"),
                     ("divergence_ply", "first divergent ply")):  # fmt: skip
    q = t[key]
    cells = [
      "-" if q[k] is None else f"{q[k]:.1f}".removesuffix(".0")
      for k in ("mean", "min", "q1", "median", "q3", "max")
    ]
    lines.append(f"| {words} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def missing_lines(record: dict) -> list[str]:
  """What the protocol plans and the record does not hold yet."""
  gone = missing(record)
  if not gone:
    return ["Every planned run is in the record."]
  return [
    f"Not in the record yet ({len(gone)} of {len(planned(record)) * len(arms(record))} planned "
    "runs): " + "; ".join(f"{f} seed {s} N={n:,} {ARM_WORDS[a]}" for f, s, n, a in gone) + "."
  ]


def tables_markdown(record: dict) -> str:
  """WORK/transfer.md: the protocol, every table and the runs not in the record yet."""
  return "\n".join(
    [
      "# World models across rules: atomic games after chess",
      "",
      setup(record),
      "",
      "## ExactState % on atomic games: every arm per family and N (mean over seeds, range)",
      "",
      atomic_table(record, "exact_state"),
      "",
      "## Loss on atomic games",
      "",
      atomic_table(record, "loss"),
      "",
      "## Chess before and after: ExactState % / loss on the chess test set",
      "",
      chess_table(record),
      "",
      "## Atomic strata: exact steps observed / expected at the other steps' ExactState at the "
      "same plies; squares' accuracy % on its steps / on every step (its steps)",
      "",
      strata_table(record),
      "",
      "## Shared plies: each atomic test game against its chess twin",
      "",
      twins_table(record),
      "",
      "## Runs",
      "",
      *missing_lines(record),
      "",
    ]
  )


# ------------------------------------------------------------------------------------------------
# Figure


def figure(record: dict, out: Path) -> None:
  """Per family (columns): atomic ExactState and loss against N (log scale), over all steps and
  from the first divergent ply on (rows); one line per arm at the mean over seeds, the range of
  the seeds as bars; the source as a dotted level."""
  import matplotlib

  from chessjax import plotting

  panels = [("exact_state", "all"), ("loss", "all")]
  if has_after(record):
    panels[1:1] = [("exact_state", "after")]
    panels.append(("loss", "after"))
  fams = families(record)
  fig, axes = plotting.subplots(
    len(panels), len(fams), figsize=(3.2 * len(fams), 2.6 * len(panels)), squeeze=False
  )
  colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
  for j, family in enumerate(fams):
    seeds = list(seed_rows(record, family))
    for i, (metric, kind) in enumerate(panels):
      ax = axes[i][j]
      scale = 100 if metric == "exact_state" else 1
      for arm in arms(record):
        pts = []
        for n in ns(record, family):
          vals = [value(run(record, family, s, n, arm), "atomic", metric, kind) for s in seeds]
          vals = [scale * v for v in vals if v is not None]
          if vals:
            pts.append((n, statistics.fmean(vals), min(vals), max(vals)))
        if pts:
          xs, ys, lo, hi = zip(*pts, strict=True)
          err = [
            [y - a for y, a in zip(ys, lo, strict=True)],
            [b - y for y, b in zip(ys, hi, strict=True)],
          ]
          ax.errorbar(
            xs,
            ys,
            yerr=err,
            marker="o",
            capsize=2,
            color=colors[ARMS.index(arm)],
            label=ARM_WORDS[arm],
          )
      src = [value(source(record, family, s), "atomic", metric, kind) for s in seeds]
      src = [scale * v for v in src if v is not None]
      if src:
        ax.axhline(statistics.fmean(src), color="gray", linestyle=":", linewidth=1, label="source")
      ax.set_xscale("log")
      ax.set_xticks(ns(record, family), [f"{n:,}" for n in ns(record, family)])
      ax.minorticks_off()
      what = "ExactState %" if metric == "exact_state" else "loss"
      ax.set_title(f"{family}: {what}, {STEPS[kind]}", fontsize=8)
      if i == len(panels) - 1:
        ax.set_xlabel("atomic training games N")
  handles, labels = axes[0][0].get_legend_handles_labels()
  fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
  fig.tight_layout(rect=(0, 0.05, 1, 1))
  tmp = out.with_name(f".{out.stem}.tmp.png")
  fig.savefig(tmp, dpi=110)
  os.replace(tmp, out)
