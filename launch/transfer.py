"""World models across rules: does a chess world model learn atomic rules faster, and is it the
rules or the change of play? Four arms per family, N and seed (issues 49 and 54).

    python -m launch.transfer [--work runs/transfer] [--families transformer,gated_deltanet] \\
        [--seeds 0] [--train-games 256,1024,4096] [--grid FAMILIES/SEEDS/NS ...] \\
        [--arms ft,control,scratch,scratch_equal] [--steps 500] [--source-steps 3000] \\
        [--max-len 128] [--test-games 1000] [--cores 0,1 | --jobs N] \\
        [--scheduler local|slurm [--wait]] [--report-only]

The experiment is a plan of tasks (`launch.manifest.Task`) in five stages, run here by
`launch.local` (`--cores` pins one task per core, `--jobs N` runs N unpinned) or submitted to SLURM
(`--scheduler slurm`: each stage a job array, each step between stages a job; `launch.cluster
status WORK` reads it):
1. data: test sets of `--test-games` random-uniform games of `--test-seed` under each rule set
   (so that the rules, not the randomness, differ); the atomic training games (random-uniform of
   `--train-seed`, the first max(N) of one set, or with `--lichess-atomic PGN` a user's export);
   the control's chess training games (random-uniform chess of the same `--train-seed`: the
   atomic games' twins until the first capture that the rules treat differently); and, for sources
   trained here, the chess training games (`--chess-train DIR` prepared, `--chess-pgn PGN`
   through `data_prep.process_pgn`, else parts 01-02 of the master games, as `launch.cwm_mini`).
2. source: per family and seed a d128 world model trained on those real chess games for
   `--source-steps` (`launch.cwm_mini`'s recipe: the family's Table 7 numbers at d128, the warmup
   scaled), or the run `--sources FAMILY[@SEED]=WORKDIR` names (read, never written: its config,
   summary and scored checkpoint are copied to WORK/runs/FAMILY_sSEED_source).
3. train: for each family, seed and N of the grid, the arms (`--arms`):
     ft             the source fine-tuned on the first N atomic training games (`--steps`);
     control        the same source fine-tuned on the first N random-uniform chess games, same
                    steps: what the change of play alone does (ft against control isolates the
                    rules);
     scratch        from scratch on the N atomic games for `--steps`;
     scratch_equal  from scratch on the N atomic games for `--source-steps` + `--steps` (the
                    source's compute and the fine-tune's: prices the chess start).
   Fine-tuning (`--config.init.workdir`, `chessjax.init_from`) takes the source's parameters and a
   fresh optimizer; every arm uses the family's d128 numbers with the warmup scaled to its steps,
   the seed of its cell (initialisation and data order), no validation (each scores its last
   checkpoint).
4. evaluate: every run and source scored on both test sets (`chessjax.world_model.evaluate`, the
   first `--max-len` steps of each game; the atomic set with its strata and its scores from each
   game's first divergent ply on).
5. report: WORK/transfer.json (the record: the protocol, per family and seed the source's scores
   and per N each arm's), WORK/transfer.md and WORK/transfer.png (`launch.transfer_tables`);
   `--record PATH` writes the record there too (no machine paths) and is read first: a run it
   holds (this protocol's, scored in an earlier session whose workdirs are gone) is not run
   again and enters the record from it, so an experiment of many sessions is recorded as it
   goes and continues where the record ends.

`--grid FAMILIES/SEEDS/NS` (repeatable) gives the cells instead of `--families` x `--seeds` x
`--train-games`, e.g. `--grid transformer,gated_deltanet,slice,mamba3/0/256,1024,4096 --grid
transformer,mamba3/1,2/1024,4096`. Locally the tasks run in the order of their value, as their
dependencies allow: `scratch_equal` (the costliest arm) last, the rest grid by grid in the order
given (so the order of `--grid` sets the priorities), in a grid seed 0 and the larger Ns first;
each run is scored as soon as it is trained, so that a partial run already has complete cells.
Each run is a chessjax workdir WORK/runs/FAMILY_sSEED_ARM_N (sources FAMILY_sSEED_source), the
data WORK/data. Rerunning the command resumes: an unfinished run continues from its newest
checkpoint, a finished one is not trained again, a scored one not scored again; SIGTERM (e.g.
`timeout 3h`) stops the running tasks at a saved step (exit 75). A task that fails is named with
its log and the command exits 1. Wall and CPU time of each task go to bench.json beside its log.
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

from chessjax import rundir
from chessjax.files import write_json, write_text
from launch import cpu_runs, local, manifest, scheduler
from launch.cpu_runs import MASTERS
from launch.transfer_tables import figure, tables_markdown

REPO = Path(__file__).resolve().parents[1]
SPLITS = ("atomic", "chess")  # The test sets: random-uniform games of one seed under each rules.
METRICS = ("loss", "labelwise", "exact_state", "trajectory")
ARMS = ("ft", "control", "scratch", "scratch_equal")
STAGES = ("data", "source", "train", "evaluate", "report")
FROM_SOURCE = ("ft", "control")
ATOMIC_STRATA = ("explosion", "king_exploded", "rule_divergent")  # chessjax.world_model.strata


def parse_args(argv=None):
  ap = argparse.ArgumentParser(
    prog="python -m launch.transfer",
    description=__doc__,
    formatter_class=argparse.RawTextHelpFormatter,
  )
  ap.add_argument("--work", default=str(REPO / "runs" / "transfer"))
  ap.add_argument("--families", default="transformer,gated_deltanet")
  ap.add_argument("--seeds", default="0", help="seeds of every cell (initialisation, data order)")
  ap.add_argument("--train-games", default="256,1024,4096", help="the Ns, comma-separated")
  ap.add_argument(
    "--grid",
    action="append",
    default=[],
    metavar="FAMILIES/SEEDS/NS",
    help="cells (repeatable) instead of --families x --seeds x --train-games",
  )
  ap.add_argument("--arms", default=",".join(ARMS), help=f"of {','.join(ARMS)}")
  ap.add_argument("--sources", default="", help="FAMILY[@SEED]=WORKDIR,... (default: train here)")
  ap.add_argument("--masters", default=str(MASTERS), help="master games, as launch.cwm_mini")
  ap.add_argument("--chess-train", default="", help="a prepared chess dataset for the sources")
  ap.add_argument("--chess-pgn", default="", help="a PGN of chess games to prepare for them")
  ap.add_argument("--source-steps", type=int, default=3000)
  ap.add_argument("--batch-size", type=int, default=32)
  ap.add_argument("--max-len", type=int, default=256, help="steps per game, trained and scored")
  ap.add_argument("--test-games", type=int, default=1000)
  ap.add_argument("--test-seed", type=int, default=0)
  ap.add_argument("--train-seed", type=int, default=1, help="of the atomic and control games")
  ap.add_argument("--lichess-atomic", default="", help="a PGN of atomic games to train on instead")
  ap.add_argument("--steps", type=int, default=1000, help="steps of ft, control and scratch")
  ap.add_argument("--eval-every", type=int, default=250, help="sources' validation")
  ap.add_argument("--eval-batches", type=int, default=10)
  ap.add_argument("--checkpoint-every", type=int, default=250)
  ap.add_argument("--report-only", action="store_true", help="write the record from what exists")
  ap.add_argument(
    "--record",
    default="",
    help="also write the record here (no machine paths); the runs it holds are not run again",
  )
  scheduler.add_flags(ap, cores="1")
  args = ap.parse_args(argv)
  for flag in ("work", "record", "chess_train", "chess_pgn", "masters", "lichess_atomic"):
    if getattr(args, flag):  # Tasks run from the repository root: every path made absolute.
      setattr(args, flag, str(Path(getattr(args, flag)).resolve()))
  try:
    args.grids = [parse_grid(g) for g in args.grid] or [
      parse_grid(f"{args.families}/{args.seeds}/{args.train_games}")
    ]
    args.arm_list = [a for a in args.arms.split(",") if a]
    args.source_dirs = {}
    for item in filter(None, args.sources.split(",")):
      key, path = item.split("=", 1)
      family, _, seed = key.partition("@")
      args.source_dirs[(family, int(seed or 0))] = str(Path(path).resolve())
  except ValueError as e:
    ap.error(f"{e}: --grid is FAMILIES/SEEDS/NS (commas inside), --sources FAMILY[@SEED]=WORKDIR")
  bad = sorted(set(args.arm_list) - set(ARMS))
  if bad or not args.arm_list:
    ap.error(f"--arms: unknown {bad}; choose from {','.join(ARMS)}")
  if args.chess_train and args.chess_pgn:
    ap.error("--chess-train and --chess-pgn: give one")
  sources = {(f, s) for f, s, _ in cells(args)}
  unknown = sorted(set(args.source_dirs) - sources)
  if unknown:
    ap.error(f"--sources names (family, seed) pairs not in the grid: {unknown}")
  return args


def parse_grid(text: str) -> dict:
  """ "FAMILIES/SEEDS/NS" -> {"families": [...], "seeds": [...], "train_games": [...]}."""
  parts = text.split("/")
  if len(parts) != 3:
    raise ValueError(f"--grid {text!r}")
  families = [f for f in parts[0].split(",") if f]
  seeds = sorted({int(s) for s in parts[1].split(",") if s})
  ns = sorted({int(n) for n in parts[2].split(",") if n})
  if not families or not seeds or not ns or min(ns) < 1 or min(seeds) < 0:
    raise ValueError(f"--grid {text!r} needs families, seeds >= 0 and Ns >= 1")
  return {"families": families, "seeds": seeds, "train_games": ns}


def cells(args) -> list[tuple[str, int, int]]:
  """Every (family, seed, N) of the grids, once, in the grids' order."""
  out = []
  for g in args.grids:
    out += [(f, s, n) for f in g["families"] for s in g["seeds"] for n in g["train_games"]]
  return list(dict.fromkeys(out))


def families(args) -> list[str]:
  return list(dict.fromkeys(f for f, _, _ in cells(args)))


# ------------------------------------------------------------------------------------------------
# Paths


def run_dir(work: Path, family: str, seed: int, arm: str, n: int | None = None) -> Path:
  """WORK/runs/FAMILY_sSEED_source, or FAMILY_sSEED_ARM_N."""
  name = f"{family}_s{seed}_{arm}" + ("" if n is None else f"_{n}")
  return Path(work) / "runs" / name


def data_paths(args, work: Path) -> dict[str, Path]:
  data = Path(work) / "data"
  paths = {s: data / f"{s}_test" for s in SPLITS}  # Named by their rules: "atomic", "chess".
  paths["atomic_train"] = data / "atomic_train"
  paths["chess_twins"] = data / "chess_train_random"  # The control arm's games.
  paths["chess_train"] = Path(args.chess_train) if args.chess_train else data / "chess_train"
  return paths


def arm_steps(args, arm: str) -> int:
  return args.source_steps + args.steps if arm == "scratch_equal" else args.steps


# ------------------------------------------------------------------------------------------------
# The plan


def _python(args) -> list[str]:
  return [args.python, "-m"]


def data_tasks(args, work: Path, paths: dict) -> list[manifest.Task]:
  """The datasets, a task each (ended once its manifest.json exists)."""
  py, most = _python(args), str(max(n for _, _, n in cells(args)))
  log = Path(work) / "data" / "prepare.log"

  def prepare(name: str, argv: list) -> manifest.Task:
    out = paths[name]
    argv = [*argv, "--out", out]
    return manifest.task("data", name, argv, REPO, outputs=[out / "manifest.json"], log=log)

  def uniform(name: str, games, seed: int, variant: str, split: str) -> manifest.Task:
    argv = [*py, "data_prep.random_uniform", "--games", str(games), "--seed", str(seed)]
    argv += ["--variant", variant, "--split", split, "--quiet", "--workers", "1"]
    return prepare(name, argv)

  out = [uniform(s, args.test_games, args.test_seed, s, "test") for s in SPLITS]
  if args.lichess_atomic:
    argv = [*py, "data_prep.process_pgn", "--pgn", args.lichess_atomic, "--variant", "atomic"]
    out.append(prepare("atomic_train", argv + ["--split", "train", "--max-games", most]))
  else:
    out.append(uniform("atomic_train", most, args.train_seed, "atomic", "train"))
  if "control" in args.arm_list:
    out.append(uniform("chess_twins", most, args.train_seed, "chess", "train"))
  if trained_sources(args) and not args.chess_train:
    if args.chess_pgn:
      argv = [*py, "data_prep.process_pgn", "--pgn", args.chess_pgn, "--val-fraction", "0.01"]
      out.append(prepare("chess_train", argv + ["--workers", "1"]))
    else:
      argv = cpu_runs.masters_train_command(Path(args.masters), paths["chess_train"], args.python)
      outputs = [paths["chess_train"] / "manifest.json"]
      out.append(manifest.task("data", "chess_train", argv, REPO, outputs=outputs, log=log))
  return out


def trained_sources(args) -> list[tuple[str, int]]:
  """The (family, seed) sources this command trains (not named by --sources)."""
  pairs = dict.fromkeys((f, s) for f, s, _ in cells(args))
  return [p for p in pairs if p not in args.source_dirs]


def train_command(args, family: str, seed: int, workdir: Path, data: Path, steps: int, extra=()):
  """The d128 recipe's command (`cpu_runs.d128_command`) with this sweep's batch, length cut and
  checkpoints, the cell's seed, then the flags of `extra`."""
  return cpu_runs.d128_command(
    family,
    workdir,
    data,
    seed=seed,
    batch_size=args.batch_size,
    max_len=args.max_len,
    steps=steps,
    checkpoint_every=args.checkpoint_every,
    extra=extra,
    python=args.python,
  )


def source_task(args, work: Path, paths: dict, family: str, seed: int) -> manifest.Task:
  wd = run_dir(work, family, seed, "source")
  extra = [f"--config.train.eval_every={args.eval_every}"]
  extra.append(f"--config.train.eval_batches={args.eval_batches}")
  argv = train_command(args, family, seed, wd, paths["chess_train"], args.source_steps, extra)
  after = [t for t in ("chess_train",) if not args.chess_train]
  return manifest.task(
    "source", wd.name, argv, REPO, runs=[(wd, args.source_steps)], after=after,
    log=wd / "train.log",
  )  # fmt: skip


def arm_task(args, work: Path, paths: dict, family: str, seed: int, n: int, arm: str):
  wd = run_dir(work, family, seed, arm, n)
  games = paths["chess_twins"] if arm == "control" else paths["atomic_train"]
  extra = [f"--config.data.max_train_games={n}", "--config.data.val_split=none"]
  after = ["chess_twins" if arm == "control" else "atomic_train"]
  if arm in FROM_SOURCE:
    source = run_dir(work, family, seed, "source")
    extra.append(f"--config.init.workdir={source}")
    after.append(source.name)
  steps = arm_steps(args, arm)
  argv = train_command(args, family, seed, wd, games, steps, extra)
  return manifest.task(
    "train", wd.name, argv, REPO, runs=[(wd, steps)], after=after, log=wd / "train.log"
  )


def eval_task(args, paths: dict, wd: Path, after: list[str]) -> manifest.Task:
  argv = [
    *_python(args), "chessjax.world_model.evaluate", "--workdir", str(wd),
    "--data", *(f"{s}={paths[s]}:test" for s in SPLITS), "--max-games", str(args.test_games),
    "--boards", "0", "--max-len", str(args.max_len),
  ]  # fmt: skip
  outputs = [wd / rundir.EVAL_DIR / f"{s}.json" for s in SPLITS]
  return manifest.task(
    "evaluate", f"eval_{wd.name}", argv, REPO, outputs=outputs, after=after, log=wd / "eval.log"
  )


def value_order(args) -> list[tuple[str, int, int, str]]:
  """(family, seed, N, arm) in the order of their value: the cheaper arms before
  `scratch_equal`; then the grids in the order given (the first grid a cell is in); in a grid,
  the lower seed, the larger N, the families and arms as given."""
  fam = {f: i for i, f in enumerate(families(args))}
  grid = {}
  for i, g in enumerate(args.grids):
    for c in [(f, s, n) for f in g["families"] for s in g["seeds"] for n in g["train_games"]]:
      grid.setdefault(c, i)
  out = [(f, s, n, a) for f, s, n in cells(args) for a in args.arm_list]

  def key(c):
    family, seed, n, arm = c
    first = grid[(family, seed, n)]
    return (arm == "scratch_equal", first, seed, -n, fam[family], args.arm_list.index(arm))

  return sorted(out, key=key)


def plan(args, argv: list[str]) -> list[manifest.Task]:
  """Every task of the experiment, in the order a local runner should try them (`launch.local`
  starts the first whose dependencies ended); stages data, source, train, evaluate, report."""
  work = Path(args.work).resolve()
  paths = data_paths(args, work)
  tasks = data_tasks(args, work, paths)
  tests = list(SPLITS)
  done = recorded(args)  # Scored in an earlier session: not run again.
  todo = [c for c in value_order(args) if c not in done]
  needed = {(f, s) for f, s, _, arm in todo if arm in FROM_SOURCE}
  planned = set()

  def add_source(family: str, seed: int) -> None:
    if (family, seed) in planned:
      return
    planned.add((family, seed))
    wd = run_dir(work, family, seed, "source")
    scored = (family, seed, "source") in done
    if (family, seed) in args.source_dirs:
      if not scored:
        tasks.append(eval_task(args, paths, wd, tests))
    elif (family, seed) in needed or not scored:
      tasks.append(source_task(args, work, paths, family, seed))
      if not scored:
        tasks.append(eval_task(args, paths, wd, [*tests, wd.name]))

  for family, seed, n, arm in todo:
    if arm in FROM_SOURCE:
      add_source(family, seed)
    t = arm_task(args, work, paths, family, seed, n, arm)
    tasks.append(t)
    tasks.append(eval_task(args, paths, run_dir(work, family, seed, arm, n), [*tests, t.name]))
  for family, seed in dict.fromkeys((f, s) for f, s, _ in cells(args)):
    add_source(family, seed)  # Sources of grids whose arms need none are scored all the same.
  report = [*_python(args), "launch.transfer", *argv, *absolute_paths(args), "--report-only"]
  names = [t.name for t in tasks]
  tasks.append(
    manifest.task("report", "report", report, REPO, after=names, log=work / "report.log")
  )
  return manifest.renumber(tasks)


def absolute_paths(args) -> list[str]:
  """The path flags again, made absolute (a task runs from the repository root; later flags win)."""
  out = []
  for flag in ("work", "record", "chess_train", "chess_pgn", "masters", "lichess_atomic"):
    if getattr(args, flag):
      out.append(f"--{flag.replace('_', '-')}={getattr(args, flag)}")
  if args.source_dirs:
    items = [f"{f}@{s}={p}" for (f, s), p in args.source_dirs.items()]
    out.append("--sources=" + ",".join(items))
  return out


def copy_source(source: Path, workdir: Path) -> None:
  """The files of `source` that scoring and fine-tuning read (config, summary, the checkpoint
  an evaluation scores: best, else latest), copied once; `source` itself is not written."""
  if (workdir / rundir.CONFIG).exists():
    return
  if not (source / rundir.CONFIG).exists():
    sys.exit(f"--sources: {source} is not a training workdir (no config.json)")
  which = rundir.default_checkpoint(source)
  sub = "best" if which == "best" else "checkpoints"
  tmp = workdir.with_name(workdir.name + ".tmp")
  shutil.rmtree(tmp, ignore_errors=True)
  tmp.mkdir(parents=True)
  shutil.copytree(source / sub, tmp / sub)
  for name in (rundir.SUMMARY, rundir.CONFIG):  # config.json last: the copy is complete.
    if (source / name).exists():
      shutil.copy2(source / name, tmp / name)
  if workdir.exists():
    shutil.rmtree(workdir)
  tmp.rename(workdir)


# ------------------------------------------------------------------------------------------------
# Record, tables, figure


def evaluated(workdir: Path) -> bool:
  return all((workdir / rundir.EVAL_DIR / f"{s}.json").exists() for s in SPLITS)


def scores(workdir: Path) -> dict | None:
  """A scored run's metrics per test set (and the atomic set's strata and scores after the first
  divergent ply), its checkpoint's step, parameters and time; None when not scored yet."""
  if not evaluated(workdir):
    return None
  out = {}
  for split in SPLITS:
    r = json.loads((workdir / rundir.EVAL_DIR / f"{split}.json").read_text())
    out[split] = {m: r[m] for m in METRICS}
    out[split]["games"], out[split]["steps"] = r["dataset"]["games"], r["steps"]
    out[split]["checkpoint_step"] = r["checkpoint_step"]
    out[split]["pieces"] = r["groups"]["pieces"]  # The 64 squares' accuracy over every step.
    if split == "atomic":
      out[split]["strata"] = {
        s: {**cpu_runs.stratum(r["strata"][s]), "pieces": r["strata"][s]["groups"]["pieces"]}
        for s in ATOMIC_STRATA
      }
      if "after_divergence" in r:
        out[split]["after_divergence"] = r["after_divergence"]
  summary = rundir.read_summary(workdir) or {}
  out["params"], out["steps"] = summary.get("params"), summary.get("steps")
  for phase in ("train", "eval"):
    segs = [s for s in local.bench_record(workdir)["segments"] if s["phase"] == phase]
    segs = [s for s in segs if s.get("cpu_s") is not None]
    out[f"{phase}_cpu_s"] = sum(s["cpu_s"] for s in segs) if segs else None
  return out


RECORD_KEYS = ("source_steps", "batch_size", "max_len", "test_games", "test_seed", "train_seed")
RECORD_KEYS += ("steps", "checkpoint_every", "lichess_atomic")  # What makes two runs the same.


def recorded(args) -> dict:
  """The scores `--record` holds from earlier sessions, when it is a record of this protocol (the
  arms form, the same `RECORD_KEYS`): {(family, seed, N, arm): scores, (family, seed, "source"):
  scores}; {} otherwise. A cell found there is not run again and enters the record from it, so an
  experiment of many sessions continues where the last one's record ends (its workdirs gone)."""
  path = Path(args.record) if args.record else None
  if path is None or not path.exists():
    return {}
  record = json.loads(path.read_text())
  ours = protocol(args)
  theirs = record.get("args", {})
  if "grids" not in theirs or any(theirs.get(k) != ours[k] for k in RECORD_KEYS):
    print(f"--record {path}: another protocol or an older form, not read", flush=True)
    return {}
  out = {}
  for family, row in record["families"].items():
    for seed, cell in row["seeds"].items():
      if "atomic" in (cell.get("source") or {}):
        out[(family, int(seed), "source")] = cell["source"]
      for n, arms in cell["runs"].items():
        out.update({(family, int(seed), int(n), a): s for a, s in arms.items() if s})
  return out


def collect(args, work: Path) -> dict:
  """{family: {"seeds": {seed: {"source": scores, "runs": {N: {arm: scores or None}}}}}}: each
  run's scores from its workdir, else from `--record` (`recorded`)."""
  done = recorded(args)
  out: dict = {}
  for family, seed, n in cells(args):
    seeds = out.setdefault(family, {"seeds": {}})["seeds"]
    if str(seed) not in seeds:
      named = args.source_dirs.get((family, seed))
      source = run_dir(work, family, seed, "source")
      where = Path(named).name if named else str(source.relative_to(work))
      got = scores(source) or done.get((family, seed, "source")) or {}
      seeds[str(seed)] = {"source": {"workdir": where, **got}, "runs": {}}
    runs = seeds[str(seed)]["runs"]
    runs[str(n)] = {
      a: scores(run_dir(work, family, seed, a, n)) or done.get((family, seed, n, a))
      for a in args.arm_list
    }
  return out


def protocol(args) -> dict:
  keep = ("source_steps", "batch_size", "max_len", "test_games", "test_seed", "train_seed")
  keep += ("steps", "checkpoint_every")
  out = {k: getattr(args, k) for k in keep}
  out["families"] = ",".join(families(args))
  out["arms"] = list(args.arm_list)
  out["grids"] = args.grids
  out["sources"] = {f"{f}@{s}": Path(p).name for (f, s), p in args.source_dirs.items()}
  out["lichess_atomic"] = Path(args.lichess_atomic).name if args.lichess_atomic else ""
  return out


def test_sets(args, work: Path) -> dict:
  """What the test sets share: each atomic game against its chess twin (the chess game of the
  same per-game seed), from `chessjax.world_model.divergence.twin_summary` when both exist."""
  paths = data_paths(args, work)
  if not all((paths[s] / "manifest.json").exists() for s in SPLITS):
    return {}
  from chessjax.world_model import divergence

  return {"twins": divergence.twin_summary(paths["atomic"], paths["chess"], args.max_len)}


def report(args, work: Path) -> dict:
  record = {"args": protocol(args), "test_sets": test_sets(args, work)}
  record["families"] = collect(args, work)
  write_json(work / "transfer.json", record)
  write_text(work / "transfer.md", tables_markdown(record))
  figure(record, work / "transfer.png")
  print(f"wrote {work / 'transfer.md'}, transfer.json, transfer.png")
  if args.record:
    write_json(Path(args.record), record)
    print(f"wrote {args.record}")
  return record


def main(argv=None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  args = parse_args(argv)
  work = Path(args.work).resolve()
  work.mkdir(parents=True, exist_ok=True)
  if args.report_only:
    report(args, work)
    return 0
  for (family, seed), path in args.source_dirs.items():
    copy_source(Path(path), run_dir(work, family, seed, "source"))
  return scheduler.execute(plan(args, argv), args, work, prog="launch.transfer", stages=STAGES)


if __name__ == "__main__":
  sys.exit(main())
