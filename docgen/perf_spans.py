"""docs/performance.md's accelerator sections, rendered from code and records: the model FLOPs
per token (`chessjax.flops`), the roofline of a paper-like batch (docs/results/roofline.json,
`benchmarks.bench_roofline`), the H200 rows (docs/results/bench_device_h200.json) and their
comparison with the paper's step time.

The paper's "1.1 s" is a whole run's average: its longest stage-2 retrains took about four days
for 310,944 steps (Walker & Lyons, appendix B; family and GPU not named), data loading,
validation and checkpoints included. Every ratio against it below is a single step against that
whole-run average, and says so.
"""

from chessjax import flops
from chessjax.models import model_config
from chessjax.world_model import grid
from docgen.findings import record

PAPER_RUN_DAYS = 4  # "The longest second-stage retrains took approximately four days."
FAMILIES = ("transformer", "slice", "slice_diag", "gated_deltanet", "gated_deltanet_pos",
            "mamba2", "mamba3", "mamba3_mimo")  # fmt: skip
LABEL = "a step against a whole-run average"


def paper_step_ms() -> float:
  """The paper's whole-run average per step, in ms."""
  return PAPER_RUN_DAYS * 86400e3 / grid.STEPS_4_EPOCHS


def h200(name: str) -> dict | None:
  rows = [r for r in record("bench_device_h200")["rows"] if r["name"] == name]
  return rows[0] if rows and rows[0]["status"] == "ok" else None


def mean_steps() -> int:
  """The bundled sample's mean game in steps (START included), the length the FLOPs table uses."""
  return round(record("roofline")["sample"]["mean_steps"])


def flops_table() -> str:
  """Training MFLOP per token at the sample's mean game, every size, and the d512 forward's split
  over projections / mixer / MLP / head."""
  t = mean_steps()
  out = [
    "| family | d128 | d256 | d384 | d512 | d512 split, % | mixer (chunk) |",
    "|---|---:|---:|---:|---:|---|---|",
  ]
  for family in FAMILIES:
    cells = [f"{flops.per_token(model_config(family, s), t) / 1e6:.2f}" for s in grid.SIZES]
    cfg = model_config(family, "d512")
    f = flops.forward(cfg, t)
    split = " / ".join(f"{100 * f[c] / sum(f.values()):.0f}" for c in flops.COMPONENTS)
    out.append(f"| {family} | " + " | ".join(cells) + f" | {split} | {flops.describe(cfg)} |")
  return "\n".join(out)


def roofline_sample() -> str:
  s = record("roofline")["sample"]
  q = s["padded_steps_quartiles"]
  return "\n".join(
    [
      f"* The sample (`{s['path']}`): {s['games']:,} games kept by the paper's rule, "
      f"{s['mean_steps']:.1f} steps on average (median {s['median_steps']:g}, longest "
      f"{s['max_steps']}).",
      f"* Batches of 128 ({s['batches']} from {s['shuffles']} seeded shuffles) padded to their "
      f"longest game: {s['mean_padded_steps']:.1f} steps on average (quartiles "
      f"{q[0]:g} / {q[1]:g} / {q[2]:g}), so {100 * s['padding']:.0f}% of a batch's cells are "
      "padding.",
    ]
  )


def roofline_table() -> str:
  rec = record("roofline")
  chips = list(rec["chips"])
  head = " | ".join(f"{c} compute ms | {c} memory ms (upper)" for c in chips)
  out = [
    f"| family | TFLOP per step | XLA GB (unfused) | {head} |",
    "|---|---:|---:|" + "---:|" * 2 * len(chips),
  ]
  for family, r in rec["rows"].items():
    cells = [f"{r[c]['compute_ms']:.1f} | {r[c]['memory_ms']:.0f}" for c in chips]
    out.append(
      f"| {family} | {r['flop_per_step'] / 1e12:.3f} | {r['bytes_per_step'] / 1e9:.0f} | "
      + " | ".join(cells)
      + " |"
    )
  return "\n".join(out)


def roofline_against_paper() -> str:
  rec = record("roofline")
  paper = paper_step_ms()
  lines = []
  for chip in rec["chips"]:
    mem = [r[chip]["memory_ms"] for r in rec["rows"].values()]
    comp = [r[chip]["compute_ms"] for r in rec["rows"].values()]
    lines.append(
      f"* {chip}: the paper's {paper / 1e3:.2f} s is "
      f"{paper / max(mem):.1f}-{paper / min(mem):.1f}x the unfused memory bound and "
      f"{paper / max(comp):.0f}-{paper / min(comp):.0f}x the compute bound ({LABEL})."
    )
  return "\n".join(lines)


def h200_table() -> str:
  from benchmarks.device.common import Row
  from benchmarks.device.steps import table

  rows = [r for r in record("bench_device_h200")["rows"] if r["status"] == "ok"]
  return table([Row(**{k: v for k, v in r.items() if k != "run"}) for r in rows]).strip()


def paper_step_table() -> str:
  """Each family's measured d512 batch-128 step (games of 256 steps), the same scaled to the
  paper-like batch's mean padded length (an estimate: the step taken as linear in the length),
  and the paper's whole-run average over each."""
  padded = record("roofline")["sample"]["mean_padded_steps"]
  paper = paper_step_ms()
  out = [
    f"| family | float32 step ms (256 steps, measured) | bfloat16 step ms (measured) | float32 "
    f"at {padded:.0f} steps (estimate) | bfloat16 at {padded:.0f} steps (estimate) | paper's "
    f"{paper / 1e3:.2f} s / float32 estimate ({LABEL}) | paper's {paper / 1e3:.2f} s / "
    f"bfloat16 estimate ({LABEL}) |",
    "|---|---:|---:|---:|---:|---:|---:|",
  ]
  for family in FAMILIES:
    a, b = h200(f"{family} d512 b128 float32"), h200(f"{family} d512 b128 bfloat16")
    if a is None or b is None:
      continue
    ea, eb = a["ms"] * padded / 256, b["ms"] * padded / 256
    out.append(
      f"| {family} | {a['ms']:.2f} | {b['ms']:.2f} | {ea:.2f} | {eb:.2f} | {paper / ea:.1f}x | "
      f"{paper / eb:.1f}x |"
    )
  return "\n".join(out)


def h200_facts() -> str:
  """MFU and step ranges, what `auto` reads off the recurrence rows, the d128 runs' GPU time."""
  rows = [r for r in record("bench_device_h200")["rows"] if r["status"] == "ok"]
  d512 = [r for r in rows if " d512 " in r["name"]]
  d128 = [r for r in rows if " d128 " in r["name"]]
  rec = {r["name"]: r for r in rows if r["part"] == "recurrence"}

  def ms(name):
    return rec[name]["ms"]

  chunked = {k: v["ms"] for k, v in rec.items() if "affine_scan chunked" in k}
  delta = {k: v["ms"] for k, v in rec.items() if "delta_rule chunked" in k}
  ssd = {k: v["ms"] for k, v in rec.items() if "ssd chunked" in k}
  best_ssd = min(ssd, key=ssd.get)
  mini = record("bench_cwm_mini")
  cpu_min = [r["train_cpu_s"] / 60 for r in mini["runs"] if r["train_cpu_s"]]
  gpu_s = [mini["args"]["steps"] * r["ms"] / 1e3 for r in d128]
  demo = record("demo")["gpu"]
  pct = lambda x: f"{100 * x:.0f}"  # noqa: E731
  return "\n".join(
    [
      f"* MFU {pct(min(r['mfu'] for r in d512))}-{pct(max(r['mfu'] for r in d512))}% at d512 "
      f"(float32 runs TF32 matmuls and is measured against the TF32 peak, bfloat16 against its "
      f"own, hence bfloat16's lower MFU at a faster step) and "
      f"{pct(min(r['mfu'] for r in d128))}-{pct(max(r['mfu'] for r in d128))}% at d128 batch 32, "
      f"where a step takes {min(r['ms'] for r in d128):.1f}-{max(r['ms'] for r in d128):.1f} ms.",
      f"* The d128 ranking's {mini['args']['steps']:,}-step runs would take "
      f"{min(gpu_s):.0f}-{max(gpu_s):.0f} s of H200 time each at these steps, against "
      f"{min(cpu_min):.0f}-{max(cpu_min):.0f} CPU-minutes on one core here.",
      f"* The affine scan (SLiCE) is fastest sequential, {ms('affine_scan sequential'):.2f} ms, "
      f"against {min(chunked.values()):.2f}-{max(chunked.values()):.2f} ms chunked and "
      f"{ms('affine_scan associative'):.2f} ms associative: `auto` is sequential on GPU as on "
      "CPU.",
      f"* The delta rule chunked takes {min(delta.values()):.2f}-{max(delta.values()):.2f} ms "
      f"against {ms('delta_rule sequential'):.1f} ms sequential "
      f"({ms('delta_rule sequential') / ms('delta_rule chunked C64'):.1f}x at the default C = 64); "
      f"SSD {ssd[best_ssd]:.2f} ms at its fastest chunk ({best_ssd.split()[-1]}) against "
      f"{ms('ssd sequential'):.1f} ms sequential "
      f"({ms('ssd sequential') / ssd[best_ssd]:.0f}x): both stay chunked.",
      f"* The demo's job on the GPU (`python -m launch.demo_world_model --workers 8`): "
      f"{demo['wall_s']} s in all, training at {demo['train_tokens_per_s'][0]:,}-"
      f"{demo['train_tokens_per_s'][1]:,} tokens/s in its log lines; real test split Labelwise "
      f"{100 * demo['splits']['real']['labelwise']:.2f}%, ExactState "
      f"{100 * demo['splits']['real']['exact_state']:.2f}% (the CPU's: "
      f"{100 * record('demo')['splits']['real']['labelwise']:.2f}% and "
      f"{100 * record('demo')['splits']['real']['exact_state']:.2f}%; TF32 matmuls), "
      f"random-uniform {100 * demo['splits']['random']['labelwise']:.2f}% and "
      f"{100 * demo['splits']['random']['exact_state']:.2f}%.",
    ]
  )


def time_to_target() -> str:
  """bench_parity_quality's time for each side to reach the released runs' highest final
  held-out loss (docs/results/parity.json)."""
  q = record("parity")["quality"]["time_to_target"]
  out = [
    "| family | target loss | released wall s | chessjax wall s | ratio | released CPU s | "
    "chessjax CPU s | whole run wall s released / chessjax |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
  ]
  notes = []
  for family in ("transformer", "slice"):
    r = q[family]
    rel, own = r["released_wall_s"], r["chessjax_wall_s"]
    whole = r["whole_run_wall_s"]
    out.append(
      f"| {family} | {r['target_loss']:.4f} | {rel[0]} ({rel[1]}-{rel[2]}) | {own[0]} "
      f"({own[1]}-{own[2]}) | {rel[0] / own[0]:.2f}x | {r['released_cpu_s']} | "
      f"{r['chessjax_cpu_s']} | {whole['released']} / {whole['chessjax']} |"
    )
    notes.append(
      f"{family} {whole['released'] / whole['chessjax']:.2f}x over the whole run, "
      f"{rel[0] / own[0]:.2f}x to the target"
    )
  return (
    "\n".join(out) + "\n\nchessjax against the released loop, wall time: " + "; ".join(notes) + "."
  )


def mimo_memory() -> str:
  """Mamba-3 MIMO's d512 step in one pass and in rematerialised segments (CPU memory analysis),
  and the H200's ratio that scales it to a GPU (docs/results/mimo_memory.json)."""
  rec = record("mimo_memory")
  h200 = rec["h200_one_pass_gib"]
  cpu = {(r["batch"], r["steps"], r["dtype"]): r for r in rec["rows"]}
  gib = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
  out = [
    "| d512 train step, program GiB | dtype | one pass (before) | segments of 64 (default) "
    "| segments of 128 | GPU estimate, segments of 64 |",
    "|---|---|---:|---:|---:|---:|",
  ]
  for r in rec["rows"]:
    ratio = h200[r["dtype"]] / cpu[128, 256, r["dtype"]]["one_pass_gib"]
    out.append(
      f"| batch {r['batch']}, {r['steps']} steps | {r['dtype']} | {gib(r['one_pass_gib'])} | "
      f"{gib(r['seg64_gib'])} | {gib(r['seg128_gib'])} | {r['seg64_gib'] * ratio:.0f} |"
    )
  ratios = ", ".join(
    f"{h200[d] / cpu[128, 256, d]['one_pass_gib']:.2f} in {d}" for d in ("bfloat16", "float32")
  )
  others = "; ".join(
    f"segments of {o['segment']}: {o['gib']:.2f} GiB at batch {o['batch']}, {o['steps']} steps"
    for o in rec["other_segments"]
  )
  c = rec["checkpoint_without_loop"]
  return "\n".join(
    out
    + [
      "",
      f"* GPU estimate: the CPU figure times the H200's program size over the CPU analysis of the "
      f"same one-pass step (batch 128, 256 steps): {ratios}. Not measured on a GPU; the CPU "
      f"figures themselves are the cautious bound: at batch 128 and 1024 steps they are "
      f"{_fits(rec)} an {rec['h100_gib']} GB H100.",
      f"* Other segment sizes, float32: {others}.",
      f"* A `jax.checkpoint` around the whole mixer without the loop: {c['jax_checkpoint_gib']:.2f}"
      f" GiB against {c['one_pass_gib']:.2f} in one pass (batch {c['batch']}, {c['steps']} steps, "
      f"{c['dtype']}); `train.remat`, the whole block rematerialised: {c['train_remat_gib']:.2f}.",
    ]
  )


H200_1128 = "bench_device_h200_1128"  # The loop and population rows of 2026-11-28.


def h200_1128_rows() -> list:
  """The 2026-11-28 check's ok rows as `benchmarks.device.common.Row`s, with the MFU columns
  today's tables show, from its own numbers (same tokens and FLOPs, another time): a step's MFU
  back to back from its each-to-completion one; a population's (that check took its MFU from the
  back-to-back time) the other way; a loop's from its step alone back to back times the loop's
  efficiency, beside the step alone's."""
  from benchmarks.device.common import Row

  rows = {r["name"]: Row(**{k: v for k, v in r.items() if k != "run"})
          for r in record(H200_1128)["rows"]}  # fmt: skip
  for r in rows.values():
    if r.part == "train":
      r.mfu_b2b = r.mfu * r.ms / r.b2b_ms
    elif r.part == "population":
      r.mfu, r.mfu_b2b = r.mfu * r.b2b_ms / r.ms, r.mfu
  for r in rows.values():
    if r.part == "loop":
      alone = rows[r.name.removeprefix("loop ")]
      r.extra.update(alone_ms=alone.ms, alone_mfu=alone.mfu, alone_mfu_b2b=alone.mfu_b2b)
      r.mfu = r.mfu_b2b = alone.mfu_b2b * r.extra["efficiency"]
  return list(rows.values())


def h200_1128_machine() -> str:
  rec = record(H200_1128)
  runs = "; ".join(
    f"run {r['run']}: `{r['command']}`, {r['seconds']} s"
    + (f" (not reached: {', '.join(r['not_reached'])})" if r["not_reached"] else "")
    for r in rec["runs"]
  )
  return (
    f"One {rec['device_kind']} ({rec['memory_mib']:,} MiB, driver {rec['driver']}), "
    f"{rec['runs'][0]['date'][:10]}, code of commit {rec['commit']}: {rec['packages']}. {runs}."
  )


def h200_loop() -> str:
  from benchmarks.device import loop

  return loop.table([r for r in h200_1128_rows() if r.part == "loop"]).strip()


def h200_population() -> str:
  from benchmarks.device import population

  return population.table([r for r in h200_1128_rows() if r.part == "population"]).strip()


def h200_d512_bf16() -> str:
  from benchmarks.device.steps import table

  rows = [r for r in h200_1128_rows() if r.part == "train" and r.name.endswith("bfloat16")]
  return table(rows).strip()


def h200_dropout_prng() -> str:
  t = record(H200_1128)["transformer_dropout_prng"]
  out = [
    "| process | variant | dropout | PRNG | step ms | b2b ms | compile s |",
    "|---:|---|---:|---|---:|---:|---:|",
  ]
  for r in t["rows"]:
    out.append(
      f"| {r['process']} | {r['variant']} | {r['dropout']:g} | {r['prng']} | {r['ms']:.2f} | "
      f"{r['b2b_ms']:.2f} | {r['compile_s']:.1f} |"
    )
  return "\n".join(out)


def h200_1128_facts() -> str:
  """What the 2026-11-28 rows say against the goals (issue 52)."""
  rows = {r.name: r for r in h200_1128_rows()}
  loop = {n.split()[2]: r.extra for n, r in rows.items() if r.part == "loop"}
  pop = {(n.split()[2], n.split()[3], n.split()[4]): r for n, r in rows.items()
         if r.part == "population"}  # fmt: skip

  def up(size, batch, k):
    return f"{pop[size, batch, k].extra['speedup']:.2f}x"

  best = pop["d128", "b128", "K64"]
  return "\n".join(
    [
      f"* The loop against its step alone: {100 * loop['d512']['efficiency']:.1f}% at d512 batch "
      f"128 (goal 90%), {100 * loop['d128']['efficiency']:.1f}% at d128 batch 32 (goal 75%): there "
      f"{loop['d128']['loop_ms']:.2f} ms a step against {loop['d128']['alone_b2b_ms']:.2f} ms for "
      f"the step back to back, {loop['d128']['host_ms']:.2f} ms of host time a step and "
      f"{100 * loop['d128']['input_wait']:.1f}% input wait: the loop, not the device, sets the "
      "pace of a small run.",
      f"* Populations of SLiCE d128 at batch 32: K = 4 / 16 / 64 give {up('d128', 'b32', 'K4')} / "
      f"{up('d128', 'b32', 'K16')} / {up('d128', 'b32', 'K64')} the member-steps of K runs one "
      "after another (goal 6x at K = 16); at batch 128, the grid's: "
      f"{up('d128', 'b128', 'K4')} / {up('d128', 'b128', 'K16')} / {up('d128', 'b128', 'K64')} "
      f"({best.extra['member_steps_s']:.1f} member-steps/s at K = 64, MFU "
      f"{100 * best.mfu_b2b:.1f}% back to back). d256 K = 4: {up('d256', 'b128', 'K4')}; d512 "
      f"K = 4: {up('d512', 'b128', 'K4')}.",
      f"* Largest K that fits the H200 at batch 128 (the memory check's estimate): "
      f"{pop['d128', 'b128', 'K64'].extra['largest_k']} at d128, "
      f"{pop['d256', 'b128', 'K4'].extra['largest_k']} at d256, "
      f"{pop['d512', 'b128', 'K4'].extra['largest_k']} at d512.",
    ]
  )


def stage1_gpu_hours() -> str:
  """The paper's stage-1 grid at d128 and d256 (batch 128) in GPU-hours: run by run, bounded by
  the H200's measured steps of 2026-11-27 (no device had timed a batch-128 step at these sizes
  then); with populations, measured where the H200 ran them (2026-11-28: SLiCE at batch 128,
  the fastest K measured), bounded elsewhere by the run-by-run upper bound (a population of
  K >= 4 was faster than its runs one after another in every measured row)."""
  from configs.cwm import BFLOAT16_FAMILIES

  runs = len(grid.LRS) * len(grid.WARMUPS) * len(grid.B2S) * len(grid.WDS)
  steps = grid.STEPS_1_EPOCH
  hours = lambda ms: runs * steps * ms / 3.6e6  # noqa: E731
  pops = [r for r in h200_1128_rows() if r.part == "population" and r.name.split()[3] == "b128"]
  out = [
    "| family | size | runs x steps | GPU-hours run by run (bounds) | with populations |",
    "|---|---|---:|---:|---|",
  ]
  totals, with_pop = [0.0, 0.0], 0.0
  for family in grid.MAIN:
    dtype = "bfloat16" if family in BFLOAT16_FAMILIES else "float32"
    low, high = h200(f"{family} d128 b32 {dtype}"), h200(f"{family} d512 b128 {dtype}")
    for size in ("d128", "d256"):
      mine = [r for r in pops if r.name.split()[1:3] == [family, size] and dtype == "float32"]
      cell, pop, value = "- (a bound was not measured)", "- (no bound)", 0.0
      if low is not None and high is not None:
        cell = f"{hours(low['ms']):,.0f} to {hours(high['ms']):,.0f}"
        totals = [totals[0] + hours(low["ms"]), totals[1] + hours(high["ms"])]
        value = hours(high["ms"])
        pop = f"at most {value:,.0f} (bound: no population measured)"
      if mine:
        best = max(mine, key=lambda r: r.extra["member_steps_s"])
        value = runs * steps / best.extra["member_steps_s"] / 3600
        largest = best.extra["k"] == max(r.extra["k"] for r in mine)
        pop = (
          f"{value:,.1f} (measured: K = {best.extra['k']}, "
          f"{best.extra['member_steps_s']:,.1f} member-steps/s"
          + (", the largest K measured" if largest else "")
          + f"; {hours(best.extra['alone_b2b_ms']):,.1f} run by run at its step alone's "
          f"{best.extra['alone_b2b_ms']:.2f} ms)"
        )
      with_pop += value
      out.append(f"| {family} | {size} | {runs} x {steps:,} | {cell} | {pop} |")
  out.append(
    f"| measured families | d128 + d256 | | {totals[0]:,.0f} to {totals[1]:,.0f} | at most "
    f"{with_pop:,.0f} |"
  )
  return "\n".join(out)


SCAN = "scan_choice"  # What `auto` picks at which shape (chessjax.ops.impl.TABLE).


def scan_rule() -> str:
  """The rule `chessjax.ops.impl.resolve` applies, with its constants and fallbacks."""
  from chessjax.ops import impl

  rule = record(SCAN)["rule"]
  assert rule == {"margin": impl.MARGIN, "near": impl.NEAR}, "the record's rule is not the code's"
  fallbacks = "; ".join(
    f"{r}: " + ", ".join(f"{impl.fallback(r, b)} on {b.upper()}" for b in ("cpu", "gpu", "tpu"))
    for r in impl.RECURRENCES
  )
  return "\n".join(
    [
      "* A call's shape: rows (the sequences at once: the batch times a population's members), "
      "length (steps) and width (what one sequential step multiplies per row: the affine scan's "
      "transition entries, d x b for SLiCE's blocks of b and d for the diagonal form; the delta "
      "rule's and SSD's state entries, H x K x V and H x P x N).",
      f"* A measured shape leaves the fallback for the fastest implementation there only if it is "
      f"{rule['margin']:g}x as fast as the fallback at the median and faster in every timed round.",
      "* A call takes the choice of the nearest measured shape of its recurrence and backend whose "
      f"rows, length and width are each within a factor {rule['near']:g} of its own (nearest: the "
      "smallest sum of |log2| ratios; a tie goes to the entry listed first).",
      f"* Fallback, where no measured shape is that near, for a backend not measured, or where no "
      f"shape is given (the FLOP counts of `chessjax.flops`): {fallbacks}.",
    ]
  )


def scan_table() -> str:
  """Each measured shape of the record: every implementation's time and ratio to the fallback,
  and what `auto` picks there."""
  rec = record(SCAN)
  out = []
  for run in rec["runs"]:
    m = run["machine"]
    where = (
      f"{m['cpu']} ({m['cores']} cores, load average {m['loadavg_before']:g} before and "
      f"{m['loadavg_after']:g} after)"
      if "cpu" in m
      else m["device_kind"]
    )
    out += [
      f"{run['backend'].upper()}: {where}, jax {m['jax']}, {m['date'][:10]}; `{run['command']}`",
      "",
      "| recurrence | layer | rows | length | width | sequential ms | chunked ms | associative "
      "ms | auto |",
      "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in run["rows"]:
      layer = f"{r['family']} {r['size']}" if "size" in r else r["family"]

      def cell(name, r=r):
        t = r["timings"].get(name)
        if t is None:
          return "over the memory cap" if name in r.get("skipped", {}) else "-"
        chunk = f" (C{t.get('chunk', r.get('chunk'))})" if name == "chunked" else ""
        return f"{t['ms']:,.2f} ({t['ratio']:.2f}x){chunk}"

      cells = " | ".join(cell(n) for n in ("sequential", "chunked", "associative"))
      out.append(
        f"| {r['recurrence']} | {layer} | {r['rows']} | {r['length']} | {r['width']:,} | {cells} "
        f"| {r.get('choice', '- (no yardstick)')} |"
      )
    out.append("")
  return "\n".join(out).strip()


def population_cpu() -> str:
  """A population's member-step against the run alone on the CPU
  (docs/results/population_cpu.json, `benchmarks.bench_population`)."""
  from benchmarks import population_table

  return population_table.table(record("population_cpu")).strip()


def loop_cpu() -> str:
  """The training loop against its step alone on the CPU (docs/results/loop_cpu.json)."""
  rec = record("loop_cpu")
  out = [
    "| row | shape | step alone ms | loop ms/step | the loop's speed, % of the step's | input wait "
    "% | host ms/step | timed steps |",
    "|---|---|---:|---:|---:|---:|---:|---:|",
  ]
  for r in rec["rows"]:
    e = r["extra"]
    out.append(
      f"| {r['name']} | {r['shape']} | {e['alone_b2b_ms']:.1f} | {e['loop_ms']:.1f} | "
      f"{100 * e['efficiency']:.1f} | {100 * e['input_wait']:.2f} | {e['host_ms']:.1f} | "
      f"{e['timed_steps']} |"
    )
  return "\n".join(out)


def loop_overhead_cpu() -> str:
  """The training loop's own cost per step on the CPU, at 1 and more steps per call
  (docs/results/loop_overhead_cpu.json, `benchmarks.bench_loop_overhead`)."""
  from benchmarks import loop_overhead_table

  return loop_overhead_table.table(record("loop_overhead_cpu")).strip()


def _fits(rec: dict) -> str:
  longest = [r["seg64_gib"] for r in rec["rows"] if (r["batch"], r["steps"]) == (128, 1024)]
  return "within" if max(longest) * 2**30 < rec["h100_gib"] * 1e9 else "not within"


def bench_device_minutes() -> str:
  """The rough minutes of the check's first three parts (its catalogue's own guesses)."""
  from benchmarks.device import ab, loop, population
  from benchmarks.device.common import Catalogue

  cat = Catalogue()
  loop.units(cat)
  ab.command_buffers(cat)
  population.units(cat)
  return f"{sum(u.seconds for u in cat.units) / 60:.1f}"


def register(spans: dict) -> None:
  spans["perf:BENCH_DEVICE_MINUTES"] = bench_device_minutes
  spans["perf:H200_1128_MACHINE"] = h200_1128_machine
  spans["perf:H200_LOOP"] = h200_loop
  spans["perf:H200_POPULATION"] = h200_population
  spans["perf:H200_1128_FACTS"] = h200_1128_facts
  spans["perf:H200_D512_BF16"] = h200_d512_bf16
  spans["perf:H200_DROPOUT_PRNG"] = h200_dropout_prng
  spans["perf:SCAN_RULE"] = scan_rule
  spans["perf:SCAN_TABLE"] = scan_table
  spans["perf:MIMO_MEMORY"] = mimo_memory
  spans["perf:STAGE1_GPU_HOURS"] = stage1_gpu_hours
  spans["perf:POPULATION_CPU"] = population_cpu
  spans["perf:LOOP_CPU"] = loop_cpu
  spans["perf:LOOP_OVERHEAD_CPU"] = loop_overhead_cpu
  spans["perf:TIME_TO_TARGET"] = time_to_target
  spans["perf:FLOPS_TABLE"] = flops_table
  spans["perf:FLOPS_T"] = lambda: str(mean_steps())
  spans["perf:ROOFLINE_SAMPLE"] = roofline_sample
  spans["perf:ROOFLINE_TABLE"] = roofline_table
  spans["perf:ROOFLINE_PAPER"] = roofline_against_paper
  spans["perf:H200_TABLE"] = h200_table
  spans["perf:PAPER_STEP_TABLE"] = paper_step_table
  spans["perf:H200_FACTS"] = h200_facts
