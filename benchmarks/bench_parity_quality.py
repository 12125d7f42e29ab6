"""Quality parity and time to quality against the released training loop (Walker & Lyons'
Chess-World-Model code, run as it is from a checkout).

    python -m benchmarks.bench_parity_quality --ref /path/to/Chess-World-Model \\
        --ref-python /path/to/venv/bin/python [--families transformer,slice] [--seeds 0,1,2] \\
        [--epochs 4] [--batch-size 16] [--max-len 256] [--train-games 4480] \\
        [--heldout-games 500] [--eval-every 140] [--cores 0,1] [--work DIR]

Games: the bundled 5,000-game lichess sample, cut by position in the file: the first
`--train-games` games train both sides, the last `--heldout-games` are the held-out split every
model is scored on. The released side gets the training games through its own `data/process.py`
(JSONL, `--val_fraction 0`: no game held back), chessjax through `data_prep.process_pgn --split`.

Training: every (family, seed) is trained by both loops for the same number of steps, the
released loop's `--epochs` (whole batches of its games and a short last one; chessjax's length
buckets make its epochs a few steps longer, so it sees slightly less than `--epochs` epochs), d128
with the paper's final hyperparameters for the cell (`chessjax.world_model.grid.FINAL`: lr, beta2,
weight decay, cosine to the floor) and the paper's warmup scaled to the run (warmup / 310,944 of
the steps), batch `--batch-size`, games cut at `--max-len` steps, dropout 0.1 (both defaults), no
validation during training. The released loop runs pinned to the first of `--cores`, chessjax to
the second, at the same time, one thread each (as `bench_vs_reference_train`), so machine load
hits both.
Both save a checkpoint every `--eval-every` steps; both log every `--eval-every` steps, with
the wall clock (CLOCK_MONOTONIC, comparable across processes) and the process CPU time read at
that step by the same glue as `bench_vs_reference_train`.

Scoring: every checkpoint of both sides is evaluated by `chessjax.world_model.evaluate` on the
held-out split (the released weights converted to chessjax parameters by the name table of
`tests/data/make_golden_logits.py`, whose logits match to 2.4e-6). The quality table gives mean
and spread (min-max) over seeds of the final checkpoint's loss, Labelwise and ExactState per side.
The time table gives, per side, the wall and CPU seconds from process start (start-up, data
loading and compilation included) until the held-out loss first reaches the highest final loss
of the released runs (linear interpolation between checkpoints), mean over seeds.

`--sides` names the side each lane (core) trains; two lanes of one side share its runs. Besides
`released` and `chessjax` there is `chessjax-file-order`: chessjax with the released loader's
batches (stored order every epoch, `data.shuffle=False`, consecutive games per batch, one length
bucket), to tell the loops apart from the data order; it is left out of the time table (one
length bucket pads every batch to `--max-len`, so its times measure padding, not the loop).

Runs are resumable: a finished run (its `run.json`) is not trained again, and scores are cached
in `scores.json`, so a session cut short continues where it stopped with the same `--work`.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks.reference import (
  CJ_GLUE,
  CJ_GLUE_LINE,
  REF_GLUE,
  REF_LINE,
  REPO,
  add_reference_args,
  split_pgn,
)
from chessjax.machine import pinned_env

# Converts every released checkpoint of a run to an .npz of its state dict (float32).
REF_EXPORT = r"""
import sys, glob, os, numpy as np, torch
for path in sorted(glob.glob(os.path.join(sys.argv[1], "ckpt_step_*.pt"))):
    out = path[:-3] + ".npz"
    if os.path.exists(out):
        continue
    sd = torch.load(path, map_location="cpu", weights_only=False)["model"]
    tmp = out + ".tmp.npz"
    np.savez(tmp, **{k: v.float().numpy() for k, v in sd.items()})
    os.replace(tmp, out)
"""


def prepare(args, work: Path) -> dict:
  train_pgn, heldout_pgn = split_pgn(args.train_games, args.heldout_games, work)
  data = {"ref": work / "ref_data", "train": work / "cj_train", "heldout": work / "cj_heldout"}
  if not any(data["ref"].glob("chess_*.jsonl")):
    data["ref"].mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CHESS_WORLD_MODEL_ID_KEY="bench-parity-quality")  # its id HMAC key
    subprocess.run(
      [args.ref_prep_python, "-m", "data.process", "--pgn", str(train_pgn),
       "--out", f"{data['ref']}/"],
      cwd=args.ref, env=env, check=True, capture_output=True,
    )  # fmt: skip
  for name, pgn, split in (("train", train_pgn, "train"), ("heldout", heldout_pgn, "test")):
    if not (data[name] / "manifest.json").exists():
      subprocess.run(
        [sys.executable, "-m", "data_prep.process_pgn", "--pgn", str(pgn), "--out",
         str(data[name]), "--split", split, "--workers", "1"],
        cwd=REPO, check=True, capture_output=True,
      )  # fmt: skip
  # One game a line (the first line of a shard also holds the spec).
  ref_games = sum(1 for p in data["ref"].glob("chess_*.jsonl") for line in p.open() if line.strip())
  games = lambda d, s: json.loads((d / "manifest.json").read_text())["splits"][s]["games"]  # noqa: E731
  return {
    **data,
    "games": {
      "released train": ref_games,
      "chessjax train": games(data["train"], "train"),
      "held-out": games(data["heldout"], "test"),
    },
  }


def hyper(family: str, total_steps: int) -> dict:
  from chessjax.world_model import grid

  lr, warmup, b2, wd, floor = grid.FINAL[family]["d128"]
  warmup = max(1, round(warmup * total_steps / grid.STEPS_4_EPOCHS))
  return {"lr": lr, "warmup": warmup, "b2": b2, "wd": wd, "floor": floor}


def launch(cmd, cwd, env, log: Path) -> tuple[float, float, float, int]:
  """Runs `cmd` to completion: (start perf_counter, wall s, CPU s of the child, return code)."""
  with log.open("w") as out:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
  proc.returncode = os.waitstatus_to_exitcode(status)
  return start, wall, usage.ru_utime + usage.ru_stime, proc.returncode


def train_ref(args, family, seed, data, run_dir: Path, core: int) -> dict:
  h = hyper(family, args.epochs * args.steps_per_epoch)
  total = args.epochs * args.steps_per_epoch
  pin, env = pinned_env(core)
  cmd = pin + [args.ref_python, "-c", REF_GLUE,
    "--experiment_config", f"{family}_d128_defaults_simple", "--data_path", str(data["ref"]),
    "--batch_size", str(args.batch_size), "--max_steps", str(args.max_len),
    "--epochs", str(args.epochs), "--seed", str(seed), "--cpu",
    "--lr", str(h["lr"]), "--beta2", str(h["b2"]), "--weight_decay", str(h["wd"]),
    "--lr_scheduler", "cosine", "--lr_warmup_steps", str(h["warmup"]),
    "--lr_decay_steps", str(total), "--lr_min_ratio", str(h["floor"]),
    "--val_fraction", "0", "--val_every", "0", "--log_every", str(args.eval_every),
    "--save_every", str(args.eval_every), "--ckpt_path", str(run_dir / "ckpt"),
    "--wandb_mode", "disabled",
  ]  # fmt: skip
  start, wall, cpu, rc = launch(cmd, args.ref, env, run_dir / "log.txt")
  text = (run_dir / "log.txt").read_text()
  if rc:
    raise RuntimeError(f"released trainer failed ({rc}):\n{text[-3000:]}")
  marks = {int(m[1]): (float(m[3]) - start, float(m[4])) for m in REF_LINE.finditer(text)}
  return {"wall_s": wall, "cpu_s": cpu, "marks": marks}


# chessjax's own batching (shuffled each epoch, length buckets), or the released loader's: the
# stored order every epoch, consecutive games in each batch.
CJ_ORDERS = {
  "chessjax": [],
  "chessjax-file-order": ["--config.data.shuffle=False", "--config.data.window_batches=1"],
}
SIDES = ("released", *CJ_ORDERS)


def train_ours(args, family, seed, data, run_dir: Path, core: int, side: str) -> dict:
  h = hyper(family, args.epochs * args.steps_per_epoch)
  pin, env = pinned_env(core)
  buckets = sorted({b for b in (64, 128, 192) if b < args.max_len} | {args.max_len})
  if side == "chessjax-file-order":
    buckets = [args.max_len]
  cmd = pin + [sys.executable, "-c", CJ_GLUE,
    f"--config={REPO}/configs/cwm.py:family={family},size=d128", f"--workdir={run_dir / 'work'}",
    f"--config.seed={seed}", f"--config.data.train={data['train']}",
    f"--config.data.batch_size={args.batch_size}", f"--config.data.max_len={args.max_len}",
    f"--config.data.bucket_lengths=({','.join(map(str, buckets))})",
    f"--config.train.steps={args.epochs * args.steps_per_epoch}",
    f"--config.optim.warmup_steps={h['warmup']}",
    f"--config.train.log_every={args.eval_every}",
    f"--config.train.checkpoint_every={args.eval_every}", "--config.train.keep_checkpoints=1000",
    *CJ_ORDERS[side],
  ]  # fmt: skip
  start, wall, cpu, rc = launch(cmd, REPO, env, run_dir / "log.txt")
  text = (run_dir / "log.txt").read_text()
  if rc:
    raise RuntimeError(f"chessjax trainer failed ({rc}):\n{text[-3000:]}")
  marks = {
    int(m[1]): (float(m[3]) - start, float(m[4]))
    for m in map(CJ_GLUE_LINE.match, text.splitlines())
    if m
  }
  return {"wall_s": wall, "cpu_s": cpu, "marks": marks}


def run_lane(args, side, data, work, core, errors) -> None:
  """Trains every (family, seed) of one side, in order, skipping finished runs."""
  try:
    for seed in args.seeds:
      for family in args.families:
        run_dir = work / "runs" / f"{side}_{family}_s{seed}"
        try:
          run_dir.mkdir(parents=True)  # Claims the run (a lane of the same side may share it).
        except FileExistsError:
          continue
        if side == "released":
          result = train_ref(args, family, seed, data, run_dir, core)
        else:
          result = train_ours(args, family, seed, data, run_dir, core, side)
        result.update(side=side, family=family, seed=seed, load=os.getloadavg()[0])
        (run_dir / "run.json").write_text(json.dumps(result))
        print(
          f"{side:8s} {family:11s} seed {seed}: wall {result['wall_s']:.0f} s, "
          f"CPU {result['cpu_s']:.0f} s, {max(result['marks'], default=0)} steps logged",
          flush=True,
        )
  except Exception as e:  # noqa: BLE001 - reported by the main thread
    errors.append(f"{side}: {e}")


def released_params(npz_path: Path, family: str, like):
  """A released state dict as a chessjax parameter tree shaped as `like` (every chessjax
  parameter set exactly once, every released parameter used)."""
  import jax

  sys.path.insert(0, str(REPO / "tests" / "data"))
  import make_step_parity as parity

  flat = dict(np.load(npz_path))
  out = {}
  for name, value in flat.items():
    try:
      path = parity.chessjax_path(parity._torch_to_chessjax(family, name))
    except (KeyError, AttributeError):
      continue  # a buffer, not a parameter
    out[path] = value.T if path.endswith(".kernel") else value

  def value(keypath, leaf):
    path = ".".join(map(str, _keys(keypath)))
    if path not in out:
      raise KeyError(f"{npz_path}: no released value for chessjax parameter {path}")
    if tuple(out[path].shape) != tuple(leaf.shape):
      raise ValueError(f"{path}: released {out[path].shape}, chessjax {leaf.shape}")
    return jax.numpy.asarray(out.pop(path), leaf.dtype)

  params = jax.tree_util.tree_map_with_path(value, like)
  if out:
    raise KeyError(f"{npz_path}: released parameters with no chessjax counterpart: {sorted(out)}")
  return params


def score_all(args, data, work: Path) -> dict:
  """Held-out metrics of every checkpoint of every finished run (cached in scores.json)."""
  import jax

  from chessjax import workdir
  from chessjax.world_model.evaluate import evaluate_split

  # Every checkpoint is scored through the same few programs: compile them once.
  jax.config.update("jax_compilation_cache_dir", str(work / "jax_cache"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
  cache_path = work / "scores.json"
  scores = json.loads(cache_path.read_text()) if cache_path.exists() else {}
  template = {}  # family -> a restored chessjax run, whose params released weights replace

  def score(key, restored):
    if key not in scores:
      r = evaluate_split(restored, data["heldout"], "test", batch_size=64)
      scores[key] = {k: r[k] for k in ("loss", "labelwise", "exact_state", "steps", "games")}
      tmp = cache_path.with_suffix(".tmp")
      tmp.write_text(json.dumps(scores))
      os.replace(tmp, cache_path)
    return scores[key]

  for run_dir in sorted((work / "runs").glob("*/run.json")):
    run = json.loads(run_dir.read_text())
    run_dir = run_dir.parent
    family, side = run["family"], run["side"]
    run["scores"] = {}
    if side != "released":
      from chessjax.checkpointing import Checkpointer

      ckpt = Checkpointer(run_dir / "work")
      steps = ckpt.steps()
      ckpt.close()
      for step in steps:
        key = f"{run_dir.name}/{step}"
        if key not in scores:
          restored = workdir.restore(run_dir / "work", step=step)
          template.setdefault(family, restored)
        run["scores"][step] = score(key, None if key in scores else restored)
    else:
      subprocess.run([args.ref_python, "-c", REF_EXPORT, str(run_dir / "ckpt")], check=True)
      for npz in sorted((run_dir / "ckpt").glob("ckpt_step_*.npz")):
        step = int(npz.stem.split("_")[-1])
        key = f"{run_dir.name}/{step}"
        if key not in scores:
          if family not in template:
            template[family] = _fresh_run(family, data, args)
          base = template[family]
          params = released_params(npz, family, base.state["params"])
          restored = base.__class__(
            config=base.config, fns=base.fns, state={**base.state, "params": params}, step=step
          )
        run["scores"][step] = score(key, None if key in scores else restored)
    (run_dir / "scored.json").write_text(json.dumps(run))
  return scores


def _keys(keypath) -> tuple:
  keys = tuple(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k))) for k in keypath)
  return keys[:-1] if keys and keys[-1] == "value" else keys


def _fresh_run(family, data, args):
  """A chessjax Restored of the d128 cell with its initial parameters (a template)."""
  from chessjax import workdir
  from configs import cwm

  config = cwm.get_config(f"family={family},size=d128")
  config.data.train = str(data["train"])
  config.data.max_len = args.max_len
  return workdir.initial(config)


def time_to(marks: dict, scores: dict, target: float) -> tuple[float, float] | None:
  """(wall s, CPU s) at which the held-out loss first reaches `target`, interpolating linearly
  between checkpoints that have a log mark; None if it never does."""
  points = [(0, None, None, None)] + [
    (s, *marks[s], scores[s]["loss"]) for s in sorted(scores) if s in marks
  ]
  for (_, w0, c0, l0), (_, w1, c1, l1) in zip(points, points[1:], strict=False):
    if l1 <= target:
      if l0 is None or l0 == l1:
        return w1, c1
      f = (l0 - target) / (l0 - l1)
      return w0 + f * (w1 - w0), c0 + f * (c1 - c0)
  return None


def summarise(args, work: Path, prep: dict) -> None:
  runs = [json.loads(p.read_text()) for p in sorted((work / "runs").glob("*/scored.json"))]
  for r in runs:
    r["scores"] = {int(k): v for k, v in r["scores"].items()}
    r["marks"] = {int(k): tuple(v) for k, v in r["marks"].items()}
    # The last checkpoint is written at the end of the run, which may not be a logged step.
    r["marks"].setdefault(max(r["scores"]), (r["wall_s"], r["cpu_s"]))

  def spread(values, fmt):
    mean = statistics.mean(values)
    return f"{fmt(mean)} ({fmt(min(values))}-{fmt(max(values))})"

  pct = lambda x: f"{100 * x:.2f}"  # noqa: E731
  loss = lambda x: f"{x:.4f}"  # noqa: E731
  print(
    f"\nGames: {prep['games']}. d128, {args.epochs} epochs, batch {args.batch_size}, max length "
    f"{args.max_len}, seeds {args.seeds}; held-out metrics by chessjax of the final checkpoint, "
    "mean (min-max) over seeds.\n"
  )
  print("| family | side | loss | Labelwise % | ExactState % | steps | seeds |")
  print("|---|---|---:|---:|---:|---:|---:|")
  finals = {}
  for family in args.families:
    for side in SIDES:
      rs = [r for r in runs if r["family"] == family and r["side"] == side]
      if not rs:
        continue
      last = [r["scores"][max(r["scores"])] for r in rs]
      finals[family, side] = last
      print(
        f"| {family} | {side} | {spread([x['loss'] for x in last], loss)} | "
        f"{spread([x['labelwise'] for x in last], pct)} | "
        f"{spread([x['exact_state'] for x in last], pct)} | "
        f"{max(rs[0]['scores'])} | {len(rs)} |"
      )
  print(
    "\nTime to the highest final held-out loss of the released runs (a loss every released run "
    "reaches), from process start (start-up, data loading, compilation included), one core each, "
    "side by side; mean over seeds (min-max); whole-run wall and CPU seconds beside.\n"
  )
  print(
    "| family | target loss | side | wall s to target | CPU s to target | run wall s | "
    "run CPU s | wall ratio released/chessjax |"
  )
  print("|---|---:|---|---:|---:|---:|---:|---:|")
  for family in args.families:
    if (family, "released") not in finals:
      continue
    # The loss every released run reaches: the worst of their final losses.
    target = max(x["loss"] for x in finals[family, "released"])
    walls = {}
    for side in ("released", "chessjax"):  # The file-order control is for quality only.
      rs = [r for r in runs if r["family"] == family and r["side"] == side]
      if not rs:
        continue
      reached = [time_to(r["marks"], r["scores"], target) for r in rs]
      hit = [t for t in reached if t is not None]
      walls[side] = statistics.mean(t[0] for t in hit) if hit else float("nan")
      f0 = lambda x: f"{x:.0f}"  # noqa: E731
      to_wall = spread([t[0] for t in hit], f0) if hit else "not reached"
      to_cpu = spread([t[1] for t in hit], f0) if hit else "not reached"
      missed = f" ({len(rs) - len(hit)} of {len(rs)} not reached)" if len(hit) < len(rs) else ""
      ratio = f"{walls['released'] / walls[side]:.2f}x" if side != "released" else ""
      print(
        f"| {family} | {target:.4f} | {side} | {to_wall}{missed} | {to_cpu} | "
        f"{spread([r['wall_s'] for r in rs], f0)} | {spread([r['cpu_s'] for r in rs], f0)} | "
        f"{ratio} |"
      )


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  add_reference_args(ap)
  ap.add_argument("--families", default="transformer,slice")
  ap.add_argument("--seeds", default="0,1,2")
  ap.add_argument("--epochs", type=int, default=4)
  ap.add_argument("--batch-size", type=int, default=16)
  ap.add_argument("--max-len", type=int, default=256)
  ap.add_argument("--train-games", type=int, default=4480)
  ap.add_argument("--heldout-games", type=int, default=500)
  ap.add_argument("--eval-every", type=int, default=140, help="checkpoint and log interval")
  ap.add_argument("--sides", default="released,chessjax", help="the side of each lane")
  ap.add_argument("--cores", default="0,1", help="the core of each lane (one per side)")
  ap.add_argument("--work", required=True, help="working directory (resumable)")
  ap.add_argument("--score-only", action="store_true", help="score and print finished runs")
  args = ap.parse_args(argv)
  args.ref = str(Path(args.ref).resolve())
  args.families = args.families.split(",")
  args.seeds = [int(s) for s in args.seeds.split(",")]
  work = Path(args.work).resolve()
  work.mkdir(parents=True, exist_ok=True)
  prep = prepare(args, work)
  # Both sides take the released loop's steps: its epochs of whole batches plus a short last one.
  args.steps_per_epoch = -(-prep["games"]["released train"] // args.batch_size)
  print(f"games: {prep['games']}, {args.steps_per_epoch} steps an epoch", flush=True)
  if not args.score_only:
    cores = [int(c) for c in args.cores.split(",")]
    sides = args.sides.split(",")
    if len(sides) != len(cores) or set(sides) - {"released", *CJ_ORDERS}:
      sys.exit(f"--sides {args.sides}: one of released, {', '.join(CJ_ORDERS)} per --cores entry")
    for run_dir in (work / "runs").glob("*"):
      if not (run_dir / "run.json").exists():
        shutil.rmtree(run_dir)  # Cut short in an earlier session: trained again.
    errors: list[str] = []
    lanes = [
      threading.Thread(target=run_lane, args=(args, side, prep, work, core, errors))
      for side, core in zip(sides, cores, strict=True)
    ]
    for lane in lanes:
      lane.start()
    for lane in lanes:
      lane.join()
    if errors:
      sys.exit("\n".join(errors))
  score_all(args, prep, work)
  summarise(args, work, prep)
  return 0


if __name__ == "__main__":
  sys.exit(main())
