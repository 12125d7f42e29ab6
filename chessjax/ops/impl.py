"""How a recurrence runs: one switch with the same meaning for every mixer (the model of
recurrentgemma's `ScanType`, resolved per backend and shape in one place).

* `SEQUENTIAL`: the readable reference, a `lax.scan` over time steps.
* `CHUNKED`: the parallel form within chunks of `chunk_size` steps, the state carried between
  chunks (SLiCE's chunked associative scan, Gated DeltaNet's WY/UT form, Mamba's SSD).
* `ASSOCIATIVE`: one associative scan over the whole sequence (the affine scan only).
* `AUTO` (every family's default): the fastest of these for the recurrence on the backend that
  traces the model, at the shape it runs, as measured (`TABLE`, below). Every choice gives the
  same numbers up to rounding (tests/ops/).

`AUTO`, the rule (`resolve`). A call's shape is three numbers: `rows`, the sequences run at once
(the batch times the members of a population: `members`), `length`, the steps of each, and
`width`, what one sequential step multiplies per row (`width_of`): the affine scan's transition
entries per token (d x b for SLiCE's blocks of b, d for the diagonal form), the delta rule's and
SSD's state entries (H x K x V, H x P x N). `TABLE` holds, per recurrence and backend, measured
shapes and the implementation chosen at each (docs/results/scan_choice.json, derived by
`choose`: the fastest there, if it beats the backend's fallback by `MARGIN` and in every timed
round, else the fallback). A call takes the choice of the nearest measured shape whose three
numbers are each within a factor `NEAR` of its own (nearest: the smallest sum of |log2| ratios;
a tie goes to the entry listed first). Fallback, where no measured shape is that near, the
backend is not in the table, or a caller gives no shape (`chessjax.flops` counts FLOPs so): the
affine scan runs `SEQUENTIAL` on CPU and GPU (3-4x faster than `CHUNKED` at d128 on a CPU;
1.4-1.7x faster than every chunk size and the associative scan at the d512 layer's shapes on an
H200), `CHUNKED` elsewhere (TPU, not measured); the delta rule and SSD run `CHUNKED` everywhere
(9.4x and 17x faster than `SEQUENTIAL` on the H200). docs/performance.md renders the rule's
table from the record.

A recurrence names itself by one of `RECURRENCES`, the one list of what each supports: `parse`
checks a config value against it, `resolve` turns `AUTO` into a concrete choice, and `check` is
how each op in `chessjax.ops` validates the concrete `impl` it is called with.
"""

import contextlib
import enum
import json
import math
import threading
from pathlib import Path

import jax


class Impl(enum.StrEnum):
  AUTO = "auto"
  SEQUENTIAL = "sequential"
  CHUNKED = "chunked"
  ASSOCIATIVE = "associative"


# recurrence -> the concrete implementations it has.
RECURRENCES = {
  "affine_scan": (Impl.SEQUENTIAL, Impl.CHUNKED, Impl.ASSOCIATIVE),
  "delta_rule": (Impl.SEQUENTIAL, Impl.CHUNKED),
  "ssd": (Impl.SEQUENTIAL, Impl.CHUNKED),
}
# (recurrence, backend) -> what AUTO falls back to there; CHUNKED where not listed.
_FALLBACK = {("affine_scan", "cpu"): Impl.SEQUENTIAL, ("affine_scan", "gpu"): Impl.SEQUENTIAL}
# The name AUTO had before this switch existed, still read from older configs.
_ALIASES = {"fast": Impl.AUTO}
MARGIN = 1.1  # A measured shape leaves the fallback for an implementation this much faster.
NEAR = 2.0  # A call takes a measured shape's choice when each of its numbers is within this factor.
TABLE_PATH = Path(__file__).with_name("scan_table.json")  # `TABLE` (package data)


def parse(value, recurrence: str) -> Impl:
  """`value` (an `Impl` or its string) as an `Impl` that `recurrence` supports; else ValueError."""
  valid = (Impl.AUTO, *RECURRENCES[recurrence])
  impl = _ALIASES.get(value, value)
  if impl not in valid:
    raise ValueError(
      f"mixer_impl must be one of {[str(v) for v in valid]} for {recurrence}, got {value!r}"
    )
  return Impl(impl)


def check(value, recurrence: str) -> Impl:
  """`value` as a concrete implementation `recurrence` supports (not `AUTO`); else ValueError."""
  if value not in RECURRENCES[recurrence]:
    valid = [str(v) for v in RECURRENCES[recurrence]]
    raise ValueError(f"unknown impl {value!r} for {recurrence}; expected one of {valid}")
  return Impl(value)


def fallback(recurrence: str, backend: str) -> Impl:
  """What `AUTO` means for `recurrence` on `backend` where the table has no near shape."""
  return _FALLBACK.get((recurrence, backend), Impl.CHUNKED)


def width_of(recurrence: str, dims: tuple) -> int:
  """A call's width from its recurrence's dimensions: the affine scan's (G blocks, block size
  b; b = 1 for the diagonal form): G b b; the delta rule's (H, K, V) and SSD's (H, P, N): their
  product, the state's entries."""
  if recurrence not in RECURRENCES:
    raise ValueError(f"unknown recurrence {recurrence!r}")
  return math.prod(dims) * (dims[-1] if recurrence == "affine_scan" else 1)


def choose(recurrence: str, backend: str, timings: dict) -> Impl:
  """The choice at one measured shape: `timings` maps each implementation timed there to its
  median time over the fallback's in the same round (`ratio`) and the largest such ratio of any
  round (`worst`); the fastest leaves the fallback if it is `MARGIN` times faster at the median
  and faster in every round."""
  base = fallback(recurrence, backend)
  best = min(sorted(timings), key=lambda name: timings[name]["ratio"])
  t = timings[best]
  if best != base and t["ratio"] * MARGIN <= 1.0 and t["worst"] < 1.0:
    return check(best, recurrence)
  return base


def derive(record: dict) -> list[dict]:
  """The table of a record of measured shapes (docs/results/scan_choice.json, written by
  `benchmarks.bench_scans`): each run's rows with a choice, as entries; a shape measured by two
  runs of one backend takes the later run's choice."""
  entries = {}
  for run in record.get("runs", [record]):
    for r in run["rows"]:
      if "choice" in r:
        key = (r["recurrence"], run["backend"], r["rows"], r["length"], r["width"])
        entries.pop(key, None)
        entries[key] = {**dict(zip(("recurrence", "backend", "rows", "length", "width"), key,
                                   strict=True)), "impl": r["choice"]}  # fmt: skip
  return list(entries.values())


def load_table(path: Path = TABLE_PATH) -> tuple[dict, ...]:
  """The measured shapes and their choices: dicts of recurrence, backend, rows, length, width and
  impl, in the file's order; ValueError for an entry that does not parse."""
  entries = json.loads(Path(path).read_text())["entries"]
  out = []
  for e in entries:
    if set(e) != {"recurrence", "backend", "rows", "length", "width", "impl"}:
      raise ValueError(f"{path}: an entry needs recurrence, backend, rows, length, width and impl:"
                       f" {e}")  # fmt: skip
    if not all(isinstance(e[k], int) and e[k] > 0 for k in ("rows", "length", "width")):
      raise ValueError(f"{path}: rows, length and width must be positive integers: {e}")
    out.append({**e, "impl": check(e["impl"], e["recurrence"])})
  return tuple(out)


TABLE = load_table()


def nearest(table, recurrence: str, backend: str, shape: tuple[int, int, int]) -> dict | None:
  """The entry of `table` for `recurrence` on `backend` nearest `shape` (rows, length, width)
  among those within a factor `NEAR` in each; None if there is none."""
  limit = math.log2(NEAR) + 1e-9
  best, best_distance = None, math.inf
  for e in table:
    if (e["recurrence"], e["backend"]) != (recurrence, backend):
      continue
    gaps = [abs(math.log2(q / m)) for q, m in zip(shape, (e["rows"], e["length"], e["width"]),
                                                   strict=True)]  # fmt: skip
    if max(gaps) <= limit and sum(gaps) < best_distance:
      best, best_distance = e, sum(gaps)
  return best


_MEMBERS = threading.local()


@contextlib.contextmanager
def members(k: int):
  """While inside, every resolved call counts `k` times its rows: a population's K members run
  one `jax.vmap`ped step, in which a model sees one member's batch. Enter it around the tracing
  of the population's step."""
  before = getattr(_MEMBERS, "k", 1)
  _MEMBERS.k = before * k
  try:
    yield
  finally:
    _MEMBERS.k = before


def resolve(
  value,
  recurrence: str,
  backend: str | None = None,
  *,
  rows: int | None = None,
  length: int | None = None,
  width: int | None = None,
  table=None,
) -> Impl:
  """The concrete implementation `value` stands for on `backend` (default: JAX's default) for a
  call of `rows` sequences of `length` steps and `width` (the rule in the module docstring; no
  shape: the fallback). `table`: the measured shapes (default: `TABLE`)."""
  impl = parse(value, recurrence)
  if impl is not Impl.AUTO:
    return impl
  backend = backend or jax.default_backend()
  if rows is not None and length is not None and width is not None:
    shape = (rows * getattr(_MEMBERS, "k", 1), length, width)
    entry = nearest(TABLE if table is None else table, recurrence, backend, shape)
    if entry is not None:
      return entry["impl"]
  return fallback(recurrence, backend)
