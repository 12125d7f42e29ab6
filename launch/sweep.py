r"""The paper's two-stage training protocol (Walker & Lyons, appendix C) as commands or JSON.

    python -m launch.sweep --stage 1 --data data/lichess_2025-03 > stage1.sh      # 1,728 runs
    python -m launch.sweep --stage 1 --families slice --sizes d128 --format json
    python -m launch.sweep --collect runs/stage1 > stage1.csv                    # after stage 1
    python -m launch.sweep --stage 2 --results stage1.csv --data data/lichess_2025-03 > stage2.sh

Stage 1 is the grid 4 families x 4 sizes x lr x warmup x beta2 x weight decay, one epoch each
(`--steps`, default 310,944 / 4 = 77,736) with linear warmup then a constant rate. Stage 2 reads the
stage-1 results (CSV, JSON list or JSON lines with columns family, size, lr, warmup, b2, wd,
val_loss), takes the run with the lowest finite val_loss per family and size, and retrains it for
310,944 steps with warmup and cosine decay to each of the floors 0.1 and 0.01 (the paper tuned the
floor too; keep the floor whose run ends with the lower validation loss). `--collect ROOT` writes
that results file as CSV from finished runs' `config.json` and `train_summary.json` under ROOT.

Every run is `python -m chessjax.main --config=configs/cwm.py:family=F,size=S --workdir=DIR
--config.KEY=VALUE ...`; the workdir name encodes the hyperparameters (e.g.
`runs/stage1/slice_d256_lr3e-3_wu10k_b0.99_wd1e-3`). Each override is checked against
`configs.cwm.get_config` (key exists, value has the field's type) before anything is printed.
Run from the repository root.
"""

import argparse
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

from configs import cwm

FAMILIES = ("transformer", "slice", "mamba3", "gated_deltanet")
SIZES = ("d128", "d256", "d384", "d512")
LRS = (1e-4, 3e-4, 1e-3, 3e-3)
WARMUPS = (5000, 10000, 20000)
B2S = (0.95, 0.99, 0.999)
WDS = (0.0, 1e-3, 1e-2)
FLOORS = (0.1, 0.01)
STEPS_4_EPOCHS = cwm.STEPS_4_EPOCHS  # 310,944: four epochs of the 10M-game training split.
STEPS_1_EPOCH = STEPS_4_EPOCHS // 4  # 77,736.
RESULT_COLUMNS = ("family", "size", "lr", "warmup", "b2", "wd", "val_loss")
CONFIG_FILE = "configs/cwm.py"


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
    name = (
      f"{self.family}_{self.size}_lr{_short(self.lr)}_wu{_steps(self.warmup)}"
      f"_b{self.b2:g}_wd{_short(self.wd)}"
    )
    return name if self.floor is None else f"{name}_floor{self.floor:g}"

  @property
  def config_arg(self) -> str:
    return f"{CONFIG_FILE}:family={self.family},size={self.size}"

  def overrides(self, data: str | None, seed: int) -> dict[str, object]:
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
    return out


def _short(x: float) -> str:
  """1e-3 -> '1e-3', 2.5e-4 -> '2.5e-4', 0 -> '0': short and exact enough to keep names unique."""
  if x == 0:
    return "0"
  mantissa, exponent = f"{x:.6e}".split("e")
  mantissa = mantissa.rstrip("0").rstrip(".")
  return f"{mantissa}e{int(exponent)}"


def _steps(n: int) -> str:
  return f"{n // 1000}k" if n % 1000 == 0 else str(n)


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
  except (KeyError, TypeError, AttributeError) as e:
    raise SweepError(f"run {run.name}: override rejected by {CONFIG_FILE}: {e}") from e


def job(run: Run, *, workdir_root: str, data: str | None, seed: int, python: str) -> dict:
  """A run as a JSON-able dict: name, config, workdir, overrides and the full command."""
  overrides = run.overrides(data, seed)
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
  sizes: Sequence[str] = SIZES,
  lrs: Sequence[float] = LRS,
  warmups: Sequence[int] = WARMUPS,
  b2s: Sequence[float] = B2S,
  wds: Sequence[float] = WDS,
  steps: int = STEPS_1_EPOCH,
) -> list[Run]:
  """The stage-1 grid (1,728 runs unfiltered), family-major in the order of the arguments."""
  grid = itertools.product(families, sizes, lrs, warmups, b2s, wds)
  return [Run(1, f, s, lr, w, b2, wd, steps, "constant") for f, s, lr, w, b2, wd in grid]


def _number(row: dict, key: str, where: str) -> float:
  value = row[key]
  try:
    return float(value)
  except (TypeError, ValueError):
    raise SweepError(f"{where}: column {key!r} is not a number: {value!r}") from None


def parse_results(rows: list[dict], source: str) -> list[tuple[Run, float]]:
  """Stage-1 result rows -> (run, val_loss) pairs, with every field checked."""
  out = []
  for i, row in enumerate(rows, 1):
    where = f"{source}, result {i}"
    if not isinstance(row, dict):
      raise SweepError(f"{where}: expected an object with columns {list(RESULT_COLUMNS)}")
    missing = [c for c in RESULT_COLUMNS if c not in row or row[c] in (None, "")]
    if missing:
      raise SweepError(f"{where}: missing column(s) {missing}; need {list(RESULT_COLUMNS)}")
    family, size = str(row["family"]).strip(), str(row["size"]).strip()
    if family not in FAMILIES:
      raise SweepError(f"{where}: unknown family {family!r}; the sweep covers {list(FAMILIES)}")
    if size not in SIZES:
      raise SweepError(f"{where}: unknown size {size!r}; expected one of {list(SIZES)}")
    lr, warmup, b2, wd = (_number(row, k, where) for k in ("lr", "warmup", "b2", "wd"))
    val_loss = _number(row, "val_loss", where)
    if not (lr > 0 and 0 < b2 < 1 and wd >= 0 and warmup >= 0 and warmup == int(warmup)):
      raise SweepError(
        f"{where}: out-of-range hyperparameters lr={lr} warmup={warmup} b2={b2} wd={wd}"
      )
    out.append((Run(1, family, size, lr, int(warmup), b2, wd, STEPS_1_EPOCH, "constant"), val_loss))
  return out


def read_results(path: str | Path) -> list[tuple[Run, float]]:
  """Reads stage-1 results from CSV, a JSON list (or {"results": [...]}) or JSON lines."""
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
  return parse_results(rows, str(path))


Cell = tuple[str, str]  # (family, size)


def best_per_cell(results: list[tuple[Run, float]]) -> dict[Cell, tuple[Run, float, int]]:
  """(family, size) -> (run with the lowest finite val_loss, that loss, runs considered).

  Non-finite losses (diverged runs) never win; ties go to the earlier row.
  """
  best: dict[Cell, tuple[Run, float, int]] = {}
  counts: dict[Cell, int] = {}
  for run, loss in results:
    cell = (run.family, run.size)
    counts[cell] = counts.get(cell, 0) + 1
    if math.isfinite(loss) and (cell not in best or loss < best[cell][1]):
      best[cell] = (run, loss, 0)
  return {cell: (run, loss, counts[cell]) for cell, (run, loss, _) in best.items()}


def stage2_runs(
  results: list[tuple[Run, float]],
  families: Sequence[str] = FAMILIES,
  sizes: Sequence[str] = SIZES,
  floors: Sequence[float] = FLOORS,
  steps: int = STEPS_4_EPOCHS,
  log=None,
) -> list[Run]:
  """For each family and size, the best stage-1 run retrained with cosine decay to each floor."""
  best = best_per_cell(results)
  present = {(r.family, r.size) for r, _ in results}
  runs = []
  for family, size in itertools.product(families, sizes):
    if (family, size) not in best:
      if (family, size) in present and log:
        print(f"# {family} {size}: every stage-1 run has a non-finite val_loss; skipped", file=log)
      continue
    run, loss, n = best[(family, size)]
    if log:
      print(f"# {family} {size}: {run.name} val_loss {loss:.6g} (best of {n})", file=log)
    for floor in floors:
      runs.append(dataclasses.replace(run, stage=2, steps=steps, schedule="cosine", floor=floor))
  return runs


def collect(root: str | Path, log=None) -> list[dict]:
  """Result rows (RESULT_COLUMNS) of the finished runs in ROOT's subdirectories.

  A run counts as finished when its `train_summary.json` reports the configured number of steps;
  unfinished or unreadable runs are skipped with a note on `log`.
  """
  root = Path(root)
  if not root.is_dir():
    raise SweepError(f"--collect: {root} is not a directory")
  rows = []
  for workdir in sorted(p for p in root.iterdir() if p.is_dir()):
    try:
      config = json.loads((workdir / "config.json").read_text())
      summary = json.loads((workdir / "train_summary.json").read_text())
      optim = config["optim"]
      done = summary["steps"] >= config["train"]["steps"]
      val_loss = summary["validation"]["loss"] if done else None
    except (OSError, ValueError, KeyError, TypeError) as e:
      if log:
        print(f"# {workdir.name}: skipped, no readable summary ({type(e).__name__}: {e})", file=log)
      continue
    if not done:
      if log:
        print(f"# {workdir.name}: skipped, unfinished ({summary['steps']} steps)", file=log)
      continue
    rows.append(
      {
        "family": config["family"],
        "size": config["size"],
        "lr": optim["lr"],
        "warmup": optim["warmup_steps"],
        "b2": optim["b2"],
        "wd": optim["weight_decay"],
        "val_loss": val_loss,
        "workdir": str(workdir),
      }
    )
  if not rows:
    raise SweepError(f"--collect: no finished runs under {root}")
  parse_results(rows, str(root))  # The same checks stage 2 will apply.
  return rows


def _list(text: str, kind, allowed: Sequence, what: str) -> list:
  values = []
  for item in filter(None, (t.strip() for t in text.split(","))):
    try:
      value = kind(item)
    except ValueError:
      raise SweepError(f"--{what}: {item!r} is not a valid {kind.__name__}") from None
    if value not in allowed:
      raise SweepError(f"--{what}: {item!r} is not in the sweep; expected some of {list(allowed)}")
    if value not in values:
      values.append(value)
  if not values:
    raise SweepError(f"--{what}: empty list")
  return values


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
  mode.add_argument("--collect", metavar="ROOT", help="print stage-1 results of ROOT/* as CSV")
  parser.add_argument("--results", help="stage 2: stage-1 results (CSV, JSON or JSON lines)")
  parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated filter")
  parser.add_argument("--sizes", default=",".join(SIZES), help="comma-separated filter")
  parser.add_argument("--lrs", help="stage 1: comma-separated filter of learning rates")
  parser.add_argument("--warmups", help="stage 1: comma-separated filter of warmup steps")
  parser.add_argument("--b2s", help="stage 1: comma-separated filter of Adam beta2")
  parser.add_argument("--wds", help="stage 1: comma-separated filter of weight decays")
  parser.add_argument("--floors", default=",".join(map(str, FLOORS)), help="stage 2 cosine floors")
  parser.add_argument(
    "--steps", type=int, help=f"steps per run (default {STEPS_1_EPOCH} / {STEPS_4_EPOCHS})"
  )
  parser.add_argument("--data", help="prepared training dataset (--config.data.train)")
  parser.add_argument("--workdir-root", default="runs", help="workdirs go to ROOT/stageN/NAME")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--python", default="python", help="interpreter in the commands")
  parser.add_argument("--shard", help="I/N: only every N-th run starting at I (split over hosts)")
  parser.add_argument(
    "--skip-finished",
    action="store_true",
    help="leave out runs whose workdir already holds a summary of all their steps",
  )
  parser.add_argument("--format", choices=("commands", "json"), default="commands")
  args = parser.parse_args(argv)
  if args.collect:
    return args
  if args.stage == 2 and not args.results:
    parser.error("--stage 2 needs --results FILE (stage-1 results)")
  if args.stage == 1 and args.results:
    parser.error("--results is only for --stage 2")
  if args.stage == 2 and any(getattr(args, k) for k in ("lrs", "warmups", "b2s", "wds")):
    parser.error("--lrs/--warmups/--b2s/--wds filter stage 1; stage 2 takes each cell's best run")
  if "://" in args.workdir_root:
    # chessjax writes workdirs with local file APIs (pathlib); see launch/README.md for buckets.
    parser.error("--workdir-root must be a path (a local disk or a mounted bucket), not a URL")
  if args.steps is not None and args.steps <= 0:
    parser.error("--steps must be positive")
  return args


def build(args: argparse.Namespace, log=None) -> list[dict]:
  """The selected runs as job dicts (see `job`)."""
  families = _list(args.families, str, FAMILIES, "families")
  sizes = _list(args.sizes, str, SIZES, "sizes")
  if args.stage == 1:
    runs = stage1_runs(
      families,
      sizes,
      _list(args.lrs, float, LRS, "lrs") if args.lrs else LRS,
      _list(args.warmups, int, WARMUPS, "warmups") if args.warmups else WARMUPS,
      _list(args.b2s, float, B2S, "b2s") if args.b2s else B2S,
      _list(args.wds, float, WDS, "wds") if args.wds else WDS,
      steps=args.steps or STEPS_1_EPOCH,
    )
  else:
    floors = list(dict.fromkeys(_floats(args.floors)))
    results = read_results(args.results)
    runs = stage2_runs(results, families, sizes, floors, args.steps or STEPS_4_EPOCHS, log=log)
    if not runs:
      raise SweepError(
        f"{args.results}: no usable stage-1 results for families {families} and sizes {sizes}"
      )
  if args.shard:
    index, count = _shard(args.shard)
    runs = runs[index::count]
  jobs = [
    job(r, workdir_root=args.workdir_root, data=args.data, seed=args.seed, python=args.python)
    for r in runs
  ]
  names = [j["workdir"] for j in jobs]
  if len(set(names)) != len(names):
    raise SweepError("two runs would share a workdir")  # Names encode every hyperparameter.
  if args.skip_finished:
    jobs = [j for j in jobs if not finished(j["workdir"], j["overrides"]["train.steps"])]
  return jobs


def finished(workdir: str | Path, steps: int) -> bool:
  """Whether the run in `workdir` wrote its final summary after `steps` steps."""
  try:
    summary = json.loads((Path(workdir) / "train_summary.json").read_text())
    return summary["steps"] >= steps
  except (OSError, ValueError, KeyError, TypeError):
    return False


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
      writer = csv.DictWriter(sys.stdout, fieldnames=[*RESULT_COLUMNS, "workdir"])
      writer.writeheader()
      writer.writerows(rows)
      return 0
    jobs = build(args, log=sys.stderr)
  except SweepError as e:
    print(f"launch.sweep: error: {e}", file=sys.stderr)
    return 1
  if args.format == "json":
    json.dump(jobs, sys.stdout, indent=1)
    sys.stdout.write("\n")
  else:
    for j in jobs:
      print(j["command"])
  return 0


if __name__ == "__main__":
  sys.exit(main())
