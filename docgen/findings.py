"""What the d128 experiments show, computed from their records and the paper's data file.

Each function takes the records of `launch.cwm_mini` (docs/results/bench_cwm_{mini,whole,long,
x4}.json: one row per run, `cwm_tables` reads the same rows) and returns Markdown lines: who beats
whom on which metric in how many seeds, gaps and how they change, where a curve peaks, and a
claim of Walker & Lyons (2026)'s status under the claims' one rule (`docgen.verdict`). The docs
show them between `<!-- wm:NAME -->` markers (`docgen.docs`), so a sentence that says more than
its record, or a number edited by hand, fails tests/test_results_records.py.

Conventions: losses to 4 decimals, accuracies in percent to 2 (points for differences); "better"
is the lower loss or the higher accuracy; a seed-by-seed count compares runs of the same seed.
"""

import json
import statistics
from functools import cache
from pathlib import Path

from chessjax.world_model import grid
from docgen import verdict
from launch.cwm_tables import ABLATIONS, MAIN, SPLITS

REPO = Path(__file__).resolve().parents[1]
METRICS = {"loss": "loss", "labelwise": "Labelwise", "exact_state": "ExactState"}
SPLIT_NAMES = {"real": "held-out real games", "random": "random-uniform games"}


@cache
def record(name: str) -> dict:
  """docs/results/NAME.json."""
  return json.loads((REPO / "docs" / "results" / f"{name}.json").read_text())


@cache
def paper() -> dict:
  """The seed paper's published tables (chessjax/world_model/paper_results.json)."""
  return json.loads((REPO / "chessjax" / "world_model" / "paper_results.json").read_text())


def name(family: str) -> str:
  return paper()["families"][family]


def paper_row(family: str, size: str, split: str) -> dict:
  """The paper's Table 8-10 row of a family, size and split (percentages as printed)."""
  for table in ("table8", "table9", "table10"):
    for row in paper()["tables"][table]["rows"]:
      if (row["family"], row["size"], row["split"]) == (family, size, split):
        return row
  raise KeyError((family, size, split))


def pct(x: float) -> str:
  return f"{100 * x:.2f}"


def loss(x: float) -> str:
  return f"{x:.4f}"


def _runs(rec: dict, seed: int | None = None) -> dict:
  """family -> row (the record's runs of `seed`; every run when None and one per family)."""
  rows = [r for r in rec["runs"] if seed is None or r["seed"] == seed]
  return {r["family"]: r for r in rows}


def _mean(rec: dict, family: str, split: str, metric: str) -> float:
  return statistics.fmean(r[split][metric] for r in rec["runs"] if r["family"] == family)


def _join(items: list[str]) -> str:
  return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def claim_cells(rows, base: str, other: str, word: str, splits=SPLITS) -> dict:
  """The rule's cells (`docgen.verdict`) of "`other` is `word` (better or worse) than `base`":
  (other, split, metric) -> each seed's outcome (`verdict.compare`: a difference within the
  printed precision is a tie), same seed against same seed; None where no seed has both runs."""
  by = {(r["family"], r["seed"]): r for r in rows}
  seeds = sorted(s for f, s in by if f == other and (base, s) in by)
  way = 1 if word == "better" else -1
  out = {}
  for split in splits:
    for m in METRICS:
      signs = [
        way * verdict.compare(by[other, s][split][m], by[base, s][split][m], m) for s in seeds
      ]
      out[other, split, m] = signs or None
  return out


def cell_label(key) -> str:
  """A (family, split, metric) cell's metric, for `verdict.which` with `cell_head`."""
  return METRICS[key[-1]]


def cell_head(key) -> str:
  return {"real": "real", "random": "random-uniform"}[key[-2]]


def where(cells: dict) -> str:
  """Where a family's cells hold (`verdict.which`), or 'every split and metric' when all do."""
  if verdict.status(cells) == verdict.HOLDS:
    splits = {k[-2] for k in cells}
    return f"every seed, {'both splits' if len(splits) > 1 else 'its split'}, every metric"
  return verdict.which(cells, cell_label, cell_head)


# ------------------------------------------------------------------------------------------------
# The d128 ranking (3,000 steps, seeds; docs/results/bench_cwm_mini.json)


def ranking_vs_transformer() -> list[str]:
  """Each recurrent main family against the Transformer of the same seed under the claims' rule
  (`docgen.verdict`), the order by held-out real ExactState beside the paper's, and whether the
  leaders' seeds separate."""
  rows = record("bench_cwm_mini")["runs"]
  n = len({r["seed"] for r in rows if r["family"] == "transformer"})
  lines = [
    f"| better than the Transformer ({n} seeds, same seed) | status | where |",
    "|---|---|---|",
  ]
  holds = []
  for family in MAIN[1:]:
    cells = claim_cells(rows, "transformer", family, "better")
    st = verdict.status(cells)
    holds.append(st == verdict.HOLDS)
    lines.append(f"| {name(family)} | {st} | {where(cells)} |")
  ours = sorted(MAIN, key=lambda f: -_mean(record("bench_cwm_mini"), f, "real", "exact_state"))
  theirs = sorted(MAIN, key=lambda f: -paper_row(f, "d128", "real")["exact_state"])
  lines += [
    "",
    "Order by held-out real ExactState (mean over seeds): ours "
    + " > ".join(name(f) for f in ours)
    + "; the paper's d128 row "
    + " > ".join(name(f) for f in theirs)
    + f". The headline (every recurrent family above the Transformer) holds here for "
    f"{sum(holds)} of {len(holds)} families.",
  ]
  first, second = ours[0], ours[1]
  spread = {
    f: [r["real"]["exact_state"] for r in rows if r["family"] == f] for f in (first, second)
  }
  overlap = min(spread[first]) <= max(spread[second]) and min(spread[second]) <= max(spread[first])
  base = [r["real"]["exact_state"] for r in rows if r["family"] == "transformer"]
  lowest = {f: min(r["real"]["exact_state"] for r in rows if r["family"] == f) for f in MAIN[1:]}
  above = [f for f in MAIN[1:] if lowest[f] > max(base)]
  lines.append(
    f"{name(first)} and {name(second)}: their seeds' real ExactState ranges "
    + ("overlap, so this ranking does not separate them" if overlap else "do not overlap")
    + (
      f"; every seed of {_join([name(f) for f in above])} is above every Transformer seed."
      if above
      else "."
    )
  )
  return lines


def curve_mean(rows: list[dict], family: str) -> dict[int, float]:
  """step -> validation loss, the mean over the family's seeds at the steps every seed has."""
  curves = [dict(r["curve"]) for r in rows if r["family"] == family]
  steps = sorted(set.intersection(*(set(c) for c in curves)))
  return {s: statistics.fmean(c[s] for c in curves) for s in steps}


def gap_curve(rows: list[dict], base: str, other: str) -> dict[int, float]:
  """step -> `other` minus `base` validation loss (means over seeds)."""
  a, b = curve_mean(rows, base), curve_mean(rows, other)
  return {s: b[s] - a[s] for s in sorted(set(a) & set(b))}


def slice_gap_over_training() -> list[str]:
  """SLiCE minus Transformer validation loss (means over seeds) along the 3,000 steps."""
  rows = record("bench_cwm_mini")["runs"]
  gap = gap_curve(rows, "transformer", "slice")
  shown = [s for s in gap if s % 500 == 0]
  last = max(gap)
  direction = "opens in the Transformer's favour" if gap[last] > gap[shown[0]] else "narrows"
  return [
    "| step | " + " | ".join(f"{s:,}" for s in shown) + " |",
    "|---|" + "---:|" * len(shown),
    "| SLiCE - Transformer, validation loss | "
    + " | ".join(f"{gap[s]:+.4f}" for s in shown)
    + " |",
    "",
    f"From step {shown[0]:,} to step {last:,} the gap {direction} "
    f"(largest at step {max(gap, key=gap.get):,}).",
  ]


def ablations_d128() -> list[str]:
  """Each ablation against its main family of the same seed on random-uniform games under the
  claims' rule (`docgen.verdict`), beside the paper's ExactState."""
  rec = record("bench_cwm_mini")
  rows = rec["runs"]
  n = len({r["seed"] for r in rows if r["family"] in ABLATIONS})
  lines = [
    f"| worse than its main family on random-uniform games ({n} seeds, same seed) | status | "
    "where | the paper's d128 random-uniform ExactState |",
    "|---|---|---|---|",
  ]
  for ablation, main in ABLATIONS.items():
    cells = claim_cells(rows, main, ablation, "worse", splits=("random",))
    p = (paper_row(main, "d128", "random")["exact_state"],
         paper_row(ablation, "d128", "random")["exact_state"])  # fmt: skip
    lines.append(
      f"| {name(ablation)} against {name(main)} | {verdict.status(cells)} | {where(cells)} | "
      f"{p[0]:.2f} -> {p[1]:.2f} |"
    )
  lines.append("")
  gap = gap_curve(rows, "gated_deltanet", "gated_deltanet_pos")
  below = [s for s in gap if gap[s] < 0]
  start = (
    min(s for s in gap if all(gap[t] < 0 for t in gap if t >= s)) if gap[max(gap)] < 0 else None
  )
  if start is not None:
    lines.append(
      f"The validation loss of {name('gated_deltanet_pos')} (mean over the same seeds) is "
      f"below {name('gated_deltanet')}'s at every validation from step {start:,} on "
      f"({gap[start]:+.4f} there, {gap[max(gap)]:+.4f} at step {max(gap):,}; below at "
      f"{len(below)} of {len(gap)} validations)."
    )
  return lines


def best_is_last() -> list[str]:
  """How many of the d128 ranking's runs have their lowest validation loss at their last step."""
  rows = record("bench_cwm_mini")["runs"]
  last = [r for r in rows if min(r["curve"], key=lambda c: c[1])[0] == r["curve"][-1][0]]
  steps = {r["curve"][-1][0] for r in rows}
  return [
    f"{len(last)} of the {len(rows)} d128 runs have their lowest validation loss at their last "
    f"step ({_join([f'{s:,}' for s in sorted(steps)])})"
  ]


def scale_d128() -> list[str]:
  """How far this protocol is from the paper's: sequences trained, and the best Trajectory."""
  rec = record("bench_cwm_mini")
  a = rec["args"]
  ours = a["steps"] * a["batch_size"]
  theirs = grid.STEPS_4_EPOCHS * 128
  best = max(r[s]["trajectory"] for r in rec["runs"] for s in SPLITS)
  return [
    f"* **Scale.** {a['steps']:,} steps of batch {a['batch_size']} train on {ours:,} sequences, "
    f"{100 * ours / theirs:.2f}% of the paper's {grid.STEPS_4_EPOCHS:,} x 128; the highest "
    f"Trajectory of any run on either split is {pct(best)}%."
  ]


# ------------------------------------------------------------------------------------------------
# Whole games after 256 training steps (seed 0; docs/results/bench_cwm_whole.json)


def whole_against_the_ranking() -> list[str]:
  """The retrained seed-0 runs over their first 256 steps against the ranking's seed-0 runs
  (ExactState and Labelwise, both splits, to the printed digit)."""
  whole, mini = _runs(record("bench_cwm_whole")), _runs(record("bench_cwm_mini"), seed=0)
  same, differ, gaps = [], [], []
  for family, row in whole.items():
    cells = []
    for split in SPLITS:
      long = row[split]["long"]
      for key, metric in (("exact_within", "exact_state"), ("labelwise_within", "labelwise")):
        a, b = pct(long[key]), pct(mini[family][split][metric])
        if a != b:
          cells.append(metric)
          gaps.append((abs(float(a) - float(b)), family, split, metric))
    (differ if cells else same).append(family)
  lines = [
    f"* **The retrained runs against the ranking's seed 0** (their first "
    f"{record('bench_cwm_whole')['args']['max_len']} steps, ExactState and Labelwise, both "
    f"splits, to the printed digit): {len(same)} of the {len(whole)} runs score the same "
    f"({_join([name(f) for f in same])})"
    + (
      f"; {_join([name(f) for f in differ])} differ by at most {max(gaps)[0]:.2f} points "
      f"({name(max(gaps)[1])}, {SPLIT_NAMES[max(gaps)[2]]} {METRICS[max(gaps)[3]]}). Not "
      "investigated: the code changed between the two sets of runs."
      if differ
      else "."
    )
  ]
  real = [
    (abs(row["real"]["loss"] - mini[f]["real"]["loss"]), f, "loss") for f, row in whole.items()
  ] + [
    (100 * abs(row["real"]["exact_state"] - mini[f]["real"]["exact_state"]), f, "ExactState")
    for f, row in whole.items()
  ]
  worst_loss = max(x for x in real if x[2] == "loss")
  worst_exact = max(x for x in real if x[2] == "ExactState")
  steps = whole["transformer"]["real"]["long"]["steps_beyond"]
  lines.append(
    f"* **Real games barely change when scored whole**: {steps:,} steps of the test games lie "
    f"beyond step 256; whole-game against cut-at-256 real loss differs by at most "
    f"{worst_loss[0]:.4f} ({name(worst_loss[1])}), ExactState by at most "
    f"{worst_exact[0]:.2f} points ({name(worst_exact[1])})."
  )
  return lines


def whole_random_games() -> list[str]:
  """Random-uniform games scored whole after 256 training steps: the loss against the cut-256
  loss, Diagonal SLiCE's largest per-game loss and where each Labelwise curve peaks."""
  whole, mini = _runs(record("bench_cwm_whole")), _runs(record("bench_cwm_mini"), seed=0)
  change = {f: whole[f]["random"]["loss"] - mini[f]["random"]["loss"] for f in whole}
  falls = [f for f in change if change[f] < 0]
  rises = {f: c for f, c in change.items() if c >= 0 and f != "slice_diag"}
  higher_lw = [f for f in whole if whole[f]["random"]["labelwise"] > mini[f]["random"]["labelwise"]]
  lower_es = [
    f for f in whole if whole[f]["random"]["exact_state"] < mini[f]["random"]["exact_state"]
  ]
  top = {f: whole[f]["random"]["long"]["max_game_loss"] for f in whole}
  others = [v for f, v in top.items() if f not in ("slice_diag", "slice")]
  lines = [
    f"* **Random-uniform games scored whole** ({whole['slice']['random']['long']['steps_beyond']:,}"
    f" steps beyond 256): Labelwise is higher than over the first 256 steps for "
    f"{len(higher_lw)} of {len(whole)} families and ExactState lower for {len(lower_es)} of "
    f"{len(whole)}. The loss falls for {_join([name(f) for f in falls])}, rises by "
    f"{min(rises.values()):.4f}-{max(rises.values()):.4f} for "
    f"{_join([name(f) for f in rises])}, and by "
    f"{change['slice_diag']:.4f} for {name('slice_diag')} "
    f"({loss(mini['slice_diag']['random']['loss'])} to "
    f"{loss(whole['slice_diag']['random']['loss'])}), whose largest per-game loss is "
    f"{top['slice_diag']:.4g} ({name('slice')} {top['slice']:.4g}; the others "
    f"{min(others):.4g}-{max(others):.4g})."
  ]
  return lines + labelwise_peaks("bench_cwm_whole")


def labelwise_peaks(rec_name: str, min_steps: int = 1000) -> list[str]:
  """Where each run's random-uniform Labelwise per 20-ply bin peaks beyond the training length
  (bins of at least `min_steps` steps) and how far it falls from there to the last such bin:
  Diagonal SLiCE against the other runs."""
  runs = _runs(record(rec_name))
  trained = record(rec_name)["args"]["max_len"]
  shape = {}
  for f, r in runs.items():
    b = r["random"]["long"]["bins"]
    bins = [
      (s, lw)
      for s, n, lw in zip(b["start"], b["steps"], b["labelwise"], strict=True)
      if s >= trained and n >= min_steps
    ]
    peak = max(bins, key=lambda x: x[1])
    shape[f] = (peak, bins[-1], bins[0])
  (p0, pv), (l0, lv), (f0, fv) = shape["slice_diag"]
  others = {f: v for f, v in shape.items() if f != "slice_diag"}
  falls = [100 * (pk[1] - last[1]) for pk, last, _ in others.values()]
  peaks = [pk[0] for pk, _, _ in others.values()]
  return [
    f"* **Random-uniform Labelwise beyond the training length** ({trained} steps; 20-ply bins of "
    f"at least {min_steps:,} steps): {name('slice_diag')} goes from {pct(fv)}% at plies "
    f"{f0}-{f0 + 19} to its peak, {pct(pv)}% at plies {p0}-{p0 + 19}, then falls "
    f"{100 * (pv - lv):.2f} points to {pct(lv)}% at plies {l0}-{l0 + 19}; the other "
    f"{len(others)} runs peak at plies {min(peaks)}-{max(peaks) + 19} and fall at most "
    f"{max(falls):.2f} points from there ({name('slice')} at plies {l0}-{l0 + 19}: "
    f"{pct(others['slice'][1][1])}%)."
  ]


def exact_state_horizon(rec_name: str) -> list[str]:
  """From which ply every run's ExactState per 20-ply bin stays below 1% (both splits), the first
  bin's range, the first wrong ply's median range, and the paper's d512 rows at plies 160-180."""
  runs = _runs(record(rec_name))
  out = []
  for split in SPLITS:
    starts = []
    first = [r[split]["long"]["bins"]["exact_state"][0] for r in runs.values()]
    for r in runs.values():
      b = r[split]["long"]["bins"]
      below = [s for s, e in zip(b["start"], b["exact_state"], strict=True) if e >= 0.01]
      nxt = [s for s in b["start"] if s > max(below, default=-1)]
      starts.append(nxt[0] if nxt else None)
    medians = [r[split]["long"]["first_wrong"]["quartiles"][1] for r in runs.values()]
    edge = runs["transformer"][split]["long"]["bins"]["start"][1]
    out.append(
      f"{SPLIT_NAMES[split]}: {pct(min(first))}-{pct(max(first))}% in plies 0-{edge - 1}, below "
      f"1% in every bin from ply {max(starts)} on for every run (median first wrong ply "
      f"{min(medians):g}-{max(medians):g})"
    )
  d512 = [r["bin_160_180"] for r in paper()["tables"]["table11"]["rows"]]
  return [
    "* **ExactState against the ply** (every run, 20-ply bins): "
    + "; ".join(out)
    + f". The paper's d512 rows of Table 11 hold {min(d512):.2f}-{max(d512):.2f}% at plies "
    "160-180."
  ]
