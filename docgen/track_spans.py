"""The language-model and atomic pages' results, rendered from their records: the Train-S, Table 6,
RAP / AP and backbone tables of docs/results/lm_train_s.json beside the paper's numbers
(chessjax/lm/paper_results.json), the atomic move-picker tables of docs/results/atomic.json, and
the comparisons each section draws from them. Bold marks a column's best model.
"""

import json
import math
from functools import cache

from docgen.findings import REPO, _join, record

LM_COLUMNS = ("lgm", "r_precision", "other_lgm", "other_r_precision", "exm")
PAPER_COLUMNS = (
  "lgm_actual_acc",
  "lgm_actual_r_prec",
  "lgm_other_acc",
  "lgm_other_r_prec",
  "exm_acc",
)
NOTATIONS = {"uci": "UCI", "rap": "UCI + RAP", "ap": "UCI + AP"}
TABLE6 = {
  "gpt2-uci": ("GPT-2 micro", "gpt2"),
  "gpt2w50-uci": ("GPT-2 (w = 50) micro", "gpt2_w50"),
  "reformer-uci": ("Reformer micro", "reformer"),
  "performer-uci": ("Performer micro", "performer"),
  "lstm-uci": ("LSTM micro", "lstm"),
  "lstm-rap": ("LSTM micro + RAP", "lstm_rap"),
}
BACKBONES = {
  "gpt2-uci": "Transformer (GPT-2 micro)",
  "slice-uci": "SLiCE",
  "gdn-uci": "Gated DeltaNet (negative eigenvalues)",
  "mamba3-uci": "Mamba-3",
}


@cache
def lm_paper() -> dict:
  return json.loads((REPO / "chessjax" / "lm" / "paper_results.json").read_text())["tables"]


def paper_lm(table: str, model: str = "gpt2", notation: str = "uci", train: str = "S") -> dict:
  for r in lm_paper()[table]["rows"]:
    if (r.get("model"), r.get("notation"), r.get("train")) == (model, notation, train):
      return r
  raise KeyError((table, model, notation, train))


def runs() -> dict:
  return record("lm_train_s")["runs"]


def rl() -> dict:
  return record("lm_train_s")["data"]["random_legal"]


def bold(text: str, on: bool) -> str:
  return f"**{text}**" if on else text


def best(values: dict, lower: bool = False):
  return (min if lower else max)(values, key=values.get)


# ------------------------------------------------------------------------------------------------
# Tables


def train_s_perplexity() -> str:
  out = ["| notation | parameters | dev perplexity | test perplexity |", "|---|---:|---:|---:|"]
  labels = {"uci": "UCI", "rap": "UCI + RAP (p = 0.25)", "ap": "UCI + AP"}
  for n, label in labels.items():
    r, p = runs()[f"gpt2-{n}"], paper_lm("table3", notation=n)
    out.append(
      f"| {label} | {r['params']:,} | {r['perplexity']['dev']:.2f} / {p['dev_perplexity']:.1f} | "
      f"{r['perplexity']['test']:.2f} / {p['test_perplexity']:.1f} |"
    )
  return "\n".join(out)


def probe_table(where: str, table: str, title: str, notations, baseline: str) -> str:
  out = [
    f"| {title} | LgM Actual Acc. | LgM Actual R-Prec. | LgM Other Acc. | LgM Other R-Prec. "
    "| ExM |",
    "|---|---:|---:|---:|---:|---:|",
  ]
  for n in notations:
    r, p = runs()[f"gpt2-{n}"][where], paper_lm(table, notation=n)
    cells = [f"{r[c]:.1f} / {p[pc]:.1f}" for c, pc in zip(LM_COLUMNS, PAPER_COLUMNS, strict=True)]
    out.append(f"| {NOTATIONS[n]} | " + " | ".join(cells) + " |")
  paper_rl = lm_paper()[table]["random_legal"]["exm_acc"]
  out.append(f"| random legal | - | - | - | - | {rl()[baseline]:.1f} / {paper_rl:.1f} |")
  return "\n".join(out)


def table6() -> str:
  rows = {k: runs()[k] for k in TABLE6}
  out = [
    "| model (Train-S) | parameters | dev / test perplexity | LgM Actual Acc. | LgM Actual R-Prec. "
    "| LgM Other Acc. | LgM Other R-Prec. | ExM |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
  ]
  top_ppl = best({k: r["perplexity"]["dev"] for k, r in rows.items()}, lower=True)
  tops = {c: best({k: r["end"][c] for k, r in rows.items()}) for c in LM_COLUMNS}
  for key, (label, model) in TABLE6.items():
    r = rows[key]
    notation = "rap" if model == "lstm_rap" else "uci"
    p = paper_lm("table6", model="lstm" if model == "lstm_rap" else model, notation=notation)
    ppl = bold(f"{r['perplexity']['dev']:.2f} / {r['perplexity']['test']:.2f}", key == top_ppl)
    cells = [
      f"{bold(format(r['end'][c], '.1f'), key == tops[c])} / {p[pc]:.1f}"
      for c, pc in zip(LM_COLUMNS, PAPER_COLUMNS, strict=True)
    ]
    out.append(f"| {label} | {r['params']:,} | {ppl} | " + " | ".join(cells) + " |")
  paper_rl = lm_paper()["table5"]["random_legal"]["exm_acc"]
  out.append(
    f"| random legal | - | - | - | - | - | - | {rl()['end_actual_exm']:.1f} / {paper_rl:.1f} |"
  )
  return "\n".join(out)


def rap_table() -> str:
  out = [
    "| backbone | UCI dev perplexity | RAP dev perplexity | RAP / UCI | letter mass before "
    "from-squares | before to-squares | from / to |",
    "|---|---:|---:|---:|---:|---:|---:|",
  ]
  for label, uci, rap in (
    (f"GPT-2 micro ({runs()['gpt2-uci']['params']:,} parameters)", "gpt2-uci", "gpt2-rap"),
    (f"Gated DeltaNet ({runs()['gdn-uci']['params']:,})", "gdn-uci", "gdn-rap"),
  ):
    a, b = runs()[uci]["perplexity"]["dev"], runs()[rap]["perplexity"]["dev"]
    roles = runs()[rap]["token_roles"]
    f, t = roles["piece_mass_before_from"], roles["piece_mass_before_to"]
    ratio = f"{f / t:.1f}x" if f / t < 10 else f"{f / t:.0f}x"
    out.append(f"| {label} | {a:.2f} | {b:.2f} | **{b / a:.2f}x** | {f:.3f} | {t:.3f} | {ratio} |")
  return "\n".join(out)


def ap_table() -> str:
  r = runs()
  cols = ("gdn-uci", "gdn-rap", "gdn-ap", "gpt2-ap")
  pa = paper_lm("table5", notation="ap")
  ps = paper_lm("table4", notation="ap")
  p3 = paper_lm("table3", notation="ap")
  params = r["gdn-uci"]["params"]
  out = [
    f"| Gated DeltaNet ({params:,} parameters) | UCI | RAP | AP | GPT-2 micro AP | paper AP "
    "(GPT-2 small) |",
    "|---|---:|---:|---:|---:|---:|",
  ]

  def row(label, fn, fmt, paper, lower=False):
    vals = {c: fn(r[c]) for c in cols}
    gdn = {c: v for c, v in vals.items() if c.startswith("gdn") and v is not None}
    top = best({c: v[0] if isinstance(v, tuple) else v for c, v in gdn.items()}, lower=lower)
    cells = []
    for c in cols:
      v = vals[c]
      cells.append("-" if v is None else bold(fmt(v), c == top))
    out.append(f"| {label} | " + " | ".join(cells) + f" | {paper} |")

  def pair(x):
    return f"{x[0]:.1f} / {x[1]:.1f}"

  row("dev perplexity (per move)", lambda x: x["perplexity"]["dev"], "{:.2f}".format,
      f"{p3['dev_perplexity']:.1f}", lower=True)  # fmt: skip
  row("test perplexity", lambda x: x["perplexity"]["test"], "{:.2f}".format,
      f"{p3['test_perplexity']:.1f}", lower=True)  # fmt: skip
  row("End-Actual LgM / ExM", lambda x: (x["end"]["lgm"], x["end"]["exm"]), pair,
      f"{pa['lgm_actual_acc']:.1f} / {pa['exm_acc']:.1f}")  # fmt: skip
  row(
    "End-Other LgM", lambda x: x["end"]["other_lgm"], "{:.1f}".format, f"{pa['lgm_other_acc']:.1f}"
  )
  row("Start-Actual LgM / ExM",
      lambda x: (x["start"]["lgm"], x["start"]["exm"]) if "start" in x else None, pair,
      f"{ps['lgm_actual_acc']:.1f} / {ps['exm_acc']:.1f}")  # fmt: skip
  return "\n".join(out)


def backbone_table() -> str:
  rows = {k: runs()[k] for k in BACKBONES}
  out = [
    "| backbone (UCI) | parameters | dev / test perplexity | End-Actual LgM / ExM | End-Other LgM "
    "| probe all squares | probe non-empty | probe changed | train time |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
  ]
  top_ppl = best({k: r["perplexity"]["dev"] for k, r in rows.items()}, lower=True)
  top_lgm = best({k: r["end"]["lgm"] for k, r in rows.items()})
  top_other = best({k: r["end"]["other_lgm"] for k, r in rows.items()})
  probes = ("all_squares", "non_empty", "changed")
  tops = {p: best({k: r["linear_probe"][p][0] for k, r in rows.items()}) for p in probes}
  for key, label in BACKBONES.items():
    r = rows[key]
    cells = [
      f"{r['params']:,}",
      bold(f"{r['perplexity']['dev']:.2f} / {r['perplexity']['test']:.2f}", key == top_ppl),
      bold(f"{r['end']['lgm']:.1f} / {r['end']['exm']:.1f}", key == top_lgm),
      bold(f"{r['end']['other_lgm']:.1f}", key == top_other),
    ]
    for p in probes:
      trained, control = r["linear_probe"][p]
      cells.append(f"{bold(f'{trained:.1f}', key == tops[p])} vs {control:.1f}")
    cells.append(f"{r['train_wall_min']:g} min")
    out.append(f"| {label} | " + " | ".join(cells) + " |")
  return "\n".join(out)


# ------------------------------------------------------------------------------------------------
# What the LM sections show


def train_s_findings() -> list[str]:
  r = runs()
  ppl = {n: r[f"gpt2-{n}"]["perplexity"]["dev"] for n in NOTATIONS}
  pp = {n: paper_lm("table3", notation=n)["dev_perplexity"] for n in NOTATIONS}
  exm = {n: r[f"gpt2-{n}"]["end"]["exm"] for n in NOTATIONS}
  pexm = {n: paper_lm("table5", notation=n)["exm_acc"] for n in NOTATIONS}
  lgm = {n: r[f"gpt2-{n}"]["end"]["lgm"] for n in NOTATIONS}
  plgm = {n: paper_lm("table5", notation=n)["lgm_actual_acc"] for n in NOTATIONS}
  below = [NOTATIONS[n] for n in NOTATIONS if exm[n] < rl()["end_actual_exm"]]
  lowest = min(ppl, key=ppl.get)
  return [
    f"* **Perplexity**: {NOTATIONS[lowest]} is lowest here; RAP's is "
    f"{ppl['rap'] / ppl['uci']:.2f}x "
    f"and AP's {ppl['ap'] / ppl['uci']:.2f}x UCI's (the paper: {pp['rap'] / pp['uci']:.2f}x and "
    f"{pp['ap'] / pp['uci']:.2f}x; AP's per-move perplexity counts its piece tokens).",
    f"* **Tracking**: End-Actual ExM is below the random-legal baseline for {len(below)} of 3 "
    f"notations ({' / '.join(f'{exm[n]:.1f}' for n in NOTATIONS)} against "
    f"{rl()['end_actual_exm']:.1f}; the paper {' / '.join(f'{pexm[n]:.1f}' for n in NOTATIONS)} "
    f"against {lm_paper()['table5']['random_legal']['exm_acc']:.1f}); LgM is "
    f"{min(lgm.values()):.1f}-{max(lgm.values()):.1f}% for all three (the paper "
    f"{' / '.join(f'{plgm[n]:.1f}' for n in NOTATIONS)}). The RAP model's Start-Actual answers "
    f"are legal in {r['gpt2-rap']['start']['lgm']:.1f}% of the rows.",
  ]


def table6_findings() -> list[str]:
  rows = {k: runs()[k] for k in TABLE6}
  lead = [c for c in LM_COLUMNS if best({k: r["end"][c] for k, r in rows.items()}) == "gpt2-uci"]
  order = sorted(rows, key=lambda k: -rows[k]["end"]["lgm"])
  porder = sorted(
    TABLE6,
    key=lambda k: -paper_lm(
      "table6", model="lstm" if TABLE6[k][1] == "lstm_rap" else TABLE6[k][1],
      notation="rap" if k == "lstm-rap" else "uci",
    )["lgm_actual_acc"],
  )  # fmt: skip
  g, w = rows["gpt2-uci"], rows["gpt2w50-uci"]
  prompts = record("lm_train_s")["data"]["probing_rows"]
  below = [k for k, r in rows.items() if r["end"]["exm"] < rl()["end_actual_exm"]]
  exms = [r["end"]["exm"] for r in rows.values()]
  return [
    f"* GPT-2 micro leads {len(lead)} of the {len(LM_COLUMNS)} probe columns; the 50-token window "
    f"costs it {g['end']['lgm'] - w['end']['lgm']:.1f} points of End-Actual LgM "
    f"({round(w['end']['lgm'] * prompts / 100)} against "
    f"{round(g['end']['lgm'] * prompts / 100)} of "
    f"{prompts:,} prompts; one seed each), with a dev perplexity "
    f"{abs(w['perplexity']['dev'] - g['perplexity']['dev']):.2f} "
    f"{'lower' if w['perplexity']['dev'] < g['perplexity']['dev'] else 'higher'} than GPT-2's.",
    "* End-Actual LgM order here: " + " > ".join(TABLE6[k][0] for k in order) + "; the paper's "
    "Train-S row: " + " > ".join(TABLE6[k][0].replace(" micro", "") for k in porder) + ".",
    f"* {len(below)} of {len(rows)} models are below the random-legal baseline on ExM "
    f"({min(exms):.1f}-{max(exms):.1f} against {rl()['end_actual_exm']:.1f}).",
  ]


def rap_findings() -> list[str]:
  r = runs()
  lines = []
  for label, key in (("GPT-2 micro", "gpt2-rap"), ("Gated DeltaNet", "gdn-rap")):
    roles = r[key]["token_roles"]["loss_per_move"]
    lines.append(
      f"* {label}, RAP, per-move loss by target role (nats; first 2,000 dev games): from-squares "
      f"{roles['from']:.3f}, to-squares {roles['to']:.3f}, end {roles['end']:.3f}, promotions "
      f"{roles['promotion']:.3f} ({roles['all']:.3f} in all); End-Actual LgM / ExM "
      f"{r[key]['end']['lgm']:.1f} / {r[key]['end']['exm']:.1f}, Start-Actual LgM "
      f"{r[key]['start']['lgm']:.1f}."
    )
  return lines


def ap_findings() -> list[str]:
  r = runs()
  roles = r["gdn-ap"]["token_roles"]
  lpm = roles["loss_per_move"]
  rap = r["gdn-rap"]["token_roles"]["loss_per_move"]
  gu, ga = r["gdn-uci"]["perplexity"]["dev"], r["gdn-ap"]["perplexity"]["dev"]
  pu, pa = r["gpt2-uci"]["perplexity"]["dev"], r["gpt2-ap"]["perplexity"]["dev"]
  p3 = {n: paper_lm("table3", notation=n)["dev_perplexity"] for n in ("uci", "ap")}
  return [
    f"* Gated DeltaNet, AP, per-move loss by target role (first 2,000 dev games): piece letters "
    f"{lpm['piece']:.3f} ({roles['loss_per_letter']:.3f} a letter; "
    f"{roles['piece_mass_on_letters']:.3f} of its mass on the six letters where one comes), "
    f"from-squares {lpm['from']:.3f}, "
    f"to-squares {lpm['to']:.3f} (RAP: {rap['to']:.3f}), end {lpm['end']:.3f}, promotions "
    f"{lpm['promotion']:.3f} ({lpm['all']:.3f} in all).",
    f"* AP over UCI, dev perplexity: GPT-2 micro {pa / pu:.2f}x ({math.log(pa / pu):.2f} nats a "
    f"move more), Gated DeltaNet {ga / gu:.2f}x ({math.log(gu / ga):.2f} nats a move less), the "
    f"paper's GPT-2 small {p3['ap'] / p3['uci']:.2f}x.",
    f"* Gated DeltaNet AP against the random-legal baselines: End-Actual ExM "
    f"{r['gdn-ap']['end']['exm']:.1f} against {rl()['end_actual_exm']:.1f}, Start-Actual ExM "
    f"{r['gdn-ap']['start']['exm']:.1f} against {rl()['start_actual_exm']:.1f}.",
  ]


def backbone_findings() -> list[str]:
  rows = {k: runs()[k] for k in BACKBONES}
  ppl = {k: r["perplexity"]["dev"] for k, r in rows.items()}
  top = min(ppl, key=ppl.get)
  lift = {k: {p: v[0] - v[1] for p, v in r["linear_probe"].items()} for k, r in rows.items()}
  small = min(lift, key=lambda k: sum(lift[k].values()))
  others = [format(rows[k]["end"]["exm"], ".1f") for k in rows if k != top]
  most = []
  for probe, words in (("all_squares", "all squares"), ("non_empty", "non-empty squares"),
                       ("changed", "changed squares")):  # fmt: skip
    k = max(lift, key=lambda k, p=probe: lift[k][p])
    most.append(f"{words} {BACKBONES[k]} ({lift[k][probe]:+.1f} points)")
  return [
    f"* {BACKBONES[top]} has the lowest perplexity of the UCI runs, "
    f"{ppl['gpt2-uci'] / ppl[top]:.1f}x below the "
    f"Transformer's; End-Actual ExM {rows[top]['end']['exm']:.1f} against the random-legal "
    f"{rl()['end_actual_exm']:.1f} (the others {_join(others)}).",
    "* The largest lift of a linear probe over its randomly initialised control: "
    + "; ".join(most)
    + f". {BACKBONES[max(ppl, key=ppl.get)]} has the highest perplexity; {BACKBONES[small]}'s "
    "probes sit closest to their control (the smallest lifts summed over the three probes).",
  ]


# ------------------------------------------------------------------------------------------------
# Atomic chess

PICKERS = {
  "prior_conflict": {
    "stockfish_d12_chess": "Stockfish 15.1 depth 12, chess rules",
    "gpt2_micro_lm": "GPT-2 micro UCI LM (master games)",
    "random": "random legal move",
    "fairy_stockfish_d4_atomic": "Fairy-Stockfish depth 4, atomic rules",
  },
  "depth12": {
    "stockfish_d12_chess": "Stockfish 15.1 depth 12, standard rules",
    "stockfish_d4_chess": "Stockfish 15.1 depth 4, standard rules",
    "fairy_stockfish_d4_atomic": "Fairy-Stockfish depth 4, atomic rules",
    "random": "uniformly random legal move",
  },
}


def atomic_table(experiment: str) -> str:
  pickers = record("atomic")["experiments"][experiment]["pickers"]
  first = "chess" if experiment == "prior_conflict" else "standard"
  diff = experiment == "prior_conflict"
  head = (
    f"| move-picker | {first}: mean Win% loss [95% CI] | BLUNDER | BEST | atomic: mean Win% loss "
    "[95% CI] | BLUNDER | BEST |" + (" atomic - chess |" if diff else "")
  )
  out = [head, "|---|" + "---:|" * (7 if diff else 6)]
  for key, label in PICKERS[experiment].items():
    cells = []
    for rules in ("chess", "atomic"):
      s = pickers[key][rules]
      cells += [
        f"{s['mean_win_loss']:.1f} [{s['ci95'][0]:.1f}, {s['ci95'][1]:.1f}]",
        f"{s['blunder_pct']}%",
        f"{s['best_pct']}%",
      ]
    if diff:
      d = pickers[key]["atomic"]["mean_win_loss"] - pickers[key]["chess"]["mean_win_loss"]
      cells.append(f"{d:+.1f}")
    out.append(f"| {label} | " + " | ".join(cells) + " |")
  return "\n".join(out)


def prior_conflict() -> list[str]:
  exp = record("atomic")["experiments"]["prior_conflict"]
  p = exp["pickers"]
  lm, rnd, sf = p["gpt2_micro_lm"], p["random"], p["stockfish_d12_chess"]
  gain = lm["atomic"]["mean_win_loss"] - lm["chess"]["mean_win_loss"]
  rgain = rnd["atomic"]["mean_win_loss"] - rnd["chess"]["mean_win_loss"]
  overlap = lm["atomic"]["ci95"][1] >= rnd["atomic"]["ci95"][0]
  better = lm["chess"]["mean_win_loss"] < rnd["chess"]["mean_win_loss"]
  times = lm["atomic"]["mean_win_loss"] / lm["chess"]["mean_win_loss"]
  return [
    f"* Under chess rules the language model loses {'less' if better else 'more'} than a random "
    f"mover ({lm['chess']['mean_win_loss']:.1f} against {rnd['chess']['mean_win_loss']:.1f} Win% "
    f"loss); under atomic rules it loses {gain:.1f} points more ({times:.2f}x its chess loss), "
    f"the random mover {rgain:.1f} more.",
    f"* Under atomic rules, against the random mover: {lm['atomic']['mean_win_loss']:.1f} against "
    f"{rnd['atomic']['mean_win_loss']:.1f}, 95% intervals {'overlapping' if overlap else 'apart'}; "
    f"the standard engine's atomic - chess difference is "
    f"{sf['atomic']['mean_win_loss'] - sf['chess']['mean_win_loss']:+.1f}. One model, one seed, "
    f"{exp['positions']} positions.",
  ]


def register(spans: dict) -> None:
  spans["lm:TRAIN_S_PPL"] = train_s_perplexity
  spans["lm:TRAIN_S_END"] = lambda: probe_table("end", "table5", "End squares (Table 5)",
                                                ("uci", "rap", "ap"), "end_actual_exm")  # fmt: skip
  spans["lm:TRAIN_S_START"] = lambda: probe_table("start", "table4", "Start squares (Table 4)",
                                                  ("rap", "ap"), "start_actual_exm")  # fmt: skip
  spans["lm:TRAIN_S_FINDINGS"] = lambda: "\n".join(train_s_findings())
  spans["lm:TABLE6"] = table6
  spans["lm:TABLE6_FINDINGS"] = lambda: "\n".join(table6_findings())
  spans["lm:RAP_TABLE"] = rap_table
  spans["lm:RAP_FINDINGS"] = lambda: "\n".join(rap_findings())
  spans["lm:AP_TABLE"] = ap_table
  spans["lm:AP_FINDINGS"] = lambda: "\n".join(ap_findings())
  spans["lm:BACKBONE_TABLE"] = backbone_table
  spans["lm:BACKBONE_FINDINGS"] = lambda: "\n".join(backbone_findings())
  spans["atomic:PRIOR_CONFLICT_TABLE"] = lambda: atomic_table("prior_conflict")
  spans["atomic:DEPTH12_TABLE"] = lambda: atomic_table("depth12")
  spans["atomic:PRIOR_CONFLICT"] = lambda: "\n".join(prior_conflict())
  spans["atomic:LM_PPL"] = lambda: format(
    record("atomic")["experiments"]["prior_conflict"]["lm"]["dev_perplexity"], ".1f"
  )
