"""World models across rules: how many atomic games buy back exact state tracking (issue 49).

    python -m launch.transfer [--work runs/transfer] [--families transformer,gated_deltanet] \\
        [--sources transformer=RUN,gated_deltanet=RUN] [--max-len 128] \\
        [--train-games 256,1024,4096] [--steps 1000] [--test-games 1000] [--cores 0,1]

1. Sources: a d128 world model per family trained on real chess games with `launch.cwm_mini`'s
   recipe (its master games, batch, length cut, the family's Table 7 numbers at d128, the warmup
   scaled to `--source-steps`), or the runs `--sources FAMILY=WORKDIR,...` names (e.g. cwm_mini's
   `--max-len 128` runs: give the same `--max-len`). A named source is read, never written: its
   config, summary and scored checkpoint (best, else latest) are copied to WORK/runs/FAMILY_source.
2. Test sets, the same count and seed under both rule sets (so that the rules, not the randomness,
   differ): `--test-games` random-uniform atomic games (`data_prep.random_uniform --variant atomic
   --seed TEST_SEED`) and as many random-uniform chess games of the same seed.
3. Each source scored on both (`chessjax.world_model.evaluate`, the first `--max-len` steps of
   each game; the atomic set with its own strata: explosions, exploded kings, moves legal only in
   atomic).
4. For each N of `--train-games`: the source fine-tuned on N atomic training games
   (`--config.init.workdir`, `chessjax.init_from`: the source's parameters, a fresh optimizer) and
   the same model trained from scratch on the same N games, with the same steps (`--steps`) and
   hyperparameters (the family's d128 recipe, the warmup scaled to `--steps`). The training games:
   random-uniform atomic games of `--train-seed` (not the test seed), the first N of one set of
   max(N); or, with `--lichess-atomic PGN`, a user's lichess atomic export through
   `data_prep.process_pgn --variant atomic` (no atomic game file is bundled or downloaded here).
   No validation split: every run scores its last checkpoint.
5. Every fine-tuned and from-scratch run scored on the atomic and the chess test sets (the chess
   score after fine-tuning: what the rule change cost the chess the source knew).
6. WORK/transfer.json (the record: the protocol, per family the source's scores and per N both
   runs' scores, atomic strata and time), WORK/transfer.md (its tables) and WORK/transfer.png
   (ExactState and loss on atomic games against N, fine-tuned against from scratch, per family,
   the source at N = 0). `--record PATH` writes the record there too (no machine paths).

Each run is a chessjax workdir under WORK/runs (FAMILY_source, FAMILY_ftN, FAMILY_scratchN); the
data is built once under WORK/data. Rerunning the command resumes: an unfinished run continues from
its newest checkpoint, a finished one is not trained again, a scored one not scored again. Each run
trains on one core (`taskset`, one XLA thread); `--cores 0,1` runs two at a time. Wall and CPU time
of each segment go to the run's bench.json, as in `launch.cwm_mini`.
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

from chessjax import workdir as workdirs
from chessjax.files import write_json, write_text
from chessjax.world_model import strata
from launch import cpu_runs
from launch.cpu_runs import MASTERS, bench_record, quiet, segment
from launch.transfer_tables import figure, tables_markdown

REPO = Path(__file__).resolve().parents[1]
SPLITS = ("atomic", "chess")  # The test sets: random-uniform games of one seed under each rules.
METRICS = ("loss", "labelwise", "exact_state", "trajectory")


def parse_args(argv=None):
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--work", default=str(REPO / "runs" / "transfer"))
  ap.add_argument("--families", default="transformer,gated_deltanet")
  ap.add_argument("--sources", default="", help="FAMILY=WORKDIR,... (default: train them here)")
  ap.add_argument("--masters", default=str(MASTERS), help="master games, as launch.cwm_mini")
  ap.add_argument(
    "--chess-train", default="", help="a prepared chess dataset (train, validation) for sources"
  )
  ap.add_argument("--source-steps", type=int, default=3000)
  ap.add_argument("--batch-size", type=int, default=32)
  ap.add_argument("--max-len", type=int, default=256, help="steps per game, trained and scored")
  ap.add_argument("--test-games", type=int, default=1000)
  ap.add_argument("--test-seed", type=int, default=0)
  ap.add_argument("--train-seed", type=int, default=1, help="of the atomic training games")
  ap.add_argument("--train-games", default="256,1024,4096", help="the Ns, comma-separated")
  ap.add_argument("--lichess-atomic", default="", help="a PGN of atomic games to train on instead")
  ap.add_argument("--steps", type=int, default=1000, help="steps of each fine-tuned/scratch run")
  ap.add_argument("--seed", type=int, default=0, help="of every run (initialisation, data order)")
  ap.add_argument("--eval-every", type=int, default=250, help="sources' validation")
  ap.add_argument("--eval-batches", type=int, default=10)
  ap.add_argument("--checkpoint-every", type=int, default=250)
  ap.add_argument("--cores", default="1", help="one run at a time on each of these cores")
  ap.add_argument("--report-only", action="store_true", help="write the record from what exists")
  ap.add_argument("--record", default="", help="also write the record here (no machine paths)")
  args = ap.parse_args(argv)
  try:
    args.ns = sorted({int(n) for n in args.train_games.split(",") if n})
    args.family_list = [f for f in args.families.split(",") if f]
    args.source_dirs = dict(item.split("=", 1) for item in args.sources.split(",") if item)
  except ValueError:
    ap.error("--train-games is N,N,... and --sources FAMILY=WORKDIR,...")
  if not args.ns or min(args.ns) < 1 or not args.family_list:
    ap.error("--train-games needs Ns >= 1 and --families at least one family")
  unknown = sorted(set(args.source_dirs) - set(args.family_list))
  if unknown:
    ap.error(f"--sources names families not in --families: {unknown}")
  return args


# ------------------------------------------------------------------------------------------------
# Data


def prepare(args, work: Path) -> dict:
  """The datasets (each skipped when its manifest exists): the two test sets, the atomic training
  games and, when sources are trained here, the chess training games."""
  data = work / "data"
  data.mkdir(parents=True, exist_ok=True)
  log = data / "prepare.log"
  py = [sys.executable, "-m"]
  paths = {"atomic": data / "atomic_test", "chess": data / "chess_test"}
  for variant, path in paths.items():
    if not (path / "manifest.json").exists():
      print(f"data: {args.test_games} random-uniform {variant} games, seed {args.test_seed}")
      cmd = ["data_prep.random_uniform", "--games", str(args.test_games), "--seed"]
      cmd += [str(args.test_seed), "--variant", variant, "--out", str(path), "--quiet"]
      quiet(py + cmd + ["--workers", "1"], log)
  paths["atomic_train"] = data / "atomic_train"
  if not (paths["atomic_train"] / "manifest.json").exists():
    most = str(max(args.ns))
    if args.lichess_atomic:
      print(f"data: the first {most} atomic games of {args.lichess_atomic}")
      cmd = ["data_prep.process_pgn", "--pgn", args.lichess_atomic, "--variant", "atomic"]
      cmd += ["--split", "train", "--max-games", most]
    else:
      print(f"data: {most} random-uniform atomic training games, seed {args.train_seed}")
      cmd = ["data_prep.random_uniform", "--games", most, "--seed", str(args.train_seed)]
      cmd += ["--variant", "atomic", "--split", "train", "--quiet", "--workers", "1"]
    quiet(py + cmd + ["--out", str(paths["atomic_train"])], log)
  games = json.loads((paths["atomic_train"] / "manifest.json").read_text())["splits"]["train"]
  if games["games"] < max(args.ns):
    sys.exit(f"the atomic training set has {games['games']} games, fewer than N={max(args.ns)}")
  if any(f not in args.source_dirs for f in args.family_list):
    paths["chess_train"] = Path(args.chess_train) if args.chess_train else data / "chess_train"
    if not (paths["chess_train"] / "manifest.json").exists():
      masters = Path(args.masters)
      if not masters.is_dir():
        sys.exit(f"no master games at {masters}: give --chess-train DIR or --sources")
      print("data: master games parts 01-02 -> chess train/validation (as launch.cwm_mini)")
      quiet(cpu_runs.masters_train_command(masters, paths["chess_train"]), log)
  return paths


# ------------------------------------------------------------------------------------------------
# Runs


def run_dir(work: Path, family: str, kind: str, n: int | None = None) -> Path:
  """WORK/runs/FAMILY_source, FAMILY_ftN (fine-tuned) or FAMILY_scratchN."""
  return work / "runs" / (f"{family}_{kind}" if n is None else f"{family}_{kind}{n}")


def train_command(args, family: str, workdir: Path, data: Path, steps: int, extra=()) -> list:
  """The d128 recipe's command (`cpu_runs.d128_command`) with this sweep's seed, batch, length cut
  and checkpoints, then the flags of `extra`."""
  return cpu_runs.d128_command(
    family,
    workdir,
    data,
    seed=args.seed,
    batch_size=args.batch_size,
    max_len=args.max_len,
    steps=steps,
    checkpoint_every=args.checkpoint_every,
    extra=extra,
  )


def atomic_command(args, family: str, workdir: Path, data: dict, n: int, source=None) -> list:
  """A fine-tuned (from `source`) or from-scratch run on the first `n` atomic training games."""
  extra = [f"--config.data.max_train_games={n}", "--config.data.val_split=none"]
  if source is not None:
    extra.append(f"--config.init.workdir={source}")
  return train_command(args, family, workdir, data["atomic_train"], args.steps, extra=extra)


def source_command(args, family: str, workdir: Path, data: dict) -> list:
  extra = [f"--config.train.eval_every={args.eval_every}"]
  extra.append(f"--config.train.eval_batches={args.eval_batches}")
  return train_command(args, family, workdir, data["chess_train"], args.source_steps, extra=extra)


def eval_command(args, data: dict, workdir: Path) -> list[str]:
  return [
    sys.executable, "-m", "chessjax.world_model.evaluate", "--workdir", str(workdir),
    "--data", *(f"{s}={data[s]}:test" for s in SPLITS), "--max-games", str(args.test_games),
    "--boards", "0", "--max-len", str(args.max_len),
  ]  # fmt: skip


def evaluated(workdir: Path) -> bool:
  return cpu_runs.evaluated(workdir, SPLITS)


def copy_source(source: Path, workdir: Path) -> None:
  """The files of `source` that scoring and fine-tuning read (config, summary, the checkpoint
  an evaluation scores: best, else latest), copied once; `source` itself is not written."""
  if (workdir / workdirs.CONFIG).exists():
    return
  if not (source / workdirs.CONFIG).exists():
    sys.exit(f"--sources: {source} is not a training workdir (no config.json)")
  which = workdirs.default_checkpoint(source)
  sub = "best" if which == "best" else "checkpoints"
  tmp = workdir.with_name(workdir.name + ".tmp")
  shutil.rmtree(tmp, ignore_errors=True)
  tmp.mkdir(parents=True)
  shutil.copytree(source / sub, tmp / sub)
  for name in (workdirs.SUMMARY, workdirs.CONFIG):  # config.json last: the copy is complete.
    if (source / name).exists():
      shutil.copy2(source / name, tmp / name)
  if workdir.exists():
    shutil.rmtree(workdir)
  tmp.rename(workdir)


def do_run(args, job: tuple, data: dict, work: Path, core: int) -> None:
  """Trains (unless finished) and scores (unless scored) one run: ("source", family) or
  (kind, family, n) with kind "ft" or "scratch"."""
  kind, family, *n = job
  workdir = run_dir(work, family, kind, *n)
  name = workdir.name
  if kind == "source" and family in args.source_dirs:
    copy_source(Path(args.source_dirs[family]), workdir)
  else:
    workdir.mkdir(parents=True, exist_ok=True)
    if kind == "source":
      steps, cmd = args.source_steps, source_command(args, family, workdir, data)
    else:
      source = run_dir(work, family, "source") if kind == "ft" else None
      steps, cmd = args.steps, atomic_command(args, family, workdir, data, n[0], source)
    if not workdirs.finished(workdir, steps):
      print(f"[train] {name} on core {core}", flush=True)
      if segment(workdir, "train", cmd, core):
        print(f"[fail] {name}: training failed, see {workdir / 'train.log'}", flush=True)
        return
  if not evaluated(workdir):
    print(f"[eval] {name} on core {core}", flush=True)
    if segment(workdir, "eval", eval_command(args, data, workdir), core):
      print(f"[fail] {name}: evaluation failed, see {workdir / 'eval.log'}", flush=True)
      return
  print(f"[done] {name}", flush=True)


def plan(args) -> list[list[tuple]]:
  """The jobs in two waves: the sources, then every fine-tuned and from-scratch run (smallest N
  first, so that a partial sweep already has a complete curve for fewer Ns)."""
  sources = [("source", f) for f in args.family_list]
  runs = [(k, f, n) for n in args.ns for f in args.family_list for k in ("ft", "scratch")]
  return [sources, runs]


def _done(args, work: Path, job: tuple) -> bool:
  kind, family, *n = job
  workdir = run_dir(work, family, kind, *n)
  return evaluated(workdir) and (kind == "source" or workdirs.finished(workdir, args.steps))


def run_all(args, work: Path, data: dict) -> None:
  for wave in plan(args):
    todo = [job for job in wave if not _done(args, work, job)]
    print(f"{len(todo)} runs to do of {len(wave)}", flush=True)
    cpu_runs.on_cores(args.cores, todo, lambda job, core: do_run(args, job, data, work, core))


# ------------------------------------------------------------------------------------------------
# Record, tables, figure


def scores(workdir: Path) -> dict | None:
  """A scored run's metrics per test set (and the atomic set's own strata), its checkpoint's step,
  parameters and time; None when not scored yet."""
  if not evaluated(workdir):
    return None
  out = {}
  for split in SPLITS:
    r = json.loads((workdir / workdirs.EVAL_DIR / f"{split}.json").read_text())
    out[split] = {m: r[m] for m in METRICS}
    out[split]["games"], out[split]["steps"] = r["dataset"]["games"], r["steps"]
    out[split]["checkpoint_step"] = r["checkpoint_step"]
    out[split]["pieces"] = r["groups"]["pieces"]  # The 64 squares' accuracy over every step.
    if split == "atomic":
      out[split]["strata"] = {
        s: {**cpu_runs.stratum(r["strata"][s]), "pieces": r["strata"][s]["groups"]["pieces"]}
        for s in strata.ATOMIC_STRATA
      }
  summary = workdirs.read_summary(workdir) or {}
  out["params"], out["steps"] = summary.get("params"), summary.get("steps")
  for phase in ("train", "eval"):
    segs = [s for s in bench_record(workdir)["segments"] if s["phase"] == phase and "cpu_s" in s]
    out[f"{phase}_cpu_s"] = sum(s["cpu_s"] for s in segs) if segs else None
  return out


def collect(args, work: Path) -> dict:
  families = {}
  for family in args.family_list:
    source = run_dir(work, family, "source")
    row = {
      "source": {
        "workdir": Path(args.source_dirs[family]).name
        if family in args.source_dirs
        else str(source.relative_to(work)),
        **(scores(source) or {}),
      },
      "runs": {},
    }
    for n in args.ns:
      row["runs"][str(n)] = {k: scores(run_dir(work, family, k, n)) for k in ("ft", "scratch")}
    families[family] = row
  return families


def protocol(args) -> dict:
  keep = ("families", "source_steps", "batch_size", "max_len", "test_games", "test_seed")
  keep += ("train_seed", "train_games", "lichess_atomic", "steps", "seed", "checkpoint_every")
  out = {k: getattr(args, k) for k in keep}
  out["sources"] = {f: Path(p).name for f, p in args.source_dirs.items()}
  out["lichess_atomic"] = Path(args.lichess_atomic).name if args.lichess_atomic else ""
  return out


def report(args, work: Path) -> dict:
  record = {"args": protocol(args), "families": collect(args, work)}
  write_json(work / "transfer.json", record)
  write_text(work / "transfer.md", tables_markdown(record))
  figure(record, work / "transfer.png")
  print(f"wrote {work / 'transfer.md'}, transfer.json, transfer.png")
  if args.record:
    write_json(Path(args.record), record)
    print(f"wrote {args.record}")
  return record


def main(argv=None) -> None:
  args = parse_args(argv)
  work = Path(args.work)
  work.mkdir(parents=True, exist_ok=True)
  if not args.report_only:
    data = prepare(args, work)
    run_all(args, work, data)
  report(args, work)


if __name__ == "__main__":
  main()
