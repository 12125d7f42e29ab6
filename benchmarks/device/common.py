"""What the parts of `benchmarks.bench_device` share: the run's shapes (full and toy), a row and a
unit of the catalogue, the run's context, `--only`'s match and the one Markdown table every part's
rows are written as."""

import dataclasses
import functools
import json
import math
import time
from collections.abc import Callable
from pathlib import Path

import jax

from chessjax import flops
from chessjax.models import registry

STARTED = time.perf_counter()  # The budget counts from the process's start.
REPO = Path(__file__).resolve().parents[2]
STEPS = 256  # Game length of every world-model row (the paper's games are mostly shorter).
CASES = {"d128 b32": ("d128", 32), "d512 b128": ("d512", 128)}
DTYPES = ("float32", "bfloat16")
FAMILIES = registry.FAMILIES  # The paper's grid: main families and ablations (and MIMO).
CHUNKS = {"affine_scan": (16, 64, 256), "delta_rule": (32, 64, 128), "ssd": (32, 64, 128)}
LM = ("gpt2", "small", 60, 512)  # family, size, batch, tokens (configs/lm.py, docs/lm.md)
LOOP_FAMILY = "slice"  # The paper's main family, the demo's.
GIB = 2**30
# Rough seconds of a unit on an H100/H200, compile and timing (the budget's guess and `--help`'s):
# a row the H200 ran on 2026-11-28 takes its unit seconds there (`H200_RECORD`, `measured_seconds`;
# its loop part took 97.8 s against 144 guessed before, its population part 293.2 against 293);
# the others a model fitted to those units: a train step alone by size (16.2-16.8 s at d128, 18.6
# at d256, 26.6 at d512 there), a loop row by size (the sample's preparation not included), a
# population's step `population_seconds`.
SECONDS = {"d128": 16.5, "d256": 18.6, "d512": 26.6}
LOOP_SECONDS = {"d128": 15.0, "d512": 37.0}  # A loop row (the H200's: 15.1 s, 36.8 s).
H200_RECORD = REPO / "docs" / "results" / "bench_device_h200_1128.json"


@dataclasses.dataclass(frozen=True)
class Shapes:
  """What a run measures at: full-run sizes, batches and K mapped to those run (the identity but
  at toy shapes), the length, chunk sizes, the recurrences' dimensions, the LM step, the loop's
  logging interval per size and how many intervals it times, the sample's games (0: all), the
  population check's memory limit (0: the device's) and the per-implementation populations' K."""

  toy: bool
  size: dict
  batch: dict
  k: dict
  steps: int
  chunks: dict
  op_batch: int
  slice_dims: tuple  # (G blocks, block size b)
  delta_dims: tuple  # (H, K, V)
  ssd_dims: tuple  # (H, P, N)
  lm: tuple
  log_every: dict
  intervals: int
  sample_games: int
  memory_limit_gb: float
  k_impl: dict  # the K of the population part's per-implementation rows, as `k`


_SIZES = ("d128", "d256", "d512")
_BATCHES = (32, 128)
_KS = (1, 4, 16, 64)
FULL = Shapes(
  False,
  {s: s for s in _SIZES},
  {b: b for b in _BATCHES},
  {k: k for k in _KS},
  STEPS,
  CHUNKS,
  128,
  (64, 8),
  (8, 48, 96),
  (16, 64, 128),
  LM,
  {"d128": 100, "d512": 50},  # The configs' log_every at d128; a d512 interval is seconds.
  3,
  0,
  0.0,
  {16: 16, 64: 64},
)
TOY = Shapes(
  True,
  {s: "d128" for s in _SIZES},
  {b: 2 for b in _BATCHES},
  {1: 1, 4: 2, 16: 2, 64: 64},  # K = 64 is refused under the toy limit (from K = 2's program).
  16,
  {name: (2, 4, 8) for name in CHUNKS},  # Named in the table as the full run's chunks.
  2,
  (4, 4),
  (2, 8, 8),
  (2, 8, 8),
  ("gpt2", "tiny", 2, 32),
  {"d128": 1, "d512": 1},
  2,
  48,
  1.0,
  {16: 2, 64: 3},  # Every implementation's population runs (none refused) at toy shapes.
)


@dataclasses.dataclass
class Row:
  part: str  # train | lm | recurrence | loop | population | cmdbuf | unroll
  name: str  # unique within a run; the same in toy and full runs
  shape: str = ""
  status: str = "ok"
  compile_s: float = math.nan
  ms: float = math.nan  # median step, each to completion (recurrence: forward + backward)
  forward_ms: float = math.nan  # recurrence rows only
  tokens_s: float = math.nan
  mfu: float = math.nan
  program_gib: float = math.nan  # the memory check's estimate
  device_peak_gib: float = math.nan
  b2b_ms: float = math.nan  # steps dispatched back to back
  mfu_b2b: float = math.nan  # MFU from b2b_ms (`mfu`: from ms, each step to completion)
  peak_own: bool | None = None  # whether the row raised the device's peak (None: not known)
  extra: dict = dataclasses.field(default_factory=dict)  # the part's own numbers


@dataclasses.dataclass
class Unit:
  """What runs at once: one row (or an A/B setting's rows, from one process), with its run-order
  part (`GROUPS`), its rough seconds and `run(ctx) -> rows` (one per name)."""

  group: str
  part: str
  names: tuple
  run: Callable
  seconds: float


class Catalogue:
  """The units of a run in run order, each row listed once (a step that several parts use runs
  in the first part that lists it)."""

  def __init__(self):
    self.units: list[Unit] = []
    self.listed: set[str] = set()

  def one(self, group: str, part: str, name: str, fn: Callable, seconds: float) -> None:
    """A unit of one row, `fn(ctx) -> Row`; `seconds`: its model's rough seconds, which the
    H200's measured unit seconds replace where it ran the row (`measured_seconds`)."""
    self.add(Unit(group, part, (name,), lambda ctx: [fn(ctx)], seconds))

  def add(self, unit: Unit) -> None:
    self.listed.update(unit.names)
    seconds = measured_seconds().get(unit.names[0], unit.seconds)
    self.units.append(dataclasses.replace(unit, seconds=seconds))


@functools.cache
def measured_seconds() -> dict[str, float]:
  """Each row's unit seconds on the H200 of 2026-11-28, by name (`H200_RECORD`; empty without
  it, e.g. away from a checkout)."""
  if not H200_RECORD.exists():
    return {}
  rows = json.loads(H200_RECORD.read_text())["rows"]
  return {r["name"]: r["extra"]["unit_s"] for r in rows if "unit_s" in r.get("extra", {})}


def population_seconds(size: str, batch: int, k: int) -> float:
  """Rough seconds of a population's unit: the step's, 2 s more to build the members, and the
  timing's share that grows with K x batch (fitted to the H200's: 16.3-24.9 s at d128 batch 32,
  K = 1-64; 17.3-29.6 at batch 128)."""
  return SECONDS[size] + 2 + 0.08 * k * (1 + batch / 128)


class Context:
  """One run's settings and what its rows share: measured results by key (a row measured once
  serves every row that needs it: a loop's step alone, a toy case that shares its shapes), the
  prepared sample and the population check's limit."""

  def __init__(self, opts, shapes: Shapes):
    self.opts, self.shapes, self.out = opts, shapes, Path(opts.out)
    self.memo: dict = {}
    self.limit = None
    self.only = [p.strip() for p in opts.only.split(",") if p.strip()]
    budget = opts.budget_minutes * 60 if opts.budget_minutes > 0 else math.inf
    self.deadline = STARTED + budget  # A process of the A/B is stopped 2 minutes past it.

  def measure(self, key, fn) -> Row:
    if key not in self.memo:
      self.memo[key] = fn()
    return dataclasses.replace(self.memo[key], extra=dict(self.memo[key].extra))


def gib(n) -> float:
  return math.nan if n is None else n / GIB


def device_peak_gib() -> float:
  stats = jax.devices()[0].memory_stats() or {}
  return stats["peak_bytes_in_use"] / GIB if "peak_bytes_in_use" in stats else math.nan


def mfus(tokens: float, flops_per_token: float, peak: float | None, ms: float, b2b_ms: float):
  """(MFU of a step of `tokens` each run to completion in `ms`, and back to back in `b2b_ms`)."""
  return tuple(flops.mfu(tokens / (t / 1e3), flops_per_token, peak) for t in (ms, b2b_ms))


def case_name(size: str, batch: int) -> str:
  return f"{size} b{batch}"


def matches(name: str, group: str, only: list[str]) -> bool:
  """Whether `--only` (its items) selects the row `name` of part `group`: an item names a part or
  a row exactly (a row of another part whose name contains the item is not selected)."""
  return not only or group in only or name in only


def fmt(x, spec: str) -> str:
  return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def peak(r: Row) -> str:
  return ("<= " if r.peak_own is False else "") + fmt(r.device_peak_gib, ".2f")


def column(header: str, value: Callable, spec: str | None = None) -> tuple:
  """A table column: its header, its alignment and its cell of a row; `value(row)` shown as is,
  or with `spec` (`fmt`: "-" where there is no number) and aligned right."""
  if spec is None:
    return header, "---", lambda r: str(value(r))
  return header, "---:", lambda r: fmt(value(r), spec)


# The columns most tables have.
NAME = column("row", lambda r: r.name)
SHAPE = column("shape", lambda r: r.shape)
STATUS = column("status", lambda r: r.status)
COMPILE_S = column("compile s", lambda r: r.compile_s, ".1f")
STEP_MS = column("step ms", lambda r: r.ms, ".2f")
B2B_MS = column("b2b ms", lambda r: r.b2b_ms, ".2f")
MFU = column("MFU %", lambda r: 100 * r.mfu, ".1f")
MFU_B2B = column("MFU b2b %", lambda r: 100 * r.mfu_b2b, ".1f")
PROGRAM_GIB = column("program GiB", lambda r: r.program_gib, ".2f")
DEVICE_PEAK = ("device peak GiB", "---:", peak)


def markdown(rows: list[Row], columns: tuple) -> str:
  """The Markdown table of `rows`, one line each, with `columns` (`column`)."""
  lines = [
    "| " + " | ".join(header for header, _, _ in columns) + " |",
    "|" + "|".join(align for _, align, _ in columns) + "|",
  ]
  lines += ["| " + " | ".join(cell(r) for _, _, cell in columns) + " |" for r in rows]
  return "\n".join(lines) + "\n"
