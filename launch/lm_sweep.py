r"""The language-model grid behind Figure 2 of Toshniwal et al. (2022) as an experiment: the data,
the runs, their probing evaluation and the tables, here or on SLURM.

    python -m launch.lm_sweep [--root runs/lm_rap] (--data data/lm [--sets data/probing] | \
        --pgn PGN [PGN ...]) [--model gpt2] [--trains S,M,L] [--ps 0,0.05,...] [--size SIZE] \
        [--steps N] [--batch-size N] [--set KEY=VALUE ...] [--cores 0,1 | --jobs N] \
        [--scheduler local|slurm [--wait]] [--print]

For each training size of `--trains` (Train-S, M and L): UCI (p = 0) and UCI + RAP at every p of
the paper's grid {5, 15, 25, 50, 75, 100}% (`chessjax/lm/paper_results.json`; `--ps` gives the p's
instead, 0 for UCI), a `chessjax.main` run of configs/lm.py with `--model` (a family of
configs/lm.py), then the tables of all of them. The experiment is a plan of tasks
(`launch.manifest.Task`) in five stages, run here by `launch.local` (one at a time; `--cores 0,1`
one at a time on each core, pinned; `--jobs N` N at a time) or submitted to SLURM (`--scheduler
slurm`: each stage a job array, each step between stages a job; `launch.cluster status ROOT`
reads it):
1. data: with `--pgn`, the LM data set built from the PGN files (`data_prep.lm_data`, the
   authors' protocol; `--max-games N` reads only the first N games, `--max-plies N` keeps games
   of at most N plies) into ROOT/data/lm; without, `--data` is a prepared one (default data/lm);
2. sets: with `--pgn`, the probing sets drawn from its probing pool (`data_prep.probing_sets`,
   `--probe-count` rows with prefixes of `--probe-min-len` to `--probe-max-len` plies) into
   ROOT/data/probing; without, `--sets` names prepared ones, or none (no probing);
3. train: each run (ROOT/MODEL_uci_T, ROOT/MODEL_rapP_T); `--size` the model's size, `--steps N`
   N batches instead of the recipe's epochs, `--batch-size N`, `--set KEY=VALUE` any other config
   override (checked against configs/lm.py before anything runs);
4. evaluate: each run scored as soon as it is trained (`chessjax.lm.evaluate`: perplexity, and the
   probes with the probing sets);
5. report: `chessjax.lm.report --runs ROOT --out ROOT/report` (the paper's tables and figures).
Rerunning the command resumes: a finished run is not trained again, a scored one not scored again;
SIGTERM stops the running tasks at a saved step (exit 75); a task that fails is named with its log
and the command exits 1. `--print` prints the commands instead, one a line (the paper's grid: 43),
with `python` and the paths as given. The world model's sweep is `launch.sweep`.
"""

import argparse
import ast
import json
import sys
from importlib import resources
from pathlib import Path

from chessjax import rundir
from launch import manifest, scheduler

REPO = Path(__file__).resolve().parents[1]
STAGES = ("data", "sets", "train", "evaluate", "report")
TRAINS = ("S", "M", "L", "all")
# Config keys the grid sets itself (`--set` may not change them; `--batch-size` has its own flag).
GRID_KEYS = (
  "family",
  "size",
  "data.train",
  "data.batch_size",
  "lm.notation",
  "lm.rap_p",
  "lm.train",
)


def paper_grid() -> list[float]:
  """The paper's RAP probabilities p (Figure 2), from the LM track's published numbers."""
  text = resources.files("chessjax.lm").joinpath("paper_results.json").read_text()
  return json.loads(text)["rap_p"]["grid"]


def parse_args(argv=None) -> argparse.Namespace:
  ap = argparse.ArgumentParser(
    prog="python -m launch.lm_sweep",
    description=__doc__,
    formatter_class=argparse.RawTextHelpFormatter,
  )
  ap.add_argument(
    "--root", "--work", dest="root", default="runs/lm_rap", help="the workdirs' folder"
  )
  ap.add_argument("--data", default=None, help="a prepared LM data set (default data/lm)")
  ap.add_argument(
    "--sets", default=None, help="prepared probing sets (chessjax.lm.evaluate --sets)"
  )
  ap.add_argument("--pgn", nargs="+", default=[], help="build the data and probing sets from these")
  ap.add_argument("--max-games", type=int, default=None, help="--pgn: its first N games only")
  ap.add_argument("--max-plies", type=int, default=None, help="--pgn: games of at most N plies")
  ap.add_argument("--workers", type=int, default=1, help="--pgn: processes of data_prep.lm_data")
  ap.add_argument("--probe-count", type=int, default=1000, help="--pgn: probing rows")
  ap.add_argument("--probe-min-len", type=int, default=51, help="--pgn: shortest prefix, plies")
  ap.add_argument("--probe-max-len", type=int, default=100, help="--pgn: longest prefix, plies")
  ap.add_argument("--model", default="gpt2", help="the model (a family of configs/lm.py)")
  ap.add_argument("--size", default="", help="the model's size (default: configs/lm.py's)")
  ap.add_argument("--trains", default="S,M,L", help=f"training sizes, of {','.join(TRAINS)}")
  ap.add_argument(
    "--ps", default="", help="RAP probabilities, 0 for UCI (default: 0 and the paper's)"
  )
  ap.add_argument("--steps", type=int, default=None, help="N batches per run instead of epochs")
  ap.add_argument("--batch-size", type=int, default=None, help="default: the recipe's 60")
  ap.add_argument(
    "--set", action="append", default=[], metavar="KEY=VALUE", help="a config override (repeatable)"
  )
  ap.add_argument("--print", action="store_true", help="print the commands, one a line; run none")
  scheduler.add_flags(ap)
  ap.set_defaults(python=None)  # `python` when printing, else this interpreter.
  args = ap.parse_args(argv)
  try:
    args.train_sizes = _items(args.trains, str)
    args.p_grid = _items(args.ps, float) if args.ps else [0.0, *paper_grid()]
    args.overrides = _overrides(args.set)
  except ValueError as e:
    ap.error(str(e))
  bad = sorted(set(args.train_sizes) - set(TRAINS))
  if bad or not args.train_sizes:
    ap.error(f"--trains: unknown {bad}; choose from {','.join(TRAINS)}")
  if not args.p_grid or not all(0 <= p <= 1 for p in args.p_grid):
    ap.error(f"--ps: probabilities in [0, 1], got {args.ps!r}")
  for flag in ("steps", "batch_size", "max_games", "max_plies", "workers", "probe_count"):
    if getattr(args, flag) is not None and getattr(args, flag) < 1:
      ap.error(f"--{flag.replace('_', '-')} must be at least 1, got {getattr(args, flag)}")
  if args.pgn and (args.data or args.sets):
    ap.error("give --pgn (the data built here) or --data and --sets (prepared ones), not both")
  names = [name for name, _ in runs(args)]
  twice = sorted({n for n in names if names.count(n) > 1})
  if twice:
    ap.error(f"--ps: two p's give one workdir ({', '.join(twice)}): p rounds to a whole percent")
  args.python = args.python or ("python" if args.print else sys.executable)
  if not args.print:  # Tasks run from the repository root: every path made absolute.
    args.root = str(Path(args.root).resolve())
    args.pgn = [str(Path(p).resolve()) for p in args.pgn]
    for flag in ("data", "sets"):
      if getattr(args, flag):
        setattr(args, flag, str(Path(getattr(args, flag)).resolve()))
  data = Path(args.root) / "data"
  if args.pgn:
    args.data, args.sets = str(data / "lm"), str(data / "probing")
  args.data = args.data or ("data/lm" if args.print else str(Path("data/lm").resolve()))
  try:
    check_configs(args)
  except ValueError as e:
    ap.error(str(e))
  return args


def _items(text: str, kind) -> list:
  try:
    return list(dict.fromkeys(kind(x.strip()) for x in text.split(",") if x.strip()))
  except ValueError:
    raise ValueError(f"not a comma-separated list of {kind.__name__}: {text!r}") from None


def _overrides(items: list[str]) -> dict[str, str]:
  """`--set KEY=VALUE` items -> {KEY: VALUE text} (the text goes to `--config.KEY=VALUE`)."""
  out = {}
  for item in items:
    key, sep, text = item.partition("=")
    key = key.strip().removeprefix("config.")
    if not sep or not key:
      raise ValueError(f"--set {item!r}: expected KEY=VALUE, e.g. train.log_every=10")
    if key in GRID_KEYS:
      raise ValueError(f"--set {key}: set by the grid itself; use its own flag")
    out[key] = text
  return out


def _literal(text: str):
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text


def runs(args) -> list[tuple[str, str]]:
  """(name, configs/lm.py argument) of every run: per training size, UCI (p = 0), then RAP at
  each p."""
  out = []
  extra = f",size={args.size}" if args.size else ""
  extra += f",steps={args.steps}" if args.steps else ""
  for train in args.train_sizes:
    for p in args.p_grid:
      if p == 0:
        name, arg = f"{args.model}_uci_{train}", f"family={args.model},notation=uci,train={train}"
      else:
        name = f"{args.model}_rap{round(100 * p)}_{train}"
        arg = f"family={args.model},notation=rap,rap_p={p:g},train={train}"
      out.append((name, arg + extra))
  return out


def extra_flags(args) -> list[str]:
  """The runs' config overrides: the batch size, then every `--set`."""
  out = [] if args.batch_size is None else [f"--config.data.batch_size={args.batch_size}"]
  return out + [f"--config.{k}={v}" for k, v in args.overrides.items()]


def check_configs(args) -> None:
  """Raises ValueError unless every run's config argument and override is one configs/lm.py
  accepts (an unknown key, or a value of the wrong type, would fail every run)."""
  from configs import lm

  overrides = {k: _literal(v) for k, v in args.overrides.items()}
  if args.batch_size is not None:
    overrides["data.batch_size"] = args.batch_size
  for name, arg in runs(args):
    try:
      config = lm.get_config(arg)
      config.lock()  # Unknown keys then raise instead of being added.
      config.update_from_flattened_dict(overrides)
    except (KeyError, TypeError, AttributeError, ValueError) as e:
      raise ValueError(f"run {name} ({arg}): rejected by configs/lm.py: {e}") from None


# ------------------------------------------------------------------------------------------------
# The plan


def data_tasks(args) -> list[manifest.Task]:
  """With `--pgn`: the LM data set, then the probing sets from its pool (ended by their files)."""
  if not args.pgn:
    return []
  py, data, sets = [args.python, "-m"], Path(args.data), Path(args.sets)
  log = data.parent / "prepare.log"
  argv = [*py, "data_prep.lm_data", "--pgn", *args.pgn, "--out", data, "--workers", args.workers]
  argv += ["--max-games", args.max_games] if args.max_games else []
  argv += ["--max-plies", args.max_plies] if args.max_plies else []
  lm_data = manifest.task("data", "lm_data", argv, REPO, outputs=[data / "manifest.json"], log=log)
  argv = [*py, "data_prep.probing_sets", "--pool", data, "--train", data, "--out", sets]
  argv += ["--count", args.probe_count, "--min-len", args.probe_min_len]
  argv += ["--max-len", args.probe_max_len]
  probing = manifest.task(
    "sets", "probing_sets", argv, REPO, outputs=[sets / "summary.json"], after=["lm_data"], log=log
  )
  return [lm_data, probing]


def run_tasks(args, name: str, arg: str) -> list[manifest.Task]:
  """A run's training task and its evaluation (with the probing sets when there are some)."""
  wd = Path(args.root) / name
  py = [args.python, "-m"]
  argv = [*py, "chessjax.main", f"--config=configs/lm.py:{arg}", f"--workdir={wd}"]
  argv += [f"--config.data.train={args.data}", *extra_flags(args)]
  after = ["lm_data"] if args.pgn else []
  train = manifest.task(
    "train", name, argv, REPO, runs=[(wd, args.steps)], after=after, log=wd / "train.log"
  )
  argv = [
    *py,
    "chessjax.lm.evaluate",
    "--workdir",
    wd,
    *(["--sets", args.sets] if args.sets else []),
  ]
  outputs = [wd / rundir.EVAL_DIR / "results.json"]
  outputs += [wd / rundir.EVAL_DIR / "probes.jsonl"] if args.sets else []
  after = [name, *(["probing_sets"] if args.pgn else [])]
  evaluate = manifest.task(
    "evaluate", f"eval_{name}", argv, REPO, outputs=outputs, after=after, log=wd / "eval.log"
  )
  return [train, evaluate]


def plan(args) -> list[manifest.Task]:
  """Every task of the grid, in the order a local runner should try them: the data, then each
  run trained then scored (training size by training size, UCI first), then the report."""
  root = Path(args.root)
  tasks = data_tasks(args)
  for name, arg in runs(args):
    tasks += run_tasks(args, name, arg)
  argv = [args.python, "-m", "chessjax.lm.report", "--runs", root, "--out", root / "report"]
  tasks.append(manifest.task("report", "report", argv, REPO, log=root / "report.log"))
  return manifest.renumber(tasks)


def check_data(args) -> str | None:
  """What keeps the runs from starting, in words (None: nothing): prepared data that is absent."""
  if args.pgn:
    return None
  if not (Path(args.data) / "manifest.json").exists():
    return f"no LM data set at {args.data}: prepare one (data_prep.lm_data) or give --pgn"
  if args.sets and not (Path(args.sets) / "end.jsonl").exists():
    return f"no probing sets at {args.sets}: prepare them (data_prep.probing_sets) or give --pgn"
  return None


def main(argv=None) -> int:
  args = parse_args(argv)
  tasks = plan(args)
  if args.print:
    for t in tasks:
      print(t.command)
    return 0
  problem = check_data(args)
  if problem:
    print(f"python -m launch.lm_sweep: error: {problem}", file=sys.stderr)
    return 1
  root = Path(args.root)
  root.mkdir(parents=True, exist_ok=True)
  return scheduler.execute(tasks, args, root, prog="launch.lm_sweep", stages=STAGES)


if __name__ == "__main__":
  sys.exit(main())
