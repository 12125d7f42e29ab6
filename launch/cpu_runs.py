"""What the CPU-scale world-model commands (`launch.cwm_mini`, `launch.transfer`) share: the d128
CPU-scale recipe (the master games, the family's Table 7 numbers at d128, the warmup scaled) and
what a record keeps of a stratum. Their tasks run through `launch.local` (here, on pinned cores,
timed into bench.json) or `launch.slurm_jobs`.

* `master_part`, `masters_train_command`: the master games and their train/validation split;
* `warmup`, `d128_command`: the `chessjax.main` command of one d128 run;
* `stratum`: what a record keeps of a stratum.
"""

import sys
from pathlib import Path

from chessjax.spec import DataSpec
from chessjax.world_model import grid

REPO = Path(__file__).resolve().parents[1]
MASTERS = REPO.parent / "shared" / "data" / "masters"


# ------------------------------------------------------------------------------------------------
# Data


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
# Scores


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
