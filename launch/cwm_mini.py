"""The Chess-World-Model paper's d128 ranking at CPU scale (Walker & Lyons 2026, Tables 8-10):
every main family and every ablation, several seeds, one protocol, resumable across sessions.

    python -m launch.cwm_mini [--work runs/bench_cwm_mini] [--cores 1 | --jobs N] \\
        [--steps 3000] [--families transformer,slice,...] [--train-pgn PGN] [--test-pgn PGN] \\
        [--scheduler local|slurm [--wait]] [--report-only]

The experiment is a plan of tasks (`launch.manifest.Task`) in four stages, run here by
`launch.local` (`--cores 0,1`: one task at a time on each core, pinned with one XLA thread;
`--jobs N`: N at a time, unpinned) or submitted to SLURM (`--scheduler slurm`: each stage a job
array, each step between stages a job; `launch.cluster status WORK` reads it):
1. data (built once under WORK/data; the master games are never copied into the repository):
   * train: parts 01 and 02 of `../shared/data/masters` (master games from PGN Mentor's "Players"
     collections; `--train-pgn PGN`: a PGN of your own instead), through `data_prep.process_pgn`
     with the paper's bucket rule and `--val-fraction 0.01` (about 1,000 validation games, of
     which the first `--eval-batches` batches are scored during training);
   * real test: the first `--test-games` kept games of part 08, a file no run trains on
     (`--test-pgn PGN`: the first `--test-games` games of your own PGN instead);
   * random-uniform test: the paper's seed-0 set, game for game (`data_prep.random_uniform --seed
     0 --compat reference`), its first `--test-games` games.
2. train: one run per family and seed (below).
3. evaluate: each run scored on both test sets as soon as it is trained.
4. report: the command again with `--report-only` (the tables, curves and report below).

Protocol (the same for every family): d128, batch `--batch-size` 32, games cut at `--max-len`
256 steps in training and in evaluation (the scores are over the first 256 steps of each test game;
the paper scores whole games), `--steps` steps, the family's Table 7 hyperparameters at d128
(`chessjax.world_model.grid`: lr, beta2, weight decay, cosine floor; ablations take their main
family's) with the warmup scaled to the run (Table 7 warmup x steps / 310,944, the steps of the
paper's four-epoch stage-2 runs at batch 128), dropout as the family has it, validation every
`--eval-every` steps. Seeds: `--seeds` for the four main families of Table 8, `--ablation-seeds`
for the three ablations of Tables 9-10. Each run trains on one core (`taskset`, one XLA thread);
`--cores 0,1` runs two at a time. Runs are ordered seed-major
(seed 0 of every family first), so a partial sweep is already a complete ranking for fewer seeds.

Resuming: a run is `WORK/runs/FAMILY_sSEED/`, a chessjax workdir; rerunning the command continues
an unfinished run from its newest checkpoint and evaluates finished ones once (`eval/*.json`).
Across sessions and machines: `--record` (default `docs/results/bench_cwm_mini.json`, the
committed tables.json of earlier sessions) holds finished runs; a planned run found there and not
in WORK is left out of the plan (not trained again) and enters the tables from the record
(`--record ""` retrains everything from scratch); `--update-record` writes this report's
tables.json back to it. `--train-only` trains the planned runs and scores none.
Wall and CPU time of every task go to the run's `bench.json`; a segment killed by the end of a
session is counted by its wall time up to the run's last log line, its CPU time as unknown. SIGTERM
(e.g. `timeout 3h`) stops the running tasks at a saved step (exit 75); a task that fails is named
with its log and the command exits 1.

Long games: `--eval-max-len N` scores each test game's first N steps instead of `--max-len`
(1,024 covers every game of both test sets: the longest random-uniform game has 708 steps, the
longest real one 324), and `--gallery N` writes each split's N worst-tracked games as a page
(`eval/NAME_gallery.html`). The length-generalisation protocol trains on 128 steps and scores
whole games:

    python -m launch.cwm_mini --max-len 128 --eval-max-len 1024 --tag _L128 \
        --seeds 0 --ablation-seeds 0 --record docs/results/bench_cwm_long.json

and tables.md then also has, per run and split, ExactState before and beyond the training length,
the ply where it falls to half its value at the training length, the first wrong ply's quartiles,
the largest per-game loss, and the strata (ExactState on captures, checks, king moves, promotions,
lost castling rights, en passant, the e.p. label's changes and the steps after, each beside the
same plies' other steps when the evaluation has them); `WORK/length.png` draws ExactState and
Labelwise against ply (20-ply bins anchored at the training length). The tables and figures are
`launch.cwm_tables`; what the records show, computed, is `docgen.findings`.

Output: `WORK/tables.md` and `WORK/tables.json` (Table 8 layout: mean and min-max over seeds beside
the paper's d128 row; the ablation pairs on both splits; seed by seed, in how many seeds each
recurrent family beats the Transformer and each ablation is worse than its main family, per split
and metric; time per run), `WORK/curves.png`
(validation loss against steps, one line per family, seeds as thin lines, their mean thick), and
`WORK/report/` from `chessjax.world_model.report` (the paper's layouts, one run per cell).
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from chessjax import rundir
from chessjax.files import write_json, write_text
from chessjax.machine import cpu_model
from launch import cpu_runs, cwm_tables, local, manifest, scheduler
from launch.cpu_runs import MASTERS, master_part, stratum
from launch.cwm_tables import (  # noqa: F401 (the tables' names, as before the split)
  ABLATIONS,
  BIN,
  MAIN,
  METRICS,
  SPLITS,
  curves_png,
  half_value_ply,
  length_png,
  long_tables_markdown,
  paired,
  paper_d128,
  summarize,
  tables_markdown,
)

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "docs" / "results" / "bench_cwm_mini.json"
STAGES = ("data", "train", "evaluate", "report")
PATH_FLAGS = ("work", "masters", "record", "train_pgn", "test_pgn")  # Made absolute.
DATA = {"train": "train_data", "real": "real_test", "random": "random_test"}  # Task names.


def parse_args(argv=None):
  ap = argparse.ArgumentParser(
    prog="python -m launch.cwm_mini",
    description=__doc__,
    formatter_class=argparse.RawTextHelpFormatter,
  )
  ap.add_argument("--work", default=str(REPO / "runs" / "bench_cwm_mini"))
  ap.add_argument("--masters", default=str(MASTERS), help="folder of pgnmentor_players_part*.bz2")
  ap.add_argument("--train-pgn", default="", help="train on this PGN instead of master parts 01-02")
  ap.add_argument("--test-pgn", default="", help="real test games from this PGN instead of part 08")
  ap.add_argument("--families", default=",".join(MAIN + tuple(ABLATIONS)))
  ap.add_argument("--seeds", default="0,1,2", help="seeds of the main families")
  ap.add_argument("--ablation-seeds", default="0,1", help="seeds of the ablations")
  ap.add_argument("--steps", type=int, default=3000)
  ap.add_argument("--batch-size", type=int, default=32)
  ap.add_argument("--max-len", type=int, default=256, help="steps per game in training")
  ap.add_argument(
    "--eval-max-len",
    type=int,
    default=None,
    help="steps scored per test game (default: --max-len; more scores beyond the trained length)",
  )
  ap.add_argument("--gallery", type=int, default=0, help="page of the N worst games per split")
  ap.add_argument("--eval-every", type=int, default=250)
  ap.add_argument("--eval-batches", type=int, default=10)
  ap.add_argument("--test-games", type=int, default=10_000)
  ap.add_argument("--tag", default="", help="suffix of the run folders (e.g. _x4 for --steps x4)")
  ap.add_argument("--report-only", action="store_true", help="write the tables from what exists")
  ap.add_argument("--train-only", action="store_true", help="train the planned runs, score none")
  ap.add_argument(
    "--record", default=str(RECORD), help='finished runs of earlier sessions ("": none)'
  )
  ap.add_argument("--update-record", action="store_true", help="write the tables.json to --record")
  scheduler.add_flags(ap, cores="1")
  args = ap.parse_args(argv)
  for flag in PATH_FLAGS:  # Tasks run from the repository root: every path made absolute.
    if getattr(args, flag):
      setattr(args, flag, str(Path(getattr(args, flag)).resolve()))
  for flag in ("train_pgn", "test_pgn"):
    if getattr(args, flag) and not Path(getattr(args, flag)).is_file():
      ap.error(f"--{flag.replace('_', '-')} {getattr(args, flag)}: no such file")
  for flag in ("steps", "batch_size", "max_len", "test_games"):
    if getattr(args, flag) < 1:
      ap.error(f"--{flag.replace('_', '-')} must be at least 1, got {getattr(args, flag)}")
  return args


def recorded(args) -> dict[tuple[str, int], dict]:
  """(family, seed) -> row of the record's tables.json, for the runs of this protocol (same steps,
  batch, length cut, test games and tag)."""
  if not args.record or not Path(args.record).exists():
    return {}
  record = json.loads(Path(args.record).read_text())
  keys = ("steps", "batch_size", "max_len", "test_games", "tag", "eval_max_len")
  if any(record["args"].get(k) != getattr(args, k) for k in keys):
    print(f"record {args.record}: another protocol, not used", flush=True)
    return {}
  return {(row["family"], row["seed"]): row for row in record["runs"]}


# ------------------------------------------------------------------------------------------------
# The plan


def data_paths(work: Path) -> dict[str, Path]:
  data = Path(work) / "data"
  return {"train": data / "train", "real": data / "real_test", "random": data / "random"}


def data_tasks(args, paths: dict) -> list[manifest.Task]:
  """The three datasets, a task each (ended once its manifest.json exists)."""
  py, log = [args.python, "-m"], paths["train"].parent / "prepare.log"
  if args.train_pgn:
    train = [*py, "data_prep.process_pgn", "--pgn", args.train_pgn, "--out", paths["train"]]
    train += ["--val-fraction", "0.01", "--workers", "2"]
  else:
    train = cpu_runs.masters_train_command(Path(args.masters), paths["train"], args.python)
  real_pgn = args.test_pgn or master_part(Path(args.masters), 8)
  real = [*py, "data_prep.process_pgn", "--pgn", real_pgn, "--out", paths["real"]]
  real += ["--split", "test", "--max-games", str(args.test_games), "--workers", "2"]
  random = [*py, "data_prep.random_uniform", "--games", str(args.test_games), "--seed", "0"]
  random += ["--compat", "reference", "--out", paths["random"], "--quiet"]
  return [
    manifest.task("data", DATA[k], argv, REPO, outputs=[paths[k] / "manifest.json"], log=log)
    for k, argv in (("train", train), ("real", real), ("random", random))
  ]


def run_dir(work: Path, family: str, seed: int, tag: str) -> Path:
  return Path(work) / "runs" / f"{family}_s{seed}{tag}"


def train_command(args, family: str, seed: int, data: dict, workdir: Path) -> list[str]:
  return cpu_runs.d128_command(
    family,
    workdir,
    data["train"],
    seed=seed,
    batch_size=args.batch_size,
    max_len=args.max_len,
    steps=args.steps,
    validation=(args.eval_every, args.eval_batches),
    python=args.python,
  )


def eval_command(args, data: dict, workdir: Path) -> list[str]:
  return [
    args.python, "-m", "chessjax.world_model.evaluate", "--workdir", str(workdir),
    "--data", f"real={data['real']}:test", f"random={data['random']}:test",
    "--max-games", str(args.test_games), "--boards", "0", "--gallery", str(args.gallery),
    *(["--max-len", str(args.eval_max_len)] if args.eval_max_len else []),
  ]  # fmt: skip


def eval_outputs(workdir: Path) -> list[Path]:
  """What an evaluation writes, once per split: the run is scored when all exist."""
  return [Path(workdir) / rundir.EVAL_DIR / f"{s}.json" for s in SPLITS]


def scored(workdir: Path) -> bool:
  return all(p.exists() for p in eval_outputs(workdir))


def run_tasks(args, data: dict, family: str, seed: int) -> list[manifest.Task]:
  """A run's training task and, unless `--train-only`, its evaluation."""
  wd = run_dir(args.work, family, seed, args.tag)
  argv = train_command(args, family, seed, data, wd)
  out = [
    manifest.task(
      "train", wd.name, argv, REPO, runs=[(wd, args.steps)], after=[DATA["train"]],
      log=wd / "train.log",
    )
  ]  # fmt: skip
  if not args.train_only:
    after = [wd.name, DATA["real"], DATA["random"]]
    out.append(
      manifest.task(
        "evaluate", f"eval_{wd.name}", eval_command(args, data, wd), REPO,
        outputs=eval_outputs(wd), after=after, log=wd / "eval.log",
      )
    )  # fmt: skip
  return out


def plan(args, argv: list[str]) -> list[manifest.Task]:
  """Every task of the experiment, in the order a local runner should try them (the data, then
  each run seed-major, trained then scored, then the report): a run of the committed record
  (`recorded`) is left out, and the report task is the command again with `--report-only`."""
  work = Path(args.work)
  data = data_paths(work)
  tasks = data_tasks(args, data)
  runs, done = cwm_tables.plan(args), recorded(args)
  todo = [r for r in runs if r not in done]
  print(f"{len(todo)} runs planned of {len(runs)} ({len(runs) - len(todo)} in the record)")
  for family, seed in todo:
    tasks += run_tasks(args, data, family, seed)
  report = [args.python, "-m", "launch.cwm_mini", *argv, *absolute_paths(args), "--report-only"]
  tasks.append(manifest.task("report", "report", report, REPO, log=work / "report.log"))
  return manifest.renumber(tasks)


def absolute_paths(args) -> list[str]:
  """The path flags again, made absolute (a task runs from the repository root; later flags win)."""
  return [f"--{f.replace('_', '-')}={getattr(args, f)}" for f in PATH_FLAGS if getattr(args, f)]


def check_masters(args, tasks: list[manifest.Task]) -> None:
  """Exits with one line when a dataset still to build reads master games that are not there."""
  masters = Path(args.masters)
  reads = [t for t in tasks if t.stage == "data" and any(str(masters) in a for a in t.argv)]
  if not masters.is_dir() and any(not t.ended() for t in reads):
    sys.exit(
      f"no master games at {masters} (see ../shared/data/README.md), or give --train-pgn and "
      "--test-pgn"
    )


# ------------------------------------------------------------------------------------------------
# Report


def validation_curve(workdir: Path) -> list[tuple[int, float]]:
  """(step, validation loss) from the training log's validation lines (every segment)."""
  out = {}
  log = workdir / "train.log"
  if not log.exists():
    return []
  for line in log.read_text(errors="replace").splitlines():
    words = line.split()
    if len(words) > 4 and words[0] == "step" and words[2] == "validation:" and words[3] == "loss":
      out[int(words[1])] = float(words[4])
  return sorted(out.items())


def collect(args, work: Path) -> list[dict]:
  rows, done = [], recorded(args)
  for family, seed in cwm_tables.plan(args):
    workdir = run_dir(work, family, seed, args.tag)
    if not scored(workdir):
      if (family, seed) in done:
        rows.append(done[family, seed])
      continue
    row = {"family": family, "seed": seed, "workdir": str(workdir.relative_to(work))}
    for split in SPLITS:
      r = json.loads((workdir / rundir.EVAL_DIR / f"{split}.json").read_text())
      row[split] = {m: r[m] for m in METRICS}
      row[split]["games"] = r["dataset"]["games"]
      if "per_ply" in r:  # Evaluations with the long-game outputs.
        row[split]["long"] = long_game_summary(r, args.max_len)
    summary = rundir.read_summary(workdir)
    row["params"], row["bad_batches"] = summary["params"], summary["bad_batches"]
    segs = local.bench_record(workdir)["segments"]
    for phase in ("train", "eval"):
      ss = [s for s in segs if s["phase"] == phase and "wall_s" in s]
      row[f"{phase}_wall_s"] = sum(s["wall_s"] for s in ss)
      cpu = [s["cpu_s"] for s in ss]
      row[f"{phase}_cpu_s"] = None if None in cpu else sum(cpu)
    row["curve"] = validation_curve(workdir)
    rows.append(row)
  return rows


def long_game_summary(r: dict, trained: int) -> dict:
  """What the long-game tables need of one evaluation (`evaluate`'s NAME.json): ExactState and
  Labelwise per 20-ply bin anchored at the training length (bins [trained + 20k, trained +
  20(k+1)), the first one clipped at ply 0), the first wrong ply of every game, per-game losses,
  the strata and the truncation."""
  ply = {k: np.asarray(v, dtype=np.float64) for k, v in r["per_ply"].items()}
  edges = sorted({0, *range(trained % BIN, len(ply["steps"]), BIN)})
  starts, steps, exact, labelwise = [], [], [], []
  for a, b in zip(edges, [*edges[1:], len(ply["steps"])], strict=True):
    n = ply["steps"][a:b].sum()
    if n:
      starts.append(a)
      steps.append(int(n))
      exact.append(float(ply["exact"][a:b].sum() / n))
      labelwise.append(float(ply["correct"][a:b].sum() / (75 * n)))
  first = np.asarray(r["first_error_steps"])
  failed = first[first >= 0]
  within = ply["steps"][:trained].sum()
  beyond = ply["steps"][trained:].sum()
  return {
    "scored_max_len": r["dataset"]["max_len"],
    "truncated_games": r["dataset"]["truncated_games"],
    "bins": {"start": starts, "steps": steps, "exact_state": exact, "labelwise": labelwise},
    "exact_within": float(ply["exact"][:trained].sum() / within) if within else None,
    "exact_beyond": float(ply["exact"][trained:].sum() / beyond) if beyond else None,
    "labelwise_within": float(ply["correct"][:trained].sum() / (75 * within)) if within else None,
    "labelwise_beyond": float(ply["correct"][trained:].sum() / (75 * beyond)) if beyond else None,
    "steps_beyond": int(beyond),
    "first_wrong": {
      "games": len(first),
      "never": int((first < 0).sum()),
      "quartiles": [float(q) for q in np.percentile(failed, [25, 50, 75])] if len(failed) else None,
      "histogram_bins_of_20": np.bincount(failed // BIN).astype(int).tolist(),
    },
    "max_game_loss": r["max_game_loss"],
    "median_game_loss": float(np.median(r["game_loss"])),
    "strata": {name: stratum(v) for name, v in r["strata"].items()},
  }


def machine_line() -> str:
  return f"{cpu_model() or 'unknown CPU'}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}"


def protocol(args) -> dict:
  """The record's `args`: the protocol, not this machine's paths (the PGNs by their file names) nor
  where the tasks ran (the scheduler's flags but `--cores`, which the records have always held)."""
  where = set(vars(_scheduler_defaults())) - {"cores"}
  out = {k: v for k, v in vars(args).items() if k not in {*PATH_FLAGS, *where}}
  out |= {f: Path(getattr(args, f)).name for f in ("train_pgn", "test_pgn") if getattr(args, f)}
  return out


def _scheduler_defaults() -> argparse.Namespace:
  ap = argparse.ArgumentParser()
  scheduler.add_flags(ap)
  return ap.parse_args([])


def report(args, work: Path) -> None:
  rows = collect(args, work)
  if not rows:
    print("no evaluated run yet")
    return
  text = tables_markdown(args, rows, machine_line()) + long_tables_markdown(args, rows)
  write_text(work / "tables.md", text)
  write_json(work / "tables.json", {"args": vars(args), "runs": rows, "summary": summarize(rows)})
  curves_png(rows, work / "curves.png")
  length_png(args, rows, work / "length.png")
  print(f"wrote {work / 'tables.md'}, tables.json, curves.png ({len(rows)} runs)")
  if args.update_record:
    record = {"args": protocol(args), "runs": rows, "summary": summarize(rows)}
    write_json(Path(args.record), record)
    print(f"wrote {args.record}")
  # The paper's layouts (Tables 4-10, Figures 3-4) from the same runs: the reproduction kit's
  # report, which keeps one run per cell (the lowest validation loss), not the seeds' mean, and
  # reads workdirs, so it sees only the runs of WORK (not those taken from the record).
  if not any(scored(run_dir(work, *r, args.tag)) for r in cwm_tables.plan(args)):
    print("no run of WORK evaluated: the paper-layout report is left out")
    return
  report_cmd = [sys.executable, "-m", "chessjax.world_model.report", "--runs", str(work / "runs")]
  subprocess.run(report_cmd + ["--out", str(work / "report")], cwd=REPO, check=True)


def main(argv=None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  args = parse_args(argv)
  work = Path(args.work)
  work.mkdir(parents=True, exist_ok=True)
  if args.report_only:
    report(args, work)
    return 0
  tasks = plan(args, argv)
  check_masters(args, tasks)
  return scheduler.execute(tasks, args, work, prog="launch.cwm_mini", stages=STAGES)


if __name__ == "__main__":
  sys.exit(main())
