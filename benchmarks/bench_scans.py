"""Each recurrence's implementations at the shapes training runs, against the one `auto` falls
back to: the measurements behind `chessjax.ops.impl.TABLE` (which implementation `auto` picks at
which shape).

    python -m benchmarks.bench_scans [--sizes d128,d256] [--rows 8,32] [--lengths 64,256]
        [--rounds 3] [--seconds 0.3] [--max-gib 3] [--out docs/results/scan_choice.json]
        [--table chessjax/ops/scan_table.json] [--device BENCH_DEVICE.json] [--toy]

A shape is one layer's recurrence (`benchmarks.harness.recurrence_inputs`, random float32 inputs,
batch-major) of a family's `size` (`chessjax.models.model_config`: the affine scan of SLiCE, its
blocks of 8, and of the diagonal ablation; the delta rule of Gated DeltaNet; SSD of Mamba-2) on
`rows` sequences of `length` steps; its width is `chessjax.ops.impl.width_of` of the layer's
dimensions. Each implementation of the recurrence (chunked at the family's chunk size) is compiled
forward + backward (the gradient of every input, as training runs it); one whose program exceeds
`--max-gib` is not run (noted). Then `--rounds` rounds each time every implementation in turn,
calls dispatched back to back for at least `--seconds` (and 2 calls), the yardstick first: the
implementation `auto` falls back to on this backend (`chessjax.ops.impl.fallback`). An
implementation's ratio is its time over the yardstick's of the same round, so a machine whose
speed drifts moves both; the record keeps the median time, the median ratio and the largest
("worst") ratio of any round, the machine's load average before and after, and the choice
(`chessjax.ops.impl.choose`).

`--out` merges this run into the record (replacing an earlier run of this backend by this
command) and `--table` writes the choices of every run in the record (`chessjax.ops.impl.derive`)
as the table `auto` reads (package data). `--device FILE` takes no measurement: it merges a
`benchmarks.bench_device` JSON's rows that time implementations side by side (the recurrences
alone at the d512 layer's shapes; the population part's per-implementation rows, rows = batch x
K) as that device's run. `--toy`: tiny shapes, one round (seconds; the suite runs it).
"""

import argparse
import datetime
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import jax

from benchmarks.device.common import FULL
from benchmarks.harness import recurrence_inputs, recurrence_programs
from chessjax import machine, memory
from chessjax.models import model_config
from chessjax.ops import impl as impls

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "docs" / "results" / "scan_choice.json"
GIB = 2**30
# recurrence -> the families whose layer it is measured at.
FAMILIES = {
  "affine_scan": ("slice", "slice_diag"),
  "delta_rule": ("gated_deltanet",),
  "ssd": ("mamba2",),
}
WHAT = (
  "Each recurrence's implementations against the one `auto` falls back to, forward + backward, "
  "at the shapes training runs (benchmarks.bench_scans): the measurements behind "
  "chessjax.ops.impl.TABLE (chessjax/ops/scan_table.json, written from this record by "
  "`chessjax.ops.impl.derive`). docs/performance.md renders it (docgen/perf_spans.py, "
  "perf:SCAN_TABLE)."
)


def layer_dims(recurrence: str, cfg) -> tuple:
  """The recurrence's dimensions in a family's layer (`recurrence_inputs`' `dims`)."""
  if recurrence == "affine_scan":
    return (cfg.d // cfg.block_size, cfg.block_size)
  if recurrence == "delta_rule":
    return (cfg.heads, cfg.head_k_dim, cfg.head_v_dim)
  return (cfg.heads, cfg.head_dim, cfg.d_state)


def toy_dims(recurrence: str, cfg) -> tuple:
  """`layer_dims` cut to a few channels (`--toy`): blocks of 4 (or the diagonal form), 2 heads."""
  if recurrence == "affine_scan":
    return (4, min(cfg.block_size, 4))
  return (2, 8, 8)


class _Program:
  """One implementation's compiled forward + backward on its inputs, ready to be timed."""

  def __init__(self, fn, inputs, impl: str, chunk: int):
    _, self.both, self.compile_s = recurrence_programs(fn, inputs, impl, chunk)
    self.inputs = inputs
    self.program_gib = (memory.program_bytes(self.both) or math.nan) / GIB

  def per_call(self, seconds: float) -> float:
    """Seconds per call over at least `seconds` (and 2 calls) dispatched back to back."""
    jax.block_until_ready(self.both(*self.inputs))
    calls, started = 0, time.perf_counter()
    while calls < 2 or time.perf_counter() - started < seconds:
      out = self.both(*self.inputs)
      calls += 1
    jax.block_until_ready(out)
    return (time.perf_counter() - started) / calls


def measure_shape(recurrence, family, size, rows, length, opts, backend) -> dict:
  """Every implementation of `recurrence` at one shape, in rounds against the yardstick."""
  cfg = model_config(family, size)
  dims = opts.dims(recurrence, cfg)
  inputs, fn = recurrence_inputs(recurrence, rows, length, dims)
  yardstick = impls.fallback(recurrence, backend)
  order = [yardstick] + [i for i in impls.RECURRENCES[recurrence] if i != yardstick]
  programs, skipped = {}, {}
  for impl in order:
    program = _Program(fn, inputs, str(impl), cfg.chunk_size)
    if program.program_gib > opts.max_gib:
      skipped[str(impl)] = f"program {program.program_gib:.1f} GiB over the {opts.max_gib} cap"
    else:
      programs[str(impl)] = program
  row = {
    "recurrence": recurrence,
    "family": family,
    "size": size,
    "rows": rows,
    "length": length,
    "width": impls.width_of(recurrence, dims),
    "dims": list(dims),
    "chunk": cfg.chunk_size,
    "yardstick": str(yardstick),
    "timings": {},
    "skipped": skipped,
  }
  if str(yardstick) not in programs:
    return row  # No yardstick, no ratio: the shape decides nothing.
  times = {name: [] for name in programs}
  for _ in range(opts.rounds):
    for name, program in programs.items():
      times[name].append(program.per_call(opts.seconds))
  base = times[str(yardstick)]
  for name, program in programs.items():
    ratios = [t / b for t, b in zip(times[name], base, strict=True)]
    row["timings"][name] = {
      "ms": 1e3 * statistics.median(times[name]),
      "ratio": statistics.median(ratios),
      "worst": max(ratios),
      "rounds_ms": [1e3 * t for t in times[name]],
      "compile_s": program.compile_s,
      "program_gib": program.program_gib,
    }
  row["choice"] = str(impls.choose(recurrence, backend, row["timings"]))
  return row


def machine_header(load_before: float) -> dict:
  return {
    "cpu": machine.cpu_model() or "unknown CPU",
    "cores": os.cpu_count(),
    "loadavg_before": round(load_before, 2),
    "loadavg_after": round(os.getloadavg()[0], 2),
    "device_kind": jax.devices()[0].device_kind,
    "jax": jax.__version__,
    "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
  }


def measure(opts) -> dict:
  """This machine's run: every recurrence at every shape of `opts`."""
  backend, load = jax.default_backend(), os.getloadavg()[0]
  rows = []
  for recurrence, families in FAMILIES.items():
    for family in families:
      for size in opts.sizes:
        for n in opts.rows:
          for length in opts.lengths:
            row = measure_shape(recurrence, family, size, n, length, opts, backend)
            rows.append(row)
            got = ", ".join(f"{k} {v['ms']:.2f} ms ({v['ratio']:.2f}x)"
                            for k, v in row["timings"].items())  # fmt: skip
            print(f"{recurrence} {family} {size} rows {n} length {length}: {got or '-'}"
                  f"{' skipped: ' + str(row['skipped']) if row['skipped'] else ''} -> "
                  f"{row.get('choice', '-')}", flush=True)  # fmt: skip
  return {
    "source": "bench_scans",
    "backend": backend,
    "command": opts.command,
    "machine": machine_header(load),
    "settings": {"rounds": opts.rounds, "seconds": opts.seconds, "max_gib": opts.max_gib},
    "rows": rows,
  }


def device_run(path: Path) -> dict:
  """A `benchmarks.bench_device` JSON's side-by-side rows as a run: the recurrence rows (one
  layer at the d512 shapes, forward + backward) and the population part's per-implementation
  rows (the whole step; rows = batch x K), each set against the fallback's row of its shape."""
  doc = json.loads(Path(path).read_text())
  backend = doc["platform"]
  ok = {r["name"]: r for r in doc["rows"] if r["status"] == "ok"}
  groups: dict = {}
  for name, r in ok.items():
    e = r.get("extra", {})
    if r["part"] == "recurrence":
      recurrence, impl = name.split()[:2]
      chunk = int(name.split()[2][1:]) if impl == "chunked" else None
      label = "d512 layer, the recurrence alone"
      key = (recurrence, label, e.get("rows"), e.get("length"), e.get("width"))
      if e.get("width") is None:  # Rows of a check older than the width: the d512 layer's.
        dims = {"affine_scan": FULL.slice_dims, "delta_rule": FULL.delta_dims,
                "ssd": FULL.ssd_dims}[recurrence]  # fmt: skip
        key = (recurrence, label, FULL.op_batch, FULL.steps, impls.width_of(recurrence, dims))
      ms = r["ms"]
    elif r["part"] == "population" and "impl" in e:
      recurrence, impl, chunk = e["recurrence"], e["impl"], e.get("chunk")
      label = f"{e['family']} {e['size']}, a population's step (K = {e['k']})"
      key = (recurrence, label, e["rows"], e["length"], e["width"])
      ms = r["b2b_ms"]
    else:
      continue
    groups.setdefault(key, {}).setdefault(impl, []).append((chunk, ms, name))
  rows = []
  for (recurrence, what, n, length, width), by_impl in groups.items():
    yardstick = str(impls.fallback(recurrence, backend))
    default_chunk = {"affine_scan": 256, "delta_rule": 64, "ssd": 64}[recurrence]
    timings = {}
    for impl, found in by_impl.items():
      # A chunked form at the family's chunk size where measured, else its fastest chunk.
      at_default = [f for f in found if f[0] in (None, default_chunk)]
      chunk, ms, name = at_default[0] if at_default else min(found, key=lambda f: f[1])
      timings[impl] = {"ms": ms, "row": name, **({"chunk": chunk} if chunk else {})}
    if yardstick not in timings:
      continue
    for t in timings.values():
      t["ratio"] = t["worst"] = t["ms"] / timings[yardstick]["ms"]
    rows.append({"recurrence": recurrence, "family": what, "rows": n, "length": length,
                 "width": width, "yardstick": yardstick, "timings": timings,
                 "choice": str(impls.choose(recurrence, backend, timings))})  # fmt: skip
  return {
    "source": "bench_device",
    "backend": backend,
    "command": f"python -m benchmarks.bench_scans --device {shown(path)} --out "
    "docs/results/scan_choice.json --table chessjax/ops/scan_table.json",
    "machine": {
      "device_kind": doc["device_kind"],
      "jax": doc["jax"],
      # A record of several runs (docs/results/bench_device_h200.json) dates each run.
      "date": doc.get("date") or min(r["date"] for r in doc["runs"]),
    },
    "rows": rows,
  }


def shown(path) -> str:
  """`path` as a record names it: from the repository root, else its file name alone (no path of
  the machine that ran it)."""
  path = Path(path).resolve()
  return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name


def merged(record: dict | None, run: dict) -> dict:
  """`record` with `run` in place of its earlier run of the same source and backend."""
  record = record or {"what": WHAT, "runs": []}
  key = (run["source"], run["backend"])
  runs = [r for r in record["runs"] if (r["source"], r["backend"]) != key] + [run]
  return {
    **record,
    "rule": {"margin": impls.MARGIN, "near": impls.NEAR},
    "runs": sorted(runs, key=lambda r: (r["backend"], r["source"])),
  }


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("--sizes", default="d128,d256")
  p.add_argument("--rows", default="8,32", help="sequences at once (batch x members)")
  p.add_argument("--lengths", default="64,256")
  p.add_argument("--rounds", type=int, default=3)
  p.add_argument("--seconds", type=float, default=0.3, help="at least this long per timing")
  p.add_argument("--max-gib", type=float, default=3.0, help="larger programs are not run")
  p.add_argument("--out", default="", help="merge the run into this record (JSON)")
  p.add_argument("--table", default="", help="write the record's choices here (JSON)")
  p.add_argument("--device", default="", help="merge a bench_device JSON's rows instead")
  p.add_argument("--toy", action="store_true", help="tiny shapes, one round: seconds")
  opts = p.parse_args(argv)
  opts.sizes = [s for s in opts.sizes.split(",") if s]
  opts.rows = [int(n) for n in opts.rows.split(",") if n]
  opts.lengths = [int(n) for n in opts.lengths.split(",") if n]
  opts.dims = layer_dims
  if opts.toy:  # The families' layers cut to a few channels: every code path, in seconds.
    opts.sizes, opts.rows, opts.lengths, opts.rounds, opts.seconds = ["d128"], [2], [16], 1, 0.0
    opts.dims = toy_dims
  # What reruns this measurement into the committed record and table (no path of this machine).
  opts.command = (
    f"python -m benchmarks.bench_scans --sizes {','.join(opts.sizes)} --rows "
    f"{','.join(map(str, opts.rows))} --lengths {','.join(map(str, opts.lengths))} --rounds "
    f"{opts.rounds} --seconds {opts.seconds:g} --max-gib {opts.max_gib:g} --out "
    "docs/results/scan_choice.json --table chessjax/ops/scan_table.json"
  )
  return opts


def main(argv=None) -> dict:
  opts = parse_args(sys.argv[1:] if argv is None else argv)
  run = device_run(Path(opts.device)) if opts.device else measure(opts)
  record = run
  if opts.out:
    out = Path(opts.out)
    record = merged(json.loads(out.read_text()) if out.exists() else None, run)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out}")
  if opts.table:
    table = {"from": "docs/results/scan_choice.json (chessjax.ops.impl.derive)",
             "entries": impls.derive(record)}  # fmt: skip
    Path(opts.table).write_text(json.dumps(table, indent=1) + "\n")
    print(f"wrote {opts.table}")
  return record


if __name__ == "__main__":
  main()
