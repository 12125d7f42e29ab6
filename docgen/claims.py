"""docs/claims.md: every headline claim of the three papers, with the paper's evidence, what
chessjax shows of it and at which scale, the record or command behind that, and what testing it
at the paper's scale would cost.

Each claim's status is computed from the records (docs/results/*.json) by `docgen.findings`,
`docgen.findings_long` and the functions below; the cost is an estimate in GPU-hours from the
H200 steps measured by `benchmarks.bench_device` (docs/results/bench_device_h200.json): a paper
stage-2 run is 310,944 steps, each taken at the measured d512 batch-128 step of 256-step games.
That step is an upper bound for the paper's smaller sizes (d128-d384 were not timed at batch
128) and for its real-game batches, which are padded to their longest game, not to 256 steps.
"""

import math

from chessjax.world_model import grid
from docgen import findings, findings_long
from docgen.findings import name, pct, record
from launch.cwm_tables import ABLATIONS, MAIN

PAPERS = {
  "cwm": "Walker & Lyons (2026), Chess-World-Model",
  "lcb": "Toshniwal et al. (2022), Learning Chess Blindfolded",
  "atomic": "Co & Konuganti (2026), Atomic chess",
}
SIZES = ("d128", "d256", "d384", "d512")


def stage2_hours(family: str) -> float | None:
  """GPU-hours of one paper stage-2 run of `family` at the H200's measured d512 batch-128 step
  (float32 with TF32 matmuls, the paper's precision; Mamba-3 bfloat16, as the paper trained it)."""
  dtype = "bfloat16" if family.startswith("mamba3") else "float32"
  rows = record("bench_device_h200")["rows"]
  ms = [r["ms"] for r in rows if r["name"] == f"{family} d512 b128 {dtype}" and r["status"] == "ok"]
  return ms[0] * grid.STEPS_4_EPOCHS / 3.6e6 if ms else None


def cost(families, sizes) -> str:
  """The stage-2 runs of `families` x `sizes`, at most their d512 steps' GPU-hours."""
  hours = [stage2_hours(f) for f in families]
  runs = len(families) * len(sizes)
  what = f"{runs} stage-2 run{'s' if runs > 1 else ''}"
  if any(h is None for h in hours):
    return f"{what}; no measured H200 step for some of them"
  total = len(sizes) * sum(hours)
  bound = "" if sizes == ("d512",) else "at most "
  return f"{what}: {bound}{total:.0f} GPU-hours on an H200 (estimate)"


def horizon_words(rec_name: str) -> str:
  """'no run keeps ExactState above 1% from ply X on (real games) or Y (random-uniform)'."""
  runs = record(rec_name)["runs"]
  out = {}
  for split in ("real", "random"):
    last = 0
    for r in runs:
      b = r[split]["long"]["bins"]
      above = [s for s, e in zip(b["start"], b["exact_state"], strict=True) if e >= 0.01]
      last = max(last, *(s + 20 for s in above))
    out[split] = last
  return (
    f"no run's ExactState is above 1% in any 20-ply bin from ply {out['real']} on (real games) "
    f"or ply {out['random']} (random-uniform games)"
  )


def _cwm() -> list[tuple]:
  mini = record("bench_cwm_mini")
  rows = mini["runs"]
  holds = {}
  for family in MAIN[1:]:
    counts, n = findings._counts(rows, "transformer", family, "better")
    holds[family] = findings._verdict(counts, n)
  ab = {}
  for ablation, main in ABLATIONS.items():
    counts, n = findings._counts(rows, main, ablation, "worse")
    ab[ablation] = findings._verdict(counts, n, splits=("random",))
  scale = f"d128, {mini['args']['steps']:,} steps of batch {mini['args']['batch_size']}"
  best_real = max(r["real"]["exact_state"] for r in rows)
  x4 = record("bench_cwm_x4")
  best_random = max(r["random"]["exact_state"] for r in x4["runs"])
  top = max(x4["runs"], key=lambda r: r["random"]["exact_state"])
  p8 = {
    (r["family"], r["size"], r["split"]): r for r in findings.paper()["tables"]["table8"]["rows"]
  }
  sat = [p8[f, "d384", "real"]["exact_state"] for f in MAIN]
  disc = [p8[f, "d512", "random"]["exact_state"] for f in MAIN]
  blow = findings_long.diagonal_slice_blowup()[0].split("**")[1].split(". ", 1)[1].rstrip(".")
  collapse = horizon_words("bench_cwm_long")
  shown = sum(v == "holds" for v in holds.values())

  def status(n_hold, n):
    return "shown" if n_hold == n else ("not shown" if n_hold == 0 else "partly")

  return [
    (
      "The recurrent models strongly outperform the Transformer at d128 and d256 (3M and 8M "
      "parameters).",
      "Table 8, d128 and d256 rows; Figure 3",
      f"{status(shown, len(holds))} at d128: "
      + "; ".join(f"{v} for {name(f)}" for f, v in holds.items())
      + f" ({scale}, seeds 0-2); d256 not run",
      "[bench_cwm_mini.json](results/bench_cwm_mini.json); `python -m launch.cwm_mini`",
      cost(MAIN, ("d128", "d256")),
    ),
    (
      "Held-out real-game performance saturates from d384; the random-uniform split stays "
      "discriminative up to d512.",
      f"Table 8: real ExactState {min(sat):.2f}-{max(sat):.2f}% at d384, random-uniform "
      f"{min(disc):.2f}-{max(disc):.2f}% at d512",
      f"not shown: d384 and d512 not run; the best real ExactState here is {pct(best_real)}% "
      f"({scale})",
      "-",
      cost(MAIN, ("d384", "d512")),
    ),
    (
      "Less expressive state transitions reduce random-uniform performance for all three "
      "recurrent families.",
      "Tables 9-10; Figure 4",
      f"{status(sum(v == 'holds' for v in ab.values()), len(ab))} at d128: "
      + "; ".join(
        f"{v} for {name(a)} against {name(m)}"
        for a, (m, v) in ((a, (ABLATIONS[a], ab[a])) for a in ab)
      )  # fmt: skip
      + f" ({scale}, seeds 0-1)",
      "[bench_cwm_mini.json](results/bench_cwm_mini.json); `python -m launch.cwm_mini`",
      cost(tuple(ABLATIONS), SIZES),
    ),
    (
      "Diagonal SLiCE is numerically unstable out of distribution: a very large random-uniform "
      "cross-entropy.",
      "Table 10, Diagonal SLiCE rows (d128-d384)",
      f"partly: {blow[0].lower() + blow[1:]} (d128, seed 0)",
      "[bench_cwm_long.json](results/bench_cwm_long.json), "
      "[bench_cwm_whole.json](results/bench_cwm_whole.json); `python -m launch.cwm_mini "
      "--max-len 128 --eval-max-len 1024 --tag _L128`",
      cost(("slice_diag", "slice"), SIZES),
    ),
    (
      "ExactState collapses long before Labelwise; Gated DeltaNet holds to about ply 180, then "
      "falls abruptly, Mamba-3 and SLiCE decay gradually.",
      "Appendix F, Tables 11-12 (d512, random-uniform)",
      f"not shown: cannot be tested at this scale; {collapse} (d128, seed 0, trained on 128 steps)",
      "[bench_cwm_long.json](results/bench_cwm_long.json)",
      cost(MAIN, ("d512",)),
    ),
    (
      "The strongest model reaches about 80% random-uniform ExactState.",
      f"Table 8, d512: Mamba-3 {p8['mamba3', 'd512', 'random']['exact_state']:.2f}%",
      f"not shown: d512 not run; the best random-uniform ExactState here is {pct(best_random)}% "
      f"({name(top['family'])}, d128, {x4['args']['steps']:,} steps, seed 0)",
      "[bench_cwm_x4.json](results/bench_cwm_x4.json)",
      cost(("mamba3",), ("d512",)),
    ),
  ]


def _lcb() -> list[tuple]:
  runs = record("lm_train_s")["runs"]
  rl = record("lm_train_s")["data"]["random_legal"]["end_actual_exm"]
  lm = {
    r["notation"]: r
    for r in findings_paper_lm("table5")
    if r["train"] == "S" and r["model"] == "gpt2"
  }
  ppl = {
    r["notation"]: r
    for r in findings_paper_lm("table3")
    if r["train"] == "S" and r["model"] == "gpt2"
  }
  rap = runs["gpt2-rap"]["perplexity"]["dev"] / runs["gpt2-uci"]["perplexity"]["dev"]
  gdn_ap = runs["gdn-ap"]["perplexity"]["dev"] / runs["gdn-uci"]["perplexity"]["dev"]
  gpt_ap = runs["gpt2-ap"]["perplexity"]["dev"] / runs["gpt2-uci"]["perplexity"]["dev"]
  paper_ap = ppl["ap"]["dev_perplexity"] / ppl["uci"]["dev_perplexity"]
  exm = {k: runs[f"gpt2-{k}"]["end"]["exm"] for k in ("uci", "rap", "ap")}
  t6 = {
    "GPT-2": runs["gpt2-uci"], "GPT-2 (w = 50)": runs["gpt2w50-uci"],
    "Reformer": runs["reformer-uci"], "Performer": runs["performer-uci"],
    "LSTM": runs["lstm-uci"], "LSTM + RAP": runs["lstm-rap"],
  }  # fmt: skip
  order = sorted(t6, key=lambda k: -t6[k]["end"]["lgm"])
  scale = "GPT-2 micro (1% of GPT-2 small's parameters), Train-S, 750 steps, one seed"
  none = "no measured H200 step for GPT-2 small (bench_device ran out of time before it)"
  big = {r["notation"]: r for r in findings_paper_lm("table5") if r["train"] == "L"}
  return [
    (
      "(a) With enough training data, Transformer language models learn to track pieces and "
      "predict legal moves with high accuracy from move sequences alone.",
      f"Table 5, Train-L: End-Actual LgM {big['uci']['lgm_actual_acc']:g}, ExM "
      f"{big['uci']['exm_acc']:g} (UCI)",
      "not shown: only Train-S was run; at that size no model here is above the random-legal "
      f"ExM ({rl:g}) with UCI",
      "[lm_train_s.json](results/lm_train_s.json)",
      none,
    ),
    (
      "(b) For small training sets, board-state information in training helps: randomly "
      "annotated piece types (RAP).",
      f"Tables 3 and 5, Train-S: dev perplexity {ppl['uci']['dev_perplexity']:g} -> "
      f"{ppl['rap']['dev_perplexity']:g}; End-Actual ExM {lm['uci']['exm_acc']:g} -> "
      f"{lm['rap']['exm_acc']:g}",
      f"not shown ({scale}): RAP's dev perplexity is {rap:.2f}x UCI's and End-Actual ExM "
      f"{exm['uci']:g} -> {exm['rap']:g}, below the random-legal {rl:g}",
      "[lm_train_s.json](results/lm_train_s.json); `python -m benchmarks.bench_lm_train_s`",
      none,
    ),
    (
      "(b) The same with every piece annotated (AP).",
      f"Tables 3 and 5, Train-S: AP dev perplexity {paper_ap:.2f}x UCI's, End-Actual ExM "
      f"{lm['ap']['exm_acc']:g}",
      f"partly: Gated DeltaNet's AP perplexity is {gdn_ap:.2f}x its UCI's (End-Actual ExM "
      f"{runs['gdn-ap']['end']['exm']:g}, above the random-legal {rl:g}); GPT-2 micro's "
      f"{gpt_ap:.2f}x ({scale})",
      "[lm_train_s.json](results/lm_train_s.json)",
      none,
    ),
    (
      "(c) Success needs full attention: a 50-token window, the Reformer, the Performer (and "
      "the LSTM) trail it.",
      "Table 6, Train-S",
      "partly: End-Actual LgM order here " + " > ".join(order) + f" ({scale}, every model at "
      "GPT-2 micro's size)",
      "[lm_train_s.json](results/lm_train_s.json)",
      none,
    ),
  ]


def findings_paper_lm(table: str) -> list[dict]:
  import json

  path = findings.REPO / "chessjax" / "lm" / "paper_results.json"
  return json.loads(path.read_text())["tables"][table]["rows"]


def _atomic() -> list[tuple]:
  exp = record("atomic")["experiments"]["prior_conflict"]
  p = exp["pickers"]
  sf, lm = p["stockfish_d12_chess"], p["gpt2_micro_lm"]
  api = "API calls, not GPU time (the paper's 200 positions x both rulesets x both efforts)"
  return [
    (
      "Under atomic rules the models' Win% loss exceeds their standard-rules loss on the same "
      "positions: they do not compose the stated rule change with their chess priors.",
      "Section 4.1; Table 1; Figure 1 (Claude Opus 4.6, GPT-5.4; 200 positions)",
      f"shown for an engine and an offline language model, not for the paper's models: "
      f"Stockfish playing standard rules loses {sf['atomic']['mean_win_loss']:g} Win% under "
      f"atomic rules ({sf['atomic']['blunder_pct']}% blunders), a GPT-2 micro LM "
      f"{lm['chess']['mean_win_loss']:g} under chess rules and {lm['atomic']['mean_win_loss']:g} "
      f"under atomic rules ({exp['positions']} positions, one model, one seed); the paper's API "
      "models were not run (no network here)",
      "[atomic.json](results/atomic.json); `python -m chessjax.atomic.pickers`, "
      "`python -m chessjax.atomic.report`",
      api,
    ),
    (
      "More reasoning effort lowers the atomic Win% loss but does not close the gap.",
      "Section 4.2; Table 1 (effort none against high); Tables 4-5",
      "not shown: the API pickers are tested against a local fake server only",
      "`python -m chessjax.atomic.pickers --picker openai` (or `anthropic`)",
      api,
    ),
    (
      "Reasoning traces show unpropagated refutation: a move judged bad under atomic rules is "
      "played anyway.",
      "Section 4.5",
      "not shown: needs the API models' reasoning text (`chessjax.atomic.llm` records it)",
      "-",
      api,
    ),
  ]


def claims_markdown() -> str:
  out = []
  for key, rows in (("cwm", _cwm()), ("lcb", _lcb()), ("atomic", _atomic())):
    out += [
      f"### {PAPERS[key]}",
      "",
      "| claim | the paper's evidence | chessjax (scale) | record; command | cost at the "
      "paper's scale |",
      "|---|---|---|---|---|",
    ]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    out.append("")
  return "\n".join(out)


def per_run_hours() -> str:
  """One stage-2 run's GPU-hours per family at the measured d512 step."""
  out = ["| family | one stage-2 run, GPU-hours (estimate) |", "|---|---:|"]
  for family in (*MAIN, *ABLATIONS, "mamba3_mimo"):
    h = stage2_hours(family)
    out.append(f"| {name(family) if family != 'mamba3_mimo' else 'Mamba-3 MIMO'} | "
               f"{'-' if h is None or math.isnan(h) else f'{h:.1f}'} |")  # fmt: skip
  return "\n".join(out)
