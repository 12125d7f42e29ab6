"""World models across rules (docs/results/transfer_atomic.json, `launch.transfer`): the world-model
page's tables and reading, and chessjax's own finding in docs/claims.md, its status by
`docgen.verdict`'s rule. Every number comes from the record.
"""

from chessjax.world_model import strata
from docgen import verdict
from docgen.findings import _join, name, record
from launch import transfer_tables

RECORD = "transfer_atomic"
COMMAND = (
  "python -m launch.transfer --families transformer,gated_deltanet,slice,mamba3 --sources "
  "FAMILY=RUN,... --max-len 128 --train-games 256,1024,4096 --steps 500"
)
METRICS = {"exact_state": "ExactState", "loss": "loss"}


def _pct(x: float) -> str:
  return f"{100 * x:.2f}%"


def _range(xs: list[float]) -> str:
  lo, hi = _pct(min(xs)), _pct(max(xs))
  return lo if lo == hi else f"{lo}-{hi}"


def scratch_below(rec: dict) -> tuple[int, int, list[float]]:
  """(runs from scratch whose atomic ExactState is below their family's source's, runs from
  scratch, their atomic ExactStates)."""
  rows = [
    (runs["scratch"]["atomic"]["exact_state"], row["source"].get("atomic"))
    for row in rec["families"].values()
    for runs in row["runs"].values()
    if runs["scratch"]
  ]
  under = sum(1 for x, src in rows if src and x < src["exact_state"])
  return under, len(rows), [x for x, _ in rows]


def pairs(rec: dict) -> list[tuple[str, int, dict, dict]]:
  """(family, N, fine-tuned atomic scores, from-scratch atomic scores) of every N both ran."""
  out = []
  for family, row in rec["families"].items():
    for n, runs in row["runs"].items():
      if runs["ft"] and runs["scratch"]:
        out.append((family, int(n), runs["ft"]["atomic"], runs["scratch"]["atomic"]))
  return out


def better(metric: str, ft: dict, scratch: dict) -> int:
  """+1 where the fine-tuned run is better on `metric` (higher ExactState, lower loss), -1 where
  the run from scratch is, 0 on a tie."""
  a, b = ft[metric], scratch[metric]
  if metric == "loss":
    a, b = -a, -b
  return verdict.sign(a > b, tie=a == b)


def cells(rec: dict) -> verdict.Cells:
  """The finding's cells: (family, N, metric), one seed each; None where a pair did not run."""
  out: verdict.Cells = {}
  done = {(f, n): (ft, sc) for f, n, ft, sc in pairs(rec)}
  for family, row in rec["families"].items():
    for n in map(int, row["runs"]):
      for metric in METRICS:
        pair = done.get((family, n))
        out[(family, n, metric)] = None if pair is None else [better(metric, *pair)]
  return out


def _label(key) -> str:
  family, n, metric = key
  return f"N={n:,} {METRICS[metric]}"


def claim_row() -> list[str]:
  """docs/claims.md's row of this finding: claim, evidence, status (scale), record; command."""
  rec = record(RECORD)
  p = rec["args"]
  c = cells(rec)
  status = verdict.status(c)
  per_family = []
  for family, group in verdict.by_group(c, lambda k: k[0]).items():
    per_family.append(
      f"{verdict.status(group)} for {name(family)} ({verdict.which(group, _label)})"
    )
  scale = (
    f"d128, one seed, {p['steps']:,} steps per run, random-uniform atomic games, "
    f"N = {', '.join(f'{int(n):,}' for n in p['train_games'].split(','))}"
  )
  ps = pairs(rec)
  if ps:
    xs = [sc["exact_state"] for _, _, _, sc in ps]
    scale += (
      f"; the runs from scratch reach {_range(xs)} atomic ExactState in "
      "those steps: what a chess start buys at this budget, not at convergence"
    )
  return [
    "A chess world model fine-tuned on N atomic games tracks atomic states better than the "
    "same model trained from scratch on the same N games for the same steps.",
    f"chessjax's own runs: ExactState and loss on {p['test_games']:,} random-uniform atomic "
    "test games (docs/world_model.md, *World models across rules*)",
    f"{status}: {'; '.join(per_family)} ({scale})",
    f"[{RECORD}.json](results/{RECORD}.json); `{COMMAND}`",
  ]


def own_findings() -> str:
  """docs/claims.md's table of chessjax's own findings."""
  rows = [claim_row()]
  out = [
    "| finding | evidence | chessjax: status (scale) | record; command |",
    "|---|---|---|---|",
  ]
  return "\n".join(out + ["| " + " | ".join(r) + " |" for r in rows])


def _runs(row: dict) -> list[dict]:
  """A family's scored runs: the source, then each N's fine-tuned and from-scratch runs."""
  runs = [row["source"], *(r for pair in row["runs"].values() for r in pair.values())]
  return [r for r in runs if r]


def reading() -> list[str]:
  """The section's reading, one bullet each: the sources on both rule sets, fine-tuned against
  from scratch, the chess score after, the strata, and what one seed can say."""
  rec = record(RECORD)
  fams = rec["families"]
  out = []
  before = []
  for family, row in fams.items():
    s = row["source"]
    if s.get("atomic") and s.get("chess"):
      before.append(
        f"{name(family)} {_pct(s['atomic']['exact_state'])} on atomic games against "
        f"{_pct(s['chess']['exact_state'])} on chess games (loss {s['atomic']['loss']:.4f} "
        f"against {s['chess']['loss']:.4f})"
      )
  if before:
    src = next(row["source"] for row in fams.values())
    shorter = ""
    if src.get("atomic", {}).get("steps") and src.get("chess", {}).get("steps"):
      a, c = src["atomic"]["steps"], src["chess"]["steps"]
      shorter = (
        f" The atomic games are shorter ({a:,} scored steps against {c:,} in as many chess "
        f"games, both cut at {rec['args']['max_len']} steps; an exploded king ends an atomic "
        "game), and ExactState falls with the ply, so the two numbers are not like for like."
      )
    out.append(
      "- **Before any atomic game** the chess-trained sources' ExactState on the two test sets "
      f"of one seed: {_join(before)}.{shorter}"
    )
  ps = pairs(rec)
  if ps:
    wins = {m: sum(better(m, ft, sc) == 1 for _, _, ft, sc in ps) for m in METRICS}
    deltas = ", ".join(
      f"{name(f)} N={n:,} {100 * (ft['exact_state'] - sc['exact_state']):+.2f}"
      for f, n, ft, sc in ps
    )
    out.append(
      f"- **Fine-tuned against from scratch**, same N games and steps: the fine-tuned run has "
      f"the higher atomic ExactState in {wins['exact_state']} of {len(ps)} pairs and the lower "
      f"loss in {wins['loss']} of {len(ps)}; ExactState, fine-tuned minus from scratch, in "
      f"points: {deltas}."
    )
  under, total, xs = scratch_below(rec)
  if total:
    out.append(
      f"- **From scratch, {rec['args']['steps']:,} steps**: atomic ExactState "
      f"{_range(xs)} at every N, below the chess-only source's in {under} of "
      f"{total} runs. So the pairs measure what a chess start buys at this step budget, not what "
      "N atomic games buy trained to the end."
    )
  after = []
  for family, row in fams.items():
    src = row["source"].get("chess")
    for n, runs in row["runs"].items():
      if src and runs["ft"]:
        c = runs["ft"]["chess"]
        after.append(
          f"{name(family)} N={int(n):,} {_pct(src['exact_state'])} -> {_pct(c['exact_state'])} "
          f"(loss {src['loss']:.4f} -> {c['loss']:.4f})"
        )
  if after:
    out.append(
      "- **Chess after fine-tuning** (ExactState on the chess test set, source -> fine-tuned): "
      f"{_join(after)}. The chess test games are random-uniform, like the atomic training games, "
      "while the sources learned from real games: a change here mixes what the rule change "
      "cost with the move from real to random-uniform play, and this record cannot separate "
      "the two."
    )
  scored = [r for row in fams.values() for r in _runs(row) if r.get("atomic")]
  if scored:
    steps = [r["atomic"]["strata"][s] for r in scored for s in r["atomic"]["strata"]]
    on = max(x["exact_state"] for x in steps)
    matched = max(x["matched"]["exact_state"] for x in steps)
    out.append(
      f"- **The atomic strata**: no run's ExactState on the steps of an explosion, an exploded "
      f"king or a rule-divergent move exceeds {_pct(on)} (on the other steps at the same plies: "
      f"at most {_pct(matched)}): near zero on both sides, too little to say which rule a model "
      "fails."
    )
    below = []
    for st in strata.ATOMIC_STRATA:
      gaps = [
        r["atomic"]["pieces"] - r["atomic"]["strata"][st]["pieces"]
        for r in scored
        if r["atomic"]["strata"][st].get("pieces") is not None
        and r["atomic"]["strata"][st]["steps"]
      ]
      if gaps:
        n = sum(g > 0 for g in gaps)
        below.append(
          f"`{st}` in {n} of {len(gaps)} runs"
          + (f" (by up to {100 * max(gaps):.2f} points)" if n else "")
        )
    if below:
      out.append(
        "- **The squares on those steps** (the 64 squares' accuracy on a stratum's steps against "
        f"the run's over every step, not ply-matched): lower on {_join(below)}."
      )
  last = (
    "- **What one seed at d128 says**: which way each pair went on this seed, with one set of "
    "N training games; not by how much it would go on another seed or set, which no run here "
    "measures."
  )
  if scored:
    top = max(r["atomic"]["exact_state"] for r in scored)
    last += (
      f" The highest atomic ExactState of any run here is {_pct(top)}, so a difference of a "
      "point is one between small numbers."
    )
  out.append(last)
  return out


def readme_line() -> str:
  """The README's line: fine-tuned against from scratch on atomic games, per family."""
  rec = record(RECORD)
  parts = []
  for family, row in rec["families"].items():
    done = [(int(n), r) for n, r in row["runs"].items() if r["ft"] and r["scratch"]]
    if done:
      ft = [r["ft"]["atomic"]["exact_state"] for _, r in done]
      sc = [r["scratch"]["atomic"]["exact_state"] for _, r in done]
      parts.append(f"{name(family)} {_range(ft)} fine-tuned against {_range(sc)} from scratch")
  if not parts:
    return "not run yet"
  p = rec["args"]
  ns = ", ".join(f"{int(n):,}" for n in p["train_games"].split(","))
  under, total, _ = scratch_below(rec)
  below = "every run" if under == total else f"{under} of {total} runs"
  return (
    f"atomic ExactState after N = {ns} random-uniform atomic games, {p['steps']:,} steps: "
    f"{_join(parts)} (d128, one seed; {below} from scratch below the chess-only source: what a "
    "chess start buys at that budget, not at convergence)"
  )


def register(spans: dict) -> None:
  spans["readme:TRANSFER"] = readme_line
  spans["tr:SETUP"] = lambda: transfer_tables.setup(record(RECORD))
  spans["tr:ATOMIC_TABLE"] = lambda: transfer_tables.atomic_table(record(RECORD))
  spans["tr:CHESS_TABLE"] = lambda: transfer_tables.chess_table(record(RECORD))
  spans["tr:STRATA_TABLE"] = lambda: transfer_tables.strata_table(record(RECORD))
  spans["tr:READING"] = lambda: "\n".join(reading())
  spans["claims:OWN"] = own_findings
