"""The table of `benchmarks.bench_population`'s record (populations against runs alone; the
committed one is docs/results/population_cpu.json), written with the benchmarks' one table writer
(`benchmarks.device.common.markdown`): the machine's line, one row per K, then a line per K in
words (`verdict`). What the command prints and what the docs render (`docgen.perf_spans`)."""

from benchmarks.device.common import column, markdown


def verdict(row: dict) -> str:
  """Whether the population of K costs more than K runs one after another, in words: more or less
  where every round says so, else the same within this machine's noise."""
  k, cost = row["k"], 1 / row["speedup"]
  runs = "1 run" if k == 1 else f"{k} runs"
  lo, hi = row["cost_ratio_range"]
  if lo > 1:
    how = "costs MORE than"
  elif hi < 1:
    how = "costs less than"
  else:
    how = "costs the same, within this machine's noise, as"
  return (
    f"K={k}: the population {how} {runs} one after another (median {cost:.2f}x their time, "
    f"per round {lo:.2f}-{hi:.2f}x)"
  )


def _per_round(r: dict) -> str:
  """The speed-up's range over the rounds (the inverse of the cost ratio's)."""
  lo, hi = (1 / x for x in reversed(r["cost_ratio_range"]))
  return f"{lo:.2f}-{hi:.2f}x"


COLUMNS = (
  column("K", lambda r: r["k"], "d"),
  column("population ms", lambda r: r["population_ms"], ".2f"),
  column("member-step ms", lambda r: r["member_step_ms"], ".2f"),
  column("alone ms", lambda r: r["alone_ms"], ".2f"),
  column("K alone ms", lambda r: r["k_alone_ms"], ".2f"),
  ("speed-up", "---:", lambda r: f"{r['speedup']:.2f}x"),
  column("per round", _per_round),
  column("member-steps/s", lambda r: r["member_steps_s"], ",.1f"),
  column("compile s", lambda r: r["compile_s"], ".1f"),
  column("program MiB", lambda r: r["program_mib"], ",.1f"),
)


def table(doc: dict) -> str:
  """The record `doc` as Markdown: its machine's line, the table and the verdicts."""
  m = doc["machine"]
  caption = (
    f"{doc['family']} {doc['size']}, batch {doc['batch']} x {doc['steps']} steps, "
    f"{doc['dtype']}; {m['cpu']} ({m['cores']} cores, load {m['loadavg']}), {m['backend']}, "
    f"jax {m['jax']}, {m['date']}"
  )
  verdicts = [f"* {verdict(r)}" for r in doc["rows"]]
  return "\n".join([caption, "", markdown(doc["rows"], COLUMNS).rstrip("\n"), "", *verdicts]) + "\n"
