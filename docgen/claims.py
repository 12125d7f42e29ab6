"""docs/claims.md: every headline claim of the three papers, with the paper's evidence, what
chessjax shows of it and at which scale, the record or command behind that, and what testing it
at the paper's scale would cost.

Each claim is split into the cells it names (families, sizes, splits, metrics; `docgen.verdict`),
each cell filled from the records (docs/results/*.json; None where no record holds it), and its
status is `verdict.status` of those cells: no status here is written by hand. The cost is the
train steps' GPU-hours only (no validation, data loading or checkpoints), from the H200 steps
measured by `benchmarks.bench_device` (docs/results/bench_device_h200.json): a paper stage-2 run is
310,944 steps, each at the measured d512 batch-128 step of 256-step games, and the paper runs
every stage-2 cell twice, once per cosine floor. That step is an upper bound for the paper's
smaller sizes (d128-d384 were not timed at batch 128) and for its real-game batches, which are
padded to their longest game, not to 256 steps.
"""

import math

from chessjax.world_model import grid
from docgen import findings, findings_long, verdict
from docgen.findings import claim_cells, name, pct, record
from launch.cwm_tables import ABLATIONS, BIN, MAIN

PAPERS = {
  "cwm": "Walker & Lyons (2026), Chess-World-Model",
  "lcb": "Toshniwal et al. (2022), Learning Chess Blindfolded",
  "atomic": "Co & Konuganti (2026), Atomic chess",
}
SIZES = ("d128", "d256", "d384", "d512")
# Stage 2 trains each cell's selected configuration once per cosine floor (0.1 and 0.01 x lr) and
# reports the one with the lower validation loss (Walker & Lyons, Appendix C; SPEC.md section 6).
FLOORS = 2
# The Mamba-3 the paper trains: MIMO rank 4 (Walker & Lyons, Appendix A), in bfloat16.
PAPER_FAMILY = {"mamba3": "mamba3_mimo"}
CWM_RECORDS = ("bench_cwm_mini", "bench_cwm_whole", "bench_cwm_long", "bench_cwm_x4")


def stage2_hours(family: str) -> float | None:
  """GPU-hours of the train steps of one paper stage-2 run of `family` at the H200's measured d512
  batch-128 step (float32 with TF32 matmuls, the paper's precision; Mamba-3 bfloat16, as the
  paper trained it)."""
  dtype = "bfloat16" if family.startswith("mamba3") else "float32"
  rows = record("bench_device_h200")["rows"]
  ms = [r["ms"] for r in rows if r["name"] == f"{family} d512 b128 {dtype}" and r["status"] == "ok"]
  return ms[0] * grid.STEPS_4_EPOCHS / 3.6e6 if ms else None


def cost(families, sizes) -> str:
  """The paper's stage-2 runs of `families` x `sizes` x both floors: at most their d512 train
  steps' GPU-hours (Mamba-3 at MIMO rank 4, SISO beside it)."""
  runs = len(families) * len(sizes) * FLOORS
  what = (
    f"{runs} stage-2 runs ({len(families)} famil{'ies' if len(families) > 1 else 'y'} x "
    f"{len(sizes)} size{'s' if len(sizes) > 1 else ''} x {FLOORS} floors)"
  )
  hours = [stage2_hours(PAPER_FAMILY.get(f, f)) for f in families]
  if any(h is None for h in hours):
    return f"{what}; no measured H200 step for some of them"
  bound = "" if sizes == ("d512",) else "at most "
  out = f"{what}: {bound}{len(sizes) * FLOORS * sum(hours):.0f} GPU-hours"
  if "mamba3" in families:
    siso = [stage2_hours(f) for f in families]
    out += f" (Mamba-3 at MIMO rank 4; SISO: {len(sizes) * FLOORS * sum(siso):.0f})"
  return out


def cwm_size(rec_name: str) -> str:
  """The model size of a `launch.cwm_mini` record's runs (the command trains d128 only)."""
  return record(rec_name)["args"].get("size", "d128")


def sizes_run() -> set[str]:
  return {cwm_size(r) for r in CWM_RECORDS}


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


def best_run(split: str) -> tuple[float, str, str]:
  """(ExactState, family, 'record words') of the best run on `split` over the CWM records."""
  out = []
  for rec_name in CWM_RECORDS:
    rec = record(rec_name)
    a = rec["args"]
    cut = f", trained on {a['max_len']}-step games" if a["max_len"] != 256 else ""
    for r in rec["runs"]:
      words = f"{cwm_size(rec_name)}, {a['steps']:,} steps{cut}, seed {r['seed']}"
      out.append((r[split]["exact_state"], r["family"], words))
  return max(out)


def _half_ply(bins: dict, metric: str) -> int | None:
  """The first bin start whose `metric` is below half its first bin's; None when none is."""
  first = bins[metric][0]
  return next((s for s, v in zip(bins["start"], bins[metric], strict=True) if v < first / 2), None)


def _families(found: dict[str, list[str]]) -> str:
  """'STATUS for A and B; STATUS for C (...)': families grouped by their status, in order."""
  parts = []
  for st, fams in found.items():
    parts.append(f"{st} for {findings._join(fams)}")
  return "; ".join(parts)


def _per_family(cells: dict) -> str:
  """Each family's own status under the rule, with where it holds when only partly."""
  groups = verdict.by_group(cells, lambda k: k[-3])
  out: dict[str, list[str]] = {}
  for family, sub in groups.items():
    st = verdict.status(sub)
    out.setdefault(st, []).append(
      name(family) + ("" if st in (verdict.HOLDS, verdict.NOT_RUN) else f" ({findings.where(sub)})")
    )
  return _families(out)


def seeds_words(rows, families) -> str:
  seeds = sorted({r["seed"] for r in rows if r["family"] in families})
  return "one seed" if len(seeds) == 1 else f"seeds {seeds[0]}-{seeds[-1]}"


def _cwm() -> list[tuple]:
  """The rows of Walker & Lyons's claims, one function each, in the paper's order."""
  return [
    _outperform_row(),
    _saturation_row(),
    _ablations_row(),
    _blowup_row(),
    _collapse_row(),
    _eighty_percent_row(),
  ]


def _mini() -> tuple[list[dict], str, str]:
  """The d128 ranking's runs (bench_cwm_mini.json), their size and the scale words."""
  mini = record("bench_cwm_mini")
  scale = f"{cwm_size('bench_cwm_mini')}, {mini['args']['steps']:,} steps of batch "
  scale += f"{mini['args']['batch_size']}"
  return mini["runs"], cwm_size("bench_cwm_mini"), scale


def _table8() -> dict:
  """The paper's Table 8 rows by (family, size, split)."""
  rows = findings.paper()["tables"]["table8"]["rows"]
  return {(r["family"], r["size"], r["split"]): r for r in rows}


def _outperform_row() -> tuple:
  """Claim 1: the recurrent families against the Transformer at d128 and d256."""
  rows, size, scale = _mini()
  sizes = ("d128", "d256")
  c1 = {}
  for sz in sizes:
    for family in MAIN[1:]:
      for key, v in claim_cells(rows, "transformer", family, "better").items():
        c1[(sz, *key)] = v if sz == size else None
  missing = [sz for sz in sizes if sz not in sizes_run()]
  at = {k[1:]: v for k, v in c1.items() if k[0] == size}
  return (
    "The recurrent models strongly outperform the Transformer at d128 and d256 (3M and 8M "
    "parameters).",
    "Table 8, d128 and d256 rows; Figure 3",
    f"{verdict.status(c1)}: at {size} {_per_family(at)} ({scale}, "
    f"{seeds_words(rows, MAIN)}, every seed against the same seed's Transformer, both splits, "
    f"loss, Labelwise and ExactState)"
    + (f"; {findings._join(missing)} not run" if missing else ""),
    "[bench_cwm_mini.json](results/bench_cwm_mini.json); `python -m launch.cwm_mini`",
    cost(MAIN, sizes),
  )


def _saturation_row() -> tuple:
  """Claim 2: real games saturate from d384; random-uniform discriminative to d512."""
  p8 = _table8()
  c2 = {(sz, f): None for sz in ("d384", "d512") for f in MAIN}
  best, fam, words = best_run("real")
  sat = [p8[f, "d384", "real"]["exact_state"] for f in MAIN]
  disc = [p8[f, "d512", "random"]["exact_state"] for f in MAIN]
  return (
    "Held-out real-game performance saturates from d384; the random-uniform split stays "
    "discriminative up to d512.",
    f"Table 8: real ExactState {min(sat):.2f}-{max(sat):.2f}% at d384, random-uniform "
    f"{min(disc):.2f}-{max(disc):.2f}% at d512",
    f"{verdict.status(c2)}: d384 and d512 not run; the best real ExactState here is "
    f"{pct(best)}% ({name(fam)}, {words})",
    "-",
    cost(MAIN, ("d384", "d512")),
  )


def _ablations_row() -> tuple:
  """Claim 3: the ablations on random-uniform games, each against its main family."""
  rows, _, scale = _mini()
  c3 = {}
  for ablation, main in ABLATIONS.items():
    c3.update(claim_cells(rows, main, ablation, "worse", splits=("random",)))
  per = []
  for ablation, main in ABLATIONS.items():
    sub = {k: v for k, v in c3.items() if k[0] == ablation}
    st = verdict.status(sub)
    where = "" if st == verdict.HOLDS else f" ({findings.where(sub)})"
    per.append(f"{st} for {name(ablation)} against {name(main)}{where}")
  return (
    "Less expressive state transitions reduce random-uniform performance for all three "
    "recurrent families.",
    "Tables 9-10; Figure 4",
    f"{verdict.status(c3)}: " + "; ".join(per) + f" ({scale}, "
    f"{seeds_words(rows, ABLATIONS)}, random-uniform loss, Labelwise and ExactState)",
    "[bench_cwm_mini.json](results/bench_cwm_mini.json); `python -m launch.cwm_mini`",
    cost(tuple(ABLATIONS), SIZES),
  )


def _blowup_row() -> tuple:
  """Claim 4: Diagonal SLiCE's random-uniform loss blows up, on both training cuts."""
  c4, ratios = {}, {}
  for rec_name in ("bench_cwm_long", "bench_cwm_whole"):
    runs = findings._runs(record(rec_name))
    ratio = runs["slice_diag"]["random"]["loss"] / runs["slice"]["random"]["loss"]
    key = record(rec_name)["args"]["max_len"]
    ratios[key] = ratio
    c4[key] = [verdict.sign(ratio >= findings_long.BLOWUP)]
  return (
    "Diagonal SLiCE is numerically unstable out of distribution: a very large random-uniform "
    "cross-entropy.",
    "Table 10, Diagonal SLiCE rows (d128-d384)",
    f"{verdict.status(c4)}: "
    + verdict.which(c4, lambda k: f"the {k}-step training cut (x{ratios[k]:.3g} SLiCE's loss)")
    + f" (a blow-up: at least {findings_long.BLOWUP:g} times SLiCE's whole-game random-uniform "
    f"loss; {cwm_size('bench_cwm_mini')}, one seed)",
    "[bench_cwm_long.json](results/bench_cwm_long.json), "
    "[bench_cwm_whole.json](results/bench_cwm_whole.json); `python -m launch.cwm_mini "
    "--max-len 128 --eval-max-len 1024 --tag _L128`",
    cost(("slice_diag", "slice"), SIZES),
  )


def _eighty_percent_row() -> tuple:
  """Claim 6: about 80% random-uniform ExactState at d512."""
  c6 = {("d512", "mamba3"): None}
  best, fam, words = best_run("random")
  return (
    "The strongest model reaches about 80% random-uniform ExactState.",
    f"Table 8, d512: Mamba-3 {_table8()['mamba3', 'd512', 'random']['exact_state']:.2f}%",
    f"{verdict.status(c6)}: d512 not run; the best random-uniform ExactState here is "
    f"{pct(best)}% ({name(fam)}, {words})",
    "[bench_cwm_x4.json](results/bench_cwm_x4.json)",
    cost(("mamba3",), ("d512",)),
  )


def _margin_half_ply(bins: dict, majority: dict) -> int | None:
  """The first bin start whose Labelwise above the majority class's (the same bin of
  docs/results/majority_bins.json) is below half its first bin's margin; None when none is."""
  base = dict(zip(majority["start"], majority["labelwise"], strict=True))
  margins = [(s, v - base[s]) for s, v in zip(bins["start"], bins["labelwise"], strict=True)]
  return next((s for s, m in margins if m < margins[0][1] / 2), None)


def _collapse_row() -> tuple:
  """Claim 5: its first clause per Table 11 family on the long-game record's random-uniform games
  (ExactState below half its first bin's value at an earlier ply than Labelwise, each measured
  above what the majority class gives on those games: docs/results/majority_bins.json, whose
  ExactState is 0, so ExactState's own halving; Labelwise's margin over the majority class's,
  which a constant row keeps without tracking a move); its second (the shape of the fall past ply
  160) not testable where a run holds no exact state there."""
  rec = record("bench_cwm_long")
  majority = record("majority_bins")
  runs = findings._runs(rec)
  families = list(dict.fromkeys(r["family"] for r in findings.paper()["tables"]["table11"]["rows"]))
  first, plies = {}, {}
  for f in families:
    if f not in runs:
      first[f] = None
      continue
    b = runs[f]["random"]["long"]["bins"]
    if b["start"] != majority["bins"]["start"][: len(b["start"])]:
      raise ValueError("bench_cwm_long.json and majority_bins.json bin the plies differently")
    e, lw = _half_ply(b, "exact_state"), _margin_half_ply(b, majority["bins"])
    below = next(
      (s for s, v, m in zip(b["start"], b["labelwise"], majority["bins"]["labelwise"],
                            strict=False) if v < m),
      None,
    )  # fmt: skip
    plies[f] = (e, lw, below)
    first[f] = [
      verdict.sign(e is not None and (lw is None or e < lw), tie=e is not None and e == lw)
    ]
  late = {}
  for f in ("gated_deltanet", "mamba3", "slice"):
    b = runs[f]["random"]["long"]["bins"]
    at = [v for s, v in zip(b["start"], b["exact_state"], strict=True) if 160 <= s < 160 + BIN]
    late[f] = None if not at or at[0] < 0.01 else _shape(b, f)
  cells = {**{("first", f): v for f, v in first.items()},
           **{("second", f): v for f, v in late.items()}}  # fmt: skip
  held = [p for p in plies.values() if p[0] is not None]
  lw = [p[1] for p in plies.values() if p[1] is not None]
  below = [p[2] for p in plies.values() if p[2] is not None]
  mb = majority["bins"]
  st1 = verdict.status({k: v for k, v in cells.items() if k[0] == "first"})
  st2 = verdict.status({k: v for k, v in cells.items() if k[0] == "second"})
  lw_words = (
    f"from ply {min(lw)}-{max(lw)} on" if lw and min(lw) != max(lw) else
    f"from ply {lw[0]} on" if lw else "never"
  )  # fmt: skip
  return (
    "ExactState collapses long before Labelwise; Gated DeltaNet holds to about ply 180, then "
    "falls abruptly, Mamba-3 and SLiCE decay gradually.",
    "Appendix F, Tables 11-12 (d512, random-uniform)",
    f"{verdict.status(cells)}: the first clause {st1} ({len(plies)} families, random-uniform "
    f"games, one seed, each measured above the majority class, the most frequent class of each "
    f"label over these games predicted at every step, whose ExactState is "
    f"{pct(majority['exact_state'])}% and whose Labelwise ranges from {pct(mb['labelwise'][0])}% "
    f"(plies 0-{mb['start'][1] - 1}) to {pct(max(mb['labelwise']))}%: ExactState falls below "
    f"half its first bin's value from ply "
    f"{max(p[0] for p in held)} on at the latest, Labelwise's margin over the majority class's "
    f"below half its first bin's {lw_words}"
    + (
      f", Labelwise itself below the majority class's from ply {min(below)}-{max(below)} on"
      if below
      else ""
    )
    + f"); the rest {st2}: {horizon_words('bench_cwm_long')} (d128, one seed, trained on "
    f"{rec['args']['max_len']} steps)",
    "[bench_cwm_long.json](results/bench_cwm_long.json), "
    "[majority_bins.json](results/majority_bins.json)",
    cost(MAIN, ("d512",)),
  )


def _shape(bins: dict, family: str) -> list[int]:
  """Gated DeltaNet: holds to ply 180 (its ExactState there at least half its first bin's) and
  then halves within one bin; the others: no bin from ply 160 on halves the one before it."""
  e = [v for s, v in zip(bins["start"], bins["exact_state"], strict=True) if s >= 160]
  first = bins["exact_state"][0]
  drops = [b < a / 2 for a, b in zip(e, e[1:], strict=False)]
  if family == "gated_deltanet":
    return [verdict.sign(e[0] >= first / 2 and any(drops))]
  return [verdict.sign(not any(drops))]


def _lm_cells(runs: dict, notation: str) -> dict:
  """Claim (b)'s cells for `notation` (rap or ap) against UCI: each backbone run with both, by dev
  perplexity (lower is the claim's way) and End-Actual ExM (higher); one seed each."""
  cells = {}
  for b in LM_BACKBONES:
    if f"{b}-uci" not in runs or f"{b}-{notation}" not in runs:
      continue
    u, a = runs[f"{b}-uci"], runs[f"{b}-{notation}"]
    ratio = a["perplexity"]["dev"] / u["perplexity"]["dev"]  # Printed x0.00.
    cells[b, "ppl"] = [verdict.compare(ratio, 1.0, "perplexity ratio")]
    cells[b, "exm"] = [verdict.compare(a["end"]["exm"] / 100, u["end"]["exm"] / 100, "exm")]
  return cells


# The backbones of lm_train_s.json trained with every notation, and Table 6's models that do not
# attend to the whole history (the claim's "a 50-token window, the Reformer, the Performer (and the
# LSTM)"), each by its run key.
LM_BACKBONES = {"gpt2": "GPT-2 micro", "gdn": "Gated DeltaNet"}
TABLE6_OTHERS = {
  "gpt2w50": "GPT-2 (w = 50)", "reformer": "Reformer", "performer": "Performer", "lstm": "LSTM",
}  # fmt: skip
TABLE6_METRICS = {
  "lgm": "End-Actual accuracy", "r_precision": "End-Actual R-Precision",
  "other_lgm": "End-Other accuracy", "other_r_precision": "End-Other R-Precision",
}  # fmt: skip
LM_METRICS = {"ppl": "dev perplexity", "exm": "End-Actual ExM"}


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
  ratio = {
    (b, n): runs[f"{b}-{n}"]["perplexity"]["dev"] / runs[f"{b}-uci"]["perplexity"]["dev"]
    for b in LM_BACKBONES
    for n in ("rap", "ap")
  }
  paper_ap = ppl["ap"]["dev_perplexity"] / ppl["uci"]["dev_perplexity"]
  scale = "GPT-2 micro (1% of GPT-2 small's parameters) and models of its size, Train-S, 750 steps"
  none = "no measured H200 step for GPT-2 small (bench_device ran out of time before it)"
  big = {r["notation"]: r for r in findings_paper_lm("table5") if r["train"] == "L"}
  # No record of a Train-L run: lm_train_s.json is Train-S only.
  if (findings.REPO / "docs" / "results" / "lm_train_l.json").exists():
    raise ValueError("docs/results/lm_train_l.json exists: give claim (a) its cells from it")
  ca = {("L", "gpt2", m): None for m in ("lgm", "exm")}

  def lm_row(notation: str) -> str:
    cells = _lm_cells(runs, notation)
    per = []
    for b, sub in verdict.by_group(cells, lambda k: k[0]).items():
      u, a = runs[f"{b}-uci"], runs[f"{b}-{notation}"]
      per.append(
        f"{LM_BACKBONES[b]} {verdict.status(sub)} (dev perplexity x{ratio[b, notation]:.2f} "
        f"UCI's, End-Actual ExM {u['end']['exm']:g} -> {a['end']['exm']:g})"
      )
    return f"{verdict.status(cells)}: " + "; ".join(per) + f" ({scale}, one seed)"

  c6, margins = _table6_cells(runs)
  prompts = record("lm_train_s")["data"]["probing_rows"]
  small = min(x for x in margins if x[0] > 0) if any(x[0] > 0 for x in margins) else None
  small_words = (
    f"; the smallest margin {small[0]:.1f} points ({TABLE6_OTHERS[small[1]]}, "
    f"{TABLE6_METRICS[small[2]]})"
    if small
    else ""
  ) + _table6_errors(margins, prompts)
  st6 = verdict.status(c6)
  where6 = (
    "GPT-2 micro above each of them on all four of Table 6's columns"
    if st6 == verdict.HOLDS
    else verdict.which(c6, lambda k: f"{TABLE6_OTHERS[k[0]]} {TABLE6_METRICS[k[1]]}")
  )
  return [
    (
      "(a) With enough training data, Transformer language models learn to track pieces and "
      "predict legal moves with high accuracy from move sequences alone.",
      f"Table 5, Train-L: End-Actual LgM {big['uci']['lgm_actual_acc']:g}, ExM "
      f"{big['uci']['exm_acc']:g} (UCI)",
      f"{verdict.status(ca)}: only Train-S was run; at that size no model here is above the "
      f"random-legal End-Actual ExM ({rl:g}) with UCI",
      "[lm_train_s.json](results/lm_train_s.json)",
      none,
    ),
    (
      "(b) For small training sets, board-state information in training helps: randomly "
      "annotated piece types (RAP).",
      f"Tables 3 and 5, Train-S: dev perplexity {ppl['uci']['dev_perplexity']:g} -> "
      f"{ppl['rap']['dev_perplexity']:g}; End-Actual ExM {lm['uci']['exm_acc']:g} -> "
      f"{lm['rap']['exm_acc']:g}",
      lm_row("rap") + f"; the random-legal End-Actual ExM is {rl:g}",
      "[lm_train_s.json](results/lm_train_s.json); `python -m benchmarks.bench_lm_train_s`",
      none,
    ),
    (
      "(b) The same with every piece annotated (AP).",
      f"Tables 3 and 5, Train-S: AP dev perplexity {paper_ap:.2f}x UCI's, End-Actual ExM "
      f"{lm['uci']['exm_acc']:g} -> {lm['ap']['exm_acc']:g}",
      lm_row("ap"),
      "[lm_train_s.json](results/lm_train_s.json)",
      none,
    ),
    (
      "(c) Success needs full attention: a 50-token window, the Reformer, the Performer (and "
      "the LSTM) trail it.",
      "Table 6, Train-S",
      f"{st6}: {where6} ({scale}, one seed{small_words})",
      "[lm_train_s.json](results/lm_train_s.json)",
      none,
    ),
  ]


def _table6_cells(runs: dict) -> tuple[dict, list[tuple]]:
  """Claim (c)'s cells: GPT-2 micro against each of Table 6's other models on each of its
  columns (one seed; percentages, a tie within the printed precision); and every margin as
  (GPT-2 minus the other in points, other, metric, the binomial standard error of the margin)."""
  gpt = runs["gpt2-uci"]["end"]
  prompts = record("lm_train_s")["data"]["probing_rows"]
  cells, margins = {}, []
  for other in TABLE6_OTHERS:
    for m in TABLE6_METRICS:
      a, b = gpt[m] / 100, runs[f"{other}-uci"]["end"][m] / 100
      cells[other, m] = [verdict.compare(a, b, m)]
      margins.append((100 * (a - b), other, m, 100 * binomial_se(a, b, prompts)))
  return cells, margins


def binomial_se(a: float, b: float, n: int) -> float:
  """The standard error of the difference of two shares `a` and `b` of `n` prompts each, taken
  as independent binomial proportions."""
  return math.sqrt((a * (1 - a) + b * (1 - b)) / n)


def _table6_errors(margins: list[tuple], prompts: int) -> str:
  """The margins beside their binomial standard errors: how many exceed two, per model."""
  ses = [m[3] for m in margins]
  beyond = {o: [m for m in margins if m[1] == o] for o in TABLE6_OTHERS}
  per = ", ".join(
    f"{TABLE6_OTHERS[o]} {sum(m[0] > 2 * m[3] for m in ms)} of {len(ms)}"
    for o, ms in beyond.items()
  )
  lo, hi = f"{min(ses):.1f}", f"{max(ses):.1f}"
  return (
    f"; each margin's binomial standard error {lo if lo == hi else f'{lo}-{hi}'} points "
    f"({prompts:,} prompts a column; the metric taken as a share of them); margins beyond two "
    f"standard errors: {per}"
  )


def findings_paper_lm(table: str) -> list[dict]:
  import json

  path = findings.REPO / "chessjax" / "lm" / "paper_results.json"
  return json.loads(path.read_text())["tables"][table]["rows"]


def _atomic() -> list[tuple]:
  """The atomic claims are about models told the atomic rules in their prompt (the paper's API
  models): a picker of the record counts only where its entry says `told_rules: true`; none does
  (the engines and the language model here read no prompt), so every cell is None."""
  exp = record("atomic")["experiments"]["prior_conflict"]
  p = exp["pickers"]
  told = [k for k, v in p.items() if v.get("told_rules")]
  loss = {k: (v["chess"]["mean_win_loss"], v["atomic"]["mean_win_loss"]) for k, v in p.items()}
  c1 = {("told", k): [verdict.sign(loss[k][1] > loss[k][0])] for k in told}
  c1 = c1 or {("told", None): None}
  c2 = {("effort", None): None}
  c3 = {("traces", None): None}
  sf, lm, rnd = p["stockfish_d12_chess"], p["gpt2_micro_lm"], p["random"]
  rise = {k: v["atomic"]["mean_win_loss"] - v["chess"]["mean_win_loss"] for k, v in p.items()}
  overlap = lm["atomic"]["ci95"][0] <= rnd["atomic"]["ci95"][1] and (
    rnd["atomic"]["ci95"][0] <= lm["atomic"]["ci95"][1]
  )
  api = "API calls, not GPU time (the paper's 200 positions x both rulesets x both efforts)"
  return [
    (
      "Under atomic rules the models' Win% loss exceeds their standard-rules loss on the same "
      "positions: they do not compose the stated rule change with their chess priors.",
      "Section 4.1; Table 1; Figure 1 (Claude Opus 4.6, GPT-5.4; 200 positions)",
      f"{verdict.status(c1)}: no picker here was told the rules (the paper's API models were "
      "not run: no network here). Without the rules, under atomic rules against chess rules, "
      f"a GPT-2 micro LM's Win% loss rises by {rise['gpt2_micro_lm']:.1f} "
      f"({lm['chess']['mean_win_loss']:g} -> {lm['atomic']['mean_win_loss']:g}), a random "
      f"mover's by {rise['random']:.1f} (95% intervals under atomic rules "
      f"{'overlapping' if overlap else 'apart'}), Stockfish playing standard rules' by "
      f"{rise['stockfish_d12_chess']:.1f} ({sf['atomic']['blunder_pct']}% blunders); "
      f"{exp['positions']} positions, one model, one seed",
      "[atomic.json](results/atomic.json); `python -m chessjax.atomic.pickers`, "
      "`python -m chessjax.atomic.report`",
      api,
    ),
    (
      "More reasoning effort lowers the atomic Win% loss but does not close the gap.",
      "Section 4.2; Table 1 (effort none against high); Tables 4-5",
      f"{verdict.status(c2)}: the API pickers are tested against a local fake server only",
      "`python -m chessjax.atomic.pickers --picker openai` (or `anthropic`)",
      api,
    ),
    (
      "Reasoning traces show unpropagated refutation: a move judged bad under atomic rules is "
      "played anyway.",
      "Section 4.5",
      f"{verdict.status(c3)}: needs the API models' reasoning text (`chessjax.atomic.llm` "
      "records it)",
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
      "| claim | the paper's evidence | chessjax: status (scale) | record; command | train-step "
      "GPU-hours on an H200 at the paper's scale (estimate) |",
      "|---|---|---|---|---|",
    ]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    out.append("")
  return "\n".join(out)


def per_run_hours() -> str:
  """One stage-2 run's train-step GPU-hours per family at the measured d512 step (one floor)."""
  out = ["| family | one stage-2 run, train-step GPU-hours on an H200 (estimate) |", "|---|---:|"]
  labels = {"mamba3": "Mamba-3 SISO (rank 1)", "mamba3_mimo": "Mamba-3 MIMO rank 4 (the paper's)"}
  for family in (*MAIN, *ABLATIONS, "mamba3_mimo"):
    h = stage2_hours(family)
    out.append(f"| {labels.get(family) or name(family)} | "
               f"{'-' if h is None or math.isnan(h) else f'{h:.1f}'} |")  # fmt: skip
  return "\n".join(out)


def h200_note() -> str:
  """Which train step the H200 rows time."""
  rec = record("bench_device_h200")
  dates = sorted(r["date"][:10] for r in rec["runs"])
  return (
    f"The H200 rows time the train step as it was at commit {rec['commit']} ({dates[0]}); the "
    "step has changed since, and these hours stand for the older step until a device re-times it"
  )
