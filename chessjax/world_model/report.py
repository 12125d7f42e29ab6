"""The paper's appendix tables and figures from training workdirs, ours beside the published ones.

    python -m chessjax.world_model.report --runs runs/sweep [runs/ablations ...] --out runs/report

Reads every training workdir under the roots (`config.json`, the training summary, `eval/*.json`)
and writes OUT/tables.md, OUT/tables.json, OUT/figure3.png and OUT/figure4.png in the layouts of
Walker & Lyons, appendices C-F and section 4: Table 4 (parameters), 5 (best stage-1 run per
cell, validation snapshot), 6 (the two cosine floors), 7 (final hyperparameters), 8 (test
results, both splits), 9-10 (less expressive variants), 11-12 (random-uniform prefix bins),
Figure 3 (test loss and ExactState against parameters) and Figure 4 (each main family against its
less expressive variant).

Runs are told apart by their config: a constant rate after warmup is a stage-1 run, a cosine decay
a stage-2 (final) run. The final run of a cell follows the paper's rule
(`chessjax.world_model.selection`): the best stage-1 configuration, replaced by the next one when
its stage-2 run was unstable, at the floor with the lower final validation loss; without stage-1
runs, the stable stage-2 run with the lowest final validation loss. A family is the string in the
run's config (a built-in name or a dotted module path), shown as it is.

Every cell reads "ours / paper"; "-" where there is no run (or the paper has no number): nothing
is interpolated or copied into our column. tables.json holds the same numbers, per table a list of
rows (snake_case column names; percentages in percent, as the paper prints them; losses as the
runs wrote them) with the workdir each row came from and the paper's numbers under `paper`.
The published numbers are data: `paper_results.json` beside this module.
"""

import argparse
import json
import logging
import math
import sys
from pathlib import Path

from matplotlib import ticker

from chessjax import plotting
from chessjax.files import write_figure, write_json, write_text
from chessjax.models import abstract_model, count_params
from chessjax.workdir import EVAL_DIR, SUMMARY, find_workdirs
from chessjax.world_model import selection
from chessjax.world_model.grid import MAIN, PAIRS, SIZES

PAPER_FILE = Path(__file__).with_name("paper_results.json")
VARIANTS = tuple(variant for _, variant in PAIRS)
BIN_STARTS = (0, 80, 160, 240, 320, 400, 500)  # The prefix bins of Tables 11-12.
METRICS = ("loss", "labelwise", "exact_state", "trajectory")
PERCENT = {"labelwise", "exact_state", "trajectory"}
log = logging.getLogger(__name__)


def paper_results() -> dict:
  """The published numbers (Walker & Lyons, Tables 4-12), keyed by table."""
  return json.loads(PAPER_FILE.read_text())


# ------------------------------------------------------------------------------------------------
# Reading runs


def load_runs(roots) -> tuple[list[selection.RunRecord], dict[str, dict], list[str]]:
  """(records, workdir -> {dataset name: eval json}, notes on skipped directories)."""
  runs, evals, notes = [], {}, []
  for workdir in find_workdirs(roots):
    try:
      run = selection.read_run(workdir)
    except (OSError, ValueError, KeyError, TypeError) as e:
      notes.append(f"{workdir}: skipped, unreadable ({type(e).__name__}: {e})")
      continue
    runs.append(run)
    evals[run.workdir] = {
      p.stem: json.loads(p.read_text()) for p in sorted((workdir / EVAL_DIR).glob("*.json"))
    }
  return runs, evals, notes


def final_runs(runs) -> tuple[dict, dict]:
  """(cell -> stage-1 winner, cell -> `selection.CellChoice` of the final run)."""
  ranking = selection.rank_stage1(runs)
  stage2 = [r for r in runs if r.stage == 2]
  cells = sorted({r.cell for r in stage2} | set(ranking), key=_cell_key)
  choices = {}
  for cell in cells:
    mine = [r for r in stage2 if r.cell == cell]
    floors = sorted({r.floor for r in mine}, key=lambda f: -f)
    ranked = list(dict.fromkeys(r.hyper for r in ranking.get(cell, [])))
    losses = {}
    for r in ranking.get(cell, []):
      losses.setdefault(r.hyper, r.val_loss)
    choice = selection.select_cell(cell, ranked, mine, floors, losses) if mine else None
    if mine and choice.best is None and ranked:  # Stage-2 runs of configurations off the ranking.
      choice = selection.select_cell(cell, [], mine, floors)
      choice.log.insert(0, f"{' '.join(cell)}: no stage-2 run of a ranked stage-1 configuration")
    if choice is not None:
      choices[cell] = choice
  return {cell: rs[0] for cell, rs in ranking.items()}, choices


def _cell_key(cell):
  family, size = cell
  order = MAIN + VARIANTS
  rank = order.index(family) if family in order else len(order)
  return (rank, family, SIZES.index(size) if size in SIZES else len(SIZES), size)


def params_millions(run: selection.RunRecord) -> tuple[float | None, str]:
  """The family's parameter count at the size (the registry's `count_params` of
  `abstract_model` when the family resolves, else the run's training summary), in millions."""
  try:
    return count_params(abstract_model(run.family, run.size)) / 1e6, "registry"
  except Exception as e:  # An unknown or unimportable family: the run's own count.
    log.info("parameters of %s %s from the run's summary (%s)", run.family, run.size, e)
    return (None if run.params is None else run.params / 1e6), SUMMARY


# ------------------------------------------------------------------------------------------------
# Tables


def _pct(x):
  return None if x is None or (isinstance(x, float) and math.isnan(x)) else 100.0 * float(x)


def _val(run, key):
  v = run.validation.get(key)
  return None if v is None else float(v)


class _Paper:
  """The published tables (`paper_results.json`): each one's title, a cell's row, and the cells
  of a table with ours, in the paper's order first."""

  def __init__(self, paper: dict):
    self.tables = paper["tables"]

  def title(self, table: str) -> str:
    return self.tables[table]["title"]

  def row(self, table, family, size, split=None):
    for r in self.tables[table]["rows"]:
      if r["family"] == family and r["size"] == size and (split is None or r["split"] == split):
        return {k: v for k, v in r.items() if k not in ("family", "size", "split")}
    return None

  def cells(self, table, extra=()):
    seen = [(r["family"], r["size"]) for r in self.tables[table]["rows"]] if table else []
    return list(dict.fromkeys([*seen, *sorted(extra, key=_cell_key)]))


def table4(runs, paper: _Paper) -> dict:
  """Table 4: parameters (millions) of every cell with a run."""
  rows = []
  param_runs = {}
  for run in runs:
    param_runs.setdefault(run.cell, run)
  for family, size in paper.cells("table4", param_runs):
    run = param_runs.get((family, size))
    value, source = params_millions(run) if run else (None, None)
    rows.append(
      {
        "family": family,
        "size": size,
        "params_m": value,
        "params_source": source,
        "workdir": run.workdir if run else None,
        "paper": paper.row("table4", family, size),
      }
    )
  return {"title": paper.title("table4"), "columns": ["params_m"], "rows": rows}


def table5(winners, paper: _Paper) -> dict:
  """Table 5: the best stage-1 configuration per cell, its validation snapshot."""
  cols5 = ["val_loss", "exact_state", "labelwise", "trajectory", "lr", "warmup", "b2", "wd"]
  rows = []
  for family, size in paper.cells("table5", winners):
    w = winners.get((family, size))
    row = {"family": family, "size": size}
    if w:
      row.update(
        val_loss=w.val_loss,
        exact_state=_pct(_val(w, "exact_state")),
        labelwise=_pct(_val(w, "labelwise")),
        trajectory=_pct(_val(w, "trajectory")),
        lr=w.lr,
        warmup=w.warmup,
        b2=w.b2,
        wd=w.wd,
      )
    else:
      row.update({c: None for c in cols5})
    row.update(workdir=w.workdir if w else None, paper=paper.row("table5", family, size))
    rows.append(row)
  return {"title": paper.title("table5"), "columns": cols5, "rows": rows}


def table6(choices, paper: _Paper) -> dict:
  """Table 6: the two cosine floors of each cell's selected configuration."""
  cols6 = ["best_floor", "best_val_loss", "other_floor", "other_val_loss", "exact_state"]
  cols6.append("labelwise")
  rows = []
  for family, size in paper.cells("table6", choices):
    c = choices.get((family, size))
    best = c.best if c else None
    other = c.other[0] if c and c.other else None
    row = {"family": family, "size": size}
    row.update(
      best_floor=best.floor if best else None,
      best_val_loss=best.val_loss if best else None,
      other_floor=other.floor if other else None,
      other_val_loss=other.val_loss if other else None,
      exact_state=_pct(_val(best, "exact_state")) if best else None,
      labelwise=_pct(_val(best, "labelwise")) if best else None,
      workdir=best.workdir if best else None,
      other_workdir=other.workdir if other else None,
      replaced=[selection.hyper_name(h) + ": " + why for h, why in c.replaced] if c else [],
      paper=paper.row("table6", family, size),
    )
    rows.append(row)
  return {"title": paper.title("table6"), "columns": cols6, "rows": rows}


def table7(choices, paper: _Paper) -> dict:
  """Table 7: the final hyperparameters of each cell (those of Table 6's better floor)."""
  cols7 = ["lr", "warmup", "b2", "wd", "lr_floor"]
  rows = []
  for family, size in paper.cells("table6", choices):  # Table 6's cells, in its order.
    c = choices.get((family, size))
    best = c.best if c else None
    row = {"family": family, "size": size}
    if best:
      row.update(lr=best.lr, warmup=best.warmup, b2=best.b2, wd=best.wd, lr_floor=best.floor)
    else:
      row.update({k: None for k in cols7})
    row.update(workdir=best.workdir if best else None, paper=paper.row("table7", family, size))
    rows.append(row)
  return {"title": paper.title("table7"), "columns": cols7, "rows": rows}


def results_table(table, choices, evals, paper: _Paper, families_ok, splits) -> dict:
  """Tables 8-10: test results of the final runs of the families `families_ok` accepts, on
  `splits` ((label, dataset name in WORKDIR/eval), ...)."""
  rows = []
  ours = [cell for cell in choices if families_ok(cell[0])]
  for family, size in paper.cells(table, ours):
    c = choices.get((family, size))
    for label, name in splits:
      result = evals.get(c.best.workdir, {}).get(name) if c and c.best else None
      row = {"family": family, "size": size, "split": label}
      for m in METRICS:
        v = None if result is None else result.get(m)
        row[m] = _pct(v) if m in PERCENT else (None if v is None else float(v))
      row.update(
        workdir=c.best.workdir if result is not None else None,
        eval_file=f"{EVAL_DIR}/{name}.json" if result is not None else None,
        paper=paper.row(table, family, size, label),
      )
      rows.append(row)
  return {"title": paper.title(table), "columns": list(METRICS), "rows": rows}


def bins_table(table, metric: str, choices, evals, paper: _Paper, random: str) -> dict:
  """Tables 11-12: `metric` per random-uniform prefix bin of the final runs (the paper: d512)."""
  bin_cols = [f"bin_{s}_{s + 20}" for s in BIN_STARTS]
  rows = []
  ours = [cell for cell in choices if cell[0] not in VARIANTS]
  for family, size in paper.cells(table, ours):
    c = choices.get((family, size))
    result = evals.get(c.best.workdir, {}).get(random) if c and c.best else None
    row = {"family": family, "size": size, "split": "random"}
    bins = (result or {}).get("bins") or {}
    starts = bins.get("start", [])
    for s, col in zip(BIN_STARTS, bin_cols, strict=True):
      v = bins[metric][starts.index(s)] if s in starts else None
      row[col] = _pct(v)
    row.update(
      workdir=c.best.workdir if result is not None else None,
      eval_file=f"{EVAL_DIR}/{random}.json" if result is not None else None,
      paper=paper.row(table, family, size),
    )
    rows.append(row)
  return {"title": paper.title(table), "columns": bin_cols, "rows": rows}


def build_tables(runs, evals, paper: dict, real: str = "real", random: str = "random") -> dict:
  """Every table as {"title", "columns", "rows"}: our numbers per row plus `paper` and `workdir`.
  `real` and `random` name the test datasets in each final run's WORKDIR/eval."""
  winners, choices = final_runs(runs)
  p = _Paper(paper)
  main, variant = (lambda f: f not in VARIANTS), (lambda f: f in VARIANTS)
  return {
    "table4": table4(runs, p),
    "table5": table5(winners, p),
    "table6": table6(choices, p),
    "table7": table7(choices, p),
    "table8": results_table(
      "table8", choices, evals, p, main, (("real", real), ("random", random))
    ),
    "table9": results_table("table9", choices, evals, p, variant, (("real", real),)),
    "table10": results_table("table10", choices, evals, p, variant, (("random", random),)),
    "table11": bins_table("table11", "exact_state", choices, evals, p, random),
    "table12": bins_table("table12", "labelwise", choices, evals, p, random),
  }


# ------------------------------------------------------------------------------------------------
# Markdown


def fmt_loss(x) -> str:
  """The paper's loss format: 6 decimals, a x 10^e (two decimals) below 1e-3 or from 1e4 on."""
  if x is None:
    return "-"
  x = float(x)
  if not math.isfinite(x):
    return str(x)
  return f"{x:.6f}" if x == 0 or 1e-3 <= abs(x) < 1e4 else f"{x:.2e}"


def _fmt(column: str, x, table: str) -> str:
  if x is None:
    return "-"
  if column in ("loss", "val_loss", "best_val_loss", "other_val_loss"):
    return fmt_loss(x)
  if column == "params_m":
    return f"{x:.2f}"
  if column == "warmup":
    return str(int(x))
  if column in ("lr", "b2", "wd", "best_floor", "other_floor", "lr_floor"):
    return f"{x:g}"
  if table == "table6":  # Printed with more digits in the paper.
    return f"{x:.3f}" if column == "exact_state" else f"{x:.4f}"
  return f"{x:.2f}"


HEADERS = {
  "params_m": "Params (M)",
  "val_loss": "Val. loss",
  "loss": "Loss",
  "exact_state": "ExactState (%)",
  "labelwise": "Labelwise (%)",
  "trajectory": "Trajectory (%)",
  "lr": "LR",
  "warmup": "Warmup",
  "b2": "β2",
  "wd": "Weight decay",
  "best_floor": "Best floor",
  "best_val_loss": "Best val. loss",
  "other_floor": "Other floor",
  "other_val_loss": "Other val. loss",
  "lr_floor": "LR floor",
}


def _header(column: str) -> str:
  if column.startswith("bin_"):
    a, b = column.split("_")[1:]
    return f"{a}–{b}"
  return HEADERS.get(column, column)


def table_markdown(key: str, table: dict, families: dict) -> str:
  number = key.removeprefix("table")
  cols = table["columns"]
  has_split = any("split" in r for r in table["rows"])
  head = ["Model", "Size", *(["Split"] if has_split else []), *map(_header, cols)]
  lines = [f"## Table {number}: {table['title']}", "", "Each cell: ours / paper.", ""]
  lines += [
    "| " + " | ".join(head) + " |",
    "|" + "---|" * 2 + "---|" * has_split + "---:|" * len(cols),
  ]
  for r in table["rows"]:
    paper = r.get("paper") or {}
    cells = [families.get(r["family"], r["family"]), r["size"]]
    if has_split:
      cells.append(r.get("split", ""))
    for c in cols:
      cells.append(f"{_fmt(c, r.get(c), key)} / {_fmt(c, paper.get(c), key)}")
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def report_markdown(tables: dict, runs, choices, paper: dict, notes, figures) -> str:
  families = paper["families"]
  lines = [
    "# Chess-World-Model results",
    "",
    f"{len(runs)} training workdirs. Layouts of Walker & Lyons (2026), appendices C-F; "
    "each cell is ours / paper, '-' where there is no run or no published number.",
    "",
  ]
  for key, table in tables.items():
    lines += [table_markdown(key, table, families), ""]
    if key == "table7":
      lines += [
        "Stage-2 replacements (the paper's rule: an unstable configuration gives way to the "
        "next best stage-1 one):",
        "",
      ]
      for rep in paper.get("stage2_replacements", []):
        lines.append(
          f"* paper, {families.get(rep['family'], rep['family'])} {rep['size']}: {rep['reason']}."
        )
      ours = [(cell, h, why) for cell, c in choices.items() for h, why in c.replaced]
      for (family, size), h, why in ours:
        lines.append(f"* ours, {family} {size}: {selection.hyper_name(h)} replaced ({why}).")
      if not ours:
        lines.append("* ours: none.")
      lines.append("")
  lines += ["## Figures", ""]
  lines += [f"![{name}]({name})" for name in figures]
  lines += ["", "## Selection log", ""]
  lines += [f"* {line}" for c in choices.values() for line in c.log] or ["* no stage-2 runs"]
  lines += [
    "",
    "## Runs",
    "",
    "| workdir | family | size | stage | health | bad batches | rollbacks | val. loss |",
    "|---|---|---|---:|---|---:|---:|---:|",
  ]
  for r in runs:
    lines.append(
      f"| `{r.workdir}` | {r.family} | {r.size} | {r.stage} | {r.health()} | {r.bad_batches} | "
      f"{r.rollbacks} | {fmt_loss(r.validation.get('loss'))} |"
    )
  if notes:
    lines += ["", "Skipped:", "", *[f"* {n}" for n in notes]]
  return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# Figures


def _series(rows, params, split, metric, families):
  out = {}
  for r in rows:
    if r["split"] != split or r.get(metric) is None or r["family"] not in families:
      continue
    p = params.get((r["family"], r["size"]))
    if p is not None:
      out.setdefault(r["family"], []).append((p, r[metric]))
  return {f: sorted(v) for f, v in out.items()}


def figure3(tables: dict, paper: dict):
  """Test loss and ExactState against parameters (log axis), a line per family, both splits:
  ours solid, the paper's dashed (Walker & Lyons, Figure 3)."""
  rows = tables["table8"]["rows"] + tables["table9"]["rows"] + tables["table10"]["rows"]
  ours_p = {(r["family"], r["size"]): r["params_m"] for r in tables["table4"]["rows"]}
  paper_p = {(r["family"], r["size"]): r["params_m"] for r in paper["tables"]["table4"]["rows"]}
  paper_rows = [
    {"family": r["family"], "size": r["size"], "split": r["split"], **r["paper"]}
    for r in rows
    if r.get("paper")
  ]
  families = list(dict.fromkeys(r["family"] for r in rows))
  colors = {f: plotting.tab10(i % 10) for i, f in enumerate(families)}
  fig, axes = plotting.subplots(2, 2, figsize=(11, 8), squeeze=False)
  for i, split in enumerate(("real", "random")):
    for j, metric in enumerate(("loss", "exact_state")):
      ax = axes[i][j]
      for source, data, params, style in (
        ("paper", paper_rows, paper_p, dict(ls="--", mfc="none", alpha=0.5)),
        ("ours", rows, ours_p, dict(ls="-")),
      ):
        for family, pts in _series(data, params, split, metric, families).items():
          x, y = zip(*pts, strict=True)
          name = paper["families"].get(family, family)
          ax.plot(x, y, marker="o", color=colors[family], label=f"{name} ({source})", **style)
      ax.set_xscale("log")
      ax.xaxis.set_major_locator(ticker.FixedLocator([3, 5, 10, 20, 40]))
      ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
      ax.xaxis.set_minor_formatter(ticker.NullFormatter())
      if metric == "loss":
        ax.set_yscale("log")
      ax.set_xlabel("parameters (M)")
      ax.set_ylabel("test loss" if metric == "loss" else "ExactState (%)")
      ax.set_title(f"{'held-out real games' if split == 'real' else 'random-uniform games'}")
      ax.grid(alpha=0.3)
  handles, labels = axes[0][0].get_legend_handles_labels()
  for ax in axes.flat[1:]:
    for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
      if lab not in labels:
        handles.append(h)
        labels.append(lab)
  if handles:
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7)
  else:
    fig.text(0.5, 0.02, "no evaluated runs", ha="center")
  fig.suptitle("Test performance against parameter count (ours solid, paper dashed)")
  fig.tight_layout(rect=(0, 0.1, 1, 0.96))
  return fig


def figure4(tables: dict, paper: dict):
  """Each main family against its less expressive variant per size, random-uniform split:
  ExactState and loss, an arrow from the variant (open) to the main family (filled) (Walker &
  Lyons, Figure 4); ours left, the paper's right."""
  main = {(r["family"], r["size"]): r for r in tables["table8"]["rows"] if r["split"] == "random"}
  var = {(r["family"], r["size"]): r for r in tables["table10"]["rows"]}
  fig, axes = plotting.subplots(2, 2, figsize=(11, 7), squeeze=False)
  drawn = 0
  for col, source in enumerate(("ours", "paper")):
    for row, metric in enumerate(("exact_state", "loss")):
      ax = axes[row][col]
      for k, (m, v) in enumerate(PAIRS):
        color = plotting.tab10(k)
        for s, size in enumerate(SIZES):
          a, b = main.get((m, size)), var.get((v, size))
          if source == "paper":
            a, b = a and a.get("paper"), b and b.get("paper")
          ya, yb = (a or {}).get(metric), (b or {}).get(metric)
          x = s + (k - 1) * 0.22
          if ya is not None:
            ax.plot([x], [ya], "o", color=color, label=m if s == 0 else None)
          if yb is not None:
            ax.plot([x], [yb], "o", mfc="none", color=color, label=v if s == 0 else None)
          if ya is not None and yb is not None:
            ax.annotate("", (x, ya), (x, yb), arrowprops=dict(arrowstyle="->", color=color))
            drawn += source == "ours"
      for s in range(len(SIZES)):
        ax.axvspan(s - 0.45, s + 0.45, color="0.93", zorder=0)
      ax.set_xticks(range(len(SIZES)), SIZES)
      if metric == "loss":
        ax.set_yscale("log")
      ax.set_ylabel("random-uniform ExactState (%)" if metric == "exact_state" else "test loss")
      ax.set_title(f"{source}")
      ax.grid(alpha=0.3, axis="y")
  axes[0][1].legend(fontsize=7, loc="lower right")
  if not drawn:
    axes[0][0].text(
      0.5, 0.5, "no main/variant pair evaluated", ha="center", transform=axes[0][0].transAxes
    )
  fig.suptitle("Less expressive variant (open) -> main family (filled), random-uniform split")
  fig.tight_layout()
  return fig


# ------------------------------------------------------------------------------------------------
# Entry point


def write_report(roots, out, *, real: str = "real", random: str = "random") -> dict:
  """Reads the runs under `roots` and writes OUT/tables.md, tables.json, figure3.png and
  figure4.png. Returns the tables."""
  out = Path(out)
  out.mkdir(parents=True, exist_ok=True)
  paper = paper_results()
  runs, evals, notes = load_runs(roots)
  tables = build_tables(runs, evals, paper, real, random)
  _, choices = final_runs(runs)
  figures = {"figure3.png": figure3(tables, paper), "figure4.png": figure4(tables, paper)}
  for name, fig in figures.items():
    write_figure(out / name, fig)
  doc = {
    "source": "chessjax.world_model.report",
    "roots": [str(r) for r in roots],
    "splits": {"real": real, "random": random},
    "selection": {" ".join(cell): c.log for cell, c in choices.items()},
    "tables": tables,
  }
  write_json(out / "tables.json", doc)
  write_text(out / "tables.md", report_markdown(tables, runs, choices, paper, notes, figures))
  return tables


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(
    prog="python -m chessjax.world_model.report", description=__doc__.split("\n")[0]
  )
  ap.add_argument("--runs", nargs="+", required=True, metavar="ROOT", help="folders of workdirs")
  ap.add_argument("--out", required=True, help="output folder")
  ap.add_argument("--real", default="real", help="eval dataset name of the real-game test split")
  ap.add_argument("--random", default="random", help="eval dataset name of the random-uniform one")
  args = ap.parse_args(argv)
  try:
    write_report(args.runs, args.out, real=args.real, random=args.random)
  except FileNotFoundError as e:
    ap.error(str(e))
  out = Path(args.out)
  print(f"tables:  {out / 'tables.md'} ({out / 'tables.json'})")
  print(f"figures: {out / 'figure3.png'}, {out / 'figure4.png'}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
