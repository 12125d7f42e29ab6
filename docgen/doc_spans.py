"""The renderers of the docs' marked spans (`docgen.docs`), by key: the world-model page's tables of
`launch.cwm_mini` runs and their findings (`docgen.findings`, `docgen.findings_long`), and the
README's results. Each renderer reads docs/results/*.json or a paper's data file, nothing else.
The other pages' spans are registered by `docgen.record_tables` and `docgen.claims`.
"""

import argparse
from collections.abc import Callable

from chessjax.world_model import grid, report
from docgen import (
  claims,
  findings,
  findings_long,
  perf_spans,
  record_tables,
  track_spans,
  transfer_spans,
  verdict,
)
from docgen.findings import name, record
from launch import cwm_tables

SPANS: dict[str, Callable[[], str]] = {}

# Record of each prefix of the world-model page's spans.
CWM = {
  "mini": "bench_cwm_mini",
  "long": "bench_cwm_long",
  "whole": "bench_cwm_whole",
  "x4": "bench_cwm_x4",
}


def span(key: str):
  def register(fn):
    if key in SPANS:
      raise ValueError(f"span {key} registered twice")
    SPANS[key] = fn
    return fn

  return register


def lines(fn: Callable[[], list[str]]) -> Callable[[], str]:
  return lambda: "\n".join(fn())


def protocol(rec: dict) -> argparse.Namespace:
  """The arguments `cwm_tables` reads, from a record's protocol."""
  return argparse.Namespace(**{"eval_max_len": None, **rec["args"]})


def _tables(text: str) -> list[str]:
  """The Markdown tables of `text`, in order."""
  return [t.strip() for t in text.split("\n\n") if t.strip().startswith("|")]


def runs_done(prefix: str) -> str:
  rec = record(CWM[prefix])
  planned = cwm_tables.plan(protocol(rec))
  names = [f"{r['family']}_s{r['seed']}" for r in rec["runs"]]
  return f"{len(names)} of the {len(planned)} planned runs ({', '.join(names)})"


def table8(prefix: str, captions: tuple[str, str]) -> str:
  rec = record(CWM[prefix])
  real, random = _tables(cwm_tables.tables_markdown(protocol(rec), rec["runs"], ""))[:2]
  return f"{captions[0]}\n\n{real}\n\n{captions[1]}\n\n{random}"


def paired_table(prefix: str, index: int) -> str:
  """The seed-by-seed tables: 0, each recurrent family against the Transformer; 1, each
  ablation against its main family."""
  rec = record(CWM[prefix])
  return _tables(cwm_tables.tables_markdown(protocol(rec), rec["runs"], ""))[3 + index]


def time_table(prefix: str) -> str:
  rec = record(CWM[prefix])
  return _tables(cwm_tables.tables_markdown(protocol(rec), rec["runs"], ""))[-1]


def long_table(prefix: str, index: int) -> str:
  """0: length generalisation; 1: strata."""
  rec = record(CWM[prefix])
  return _tables(cwm_tables.long_tables_markdown(protocol(rec), rec["runs"]))[index]


def tables_11_12() -> str:
  """The paper's Tables 11-12 layout: its d512 rows, then the whole-game record's d128 runs."""
  rec, data = record("bench_cwm_whole"), findings.paper()
  out = []
  for key, title in (
    ("table11", "ExactState %; each cell ours / paper"),
    ("table12", "Labelwise %"),
  ):
    table = rec["report_tables"][key]
    rows = [{"family": r["family"], "size": r["size"], "split": r["split"], "paper": r}
            for r in data["tables"][key]["rows"]]  # fmt: skip
    rows += [dict(r, paper=None) for r in table["rows"]]
    md = report.table_markdown(key, dict(table, rows=rows), data["families"])
    out.append(f"Table {key.removeprefix('table')} ({title}):\n\n" + _tables(md)[0])
  return "\n\n".join(out)


for _p in CWM:
  SPANS[f"{_p}:RUNS_DONE"] = lambda p=_p: runs_done(p)
  SPANS[f"{_p}:TIME_TABLE"] = lambda p=_p: time_table(p)
SPANS["mini:TABLE8"] = lambda: table8(
  "mini", ("Held-out real games (Table 8 layout):", "Random-uniform games (Table 8 layout):")
)
SPANS["mini:PAIRED_TRANSFORMER"] = lambda: paired_table("mini", 0)
SPANS["mini:PAIRED_ABLATIONS"] = lambda: paired_table("mini", 1)
SPANS["long:TABLE8_LONG"] = lambda: table8(
  "long", ("Held-out real games:", "Random-uniform games:")
)
for _p in ("whole", "x4"):
  SPANS[f"{_p}:TABLE8_LONG"] = lambda p=_p: table8(
    p, ("Held-out real games, whole:", "Random-uniform games, whole:")
  )
SPANS["long:LENGTH_TABLE"] = lambda: long_table("long", 0)
SPANS["whole:LENGTH_TABLE"] = lambda: long_table("whole", 0)
SPANS["long:STRATA_TABLE"] = lambda: long_table("long", 1)
SPANS["whole:TABLES_11_12"] = tables_11_12

# Findings of the world-model page.
SPANS["wm:RANKING"] = lines(findings.ranking_vs_transformer)
SPANS["wm:SLICE_GAP"] = lines(findings.slice_gap_over_training)
SPANS["wm:ABLATIONS"] = lines(findings.ablations_d128)
SPANS["wm:SCALE"] = lines(findings.scale_d128)
SPANS["wm:BEST_IS_LAST"] = lines(findings.best_is_last)
SPANS["wm:WHOLE_VS_RANKING"] = lines(findings.whole_against_the_ranking)
SPANS["wm:WHOLE_RANDOM"] = lines(findings.whole_random_games)
SPANS["wm:WHOLE_HORIZON"] = lines(lambda: findings.exact_state_horizon("bench_cwm_whole"))
SPANS["wm:DIAG_BLOWUP"] = lines(findings_long.diagonal_slice_blowup)
SPANS["wm:COLLAPSE"] = lines(findings_long.collapse_claim)
SPANS["wm:LABELWISE_BEYOND"] = lines(findings_long.labelwise_beyond)
SPANS["wm:STRATA"] = lines(findings_long.strata_findings)
SPANS["wm:X4_GAP_TABLE"] = lines(findings_long.x4_gap_table)
SPANS["wm:X4_SLICE"] = lines(findings_long.x4_slice_gap)
SPANS["wm:X4_LEADERS"] = lines(findings_long.x4_gains_and_leaders)
SPANS["wm:X4_FIRST_WRONG"] = lines(findings_long.x4_first_wrong_and_beyond)


@span("readme:D128_TABLE")
def readme_d128() -> str:
  """The README's d128 table: per family, seeds, real and random-uniform loss and ExactState
  (mean [min-max] over seeds; the paper's d128 ExactState in parentheses)."""
  rec = record("bench_cwm_mini")
  s = cwm_tables.summarize(rec["runs"])
  out = [
    f"| d128, {rec['args']['steps']:,} steps | seeds | real loss | real ExactState % (paper) | "
    "random loss | random ExactState % (paper) |",
    "|---|---:|---:|---:|---:|---:|",
  ]
  for family in (*cwm_tables.MAIN, *cwm_tables.ABLATIONS):
    cells = []
    for split in cwm_tables.SPLITS:
      p = findings.paper_row(family, "d128", split)["exact_state"]
      cells.append(cwm_tables._cell(s[family][split]["loss"], 4))
      cells.append(f"{cwm_tables._cell(s[family][split]['exact_state'], 2)} ({p:.2f})")
    out.append(f"| {name(family)} | {len(s[family]['seeds'])} | " + " | ".join(cells) + " |")
  return "\n".join(out)


# ------------------------------------------------------------------------------------------------
# The demo, parity with the released code, the reproduction kit


@span("wm:POPULATION_DROPOUT")
def population_dropout() -> str:
  """Members with their own data orders and dropout at the padded shape, against their runs
  alone (docs/results/population_dropout.json)."""
  rec = record("population_dropout")
  diffs = ", ".join(f"{r['difference']:+.5f} (seed {r['seed']})" for r in rec["rows"])
  ratio = rec["largest_difference"] / rec["seed_spread"]
  return (
    f"{rec['family']} {rec['size']}, {rec['steps']} steps, seeds {rec['seeds']}: the members' "
    f"batches were padded at {100 * rec['padded_step_share']:.0f}% of the steps; final "
    f"validation loss, member minus run alone: {diffs}; the runs alone spread over "
    f"{rec['seed_spread']:.5f} across the seeds, so the largest difference is "
    f"{100 * ratio:.0f}% of that spread (one population, {len(rec['seeds'])} seeds; a toy scale)"
  )


@span("wm:DEMO")
def demo_table() -> str:
  rec = record("demo")
  out = ["| what | result |", "|---|---|"]
  for split, words in (("real", "real test split"), ("random", "random-uniform")):
    s = rec["splits"][split]
    cut = f", cut at {s['max_len']} steps" if "max_len" in s else ""
    out.append(
      f"| demo model vs majority-class baseline, {words} ({s['games']} games{cut}) | Labelwise "
      f"{findings.pct(s['labelwise'])}% vs {findings.pct(s['baseline_labelwise'])}%, ExactState "
      f"{findings.pct(s['exact_state'])}% vs {findings.pct(s['baseline_exact_state'])}% |"
    )
  return "\n".join(out)


@span("wm:GOLDEN")
def golden_table() -> str:
  g, step = record("parity")["golden"], record("parity")["step"]
  out = [
    "| chessjax against | precision | largest difference | largest value | test |",
    "|---|---|---:|---:|---|",
    f"| the released models' logits ({g['logits']['models']}) | float32 | "
    f"{g['logits']['max_abs_diff']:.1e} | {g['logits']['max_abs_value']:g} | "
    f"`{g['test'].split()[0]}` |",
  ]
  for r in g["ops"]["rows"]:
    out.append(
      f"| {r['op']}: {r['reference']} | {r['dtype']} | {r['max_abs_diff']:.1e} | "
      f"{r['max_abs_value']:g} | `{g['ops']['test'].split()[0]}` |"
    )
  for family in ("transformer", "slice"):
    s = step[family]
    out.append(
      f"| the released training step, {name(family)}, 30 steps | float32 | loss "
      f"{s['loss_rel']:.1e}, gradient norm {s['grad_norm_rel']:.1e} (relative); parameters "
      f"{s['params_abs']:.1e} | parameters move by up to {step['params_move']:g} | "
      f"`{step['test'].split()[0]}` |"
    )
  return "\n".join(out)


def _spread(v: list[float], digits: int) -> str:
  return f"{v[0]:.{digits}f} ({v[1]:.{digits}f}-{v[2]:.{digits}f})"


@span("wm:PARITY_TABLE")
def parity_table() -> str:
  q = record("parity")["quality"]
  out = [
    "| family | loop | held-out loss | Labelwise % | ExactState % |",
    "|---|---|---:|---:|---:|",
  ]
  for family, sides in q["rows"].items():
    for side, m in sides.items():
      out.append(
        f"| {name(family)} | {side} | {_spread(m['loss'], 4)} | {_spread(m['labelwise'], 2)} | "
        f"{_spread(m['exact_state'], 2)} |"
      )
  return "\n".join(out)


@span("wm:PARITY_FINDINGS")
def parity_findings() -> str:
  """chessjax's loop against the released one: by how much, outside the seed spread or not, and
  what the released batch order leaves of the difference."""
  q = record("parity")["quality"]["rows"]
  out = []
  for family, sides in q.items():
    rel, own, order = sides["released"], sides["chessjax"], sides["chessjax, released batch order"]
    lower = 100 * (rel["loss"][0] - own["loss"][0]) / rel["loss"][0]
    outside = own["loss"][2] < rel["loss"][1]
    inside = [
      m for m in ("loss", "labelwise", "exact_state") if rel[m][1] <= order[m][0] <= rel[m][2]
    ]
    overlap = [
      m for m in ("loss", "labelwise", "exact_state")
      if order[m][1] <= rel[m][2] and rel[m][1] <= order[m][2]
    ]  # fmt: skip
    words = {"loss": "loss", "labelwise": "Labelwise", "exact_state": "ExactState"}
    out.append(
      f"* **{name(family)}**: chessjax's own loop ends {lower:.1f}% lower in held-out loss than "
      f"the released loop, {'outside' if outside else 'inside'} the released seeds' range. On the "
      f"released batch order its mean is inside that range on "
      f"{findings._join([words[m] for m in inside]) if inside else 'no metric'} and the seed "
      f"ranges overlap on {len(overlap)} of 3; the loss gap to the released mean goes from "
      f"{rel['loss'][0] - own['loss'][0]:.4f} to {rel['loss'][0] - order['loss'][0]:.4f}."
    )
  return "\n".join(out)


def reproduce_rows(cells: list[tuple[str, str, str]]) -> str:
  """Table 8 rows of `make reproduce-mini`: ours / the paper's (report.fmt_loss and 2 decimals;
  "-" where the kit ran no cell)."""
  rec = record("reproduce_mini")["table8"]
  out = [
    "| Model | Size | Split | Loss | Labelwise (%) | ExactState (%) | Trajectory (%) |",
    "|---|---|---|---:|---:|---:|---:|",
  ]
  for family, size, split in cells:
    ours = rec.get(family, {}).get(size, {}).get(split)
    p = findings.paper_row(family, size, split)
    row = []
    for m in ("loss", "labelwise", "exact_state", "trajectory"):
      fmt = report.fmt_loss if m == "loss" else (lambda x: f"{x:.2f}")
      row.append(f"{'-' if ours is None else fmt(ours[m])} / {fmt(p[m])}")
    out.append(f"| {name(family)} | {size} | {split} | " + " | ".join(row) + " |")
  return "\n".join(out)


SPANS["rm:TABLE8"] = lambda: reproduce_rows(
  [("transformer", "d128", "real"), ("transformer", "d128", "random"),
   ("transformer", "d256", "real"), ("slice", "d128", "real"), ("slice", "d128", "random")]
)  # fmt: skip
SPANS["readme:REPRODUCE_TABLE8"] = lambda: reproduce_rows(
  [("transformer", "d128", "real"), ("slice", "d128", "real"), ("slice", "d256", "real")]
)


@span("rm:SELECTION")
def reproduce_selection() -> str:
  """The kit's selection, per family: the stage-1 winner and the floor kept in stage 2."""
  sel = record("reproduce_mini")["selection"]
  out = []
  for family, sizes in sel.items():
    for size, s in sizes.items():
      other = 0.01 if s["kept_floor"] == 0.1 else 0.1
      kept, dropped = (s[f"val_loss_floor_{x:g}"] for x in (s["kept_floor"], other))
      out.append(
        f"* {name(family)} {size}: lr {s['lr']:g}, warmup {s['warmup']}, beta2 {s['b2']:g}, "
        f"weight decay {s['wd']:g} (stage-1 validation loss {s['stage1_val_loss']:g}); floor "
        f"{s['kept_floor']:g} kept ({kept:g} against {dropped:g} at floor {other:g})."
      )
  return "\n".join(out)


@span("rm:TIME")
def reproduce_time() -> str:
  rec = record("reproduce_mini")
  minutes, seconds = divmod(rec["wall_s"], 60)
  return f"{minutes} min {seconds} s"


@span("rm:RERUN")
def reproduce_reruns() -> str:
  """Each later run of the command against the record's own: whether its Table 8 and selection
  are the same, computed here."""
  rec = record("reproduce_mini")
  out = []
  for run in rec.get("reruns", []):
    parts = (("table8", "Table 8"), ("selection", "selection"))
    differ = [label for key, label in parts if run[key] != rec[key]]
    verdict = f"a different {' and '.join(differ)}" if differ else "the same Table 8 and selection"
    minutes, seconds = divmod(run["wall_s"], 60)
    out.append(
      f"Run again at commit {run['commit']} ({run['date']}), {run['how']}, on "
      f"{run['machine']}: {verdict} to the printed digit, in {minutes} min {seconds} s."
    )
  return " ".join(out)


# ------------------------------------------------------------------------------------------------
# docs/claims.md

SPANS["claims:TABLES"] = claims.claims_markdown
SPANS["claims:HOURS"] = claims.per_run_hours
SPANS["claims:H200_NOTE"] = claims.h200_note
SPANS["claims:RULE"] = lambda: verdict.RULE

record_tables.register(SPANS)
perf_spans.register(SPANS)
track_spans.register(SPANS)
transfer_spans.register(SPANS)


# ------------------------------------------------------------------------------------------------
# The README's results


@span("readme:PARITY")
def readme_parity() -> str:
  g, step, q = (record("parity")[k] for k in ("golden", "step", "quality"))
  inside = {}
  for family, sides in q["rows"].items():
    rel, order = sides["released"], sides["chessjax, released batch order"]
    inside[family] = sum(rel[m][1] <= order[m][0] <= rel[m][2] for m in rel)
  return (
    f"Transformer and SLiCE logits within {g['logits']['max_abs_diff']:.1e}, 30 training steps "
    f"within {max(step[f]['loss_rel'] for f in ('transformer', 'slice')):.1e} in the loss, and, "
    "trained on the released batch order, held-out means inside the released runs' seed range on "
    + " and ".join(f"{inside[f]} of 3 metrics for {name(f)}" for f in inside)
  )


@span("readme:DEMO")
def readme_demo() -> str:
  s = record("demo")["splits"]["real"]
  return (
    f"Labelwise {findings.pct(s['labelwise'])}%, ExactState {findings.pct(s['exact_state'])}% on "
    f"real test games (majority class: {findings.pct(s['baseline_labelwise'])}%, "
    f"{findings.pct(s['baseline_exact_state'])}%)"
  )


@span("readme:CWM_CLAIMS")
def readme_cwm_claims() -> str:
  out = ["| the paper's claim | here (scale) |", "|---|---|"]
  out += [f"| {c[0]} | {c[2]} |" for c in claims._cwm()]
  return "\n".join(out)


@span("readme:X4")
def readme_x4() -> str:
  return "\n".join(findings_long.x4_slice_gap()[:1] + ["", *findings_long.x4_leaders_table()])


@span("readme:LM")
def readme_lm() -> str:
  return "\n".join(
    track_spans.train_s_findings()
    + track_spans.backbone_findings()[:1]
    + track_spans.ap_findings()[1:2]
    + track_spans.table6_findings()[1:2]
  )


@span("readme:ATOMIC")
def readme_atomic() -> str:
  return "\n".join(track_spans.prior_conflict())


@span("readme:PERF")
def readme_perf() -> str:
  tb = record("performance_cpu")["tables"]
  data = tb["DATA_PREP"]["rows"][0][3]["v"][0]
  loop = tb["TRAINING_LOOP"]["rows"][1][1]["v"]
  cache = tb["COMPILE_CACHE"]["rows"][0]
  probing = record("performance_cpu")["facts"]["PROBING_NOTES"]["items"][0]["v"][0]
  return (
    f"PGN -> shards {data:.1f}x the released algorithm; training loop {loop[2]:.2f}x (SLiCE) and "
    f"{loop[6]:.2f}x (Transformer) the released loop, one core each; a second run with the same "
    f"shapes starts training in {cache[2]['v'][0]:.1f} s instead of {cache[1]['v'][0]:.1f} s "
    f"(per-host compilation cache); probing {probing:.2f}x fewer CPU seconds (shared prefixes)"
  )


@span("readme:H200")
def readme_h200() -> str:
  ms = [perf_spans.h200(f"{f} d512 b128 float32") for f in perf_spans.FAMILIES]
  ms = [r["ms"] for r in ms if r]
  return (
    f"the d512 batch-128 float32 step of 256-step games took {min(ms):.0f}-{max(ms):.0f} ms per "
    f"family (the paper times no step; its longest stage-2 retrains, about "
    f"{perf_spans.PAPER_RUN_DAYS} days for {grid.STEPS_4_EPOCHS:,} steps, average "
    f"{perf_spans.paper_step_ms() / 1e3:.2f} s a step, computed here, data loading, validation "
    "and checkpoints included), "
    f"the `make demo` job {record('demo')['gpu']['wall_s']} s"
  )
