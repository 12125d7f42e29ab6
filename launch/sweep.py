r"""The paper's two-stage training protocol (Walker & Lyons, appendix C) as commands or JSON.

    python -m launch.sweep --stage 1 --data data/lichess_2025-03 > stage1.sh      # 1,728 runs
    python -m launch.sweep --stage 1 --families slice --sizes d128 --format json
    python -m launch.sweep --collect runs/stage1 > stage1.csv                    # after stage 1
    python -m launch.sweep --stage 2 --results stage1.csv --data data/lichess_2025-03 > stage2.sh
    python -m launch.sweep --collect runs/stage2 > stage2.csv                    # after stage 2
    python -m launch.sweep --stage 2 --results stage1.csv --stage2-results stage2.csv ...  # again
    python -m launch.sweep --select --results stage1.csv --stage2-results stage2.csv > sel.json
    python -m launch.sweep --evaluate --results stage1.csv --stage2-results stage2.csv \
        --test-data real=data/lichess_2025-04:test random=data/random > evaluate.sh

Stage 1 is the grid 4 families x 4 sizes x lr x warmup x beta2 x weight decay, one epoch each
(`--steps`, default 310,944 / 4 = 77,736) with linear warmup then a constant rate. `--collect ROOT`
writes, as CSV, one row per run under ROOT with a training summary (`chessjax.rundir.SUMMARY`): its
hyperparameters, every validation metric (`val_*`) and its health (finished, non-finite batches,
rollbacks, aborted).

Stage 2 applies the paper's rule (`chessjax.world_model.selection`): per family and size, the
finished stage-1 run with the lowest finite validation loss is retrained for 310,944 steps with
warmup and cosine decay to each of the floors 0.1 and 0.01. Given the stage-2 results so far
(`--stage2-results`, a `--collect` of the stage-2 root), a configuration whose stage-2 run was
unstable (aborted, or rolled back by the non-finite guard) is replaced by the next best stage-1
configuration, whose runs are then emitted (this is how the paper came to retrain the second-best
SLiCE d512 configuration); once both floors of a configuration finished stably, the floor with the
lower final validation loss is kept. Every choice is logged with its reason on stderr. `--select`
prints the choices as JSON, `--evaluate` the evaluation commands of the kept runs (with
`--format json`: each with its cell, run name, workdir and the files it writes, as
`launch.protocol` reads them).

Every run is `python -m chessjax.main --config=configs/cwm.py:family=F,size=S --workdir=DIR
--config.KEY=VALUE ...`; the workdir name encodes the hyperparameters (e.g.
`runs/stage1/slice_d256_lr3e-3_wu10k_b0.99_wd1e-3`). `--set KEY=VALUE` adds a config override to
every run (batch size, sequence length, ...), `--off-grid` lets the stage-1 filters take values
outside the paper's grid (the toy sweep of `launch.reproduce_mini`). A family may also be a dotted
module path (`chessjax.models.registry.FamilyModule`). Each override is checked against
`configs.cwm.get_config` (key exists, value has the field's type) before anything is printed.
Run from the repository root.

`--population K` trains the runs of a stage that share family, size and every setting but their
optimizer numbers (learning rate, warmup, beta2, weight decay, floor) and seed as populations of
at most K members (`chessjax.population`: one compiled step for all of them, so small models
fill an accelerator): one `python -m chessjax.population --workdir=ROOT/stageN --member NAME:...`
command per population, each member's workdir the very ROOT/stageN/NAME its run alone would have
had, so `--collect`, the selection rule, `--evaluate` and the reports read them unchanged. The
text output puts a `# population NAME: RUN RUN ...` line before each command; the JSON output
lists the populations, each with its runs.
"""

import argparse
import ast
import csv
import dataclasses
import functools
import io
import itertools
import json
import math
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from chessjax import rundir
from chessjax.members import MEMBER_KEYS
from chessjax.rundir import find_workdirs
from chessjax.world_model import grid, selection
from chessjax.world_model.selection import RunRecord
from configs import cwm

FAMILIES = grid.MAIN
# The paper's text calls its Mamba-3 MIMO with rank 4, but the released code and the published
# parameter counts are SISO (`mamba3`); `--mimo` adds the rank-4 variant to the sweep.
MIMO = "mamba3_mimo"
RESULT_COLUMNS = ("family", "size", "lr", "warmup", "b2", "wd", "val_loss")
HEALTH_COLUMNS = ("finished", "aborted", "bad_batches", "rollbacks", "steps", "total_steps")
CONFIG_FILE = "configs/cwm.py"
# Overrides the grid itself sets: `--set` may not change them.
GRID_KEYS = (
  "optim.lr",
  "optim.warmup_steps",
  "optim.b2",
  "optim.weight_decay",
  "optim.schedule",
  "optim.floor",
  "train.steps",
  "data.train",
  "seed",
)


class SweepError(ValueError):
  """Bad input: a results file, a filter or a flag value."""


@dataclasses.dataclass(frozen=True)
class Run:
  """One training run: a grid cell, its optimizer hyperparameters and its schedule."""

  stage: int
  family: str
  size: str
  lr: float
  warmup: int
  b2: float
  wd: float
  steps: int
  schedule: str  # "constant" (stage 1) or "cosine" (stage 2).
  floor: float | None = None  # Cosine floor as a fraction of lr; None for "constant".

  @property
  def name(self) -> str:
    family = self.family.replace(".", "-")  # A dotted module path stays one path component.
    name = (
      f"{family}_{self.size}_lr{_short(self.lr)}_wu{_steps(self.warmup)}"
      f"_b{self.b2:g}_wd{_short(self.wd)}"
    )
    return name if self.floor is None else f"{name}_floor{self.floor:g}"

  @property
  def config_arg(self) -> str:
    return f"{CONFIG_FILE}:family={self.family},size={self.size}"

  def overrides(self, data: str | None, seed: int, extra: dict | None = None) -> dict[str, object]:
    """Flattened config overrides (`optim.lr` -> value), typed like the config's fields."""
    out: dict[str, object] = {
      "optim.lr": float(self.lr),
      "optim.warmup_steps": int(self.warmup),
      "optim.b2": float(self.b2),
      "optim.weight_decay": float(self.wd),
      "optim.schedule": self.schedule,
    }
    if self.floor is not None:
      out["optim.floor"] = float(self.floor)
    out["train.steps"] = int(self.steps)
    if data:
      out["data.train"] = data
    out["seed"] = int(seed)
    out.update(extra or {})
    return out


def _short(x: float) -> str:
  """1e-3 -> '1e-3', 2.5e-4 -> '2.5e-4', 0 -> '0': short and exact enough to keep names unique."""
  if x == 0:
    return "0"
  mantissa, exponent = f"{x:.6e}".split("e")
  mantissa = mantissa.rstrip("0").rstrip(".")
  return f"{mantissa}e{int(exponent)}"


def _steps(n: int) -> str:
  return f"{n // 1000}k" if n % 1000 == 0 and n else str(n)


def _flag_value(value: object) -> str:
  # repr keeps every float digit, so parsing the flag gives back the same number.
  return repr(value) if isinstance(value, float) else str(value)


@functools.cache
def _locked_config(family: str, size: str):
  config = cwm.get_config(f"family={family},size={size}")
  config.lock()  # Unknown keys then raise instead of being added.
  return config


def validate(run: Run, overrides: dict[str, object]) -> None:
  """Raises SweepError unless every override names an existing leaf and has its type."""
  try:
    _locked_config(run.family, run.size).update_from_flattened_dict(overrides)
  except (KeyError, TypeError, AttributeError, ValueError) as e:
    raise SweepError(f"run {run.name}: override rejected by {CONFIG_FILE}: {e}") from e


def job(
  run: Run,
  *,
  workdir_root: str,
  data: str | None,
  seed: int,
  python: str,
  extra: dict | None = None,
) -> dict:
  """A run as a JSON-able dict: name, config, workdir, overrides and the full command."""
  overrides = run.overrides(data, seed, extra)
  validate(run, overrides)
  workdir = f"{workdir_root.rstrip('/')}/stage{run.stage}/{run.name}"
  argv = [python, "-m", "chessjax.main", f"--config={run.config_arg}", f"--workdir={workdir}"]
  argv += [f"--config.{k}={_flag_value(v)}" for k, v in overrides.items()]
  return {
    "name": run.name,
    "stage": run.stage,
    "family": run.family,
    "size": run.size,
    "config": run.config_arg,
    "workdir": workdir,
    "overrides": overrides,
    "command": shlex.join(argv),
  }


def stage1_runs(
  families: Sequence[str] = FAMILIES,
  sizes: Sequence[str] = grid.SIZES,
  lrs: Sequence[float] = grid.LRS,
  warmups: Sequence[int] = grid.WARMUPS,
  b2s: Sequence[float] = grid.B2S,
  wds: Sequence[float] = grid.WDS,
  steps: int = grid.STEPS_1_EPOCH,
) -> list[Run]:
  """The stage-1 grid (1,728 runs unfiltered), family-major in the order of the arguments."""
  cells = itertools.product(families, sizes, lrs, warmups, b2s, wds)
  return [Run(1, f, s, lr, w, b2, wd, steps, "constant") for f, s, lr, w, b2, wd in cells]


def _is_family(name: str) -> bool:
  """A sweep family: the paper's four or a dotted module path (a family module of one's own)."""
  return name in (*FAMILIES, MIMO) or ("." in name and all(name.split(".")))


def _number(row: dict, key: str, where: str) -> float:
  value = row[key]
  try:
    return float(value)
  except (TypeError, ValueError):
    raise SweepError(f"{where}: column {key!r} is not a number: {value!r}") from None


def _flag(row: dict, key: str, default: bool) -> bool:
  value = row.get(key)
  if value in (None, ""):
    return default
  if isinstance(value, bool):
    return value
  return str(value).strip().lower() in ("true", "1", "yes")


def parse_results(rows: list[dict], source: str, stage: int = 1) -> list[RunRecord]:
  """Result rows -> `RunRecord`s, with every field checked.

  Needs RESULT_COLUMNS (stage 2 also `floor`); the health columns of `--collect` are optional (a
  row without them counts as a finished, stable run).
  """
  need = RESULT_COLUMNS + (("floor",) if stage == 2 else ())
  out = []
  for i, row in enumerate(rows, 1):
    where = f"{source}, result {i}"
    if not isinstance(row, dict):
      raise SweepError(f"{where}: expected an object with columns {list(need)}")
    missing = [c for c in need if c not in row or row[c] in (None, "")]
    if missing:
      raise SweepError(f"{where}: missing column(s) {missing}; need {list(need)}")
    family, size = str(row["family"]).strip(), str(row["size"]).strip()
    if not _is_family(family):
      raise SweepError(
        f"{where}: unknown family {family!r}; the sweep covers {list(FAMILIES)} and dotted "
        "module paths"
      )
    if size not in grid.SIZES:
      raise SweepError(f"{where}: unknown size {size!r}; expected one of {list(grid.SIZES)}")
    lr, warmup, b2, wd = (_number(row, k, where) for k in ("lr", "warmup", "b2", "wd"))
    val_loss = _number(row, "val_loss", where)
    if not (lr > 0 and 0 < b2 < 1 and wd >= 0 and warmup >= 0 and warmup == int(warmup)):
      raise SweepError(
        f"{where}: out-of-range hyperparameters lr={lr} warmup={warmup} b2={b2} wd={wd}"
      )
    floor = _number(row, "floor", where) if stage == 2 else None
    total = (
      int(_number(row, "total_steps", where)) if row.get("total_steps") not in (None, "") else 1
    )
    finished = _flag(row, "finished", True)
    steps = int(_number(row, "steps", where)) if row.get("steps") not in (None, "") else total
    validation = {"loss": val_loss}
    for key, value in row.items():
      if key.startswith("val_") and key != "val_loss" and value not in (None, ""):
        try:
          validation[key[4:]] = float(value)
        except (TypeError, ValueError):
          pass
    out.append(
      RunRecord(
        workdir=str(row.get("workdir") or ""),
        family=family,
        size=size,
        stage=stage,
        lr=lr,
        warmup=int(warmup),
        b2=b2,
        wd=wd,
        floor=floor,
        steps=max(steps, total) if finished else min(steps, total - 1),
        total_steps=total,
        has_summary=True,
        aborted=_flag(row, "aborted", False),
        bad_batches=int(_number(row, "bad_batches", where)) if row.get("bad_batches") else 0,
        rollbacks=int(_number(row, "rollbacks", where)) if row.get("rollbacks") else 0,
        validation=validation,
      )
    )
  return out


def read_results(path: str | Path, stage: int = 1) -> list[RunRecord]:
  """Reads results from CSV, a JSON list (or {"results": [...]}) or JSON lines."""
  path = Path(path)
  try:
    text = path.read_text()
  except OSError as e:
    raise SweepError(f"cannot read results file: {e}") from e
  stripped = text.lstrip()
  if not stripped:
    raise SweepError(f"{path}: empty results file")
  try:
    if path.suffix == ".jsonl" or (path.suffix != ".json" and stripped.startswith("{")):
      rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    elif path.suffix == ".json" or stripped.startswith("["):
      rows = json.loads(text)
      if isinstance(rows, dict) and "results" in rows:
        rows = rows["results"]
      if not isinstance(rows, list):
        raise SweepError(f"{path}: expected a JSON list of results (or {{'results': [...]}})")
    else:
      rows = list(csv.DictReader(io.StringIO(text)))
  except json.JSONDecodeError as e:
    raise SweepError(f"{path}: not valid JSON: {e}") from e
  if not rows:
    raise SweepError(f"{path}: no results")
  return parse_results(rows, str(path), stage)


Cell = tuple[str, str]  # (family, size)


def choose(
  results: list[RunRecord],
  stage2: list[RunRecord],
  families: Sequence[str],
  sizes: Sequence[str],
  floors: Sequence[float],
  log=None,
) -> list[selection.CellChoice]:
  """The paper's rule (`selection.select_cell`) for every cell with stage-1 results, logged."""
  ranking = selection.rank_stage1(results)
  present = {r.cell for r in results}
  out = []
  for cell in itertools.product(families, sizes):
    if cell not in ranking:
      if cell in present and log:
        print(
          f"# {' '.join(cell)}: no finished stage-1 run with a finite val_loss; skipped", file=log
        )
      continue
    ranked = list(dict.fromkeys(r.hyper for r in ranking[cell]))
    losses = {}
    for r in ranking[cell]:
      losses.setdefault(r.hyper, r.val_loss)
    choice = selection.select_cell(cell, ranked, stage2, floors, losses)
    choice.log[-1] += f" (best of {len(ranking[cell])})" if choice.rank == 1 else ""
    if log:
      for line in choice.log:
        print(f"# {line}", file=log)
    out.append(choice)
  return out


def stage2_runs(
  results: list[RunRecord],
  families: Sequence[str] = FAMILIES,
  sizes: Sequence[str] = grid.SIZES,
  floors: Sequence[float] = grid.FLOORS,
  steps: int = grid.STEPS_4_EPOCHS,
  log=None,
  stage2: list[RunRecord] = (),
) -> list[Run]:
  """For each family and size, the selected stage-1 configuration (`choose`) retrained with cosine
  decay to each floor."""
  runs = []
  for choice in choose(results, list(stage2), families, sizes, floors, log):
    if choice.hyper is None:
      continue
    lr, warmup, b2, wd = choice.hyper
    family, size = choice.cell
    for floor in floors:
      runs.append(Run(2, family, size, lr, warmup, b2, wd, steps, "cosine", floor))
  return runs


def _flatten(prefix: str, value, out: dict) -> None:
  if isinstance(value, dict):
    for k, v in value.items():
      _flatten(f"{prefix}_{k}", v, out)
  elif isinstance(value, (int, float)) and not isinstance(value, bool) or value is None:
    out[prefix] = value


def collect(root: str | Path, log=None) -> list[dict]:
  """One row per run under ROOT (any depth) that wrote its training summary: family, size,
  hyperparameters, stage and floor, every validation metric (`val_*`, nested ones joined by `_`),
  health (finished, aborted, bad_batches, rollbacks, steps, total_steps) and workdir.

  Runs without a summary (running, or crashed before the end) are skipped with a note on `log`.
  """
  root = Path(root)
  if not root.is_dir():
    raise SweepError(f"--collect: {root} is not a directory")
  rows = []
  for workdir in find_workdirs([root]):
    name = workdir.relative_to(root) if workdir != root else workdir.name
    try:
      run = selection.read_run(workdir)
    except (OSError, ValueError, KeyError, TypeError) as e:
      if log:
        print(f"# {name}: skipped, unreadable ({type(e).__name__}: {e})", file=log)
      continue
    if not run.has_summary:
      if log:
        print(f"# {name}: skipped, no {rundir.SUMMARY} (running or crashed)", file=log)
      continue
    if log and run.health() != "finished":
      print(f"# {name}: {run.health()}", file=log)
    row = {
      "family": run.family,
      "size": run.size,
      "lr": run.lr,
      "warmup": run.warmup,
      "b2": run.b2,
      "wd": run.wd,
      "val_loss": run.validation.get("loss", math.nan),
      "stage": run.stage,
      "floor": "" if run.floor is None else run.floor,
      "finished": run.finished,
      "aborted": run.aborted,
      "bad_batches": run.bad_batches,
      "rollbacks": run.rollbacks,
      "steps": run.steps,
      "total_steps": run.total_steps,
    }
    metrics = {}
    _flatten("val", {k: v for k, v in run.validation.items() if k != "loss"}, metrics)
    row.update(metrics)
    row["workdir"] = str(workdir)
    rows.append(row)
  if not rows:
    raise SweepError(f"--collect: no runs with a {rundir.SUMMARY} under {root}")
  for stage in (1, 2):  # The same checks stage 2 will apply.
    parse_results([r for r in rows if r["stage"] == stage], str(root), stage)
  return rows


def collect_columns(rows: list[dict]) -> list[str]:
  """The CSV header: the result and health columns, then the metrics in order of appearance."""
  first = [*RESULT_COLUMNS, "stage", "floor", *HEALTH_COLUMNS]
  rest = [k for k in dict.fromkeys(k for r in rows for k in r) if k not in first and k != "workdir"]
  return [*first, *rest, "workdir"]


def _list(text: str, kind, allowed: Sequence | None, what: str) -> list:
  values = []
  for item in filter(None, (t.strip() for t in text.split(","))):
    try:
      value = kind(item)
    except ValueError:
      raise SweepError(f"--{what}: {item!r} is not a valid {kind.__name__}") from None
    if allowed is not None and value not in allowed:
      raise SweepError(f"--{what}: {item!r} is not in the sweep; expected some of {list(allowed)}")
    if value not in values:
      values.append(value)
  if not values:
    raise SweepError(f"--{what}: empty list")
  return values


def _families(text: str, mimo: bool = False) -> list[str]:
  values = list(dict.fromkeys(filter(None, (t.strip() for t in text.split(",")))))
  if mimo and MIMO not in values:
    values.append(MIMO)
  for family in values:
    if not _is_family(family):
      raise SweepError(
        f"--families: {family!r} is not in the sweep; expected some of {list(FAMILIES)} or a "
        "dotted module path"
      )
  if not values:
    raise SweepError("--families: empty list")
  return values


def _off_grid(text: str, kind, what: str, ok) -> list:
  values = _list(text, kind, None, what)
  bad = [v for v in values if not ok(v)]
  if bad:
    raise SweepError(f"--{what}: out of range: {bad}")
  return values


def _sets(items: Sequence[str]) -> dict[str, object]:
  """`--set KEY=VALUE` items -> overrides (VALUE as a Python literal, else a string)."""
  out = {}
  for item in items:
    key, sep, text = item.partition("=")
    key = key.strip().removeprefix("config.")
    if not sep or not key:
      raise SweepError(f"--set {item!r}: expected KEY=VALUE, e.g. data.batch_size=32")
    if key in GRID_KEYS:
      raise SweepError(f"--set {key}: set by the sweep itself; use its own flag")
    try:
      out[key] = ast.literal_eval(text)
    except (ValueError, SyntaxError):
      out[key] = text
  return out


def _shard(text: str) -> tuple[int, int]:
  try:
    index, count = (int(t) for t in text.split("/"))
  except ValueError:
    raise SweepError(f"--shard {text!r}: expected I/N, e.g. 0/8") from None
  if not 0 <= index < count:
    raise SweepError(f"--shard {text!r}: need 0 <= I < N")
  return index, count


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(
    prog="python -m launch.sweep",
    description=(
      "Stage-1 sweep and stage-2 retraining runs (Walker & Lyons, appendix C) as commands or JSON."
    ),
  )
  mode = parser.add_mutually_exclusive_group(required=True)
  mode.add_argument("--stage", type=int, choices=(1, 2))
  mode.add_argument("--collect", metavar="ROOT", help="print the results of the runs under ROOT")
  mode.add_argument("--select", action="store_true", help="print the stage-2 selection as JSON")
  mode.add_argument(
    "--evaluate", action="store_true", help="print evaluation commands of the selected runs"
  )
  parser.add_argument("--results", help="stage-1 results (CSV, JSON or JSON lines)")
  parser.add_argument("--stage2-results", help="stage-2 results so far (a --collect of stage 2)")
  parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated filter")
  parser.add_argument(
    "--mimo", action="store_true", help=f"add {MIMO} (Mamba-3 MIMO rank 4; mamba3 is SISO)"
  )
  parser.add_argument("--sizes", default=",".join(grid.SIZES), help="comma-separated filter")
  parser.add_argument("--lrs", help="stage 1: comma-separated filter of learning rates")
  parser.add_argument("--warmups", help="stage 1: comma-separated filter of warmup steps")
  parser.add_argument("--b2s", help="stage 1: comma-separated filter of Adam beta2")
  parser.add_argument("--wds", help="stage 1: comma-separated filter of weight decays")
  parser.add_argument(
    "--off-grid", action="store_true", help="stage 1: --lrs/--warmups/--b2s/--wds take any value"
  )
  parser.add_argument(
    "--floors", default=",".join(map(str, grid.FLOORS)), help="stage 2 cosine floors"
  )
  parser.add_argument(
    "--steps",
    type=int,
    help=f"steps per run (default {grid.STEPS_1_EPOCH} / {grid.STEPS_4_EPOCHS})",
  )
  parser.add_argument("--data", help="prepared training dataset (--config.data.train)")
  parser.add_argument(
    "--set",
    action="append",
    default=[],
    metavar="KEY=VALUE",
    help="config override for every run, e.g. data.batch_size=32 (repeatable)",
  )
  parser.add_argument(
    "--test-data",
    nargs="+",
    metavar="NAME=PATH[:SPLIT]",
    help="--evaluate: test datasets (chessjax.world_model.evaluate --data)",
  )
  parser.add_argument("--eval-args", default="", help="--evaluate: extra evaluate flags")
  parser.add_argument("--workdir-root", default="runs", help="workdirs go to ROOT/stageN/NAME")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--python", default="python", help="interpreter in the commands")
  parser.add_argument("--shard", help="I/N: only every N-th run starting at I (split over hosts)")
  parser.add_argument(
    "--skip-finished",
    action="store_true",
    help="leave out runs whose workdir already holds a final summary (finished or aborted)",
  )
  parser.add_argument("--format", choices=("commands", "json"), default="commands")
  parser.add_argument(
    "--population",
    type=int,
    default=0,
    metavar="K",
    help="group the runs into populations of at most K members (chessjax.population); 0: none",
  )
  args = parser.parse_args(argv)
  if args.collect:
    return args
  if (args.stage == 2 or args.select or args.evaluate) and not args.results:
    parser.error("--stage 2, --select and --evaluate need --results FILE (stage-1 results)")
  if (args.select or args.evaluate) and not args.stage2_results:
    parser.error("--select and --evaluate need --stage2-results FILE (a --collect of stage 2)")
  if args.evaluate and not args.test_data:
    parser.error("--evaluate needs --test-data NAME=PATH[:SPLIT] ...")
  if args.stage == 1 and (args.results or args.stage2_results):
    parser.error("--results and --stage2-results are only for --stage 2, --select, --evaluate")
  if args.stage != 1 and any(getattr(args, k) for k in ("lrs", "warmups", "b2s", "wds")):
    parser.error("--lrs/--warmups/--b2s/--wds filter stage 1; stage 2 takes each cell's best run")
  if "://" in args.workdir_root:
    # chessjax writes workdirs with local file APIs (pathlib); see launch/README.md for buckets.
    parser.error("--workdir-root must be a path (a local disk or a mounted bucket), not a URL")
  if args.steps is not None and args.steps <= 0:
    parser.error("--steps must be positive")
  if args.population < 0:
    parser.error("--population must be >= 0 (0: every run on its own)")
  return args


def _stage1_values(args) -> tuple[list, list, list, list]:
  if args.off_grid:
    get = lambda text, kind, what, ok, default: (  # noqa: E731
      _off_grid(text, kind, what, ok) if text else list(default)
    )
  else:
    get = lambda text, kind, what, ok, default: (  # noqa: E731
      _list(text, kind, default, what) if text else list(default)
    )
  return (
    get(args.lrs, float, "lrs", lambda x: x > 0, grid.LRS),
    get(args.warmups, int, "warmups", lambda x: x >= 0, grid.WARMUPS),
    get(args.b2s, float, "b2s", lambda x: 0 < x < 1, grid.B2S),
    get(args.wds, float, "wds", lambda x: x >= 0, grid.WDS),
  )


def _choices(args, log) -> list[selection.CellChoice]:
  families = _families(args.families, args.mimo)
  sizes = _list(args.sizes, str, grid.SIZES, "sizes")
  floors = list(dict.fromkeys(_floats(args.floors)))
  results = read_results(args.results)
  stage2 = read_results(args.stage2_results, stage=2) if args.stage2_results else []
  return choose(results, stage2, families, sizes, floors, log)


def build(args: argparse.Namespace, log=None) -> list[dict]:
  """The selected runs as job dicts (see `job`)."""
  families = _families(args.families, args.mimo)
  sizes = _list(args.sizes, str, grid.SIZES, "sizes")
  extra = _sets(args.set)
  if args.stage == 1:
    runs = stage1_runs(
      families, sizes, *_stage1_values(args), steps=args.steps or grid.STEPS_1_EPOCH
    )
  else:
    floors = list(dict.fromkeys(_floats(args.floors)))
    results = read_results(args.results)
    stage2 = read_results(args.stage2_results, stage=2) if args.stage2_results else []
    steps = args.steps or grid.STEPS_4_EPOCHS
    runs = stage2_runs(results, families, sizes, floors, steps, log=log, stage2=stage2)
    if not runs:
      raise SweepError(
        f"{args.results}: no usable stage-1 results for families {families} and sizes {sizes}"
      )
  if args.shard:
    index, count = _shard(args.shard)
    runs = runs[index::count]
  jobs = [
    job(
      r,
      workdir_root=args.workdir_root,
      data=args.data,
      seed=args.seed,
      python=args.python,
      extra=extra,
    )
    for r in runs
  ]
  names = [j["workdir"] for j in jobs]
  if len(set(names)) != len(names):
    raise SweepError("two runs would share a workdir")  # Names encode every hyperparameter.
  if args.skip_finished:
    jobs = [j for j in jobs if not rundir.finished(j["workdir"], j["overrides"]["train.steps"])]
  return jobs


def populations(jobs: list[dict], members: int, python: str) -> list[dict]:
  """`jobs` (`build`) as population commands of at most `members` runs each: the runs of one stage,
  family and size whose overrides agree outside `MEMBER_KEYS`, in their order. Each population
  is a dict: name, stage, family, size, workdir (ROOT/stageN: the members' parent), its runs'
  names, the runs themselves and the command."""
  groups: dict[tuple, list[dict]] = {}
  for j in jobs:
    shared = {k: v for k, v in j["overrides"].items() if k not in MEMBER_KEYS}
    root = j["workdir"].rsplit("/", 1)[0]
    key = (j["stage"], j["config"], root, json.dumps(shared, sort_keys=True, default=str))
    groups.setdefault(key, []).append(j)
  out = []
  for (stage, config, root, _), runs in groups.items():
    shared = {k: v for k, v in runs[0]["overrides"].items() if k not in MEMBER_KEYS}
    for start in range(0, len(runs), members):
      chunk = runs[start : start + members]
      argv = [python, "-m", "chessjax.population", f"--config={config}", f"--workdir={root}"]
      argv += [f"--config.{k}={_flag_value(v)}" for k, v in shared.items()]
      for r in chunk:
        own = ",".join(
          f"{k}={_flag_value(v)}" for k, v in r["overrides"].items() if k in MEMBER_KEYS
        )
        argv.append(f"--member={r['name']}:{own}")
      family, size = runs[0]["family"], runs[0]["size"]
      name = f"stage{stage}_{family.replace('.', '-')}_{size}_p{start // members}"
      out.append({
        "name": name, "stage": stage, "family": family, "size": size, "workdir": root,
        "members": [r["name"] for r in chunk], "runs": chunk, "command": shlex.join(argv),
      })  # fmt: skip
  return out


def selection_json(choices: list[selection.CellChoice]) -> list[dict]:
  """The choices as JSON-able rows: the kept run, the other floors, the replaced configurations."""

  def hyper(h):
    return None if h is None else dict(zip(("lr", "warmup", "b2", "wd"), h, strict=True))

  def run(r):
    return {"floor": r.floor, "val_loss": r.val_loss, "workdir": r.workdir}

  out = []
  for c in choices:
    status = "done" if c.done else "pending" if c.hyper is not None else "none"
    out.append(
      {
        "family": c.cell[0],
        "size": c.cell[1],
        "status": status,
        "config": hyper(c.hyper),
        "stage1_rank": c.rank,
        "kept": run(c.best) if c.best is not None else None,
        "others": [run(r) for r in c.other],
        "pending_floors": c.pending_floors,
        "replaced": [{"config": hyper(h), "why": why} for h, why in c.replaced],
        "log": c.log,
      }
    )
  return out


def evaluate_jobs(choices, test_data: Sequence[str], python: str, extra: str) -> list[dict]:
  """The `chessjax.world_model.evaluate` jobs of every cell whose selection is done: dicts with
  the cell (family, size), the kept run's name and workdir, the files the evaluation writes
  (`outputs`: WORKDIR/eval/NAME.json per test dataset NAME=PATH[:SPLIT]) and the command."""
  names = [t.split("=", 1)[0] for t in test_data]
  out = []
  for c in choices:
    if c.done:
      workdir = c.best.workdir
      argv = [python, "-m", "chessjax.world_model.evaluate", "--workdir", workdir]
      out.append({
        "family": c.cell[0], "size": c.cell[1], "name": Path(workdir).name, "workdir": workdir,
        "outputs": [str(Path(workdir) / rundir.EVAL_DIR / f"{n}.json") for n in names],
        "command": shlex.join([*argv, "--data", *test_data, *shlex.split(extra)]),
      })  # fmt: skip
  return out


def _floats(text: str) -> list[float]:
  out = []
  for item in filter(None, (t.strip() for t in text.split(","))):
    try:
      out.append(float(item))
    except ValueError:
      raise SweepError(f"--floors: {item!r} is not a number") from None
  bad = [f for f in out if not 0 <= f < 1]
  if bad or not out:
    raise SweepError(f"--floors {text!r}: need numbers in [0, 1)")
  return out


def main(argv: Sequence[str] | None = None) -> int:
  args = parse_args(argv)
  try:
    if args.collect:
      rows = collect(args.collect, log=sys.stderr)
      writer = csv.DictWriter(sys.stdout, fieldnames=collect_columns(rows), restval="")
      writer.writeheader()
      writer.writerows(rows)
      return 0
    if args.select or args.evaluate:
      choices = _choices(args, sys.stderr)
      if args.select:
        json.dump(selection_json(choices), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
      jobs = evaluate_jobs(choices, args.test_data, args.python, args.eval_args)
      if args.format == "json":
        json.dump(jobs, sys.stdout, indent=1)
        sys.stdout.write("\n")
      else:
        for j in jobs:
          print(j["command"])
      return 0
    jobs = build(args, log=sys.stderr)
  except SweepError as e:
    print(f"launch.sweep: error: {e}", file=sys.stderr)
    return 1
  if args.population:
    pops = populations(jobs, args.population, args.python)
    if args.format == "json":
      json.dump(pops, sys.stdout, indent=1)
      sys.stdout.write("\n")
    else:
      for p in pops:
        print(f"# population {p['name']}: {' '.join(p['members'])}")
        print(p["command"])
    return 0
  if args.format == "json":
    json.dump(jobs, sys.stdout, indent=1)
    sys.stdout.write("\n")
  else:
    for j in jobs:
      print(j["command"])
  return 0


if __name__ == "__main__":
  sys.exit(main())
