"""A run's settings, read from its config once: `TrainSpec.from_config(config, epoch_steps=...)`.

The config files (`configs/*.py`, ml_collections) are the surface users edit and the workdir keeps
(`config.json`); below this module nothing reads a config key or knows its default. The three
blocks the training loop reads are frozen dataclasses whose field defaults are the only defaults
(`configs/common.py` builds the config blocks from them, so a key a config file leaves out, or an
old workdir's `config.json` predates, means the same everywhere):

* `DataSpec` (`config.data`): where the games are, the batch, the length buckets, the loader;
* `LoopSpec` (`config.train`): the run's length and its cadence (logging, validation,
  checkpoints), the non-finite guard, memory and compilation settings, the steps per compiled
  call (`chessjax.dispatch`);
* `OptimSpec` (`config.optim`): AdamW and the learning-rate schedule (`chessjax.optim`);
* `InitSpec` (`config.init`): the run whose parameters a new run starts from (`chessjax.init_from`).

`TrainSpec` holds them with the model's identity (task, family, size, seed, model overrides) and
derives, once, what several rooms need: the run's total steps (`train.steps`, or `train.epochs`
whole epochs of `epoch_steps` batches; both above 0 is refused, for every task), the warmup, the
micro-batch count, the schedule `lr_at` and whether to compile ahead. A key a block does not know
is refused with the keys it does know (a typo never trains silently with the default).
"""

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any

import jax

from chessjax import optim, profiling

AUTO = "auto"
WORLD_MODEL = "world_model"  # The task of a config written before tasks existed.
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


@dataclasses.dataclass(frozen=True)
class DataSpec:
  """`config.data`: the training set and how it is batched (`chessjax.batches`)."""

  train: str = ""  # A prepared dataset directory or URL (data_prep.process_pgn, lm_data).
  train_split: str = "train"
  val_split: str = "validation"
  batch_size: int = 128  # Global, over all processes and devices.
  max_len: int = 1024  # Steps kept per game (START included); longer games are cut.
  bucket_lengths: tuple[int, ...] = (64, 128, 192, 256, 384, 512, 768, 1024)
  worker_count: int = 0  # grain worker processes (0: threads in this process).
  window_batches: int = 64  # Batches per sorted window of the length plan.
  shuffle: bool = True  # False: the stored order every epoch (as the released loader).
  max_train_games: int = 0  # > 0: only the split's first N games.
  min_bucket_batches: int = 0  # > 0: buckets fewer of the run's batches use merge upwards.

  def buckets_to_max_len(self) -> tuple[int, ...]:
    """The bucket lengths below `max_len`, then `max_len` itself: the ladder a launcher gives a
    run it cuts at a length of its own (`DataSpec(max_len=128).buckets_to_max_len()` is (64,
    128); 100 gives (64, 100); 2048 gives the whole ladder, then 2048)."""
    return (*(b for b in self.bucket_lengths if b < self.max_len), self.max_len)


@dataclasses.dataclass(frozen=True)
class LoopSpec:
  """`config.train`: the loop (`chessjax.train`) and its step (`chessjax.step`)."""

  steps: int = 0  # The run's length in batches, when `epochs` is 0.
  epochs: int = 0  # > 0: whole epochs of the training split instead.
  log_every: int = 100
  eval_every: int = 5000  # 0: once per epoch.
  eval_batches: int = 10  # Validation batches per evaluation (0: the whole split).
  checkpoint_every: int = 5000
  keep_checkpoints: int = 3
  early_stopping_patience: int = 0  # > 0: stop after this many validations without a best.
  snapshot_every: int = 500  # Non-finite guard: the snapshot parameters roll back to.
  max_bad_batches: int = 20  # Abort after this many consecutive non-finite batches.
  progress_seconds: float = 10.0  # A progress line at least this often between log lines.
  micro_batches: int = 1  # The batch's gradient summed over this many slices (same step).
  steps_per_call: int = 1  # Up to this many batches of one shape per compiled call (dispatch).
  remat: bool = False  # Each block's activations recomputed in the backward pass.
  memory_limit_gb: float = 0.0  # The memory check's limit; 0: what the machine has.
  compilation_cache: str = AUTO  # chessjax.runtime: a per-user cache; "" for none.
  compile_ahead: str = AUTO  # Other lengths' steps in a background thread: auto|true|false.
  profile: str = ""  # "START:STOP": a profiler trace of those steps (chessjax.profiling).


@dataclasses.dataclass(frozen=True)
class OptimSpec:
  """`config.optim`: AdamW with clipping and the schedule (`chessjax.optim`). The learning rate,
  warmup, beta2, weight decay and floor have no default: every config file sets them (the
  paper's grid, `chessjax.world_model.grid`, or a track's recipe)."""

  lr: float
  warmup_steps: int
  b2: float
  weight_decay: float
  floor: float  # The cosine's final rate as a fraction of `lr`.
  b1: float = 0.9
  eps: float = 1e-8
  clip_norm: float = 1.0
  schedule: str = "cosine"  # "cosine" | "constant" (after warmup) | "linear" (to zero).
  warmup_fraction: float = 0.0  # > 0: warmup over this fraction of the run, not warmup_steps.
  decay_all: bool = False  # Weight decay on every parameter, `NoWeightDecay` ones included.


@dataclasses.dataclass(frozen=True)
class InitSpec:
  """`config.init`: start a new run from another run's parameters (`chessjax.init_from`), with a
  fresh optimizer state, schedule and step. A run that has a checkpoint of its own resumes it and
  never reads this again."""

  workdir: str = ""  # The source run's workdir; "" starts from the model's own initialisation.
  checkpoint: str = ""  # "best", "latest" or a step; "": best, else latest (`chessjax.workdir`).
  parts: str = "all"  # "all" | "backbone" (every parameter outside the task's head).

  PARTS = ("all", "backbone")

  @property
  def which(self) -> str | None:
    """The source checkpoint as `chessjax.workdir.restore` takes it: "best", "latest", or None
    (best, else latest; or latest at `step`)."""
    return self.checkpoint if self.checkpoint in ("best", "latest") else None

  @property
  def step(self) -> int | None:
    """The source checkpoint's step, when `checkpoint` names one."""
    return int(self.checkpoint) if self.checkpoint.isdigit() else None

  def validate(self) -> None:
    if self.parts not in self.PARTS:
      raise ValueError(f"init.parts must be one of {self.PARTS}, got {self.parts!r}")
    if self.checkpoint not in ("", "best", "latest") and not self.checkpoint.isdigit():
      raise ValueError(
        f"init.checkpoint must be best, latest or a step (a number), got {self.checkpoint!r}"
      )
    if not self.workdir and (self.checkpoint or self.parts != "all"):
      raise ValueError("init.checkpoint and init.parts need init.workdir (the source run)")


def defaults(block: type) -> dict:
  """The field defaults of a spec block (what `configs/common.py` starts each config block from)."""
  return {
    f.name: f.default for f in dataclasses.fields(block) if f.default is not dataclasses.MISSING
  }


def task_of(config) -> str:
  """`config.task`, the task a config trains (`chessjax.task.get_task`), read alone: a reader of
  many workdirs can tell a task's runs from others' before reading the rest. Configs written
  before tasks existed trained the world model."""
  return str(config.get("task", WORLD_MODEL))


def _required(config, key: str):
  """`config[key]` (a ConfigDict or dict), or a ValueError naming the missing key."""
  if key not in config:
    raise ValueError(f"the config has no {key}")
  return config[key]


def _read_block(cls: type, block, name: str):
  """`cls` from a config block (a ConfigDict or dict): unknown keys refused, missing keys (and
  None) defaulted, each value converted to its field's type."""
  values = _as_dict(block)
  fields = {f.name: f for f in dataclasses.fields(cls)}
  unknown = sorted(set(values) - set(fields))
  if unknown:
    keys = ", ".join(f"{name}.{k}" for k in unknown)
    raise ValueError(f"unknown config key(s) {keys}; {name} has {sorted(fields)}")
  kwargs = {}
  for key, field in fields.items():
    value = values.get(key)
    if value is None:
      if field.default is dataclasses.MISSING:
        raise ValueError(f"the config has no {name}.{key} (it has no default)")
      continue
    try:
      kwargs[key] = _convert(field.type, value)
    except (TypeError, ValueError):
      raise ValueError(f"{name}.{key}={value!r} is not a {field.type}") from None
  return cls(**kwargs)


def _convert(kind, value):
  if kind == tuple[int, ...]:
    return tuple(int(v) for v in value)
  if kind is bool:
    if isinstance(value, str):
      if value.strip().lower() not in _TRUE + _FALSE:
        raise ValueError(value)
      return value.strip().lower() in _TRUE
    return bool(value)
  if kind is int:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
      raise ValueError(value)
    return int(value)
  if kind is float:
    return float(value)
  return str(value).lower() if isinstance(value, bool) else str(value)


@dataclasses.dataclass(frozen=True)
class TrainSpec:
  """Everything the loop, the step and the compiler read of a config (module docstring)."""

  task: str
  family: str
  size: str
  seed: int
  model: Mapping[str, Any]  # Overrides of the family's model config (`config.model`).
  data: DataSpec
  train: LoopSpec
  optim: OptimSpec
  init: InitSpec = InitSpec()
  epoch_steps: int | None = None  # Batches per epoch of the training split, when known.

  @classmethod
  def from_config(cls, config, *, epoch_steps: int | None = None) -> "TrainSpec":
    """The spec of a config (`ml_collections.ConfigDict`, as built by `configs/*.py` or read
    back from a workdir's `config.json`). `epoch_steps`: the training split's batches per epoch
    (`BatchPlan.batches_per_epoch`), which an epoch-based run's length needs."""
    spec = cls(
      task=task_of(config),
      family=str(_required(config, "family")),
      size=str(_required(config, "size")),
      seed=int(_required(config, "seed")),
      model=_as_dict(config.get("model", {})),
      data=_read_block(DataSpec, _required(config, "data"), "data"),
      train=_read_block(LoopSpec, _required(config, "train"), "train"),
      optim=_read_block(OptimSpec, _required(config, "optim"), "optim"),
      # Configs written before `init` existed started from the model's own initialisation.
      init=_read_block(InitSpec, config.get("init", {}), "init"),
      epoch_steps=epoch_steps,
    )
    spec.validate()
    return spec

  def replace(self, **changes) -> "TrainSpec":
    return dataclasses.replace(self, **changes)

  def validate(self) -> None:
    t, o = self.train, self.optim
    if t.epochs < 0 or t.steps < 0:
      raise ValueError(f"train.epochs={t.epochs} and train.steps={t.steps} must be >= 0")
    if t.epochs and t.steps:
      raise ValueError(
        f"train.epochs={t.epochs} and train.steps={t.steps} are both set; the run length is one "
        "of them: --config.train.epochs=N for N epochs, or --config.train.epochs=0 "
        "--config.train.steps=N for N steps"
      )
    if t.micro_batches < 1 or self.data.batch_size % t.micro_batches:
      raise ValueError(
        f"train.micro_batches={t.micro_batches} must be >= 1 and divide "
        f"data.batch_size={self.data.batch_size}"
      )
    if o.schedule not in optim.SCHEDULES:
      raise ValueError(f"optim.schedule must be one of {optim.SCHEDULES}, got {o.schedule!r}")
    if t.compile_ahead.strip().lower() not in (AUTO, *_TRUE, *_FALSE):
      raise ValueError(f"train.compile_ahead must be auto, true or false, got {t.compile_ahead!r}")
    profiling.parse_range(t.profile)  # "START:STOP" or "".
    self.init.validate()
    for key in ("log_every", "checkpoint_every", "snapshot_every", "max_bad_batches",
                "steps_per_call"):  # fmt: skip
      if getattr(t, key) < 1:
        raise ValueError(f"train.{key} must be >= 1, got {getattr(t, key)}")

  @property
  def dtype(self) -> str:
    """The precision policy (`model.dtype`; `chessjax.models.layers.DTYPES`)."""
    return str(self.model.get("dtype", "float32"))

  @property
  def total_steps(self) -> int | None:
    """`train.epochs` epochs of `epoch_steps` batches when set, else `train.steps`; None for an
    epoch-based spec whose epoch length is unknown (read back for evaluation)."""
    if not self.train.epochs:
      return self.train.steps
    return None if self.epoch_steps is None else self.train.epochs * self.epoch_steps

  @property
  def warmup_steps(self) -> int | None:
    """`optim.warmup_fraction` of the run's total steps when set (> 0), else
    `optim.warmup_steps`. (Toshniwal et al. warm up over 10% of a 10-epoch horizon, which an
    early stop may cut short.)"""
    fraction = self.optim.warmup_fraction
    if not fraction:
      return self.optim.warmup_steps
    total = self.total_steps
    return None if total is None else max(int(round(fraction * total)), 1)

  @property
  def micro_batches(self) -> int:
    return self.train.micro_batches

  @property
  def lr_at(self) -> Callable:
    """The learning rate as a function of the 0-based step (`chessjax.optim.lr_schedule`): the
    schedule the optimizer runs and the logger reports. For an epoch-based spec of unknown epoch
    length (evaluation) it raises when called: such a state must not be trained."""
    total = self.total_steps
    if total is None:

      def unknown(step):
        raise ValueError(
          "the schedule's length is unknown: an epoch-based run needs its training split's "
          "batches per epoch (TrainSpec.from_config(config, epoch_steps=...))"
        )

      return unknown
    o = self.optim
    return optim.lr_schedule(o.lr, self.warmup_steps, total, o.schedule, o.floor)

  @property
  def compile_ahead(self) -> bool:
    """Whether the loop compiles the step for the run's other batch lengths in a background
    thread (`chessjax.compile.StepCompiler`). "auto": when that can overlap training, i.e. the
    steps run on an accelerator or this process may use more than one CPU core; on a single core
    it would only move the compilations, not hide them."""
    setting = self.train.compile_ahead.strip().lower()
    if setting == AUTO:
      return jax.default_backend() != "cpu" or _usable_cores() > 1
    return setting in _TRUE

  @property
  def memory_limit_bytes(self) -> int | None:
    """`train.memory_limit_gb` in bytes; None: what the machine has (`chessjax.memory`)."""
    gb = self.train.memory_limit_gb
    return int(gb * 2**30) if gb else None


def _as_dict(block) -> dict:
  return block.to_dict() if hasattr(block, "to_dict") else dict(block)


def _usable_cores() -> int:
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # Not on Linux.
    return os.cpu_count() or 1
