"""The Chess-World-Model paper's d128 ranking at CPU scale (Walker & Lyons 2026, Tables 8-10):
every main family and every ablation, several seeds, one protocol, resumable across sessions.

    python -m launch.cwm_mini [--work runs/bench_cwm_mini] [--cores 1] \\
        [--steps 3000] [--families transformer,slice,...] [--report-only]

Data (built once under WORK/data; the master games are never copied into the repository):
* train: parts 01 and 02 of `../shared/data/masters` (master games from PGN Mentor's "Players"
  collections), through
  `data_prep.process_pgn` with the paper's bucket rule and `--val-fraction 0.01` (about 1,000
  validation games, of which the first `--eval-batches` batches are scored during training);
* real test: the first `--test-games` kept games of part 08, a file no run trains on;
* random-uniform test: the paper's seed-0 set, game for game (`data_prep.random_uniform --seed 0
  --compat reference`), its first `--test-games` games.

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
in WORK is not trained again and enters the tables from the record (`--record ""` retrains
everything from scratch); `--update-record` writes this report's tables.json back to it.
Wall and CPU time of every segment go to the run's `bench.json`; a segment killed by the end of a
session is counted by its wall time up to the run's last log line, its CPU time as unknown.

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

from chessjax.files import write_json, write_text
from chessjax.machine import cpu_model
from chessjax.workdir import EVAL_DIR, finished, read_summary
from launch import cpu_runs
from launch.cpu_runs import MASTERS, bench_record, master_part, quiet, segment, stratum
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
  plan,
  summarize,
  tables_markdown,
)

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "docs" / "results" / "bench_cwm_mini.json"


def parse_args(argv=None):
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--work", default=str(REPO / "runs" / "bench_cwm_mini"))
  ap.add_argument("--masters", default=str(MASTERS), help="folder of pgnmentor_players_part*.bz2")
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
  ap.add_argument("--cores", default="1", help="one run at a time on each of these cores")
  ap.add_argument("--tag", default="", help="suffix of the run folders (e.g. _x4 for --steps x4)")
  ap.add_argument("--report-only", action="store_true", help="write the tables from what exists")
  ap.add_argument("--train-only", action="store_true", help="train the planned runs, score none")
  ap.add_argument(
    "--record", default=str(RECORD), help='finished runs of earlier sessions ("": none)'
  )
  ap.add_argument("--update-record", action="store_true", help="write the tables.json to --record")
  return ap.parse_args(argv)


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
# Data


def prepare(args, work: Path) -> dict:
  """The three datasets (each skipped when its manifest exists)."""
  masters = Path(args.masters)
  data = work / "data"
  data.mkdir(parents=True, exist_ok=True)
  paths = {"train": data / "train", "real": data / "real_test", "random": data / "random"}
  py = [sys.executable, "-m"]
  if not (paths["train"] / "manifest.json").exists():
    print("data: master games parts 01-02 -> train/validation", flush=True)
    quiet(cpu_runs.masters_train_command(masters, paths["train"]), data / "prepare.log")
  if not (paths["real"] / "manifest.json").exists():
    print(f"data: master games part 08 -> real test ({args.test_games} games)", flush=True)
    cmd = ["data_prep.process_pgn", "--pgn", master_part(masters, 8), "--out", str(paths["real"])]
    cmd += ["--split", "test", "--max-games", str(args.test_games), "--workers", "2"]
    quiet(py + cmd, data / "prepare.log")
  if not (paths["random"] / "manifest.json").exists():
    print(f"data: random-uniform seed 0 ({args.test_games} games, reference order)", flush=True)
    cmd = ["data_prep.random_uniform", "--games", str(args.test_games), "--seed", "0"]
    cmd += ["--compat", "reference", "--out", str(paths["random"]), "--quiet"]
    quiet(py + cmd, data / "prepare.log")
  return paths


# ------------------------------------------------------------------------------------------------
# Runs


def run_dir(work: Path, family: str, seed: int, tag: str) -> Path:
  return work / "runs" / f"{family}_s{seed}{tag}"


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
  )


def eval_command(args, data: dict, workdir: Path) -> list[str]:
  return [
    sys.executable, "-m", "chessjax.world_model.evaluate", "--workdir", str(workdir),
    "--data", f"real={data['real']}:test", f"random={data['random']}:test",
    "--max-games", str(args.test_games), "--boards", "0", "--gallery", str(args.gallery),
    *(["--max-len", str(args.eval_max_len)] if args.eval_max_len else []),
  ]  # fmt: skip


def evaluated(workdir: Path) -> bool:
  return cpu_runs.evaluated(workdir, SPLITS)


def do_run(args, family: str, seed: int, data: dict, work: Path, core: int) -> None:
  workdir = run_dir(work, family, seed, args.tag)
  workdir.mkdir(parents=True, exist_ok=True)
  name = workdir.name
  if not finished(workdir, args.steps):
    print(f"[train] {name} on core {core}", flush=True)
    train = train_command(args, family, seed, data, workdir)
    if segment(workdir, "train", train, core, close_killed=True):
      print(f"[fail] {name}: training failed, see {workdir / 'train.log'}", flush=True)
      return
  if args.train_only:
    print(f"[trained] {name}", flush=True)
    return
  if not evaluated(workdir):
    print(f"[eval] {name} on core {core}", flush=True)
    if segment(workdir, "eval", eval_command(args, data, workdir), core, close_killed=True):
      print(f"[fail] {name}: evaluation failed, see {workdir / 'eval.log'}", flush=True)
      return
  print(f"[done] {name}", flush=True)


def run_all(args, work: Path, data: dict) -> None:
  """Every planned run, one at a time per core; runs already evaluated are skipped."""
  done = recorded(args)
  todo = [r for r in plan(args) if not evaluated(run_dir(work, *r, args.tag)) and r not in done]
  print(f"{len(todo)} runs to do of {len(plan(args))} ({len(done)} in the record)", flush=True)
  cpu_runs.on_cores(args.cores, todo, lambda run, core: do_run(args, *run, data, work, core))


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
  for family, seed in plan(args):
    workdir = run_dir(work, family, seed, args.tag)
    if not evaluated(workdir):
      if (family, seed) in done:
        rows.append(done[family, seed])
      continue
    row = {"family": family, "seed": seed, "workdir": str(workdir.relative_to(work))}
    for split in SPLITS:
      r = json.loads((workdir / EVAL_DIR / f"{split}.json").read_text())
      row[split] = {m: r[m] for m in METRICS}
      row[split]["games"] = r["dataset"]["games"]
      if "per_ply" in r:  # Evaluations with the long-game outputs.
        row[split]["long"] = long_game_summary(r, args.max_len)
    summary = read_summary(workdir)
    row["params"], row["bad_batches"] = summary["params"], summary["bad_batches"]
    segs = bench_record(workdir)["segments"]
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
  if args.update_record:  # The protocol, not this machine's paths.
    protocol = {k: v for k, v in vars(args).items() if k not in ("work", "masters", "record")}
    write_json(Path(args.record), {"args": protocol, "runs": rows, "summary": summarize(rows)})
    print(f"wrote {args.record}")
  # The paper's layouts (Tables 4-10, Figures 3-4) from the same runs: the reproduction kit's
  # report, which keeps one run per cell (the lowest validation loss), not the seeds' mean, and
  # reads workdirs, so it sees only the runs of WORK (not those taken from the record).
  if not any(evaluated(run_dir(work, *r, args.tag)) for r in plan(args)):
    print("no run of WORK evaluated: the paper-layout report is left out")
    return
  report_cmd = [sys.executable, "-m", "chessjax.world_model.report", "--runs", str(work / "runs")]
  subprocess.run(report_cmd + ["--out", str(work / "report")], cwd=REPO, check=True)


def main(argv=None) -> None:
  args = parse_args(argv)
  work = Path(args.work)
  work.mkdir(parents=True, exist_ok=True)
  if not args.report_only:
    if not Path(args.masters).is_dir():
      sys.exit(f"no master games at {args.masters} (see ../shared/data/README.md)")
    data = prepare(args, work)
    run_all(args, work, data)
  report(args, work)


if __name__ == "__main__":
  main()
