"""The paper's model selection over training workdirs (Walker & Lyons, appendix C).

Stage 1 ranks the one-epoch runs of each family and size cell by validation loss. Stage 2 retrains
the winner for four epochs at two cosine floors and keeps the floor with the lower final validation
loss. A configuration whose stage-2 run is unstable (aborted by the non-finite guard, or rolled back
by it to a snapshot) is replaced by the next best stage-1 configuration: this is how the paper came
to retrain the second-best SLiCE d512 configuration (appendix C, "the first-stage validation-loss
winner was unstable during the full four epoch run").

`read_run(workdir)` turns what `chessjax.train` writes (`config.json`, the summary) into a
`RunRecord`; `select_cell` applies the rule to one cell and says why at every step. The sweep
(`launch.sweep`) and the report (`chessjax.world_model.report`) share it.
"""

import dataclasses
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from chessjax.spec import TrainSpec
from chessjax.workdir import read_config, read_summary

Hyper = tuple[
  float, int, float, float
]  # (lr, warmup, b2, weight decay): one stage-1 configuration.


@dataclasses.dataclass(frozen=True)
class RunRecord:
  """One training run as the selection and the report see it."""

  workdir: str
  family: str
  size: str
  stage: int  # 1: constant rate after warmup (the one-epoch sweep); 2: cosine decay.
  lr: float
  warmup: int
  b2: float
  wd: float
  floor: float | None  # Cosine floor as a fraction of lr; None in stage 1.
  steps: int  # Steps done (0 without a summary).
  total_steps: int
  has_summary: bool
  aborted: bool = False
  stopped_early: bool = False
  bad_batches: int = 0
  rollbacks: int = 0
  params: int | None = None
  validation: dict = dataclasses.field(default_factory=dict, compare=False)

  @property
  def hyper(self) -> Hyper:
    return (self.lr, self.warmup, self.b2, self.wd)

  @property
  def cell(self) -> tuple[str, str]:
    return (self.family, self.size)

  @property
  def finished(self) -> bool:
    """Trained to its end (its total steps, or stopped early) and not aborted: of the runs a rerun
    would not train further (`chessjax.workdir.finished`), those that ended well."""
    done = self.steps >= self.total_steps or self.stopped_early
    return self.has_summary and not self.aborted and done

  @property
  def val_loss(self) -> float:
    loss = self.validation.get("loss")
    return float(loss) if loss is not None else math.nan

  def unstable(self) -> str | None:
    """Why the non-finite guard makes this run unstable (aborted, rolled back), or None."""
    if self.aborted:
      return "aborted by the non-finite guard"
    if self.rollbacks > 0:
      return f"rolled back {self.rollbacks} time(s) by the non-finite guard"
    return None

  def health(self) -> str:
    if self.aborted:
      return "aborted"
    if not self.has_summary:
      return "no summary (running or crashed)"
    if not self.finished:
      return f"unfinished ({self.steps}/{self.total_steps} steps)"
    return "finished"


def read_run(workdir) -> RunRecord:
  """The record of a training workdir (needs `config.json`; its summary if written).

  Raises OSError/ValueError/KeyError/TypeError when the files are unreadable or incomplete.
  """
  workdir = Path(workdir)
  spec = TrainSpec.from_config(read_config(workdir))
  optim = spec.optim
  summary = read_summary(workdir)
  stage = 1 if optim.schedule == "constant" else 2
  total = spec.train.steps
  if summary is not None:
    total = int(summary.get("total_steps", total))
  return RunRecord(
    workdir=str(workdir),
    family=spec.family,
    size=spec.size,
    stage=stage,
    lr=optim.lr,
    warmup=optim.warmup_steps,
    b2=optim.b2,
    wd=optim.weight_decay,
    floor=None if stage == 1 else optim.floor,
    steps=int(summary["steps"]) if summary else 0,
    total_steps=total,
    has_summary=summary is not None,
    aborted=bool(summary.get("aborted", False)) if summary else False,
    stopped_early=bool(summary.get("stopped_early", False)) if summary else False,
    bad_batches=int(summary.get("bad_batches", 0)) if summary else 0,
    rollbacks=int(summary.get("rollbacks", 0)) if summary else 0,
    params=int(summary["params"]) if summary and "params" in summary else None,
    validation=dict(summary.get("validation") or {}) if summary else {},
  )


def rank_stage1(runs: Iterable[RunRecord]) -> dict[tuple[str, str], list[RunRecord]]:
  """Per cell, the finished stage-1 runs with a finite validation loss, best first (stable sort:
  ties keep their order)."""
  out: dict[tuple[str, str], list[RunRecord]] = {}
  for run in runs:
    if run.stage == 1 and run.finished and math.isfinite(run.val_loss):
      out.setdefault(run.cell, []).append(run)
  return {cell: sorted(rs, key=lambda r: r.val_loss) for cell, rs in out.items()}


@dataclasses.dataclass
class CellChoice:
  """The outcome of the rule for one cell."""

  cell: tuple[str, str]
  hyper: Hyper | None  # The configuration now selected (None: no candidate left).
  rank: int | None  # Its 1-based stage-1 rank (None when no stage-1 ranking was given).
  best: RunRecord | None = None  # The kept stage-2 run (lower final val loss); None while pending.
  other: list[RunRecord] = dataclasses.field(default_factory=list)  # The other floors' runs.
  pending_floors: list[float] = dataclasses.field(default_factory=list)  # Still to run/finish.
  replaced: list[tuple[Hyper, str]] = dataclasses.field(default_factory=list)  # (config, why).
  log: list[str] = dataclasses.field(default_factory=list)

  @property
  def done(self) -> bool:
    return self.best is not None and not self.pending_floors


def hyper_name(h: Hyper) -> str:
  lr, warmup, b2, wd = h
  return f"lr={lr:g} warmup={warmup} b2={b2:g} wd={wd:g}"


def select_cell(
  cell: tuple[str, str],
  ranked: Sequence[Hyper],
  stage2: Iterable[RunRecord],
  floors: Sequence[float],
  stage1_loss: dict | None = None,
) -> CellChoice:
  """The paper's rule for one cell.

  `ranked`: the cell's stage-1 configurations, best validation loss first (empty: rank the
  stage-2 configurations by their own best final validation loss, as the report does for runs
  trained without a sweep). `stage2`: the cell's stage-2 runs. Walks the ranking: a configuration
  with an unstable stage-2 run is replaced by the next; the first one whose runs at every floor
  finished stably is selected and its floor with the lower final validation loss kept (ties: the
  first floor of `floors`); a configuration with floors not yet run or finished stops the walk
  (pending).
  """
  by_hyper: dict[Hyper, dict[float, RunRecord]] = {}
  for run in stage2:
    if run.cell == cell and run.stage == 2:
      by_hyper.setdefault(run.hyper, {})[run.floor] = run
  own_rank = not ranked
  if own_rank:

    def best_loss(h):
      losses = [r.val_loss for r in by_hyper[h].values() if r.finished and not r.unstable()]
      losses = [x for x in losses if math.isfinite(x)]
      return min(losses) if losses else math.inf

    ranked = sorted(by_hyper, key=best_loss)
    floors = sorted({f for runs in by_hyper.values() for f in runs}, key=lambda f: -f)
  choice = CellChoice(cell, None, None)
  name = " ".join(cell)
  for i, hyper in enumerate(ranked, 1):
    runs = by_hyper.get(hyper, {})
    what = f"stage-1 rank {i}" if not own_rank else "trained configuration"
    if stage1_loss and hyper in stage1_loss:
      what += f" (val_loss {stage1_loss[hyper]:.6g})"
    bad = [(f, r.unstable()) for f, r in runs.items() if r.unstable()]
    if bad:
      why = "; ".join(f"floor {f:g}: {reason} ({Path(runs[f].workdir).name})" for f, reason in bad)
      choice.replaced.append((hyper, why))
      choice.log.append(f"{name}: {hyper_name(hyper)}, {what}: unstable in stage 2 ({why})")
      continue
    choice.hyper, choice.rank = hyper, (None if own_rank else i)
    reason = (
      "lowest stage-1 validation loss"
      if i == 1 and not own_rank
      else "next best after unstable configuration(s)"
      if choice.replaced
      else "lowest final validation loss of the trained configurations"
    )
    choice.pending_floors = [f for f in floors if f not in runs or not runs[f].finished]
    done = [runs[f] for f in floors if f in runs and runs[f].finished]
    if done:
      best = min(done, key=lambda r: r.val_loss if math.isfinite(r.val_loss) else math.inf)
      choice.best = best
      choice.other = [r for r in done if r is not best]
    if choice.pending_floors:
      pending = ", ".join(f"{f:g}" for f in choice.pending_floors)
      choice.log.append(
        f"{name}: {hyper_name(hyper)}, {what}: selected ({reason}); floor(s) {pending} to run"
      )
    else:
      others = ", ".join(f"floor {r.floor:g} val_loss {r.val_loss:.6g}" for r in choice.other)
      choice.log.append(
        f"{name}: {hyper_name(hyper)}, {what}: selected ({reason}); kept floor "
        f"{best.floor:g} (final val_loss {best.val_loss:.6g}"
        + (f"; lower than {others})" if others else ")")
      )
    return choice
  choice.log.append(f"{name}: no stable configuration left ({len(ranked)} tried)")
  return choice
