"""The table of `benchmarks.bench_loop_overhead`'s record (the training loop's own cost per step;
the committed one is docs/results/loop_overhead_cpu.json), written with the benchmarks' one table
writer (`benchmarks.device.common.markdown`): the machine's line, one row per loop, then a line
per row in words. What the command prints and what the docs render (`docgen.perf_spans`)."""

from benchmarks.device.common import column, markdown


def _range(r: dict) -> str:
  lo, hi = r["own_ms_range"]
  return f"{lo:.2f} to {hi:.2f}"


def _cpu(r: dict) -> str:
  threads = f"{r['main_cpu_ms']:.2f}, " + (
    "-" if r["input_cpu_ms"] is None else f"{r['input_cpu_ms']:.2f}"
  )
  return f"{r['cpu_ms']:.2f} ({threads})"


COLUMNS = (
  column("loop", lambda r: r["name"]),
  column("step alone ms", lambda r: r["step_alone_ms"], ".2f"),
  column("call alone ms/step", lambda r: r["call_alone_ms"], ".2f"),
  column("loop ms/step", lambda r: r["loop_ms"], ".2f"),
  column("loop's own ms/step", lambda r: r["own_ms"], ".2f"),
  column("per round", _range),
  column("host ms/step (its log)", lambda r: r["host_ms"], ".2f"),
  column("input wait %", lambda r: 100 * r["input_wait"], ".1f"),
  column("CPU ms/step: call alone", lambda r: r["call_alone_cpu_ms"], ".2f"),
  column("loop (its main thread, input thread)", _cpu),
)


def verdict(row: dict, goal_ms: float) -> str:
  """Whether the loop's own cost of a row is within the goal, in words."""
  own = row["own_ms"]
  where = "within" if own <= goal_ms else "ABOVE"
  return (
    f"{row['name']}: the loop costs {own:.2f} ms a step beyond its call alone (median of "
    f"{len(row['rounds'])} rounds), {where} the goal of {goal_ms:g} ms"
  )


def gains(doc: dict) -> list[str]:
  """What several steps per call buy, in words: for each loop with more than one step per call,
  its call alone and loop against the same members' at one step per call."""
  ones = {r["members"]: r for r in doc["rows"] if r["steps_per_call"] == 1}
  out = []
  for r in doc["rows"]:
    one = ones.get(r["members"])
    if r["steps_per_call"] == 1 or one is None:
      continue
    who = "one run" if r["members"] == 1 else f"a population of {r['members']}"
    out.append(
      f"{who} at {r['steps_per_call']} steps per call: the call alone {r['call_alone_ms']:.2f} "
      f"ms a step against the step alone's {r['step_alone_ms']:.2f}, the loop {r['loop_ms']:.2f} "
      f"against {one['loop_ms']:.2f} at one step per call ({one['loop_ms'] / r['loop_ms']:.2f}x)"
    )
  return out


def table(doc: dict) -> str:
  """The record `doc` as Markdown: its machine's line, the table, the verdicts and what several
  steps per call buy."""
  m, c = doc["machine"], doc["config"]
  caption = (
    f"{c['family']} d={c['d']}, batch {c['batch']} x {c['length']} steps, {c['steps']} steps a "
    f"loop ({c['log_every']} a log interval, the first left out), {doc['rounds']} rounds; "
    f"{m['cpu']} ({m['cores']} cores, load {m['loadavg']} at the start, {m['loadavg_end']} at "
    f"the end), {m['backend']}, jax {m['jax']}, {m['date']}"
  )
  verdicts = [f"* {verdict(r, doc['goal_ms'])}" for r in doc["rows"]]
  verdicts += [f"* {line}" for line in gains(doc)]
  return "\n".join([caption, "", markdown(doc["rows"], COLUMNS).rstrip("\n"), "", *verdicts]) + "\n"
