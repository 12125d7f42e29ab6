"""The paper's tables and figures from language-model workdirs, ours beside the published ones.

    python -m chessjax.lm.report --runs runs/lm [runs/more ...] --out runs/lm_report

Reads every language-model training workdir under the roots (`config.json`, the training summary,
`eval/results.json` and `eval/probes.jsonl` of `chessjax.lm.evaluate`) and writes OUT/tables.md,
OUT/tables.json and OUT/figure2.png, figure4.png, figure5.png, figure8.png in the layouts of
Toshniwal et al. (2022): Table 3 (dev / test perplexity), 4 and 5 (Start and End probes with the
random-legal row), 6 (End probes of the other models), 7 (error categories), 13 (pseudo-legal
errors by check x king moved), 14 (path-obstruction errors by piece type) and Figures 2, 4, 5 and
8 (`chessjax.lm.figures`: dev perplexity against the RAP p, tokenized training game lengths,
probing prefix lengths, path lengths of the predicted moves).

A run's cell is (model, notation with its RAP p, training size S/M/L/all), read from its config.
It takes the paper's row of that cell when the model and notation match and a RAP run's p is the
tuned p of its training size (25% for S and M, 15% for L; the paper gives no p for its LSTM +
RAP, whose row takes an LSTM RAP run at that p, configs/lm.py's default). The paper's rows are
GPT-2 small: a GPT-2 run of another size takes them, its size shown. Every run of a cell gets a
row of its own; runs of no paper row follow the paper's rows of their training size, with "-" on
the paper's side. Table 3 lists every evaluated run, Table 4 every run that took the Start tasks
(RAP and AP), Table 5 the GPT-2 runs, Table 6 the GPT-2 UCI runs and every other model's, Table 7
every probed run; Tables 13 and 14 (the paper's: GPT-2 UCI Train-L alone) one block per probed
run. The random-legal rows of Tables 4-5 come one per probing set the runs were probed on.

Every cell reads "ours / paper"; "-" where there is no run or no published number: nothing is
interpolated or copied into our column. tables.json holds the same numbers, per table a list of
rows (snake_case column names; percentages in percent and perplexities per move, as the paper
prints them) with the workdir each row came from and the paper's numbers under `paper`; every
number of ours is one of the run's own files (`eval/results.json`, `config.json`,
the training summary; the figures' data also `eval/probes.jsonl` and the training data set). The
published numbers are data: `paper_results.json` beside this module. Directories that cannot be
read, and workdirs of other tasks, are skipped with a note.

The commands of the runs behind Figure 2 (the paper's p grid {5, 15, 25, 50, 75, 100}% and UCI,
p = 0, for Train-S, M and L, each trained, evaluated, then this report) are run by
`python -m launch.lm_sweep --data DATA`, and printed with `--print` (formerly this command's
`--launch-list`).
"""

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path

from chessjax.files import write_figure, write_json, write_text
from chessjax.lm import figures as lm_figures
from chessjax.lm import probing
from chessjax.spec import TrainSpec, task_of
from chessjax.workdir import EVAL_DIR, find_workdirs, read_config, read_summary

PAPER_FILE = Path(__file__).with_name("paper_results.json")
TRAINS = ("S", "M", "L", "all")
NOTATIONS = ("uci", "rap", "ap")
PROBE_COLUMNS = ("lgm_actual_acc", "lgm_actual_r_prec", "lgm_other_acc", "lgm_other_r_prec")
PROBE_COLUMNS += ("exm_acc",)
# Table 7's column order (syntax, path obstruction, pseudo-legal), then unreachable, which the
# paper leaves out.
TABLE7_ORDER = ("syntax", "path_obstruction", "pseudo_legal", "unreachable")
ERROR_COLUMNS = tuple(f"{t}_{c}" for t in ("actual", "other") for c in TABLE7_ORDER)
BREAKDOWN_COLUMNS = ("end_actual_errors", "end_actual_total", "end_other_errors", "end_other_total")
PIECE_NAMES = {"R": "Rook (R)", "N": "Knight (N)", "B": "Bishop (B)", "Q": "Queen (Q)"}
PIECE_NAMES |= {"K": "King (K)", "total": "Total"}
CASE_NAMES = {
  "check_king": "Check + King",
  "check_other": "Check + Other",
  "no_check_king": "No Check + King",
  "no_check_other": "No Check + Other",
  "total": "Total",
}


def paper_results() -> dict:
  """The published numbers (Toshniwal et al. 2022), keyed by table."""
  return json.loads(PAPER_FILE.read_text())


# The paper's tuned RAP p per training size (section 4), the one a RAP run needs to take its rows.
TUNED_P: dict[str, float] = paper_results()["rap_p"]["tuned"]


# ------------------------------------------------------------------------------------------------
# Reading runs


@dataclasses.dataclass
class LMRun:
  """One language-model workdir as the report reads it."""

  workdir: str
  family: str
  size: str
  notation: str
  rap_p: float
  train: str
  data: str  # config data.train: the training data set
  train_split: str
  max_train_games: int  # 0: the whole split
  steps: int | None  # The training summary's.
  params: int | None
  results: dict | None  # eval/results.json, None when not evaluated
  probes: Path | None  # eval/probes.jsonl when written

  @property
  def tuned(self) -> bool:
    """Whether a RAP run has the paper's tuned p of its training size (always true otherwise)."""
    tuned = TUNED_P.get(self.train, -1.0)
    return self.notation != "rap" or math.isclose(self.rap_p, tuned)

  @property
  def paper_key(self) -> tuple[str, str, str] | None:
    """(train, model, notation) of the paper's row this run takes, or None."""
    return (self.train, self.family, self.notation) if self.tuned else None

  def tasks(self) -> dict:
    return ((self.results or {}).get("probes") or {}).get("tasks") or {}


class NotLanguageModel(ValueError):
  pass


def read_run(workdir) -> LMRun:
  """The record of a language-model workdir. Raises NotLanguageModel for another task's workdir,
  OSError/ValueError/KeyError/TypeError when its files are unreadable or incomplete."""
  workdir = Path(workdir)
  config = read_config(workdir)
  if task_of(config) != "lm":
    raise NotLanguageModel(f"task {task_of(config)!r}, not a language model")
  spec, lm = TrainSpec.from_config(config), config["lm"]
  summary = read_summary(workdir) or {}
  results_path = workdir / EVAL_DIR / "results.json"
  results = json.loads(results_path.read_text()) if results_path.exists() else None
  if results is not None and not isinstance(results, dict):
    raise TypeError(f"{results_path} is not a JSON object")
  probes = workdir / EVAL_DIR / "probes.jsonl"
  return LMRun(
    workdir=str(workdir),
    family=spec.family,
    size=spec.size,
    notation=str(lm["notation"]),
    rap_p=float(lm.get("rap_p", 0.0)),
    train=str(lm.get("train", "all")),
    data=spec.data.train,
    train_split=spec.data.train_split,
    max_train_games=spec.data.max_train_games,
    steps=int(summary["steps"]) if "steps" in summary else None,
    params=int(summary["params"]) if "params" in summary else None,
    results=results,
    probes=probes if probes.exists() else None,
  )


def load_runs(roots) -> tuple[list[LMRun], list[str]]:
  """(language-model runs under `roots`, notes on the directories skipped)."""
  runs, notes = [], []
  for workdir in find_workdirs(roots):
    try:
      runs.append(read_run(workdir))
    except NotLanguageModel as e:
      notes.append(f"{workdir}: skipped, {e}")
    except (OSError, ValueError, KeyError, TypeError) as e:
      notes.append(f"{workdir}: skipped, unreadable ({type(e).__name__}: {e})")
  return runs, notes


# ------------------------------------------------------------------------------------------------
# Tables


def _order(models: dict):
  rank = {m: i for i, m in enumerate(models)}

  def key(run: LMRun):
    return (
      rank.get(run.family, len(rank)),
      run.family,
      NOTATIONS.index(run.notation) if run.notation in NOTATIONS else len(NOTATIONS),
      run.rap_p,
      run.size,
      run.workdir,
    )

  return key


def _pairs(paper_rows, runs, models) -> list[tuple[dict | None, LMRun | None]]:
  """[(paper row or None, run or None)] in the paper's layout: per training size its rows in the
  paper's order, each with every run of its cell (a row without a run once), then the runs of
  that size no paper row takes."""
  trains = list(dict.fromkeys([*TRAINS, *sorted({r.train for r in runs})]))
  out, taken = [], set()
  for train in trains:
    for p in (p for p in paper_rows if p["train"] == train):
      mine = [r for r in runs if r.paper_key == (p["train"], p["model"], p["notation"])]
      out += [(p, r) for r in sorted(mine, key=lambda r: r.workdir) or [None]]
      taken |= {r.workdir for r in mine}
    extra = [r for r in runs if r.train == train and r.workdir not in taken]
    out += [(None, r) for r in sorted(extra, key=_order(models))]
  return out


def _row(p: dict | None, r: LMRun | None, tuned: dict) -> dict:
  """The identifying fields of a row: the run's when there is one, else the paper row's."""
  if r is not None:
    return {
      "train": r.train,
      "model": r.family,
      "size": r.size,
      "notation": r.notation,
      "rap_p": r.rap_p,
    }
  return {
    "train": p["train"],
    "model": p["model"],
    "size": None,
    "notation": p["notation"],
    # The paper gives its tuned p for GPT-2 only (section 4).
    "rap_p": tuned[p["train"]] if p["notation"] == "rap" and p["model"] == "gpt2" else None,
  }


def _paper(p: dict | None) -> dict | None:
  if p is None:
    return None
  return {k: v for k, v in p.items() if k not in ("train", "model", "notation", "category")}


def _probe_values(tasks: dict, kind: str) -> dict:
  actual, other = tasks.get(f"{kind}_actual"), tasks.get(f"{kind}_other")
  return {
    "lgm_actual_acc": actual["lgm"] if actual else None,
    "lgm_actual_r_prec": actual["r_precision"] if actual else None,
    "lgm_other_acc": other["lgm"] if other else None,
    "lgm_other_r_prec": other["r_precision"] if other else None,
    "exm_acc": actual.get("exm") if actual else None,
  }


def _perplexity(run: LMRun) -> dict:
  ppl = (run.results or {}).get("perplexity") or {}
  return {f"{name}_perplexity": (ppl.get(name) or {}).get("perplexity") for name in ("dev", "test")}


def _error_values(tasks: dict) -> dict:
  out = {}
  for t, task in (("actual", "end_actual"), ("other", "end_other")):
    counts = tasks[task]["errors"]["counts"]
    for c in TABLE7_ORDER:
      out[f"{t}_{c}"] = counts[c]
  return out


def _has_breakdowns(run: LMRun) -> bool:
  tasks = run.tasks()
  return all(
    "pseudo_legal_by_case" in ((tasks.get(t) or {}).get("errors") or {})
    for t in ("end_actual", "end_other")
  )


def _simple_table(key, paper, runs, columns, values) -> dict:
  ptab = paper["tables"][key]
  tuned = paper["rap_p"]["tuned"]
  rows = []
  for p, r in _pairs(ptab["rows"], runs, paper["models"]):
    row = _row(p, r, tuned)
    row.update(values(r) if r is not None else dict.fromkeys(columns))
    row.update(workdir=r.workdir if r else None, paper=_paper(p))
    rows.append(row)
  return {"title": ptab["title"], "columns": list(columns), "rows": rows}


def _random_legal_rows(runs, paper, table: str, task: str) -> list[dict]:
  """Tables 4-5's last row: the random-legal baseline of each probing set the runs were probed on
  (one row per set; its workdir the first run that holds it), the paper's beside it."""
  groups: dict = {}
  for r in runs:
    value = r.results["probes"]["random_legal"].get(task)
    if value is None:
      continue
    key = (r.results["probes"].get("sets"), value)
    groups.setdefault(key, []).append(r.workdir)
  base = {"train": None, "model": "random_legal", "size": None, "notation": None, "rap_p": None}
  paper_row = paper["tables"][table]["random_legal"]
  rows = []
  for (sets, value), workdirs in groups.items():
    row = {**base, **dict.fromkeys(PROBE_COLUMNS), "exm_acc": value}
    rows.append({**row, "sets": sets, "workdir": workdirs[0], "workdirs": workdirs})
  if not rows:
    rows.append({**base, **dict.fromkeys(PROBE_COLUMNS), "sets": None, "workdir": None})
  for row in rows:
    row["paper"] = dict(paper_row)
  return rows


def _breakdown_table(key, paper, runs, field: str, names) -> dict:
  """Table 13 or 14: per cell (the paper's and every run's) one row per case or piece."""
  ptab = paper["tables"][key]
  tuned = paper["rap_p"]["tuned"]
  cells = list({(p["train"], p["model"], p["notation"]): p for p in ptab["rows"]}.values())
  rows = []
  for p, r in _pairs(cells, runs, paper["models"]):
    for name in (*names, "total"):
      row = _row(p, r, tuned)
      row["category"] = name
      for task in ("end_actual", "end_other"):
        cell = r.tasks()[task]["errors"][field][name] if r is not None else {}
        row[f"{task}_errors"] = cell.get("errors")
        row[f"{task}_total"] = cell.get("total")
      mine = None
      if p is not None:
        mine = next(
          q
          for q in ptab["rows"]
          if (q["train"], q["model"], q["notation"], q["category"])
          == (p["train"], p["model"], p["notation"], name)
        )
      row.update(workdir=r.workdir if r else None, paper=_paper(mine))
      rows.append(row)
  return {"title": ptab["title"], "columns": list(BREAKDOWN_COLUMNS), "rows": rows}


def build_tables(runs: list[LMRun], paper: dict) -> dict:
  """Every table as {"title", "columns", "rows"}: our numbers per row plus `paper` and `workdir`."""
  evaluated = [r for r in runs if r.results is not None]
  with_ppl = [r for r in evaluated if any(v is not None for v in _perplexity(r).values())]
  start = [r for r in evaluated if "start_actual" in r.tasks()]
  end = [r for r in evaluated if "end_actual" in r.tasks() and "end_other" in r.tasks()]
  tables = {
    "table3": _simple_table(
      "table3", paper, with_ppl, ("dev_perplexity", "test_perplexity"), _perplexity
    ),
    "table4": _simple_table(
      "table4", paper, start, PROBE_COLUMNS, lambda r: _probe_values(r.tasks(), "start")
    ),
    "table5": _simple_table(
      "table5",
      paper,
      [r for r in end if r.family == "gpt2"],
      PROBE_COLUMNS,
      lambda r: _probe_values(r.tasks(), "end"),
    ),
    "table6": _simple_table(
      "table6",
      paper,
      [r for r in end if r.family != "gpt2" or r.notation == "uci"],
      PROBE_COLUMNS,
      lambda r: _probe_values(r.tasks(), "end"),
    ),
    "table7": _simple_table(
      "table7", paper, end, ERROR_COLUMNS, lambda r: _error_values(r.tasks())
    ),
  }
  tables["table4"]["rows"] += _random_legal_rows(start, paper, "table4", "start_actual")
  tables["table5"]["rows"] += _random_legal_rows(end, paper, "table5", "end_actual")
  split = [r for r in end if _has_breakdowns(r)]
  tables["table13"] = _breakdown_table(
    "table13", paper, split, "pseudo_legal_by_case", probing.PSEUDO_LEGAL_CASES
  )
  tables["table14"] = _breakdown_table(
    "table14", paper, split, "path_obstruction_by_piece", probing.TABLE11_PIECES
  )
  return tables


# ------------------------------------------------------------------------------------------------
# Markdown


def _model_name(row: dict, models: dict) -> str:
  if row["model"] == "random_legal":
    return "Random Legal"
  name = models.get(row["model"], row["model"])
  return f"{name} {row['size']}" if row.get("size") else name


def _notation_name(row: dict, notations: dict) -> str:
  if row["notation"] is None:
    return ""
  name = notations.get(row["notation"], row["notation"])
  if row["notation"] == "rap" and row.get("rap_p") is not None:
    name += f" (p = {row['rap_p']:g})"
  return name


def _fmt(column: str, x, ours: bool) -> str:
  if x is None:
    return "-"
  if column.endswith("perplexity"):
    return f"{x:.2f}" if ours else f"{x:.1f}"
  if isinstance(x, int) or column in ERROR_COLUMNS or column in BREAKDOWN_COLUMNS:
    return str(int(x))
  return f"{x:.1f}"


HEADERS = {
  "dev_perplexity": "Dev set",
  "test_perplexity": "Test set",
  "lgm_actual_acc": "LgM Actual Acc.",
  "lgm_actual_r_prec": "LgM Actual R-Prec.",
  "lgm_other_acc": "LgM Other Acc.",
  "lgm_other_r_prec": "LgM Other R-Prec.",
  "exm_acc": "ExM Acc.",
  "end_actual_errors": "End-Actual Errors",
  "end_actual_total": "End-Actual Total",
  "end_other_errors": "End-Other Errors",
  "end_other_total": "End-Other Total",
}
for _c in ERROR_COLUMNS:
  _task, _cat = _c.split("_", 1)
  _name = {"path_obstruction": "Path Obst.", "pseudo_legal": "Pseudo Leg."}.get(_cat, _cat.title())
  HEADERS[_c] = f"{_task.title()} {_name}"


def table_markdown(key: str, table: dict, paper: dict) -> str:
  number = key.removeprefix("table")
  cols = table["columns"]
  lines = [f"## Table {number}: {table['title']}", "", "Each cell: ours / paper.", ""]
  lines += [
    "| Train | Model | Notation | " + " | ".join(HEADERS[c] for c in cols) + " |",
    "|---|---|---|" + "---:|" * len(cols),
  ]
  flags = []
  for r in table["rows"]:
    p = r.get("paper") or {}
    model = _model_name(r, paper["models"])
    if p.get("flag"):
      flags.append(f"Train-{r['train']} {paper['models'].get(r['model'], r['model'])}: {p['flag']}")
      model += " (†)"
    if r["model"] == "random_legal":  # The paper's last row: its label spans the three columns.
      cells = ["Random Legal", "", ""]
    else:
      cells = [r["train"], model, _notation_name(r, paper["notations"])]
    cells += [f"{_fmt(c, r.get(c), True)} / {_fmt(c, p.get(c), False)}" for c in cols]
    lines.append("| " + " | ".join(cells) + " |")
  lines += ["", *[f"(†) {f}" for f in dict.fromkeys(flags)]] if flags else []
  return "\n".join(lines)


def breakdown_markdown(key: str, table: dict, paper: dict, names: dict) -> str:
  number = key.removeprefix("table")
  lines = [f"## Table {number}: {table['title']}", "", "Each cell: ours / paper.", ""]
  cols = table["columns"]
  rows = table["rows"]
  for i in range(0, len(rows), len(names)):
    block = rows[i : i + len(names)]
    head = block[0]
    where = f"`{head['workdir']}`" if head["workdir"] else "no run"
    lines += [
      f"### {_model_name(head, paper['models'])}, {_notation_name(head, paper['notations'])}, "
      f"Train-{head['train']} ({where})",
      "",
      "| Category | " + " | ".join(HEADERS[c] for c in cols) + " |",
      "|---|" + "---:|" * len(cols),
    ]
    for r in block:
      p = r.get("paper") or {}
      cells = [f"{_fmt(c, r.get(c), True)} / {_fmt(c, p.get(c), False)}" for c in cols]
      lines.append(f"| {names[r['category']]} | " + " | ".join(cells) + " |")
    lines.append("")
  return "\n".join(lines)


def report_markdown(tables, figures, runs, paper, notes, figure_names) -> str:
  lines = [
    "# Learning Chess Blindfolded: results",
    "",
    f"{len(runs)} language-model workdirs. Layouts of Toshniwal et al. (2022); each cell is "
    "ours / paper, '-' where there is no run or no published number. The paper's rows are "
    "GPT-2 small; our runs are shown with their size.",
    "",
  ]
  for key, table in tables.items():
    if key == "table13":
      lines.append(breakdown_markdown(key, table, paper, CASE_NAMES))
      lines += [
        "Cases: the side to move in check before the move or not x the prompt's piece (on its "
        "start square) the king or another; Total: the rows of the case less those with an error "
        "of another category.",
        "",
      ]
    elif key == "table14":
      lines.append(breakdown_markdown(key, table, paper, PIECE_NAMES))
    else:
      lines += [table_markdown(key, table, paper), ""]
    if key == "table7":
      lines += ["The paper omits unreachable errors (fewer than 5 for every model).", ""]
  lines += ["## Figures", ""]
  lines += [
    "* Figure 2: dev perplexity against the RAP probability p (0 = UCI), one line per model, size "
    "and training size; the paper's figure has no numbers in its text, so only its Table 3 "
    "points (UCI and the tuned p) are drawn, unconnected. `python -m launch.lm_sweep "
    "--data DATA` runs the paper's grid (`--print`: its commands).",
    "* Figure 4: tokens of each training game written in UCI (`<s>` and `</s>` included); "
    + (
      "; ".join(
        f"{h['data']}:{h['split']} ({h['count']:,} games, mean {h['mean']:.1f}, {h['min']}-"
        f"{h['max']})"
        for h in figures["figure4"]
        if h["count"]
      )
      or "no training data readable"
    )
    + ".",
    "* Figure 5: probing prefix lengths in moves; "
    + (
      "; ".join(
        f"{h['sets'] or h['workdir']} ({h['count']:,} prompts, {h['min']}-{h['max']} moves)"
        for h in figures["figure5"]
        if h["count"]
      )
      or "no probed run"
    )
    + ".",
    "* Figure 8: mean path length (king moves from the start square) of legal predictions and "
    "of path-obstruction errors per piece type; knights always 2, kings 1.",
    "",
  ]
  lines += [f"![{name}]({name})" for name in figure_names]
  lines += [
    "",
    "## Runs",
    "",
    "| workdir | model | size | notation | p | train | steps | params | evaluated | probes |",
    "|---|---|---|---|---:|---|---:|---:|---|---|",
  ]
  for r in runs:
    lines.append(
      f"| `{r.workdir}` | {r.family} | {r.size} | {r.notation} | {r.rap_p:g} | {r.train} | "
      f"{'-' if r.steps is None else r.steps} | "
      f"{'-' if r.params is None else f'{r.params:,}'} | {'yes' if r.results else 'no'} | "
      f"{'yes' if r.tasks() else 'no'} |"
    )
  if notes:
    lines += ["", "Notes:", "", *[f"* {n}" for n in notes]]
  return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# Entry point


def write_report(roots, out) -> dict:
  """Reads the runs under `roots` and writes OUT/tables.md, tables.json and the figures. Returns
  the tables.json document."""
  out = Path(out)
  out.mkdir(parents=True, exist_ok=True)
  paper = paper_results()
  runs, notes = load_runs(roots)
  for r in runs:
    if r.tasks() and not _has_breakdowns(r):
      notes.append(
        f"{r.workdir}: eval/results.json predates Tables 13-14's breakdowns; rerun "
        "chessjax.lm.evaluate for them"
      )
  tables = build_tables(runs, paper)
  figures = lm_figures.figure_data(runs, tables, paper, notes)
  pngs = lm_figures.draw(figures)
  for name, fig in pngs.items():
    write_figure(out / name, fig)
  doc = {
    "source": "chessjax.lm.report",
    "roots": [str(r) for r in roots],
    "notes": notes,
    "runs": [
      {
        "workdir": r.workdir,
        "model": r.family,
        "size": r.size,
        "notation": r.notation,
        "rap_p": r.rap_p,
        "train": r.train,
        "steps": r.steps,
        "params": r.params,
        "evaluated": r.results is not None,
      }
      for r in runs
    ],
    "flags": paper["flags"],
    "tables": tables,
    "figures": figures,
  }
  write_json(out / "tables.json", doc)
  write_text(out / "tables.md", report_markdown(tables, figures, runs, paper, notes, pngs))
  return doc


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(
    prog="python -m chessjax.lm.report", description=__doc__.split("\n")[0]
  )
  ap.add_argument("--runs", nargs="+", metavar="ROOT", help="folders of LM workdirs")
  ap.add_argument("--out", help="output folder")
  ap.add_argument("--launch-list", action="store_true", help=argparse.SUPPRESS)  # Moved.
  args, unknown = ap.parse_known_args(argv)
  if args.launch_list:  # The launch list is a script of launch/ now; say where.
    ap.error(f"--launch-list moved: python -m launch.lm_sweep --print {' '.join(unknown)}".rstrip())
  if unknown:
    ap.error(f"unrecognized arguments: {' '.join(unknown)}")
  if not args.runs or not args.out:
    ap.error("--runs and --out are required")
  try:
    doc = write_report(args.runs, args.out)
  except FileNotFoundError as e:
    ap.error(str(e))
  out = Path(args.out)
  print(f"tables:  {out / 'tables.md'} ({out / 'tables.json'}), {len(doc['runs'])} runs")
  print(f"figures: {', '.join(str(out / f'{n}.png') for n in doc['figures'])}")
  for note in doc["notes"]:
    print(f"note: {note}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
