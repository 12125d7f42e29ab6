"""What the CPU-scale world-model commands (`launch.cwm_mini`, `launch.transfer`) share: runs as
subprocesses on one pinned core with their wall and CPU time in the run's bench.json, and the d128
CPU-scale recipe (the master games, the family's Table 7 numbers at d128, the warmup scaled).

* `quiet`: a data-preparation command, its output appended to a log;
* `master_part`, `masters_train_command`: the master games and their train/validation split;
* `warmup`, `d128_command`: the `chessjax.main` command of one d128 run;
* `segment`, `bench_record`: one phase of a run on one core, timed into bench.json
  ({"segments": [{phase, core, start, end, wall_s, cpu_s, returncode}, ...]});
* `on_cores`: runs one at a time on each of several cores;
* `evaluated`, `stratum`: whether a run is scored, and what a record keeps of a stratum.
"""

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from chessjax.files import write_json
from chessjax.machine import pinned_env
from chessjax.spec import DataSpec
from chessjax.workdir import EVAL_DIR
from chessjax.world_model import grid

REPO = Path(__file__).resolve().parents[1]
MASTERS = REPO.parent / "shared" / "data" / "masters"


# ------------------------------------------------------------------------------------------------
# Data


def quiet(cmd: list[str], log: Path) -> None:
  """Runs `cmd` from the repository, its output appended to `log`; raises if it fails."""
  with open(log, "a") as f:
    subprocess.run(cmd, cwd=REPO, check=True, stdout=f, stderr=subprocess.STDOUT)


def master_part(masters: Path, n: int) -> str:
  """Part `n` of the master games (PGN Mentor's "Players" collections, `../shared/data`)."""
  return str(Path(masters) / f"pgnmentor_players_part{n:02d}.pgn.bz2")


def masters_train_command(masters: Path, out: Path, python: str = sys.executable) -> list[str]:
  """Parts 01 and 02 of the master games -> train and validation (1% of the games) at `out`."""
  parts = [master_part(masters, 1), master_part(masters, 2)]
  return [
    python, "-m", "data_prep.process_pgn", "--pgn", *parts, "--out", str(out),
    "--val-fraction", "0.01", "--workers", "2",
  ]  # fmt: skip


# ------------------------------------------------------------------------------------------------
# The d128 recipe


def warmup(family: str, steps: int) -> int:
  """Table 7's d128 warmup of the family, scaled from the paper's four epochs to `steps`."""
  paper = grid.recipe(family, "d128").warmup_steps
  return max(1, round(paper * steps / grid.STEPS_4_EPOCHS))


def d128_command(
  family: str,
  workdir: Path,
  train,
  *,
  seed: int,
  batch_size: int,
  max_len: int,
  steps: int,
  checkpoint_every: int = 250,
  validation: tuple[int, int] | None = None,
  extra=(),
  python: str = sys.executable,
) -> list[str]:
  """The `chessjax.main` command of a d128 run of `family` on the dataset `train`: the family's
  Table 7 hyperparameters (configs/cwm.py) with the warmup scaled to `steps`, games cut at
  `max_len`, validation every `validation[0]` steps on `validation[1]` batches when given, a log
  line and a checkpoint (one kept) every `checkpoint_every` steps, then the flags of `extra`."""
  buckets = DataSpec(max_len=max_len).buckets_to_max_len()
  c = "--config."
  every = [] if validation is None else [f"{c}train.eval_every={validation[0]}"]
  every += [] if validation is None else [f"{c}train.eval_batches={validation[1]}"]
  return [
    python, "-m", "chessjax.main", f"--config=configs/cwm.py:family={family},size=d128",
    f"--workdir={workdir}", f"{c}data.train={train}", f"{c}seed={seed}",
    f"{c}data.batch_size={batch_size}", f"{c}data.max_len={max_len}",
    f"{c}data.bucket_lengths={buckets}", f"{c}optim.warmup_steps={warmup(family, steps)}",
    f"{c}train.steps={steps}", *every, f"{c}train.checkpoint_every={checkpoint_every}",
    f"{c}train.log_every={checkpoint_every}", f"{c}train.keep_checkpoints=1", *extra,
  ]  # fmt: skip


# ------------------------------------------------------------------------------------------------
# Runs on pinned cores


def bench_record(workdir: Path) -> dict:
  """The run's bench.json: {"segments": [...]}, empty when there is none yet."""
  path = workdir / "bench.json"
  return json.loads(path.read_text()) if path.exists() else {"segments": []}


def _close_killed_segment(workdir: Path, record: dict) -> None:
  """A segment that started but never ended (the session stopped): wall time up to the last write
  of its log, CPU time unknown."""
  for s in [s for s in record["segments"] if "end" not in s]:
    log = workdir / f"{s['phase']}.log"
    s["end"] = log.stat().st_mtime if log.exists() else s["start"]
    s["wall_s"], s["cpu_s"], s["killed"] = s["end"] - s["start"], None, True


def segment(workdir: Path, phase: str, cmd: list[str], core: int, *, close_killed=False) -> int:
  """Runs one phase of a run on `core` (`taskset`, one XLA thread), appending its output to
  PHASE.log and its wall and CPU time to bench.json; returns its exit code. With `close_killed`,
  a segment an earlier session left open is first closed (`_close_killed_segment`); without, it
  stays open (no end, no times)."""
  record = bench_record(workdir)
  if close_killed:
    _close_killed_segment(workdir, record)
  entry = {"phase": phase, "core": core, "start": time.time()}
  record["segments"].append(entry)
  write_json(workdir / "bench.json", record)
  prefix, env = pinned_env(core)
  with open(workdir / f"{phase}.log", "a") as log:
    proc = subprocess.Popen(prefix + cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(proc.pid, 0)
  entry["end"] = time.time()
  entry["wall_s"], entry["cpu_s"] = entry["end"] - entry["start"], usage.ru_utime + usage.ru_stime
  entry["returncode"] = os.waitstatus_to_exitcode(status)
  write_json(workdir / "bench.json", record)
  return entry["returncode"]


def on_cores(cores: str, todo: list, run: Callable[[object, int], None]) -> None:
  """`run(item, core)` for every item of `todo`, in order, one at a time on each core of `cores`
  ("0,1": two at a time)."""
  todo, lock = list(todo), threading.Lock()

  def lane(core: int) -> None:
    while True:
      with lock:
        if not todo:
          return
        item = todo.pop(0)
      run(item, core)

  threads = [threading.Thread(target=lane, args=(int(c),)) for c in cores.split(",")]
  for t in threads:
    t.start()
  for t in threads:
    t.join()


# ------------------------------------------------------------------------------------------------
# Scores


def evaluated(workdir: Path, splits) -> bool:
  """Whether the run has been scored on every split (`chessjax.world_model.evaluate`)."""
  return all((workdir / EVAL_DIR / f"{s}.json").exists() for s in splits)


def stratum(v: dict) -> dict:
  """A stratum's steps and ExactState, those of its ply-matched other steps, and its transition
  error beside theirs ({steps, error, matched: {steps, error}}), when the evaluation has them
  (`chessjax.world_model.strata`)."""
  out = {"steps": v["steps"], "exact_state": v["exact_state"]}
  if "matched" in v:
    out["matched"] = {k: v["matched"][k] for k in ("steps", "exact_state")}
  if "transition_error" in v:
    t = v["transition_error"]
    out["transition_error"] = {
      "steps": t["steps"],
      "error": t["error"],
      "matched": {k: t["matched"][k] for k in ("steps", "error")},
    }
  return out
