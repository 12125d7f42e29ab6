"""World models across rules (docs/results/transfer_atomic.json, `launch.transfer`): the
world-model page's tables and reading, the README line and chessjax's own findings in
docs/claims.md, each status by `docgen.verdict`'s rule. Every number comes from the record
(`launch.transfer_tables` reads it), and a run or score the record does not hold yet is named as
missing.

The findings compare arms run on the same N games, family and seed (a cell: family, N and
metric, one outcome per seed, a tie within the printed precision):
  * the rules: fine-tuned on N atomic games against the control (the same source fine-tuned on
    N random-uniform chess games for the same steps), on the steps from each atomic test game's
    first divergent ply on (`chessjax.world_model.divergence`), where the rule sets differ;
  * the chess start: fine-tuned against the same model from scratch on the N atomic games for the
    source's steps plus the fine-tune's (equal compute), on every atomic step.
No sentence here says the fine-tuned models track the atomic rules unless the first holds.
"""

import statistics

from chessjax.world_model import strata
from docgen import verdict
from docgen.findings import _join, name, record
from launch import transfer_tables as tt

RECORD = "transfer_atomic"
COMMAND = "python -m launch.transfer"
METRICS = {"exact_state": "ExactState", "loss": "loss"}
RULES = ("ft", "control", "after")  # The arm, the arm it is compared with, the steps.
START = ("ft", "scratch_equal", "all")


def _rec() -> dict:
  return record(RECORD)


def _pct(x: float) -> str:
  return f"{100 * x:.2f}%"


def _range(xs: list[float]) -> str:
  lo, hi = _pct(min(xs)), _pct(max(xs))
  return lo if lo == hi else f"{lo}-{hi}"


def _mean(xs: list[float], fmt) -> str:
  """The mean of one value per seed in `fmt`, and its range when there are several."""
  out, lo, hi = fmt(statistics.fmean(xs)), fmt(min(xs)), fmt(max(xs))
  return out if lo == hi else f"{out} (seeds {lo}-{hi})"


def _loss(x: float) -> str:
  return f"{x:.4f}"


def _ns(ns: list[int]) -> str:
  return ", ".join(f"{n:,}" for n in ns)


# ------------------------------------------------------------------------------------------------
# Pairs and cells


def scores(run: dict | None, steps: str) -> dict | None:
  """A run's atomic scores over all its steps, or (`steps="after"`) from each game's first
  divergent ply on; None where the record does not hold them."""
  part = (run or {}).get("atomic") or {}
  if steps == "after":
    part = part.get("after_divergence") or {}
  return part if all(part.get(m) is not None for m in METRICS) else None


def pairs(rec: dict, arm: str, other: str, steps: str = "all") -> list[tuple]:
  """(family, N, seed, `arm`'s scores, `other`'s) of every family, N and seed where both arms
  are scored on `steps`."""
  out = []
  for family in tt.families(rec):
    for n in tt.ns(rec, family):
      for seed in tt.seed_rows(rec, family):
        a, b = (scores(tt.run(rec, family, seed, n, x), steps) for x in (arm, other))
        if a and b:
          out.append((family, n, seed, a, b))
  return out


def better(metric: str, a: dict, b: dict) -> int:
  """+1 where `a` is better on `metric` (higher ExactState, lower loss), -1 where `b` is, 0
  within the printed precision (`verdict.compare`)."""
  return verdict.compare(a[metric], b[metric], metric)


def cells(rec: dict, arm: str = "ft", other: str = "scratch", steps: str = "all") -> verdict.Cells:
  """The cells of "`arm` beats `other` on `steps`": (family, N, metric) -> one outcome per seed
  both ran; None where no seed has both."""
  done: dict = {}
  for family, n, _, a, b in pairs(rec, arm, other, steps):
    for m in METRICS:
      done.setdefault((family, n, m), []).append(better(m, a, b))
  return {
    (family, n, m): done.get((family, n, m))
    for family in tt.families(rec)
    for n in tt.ns(rec, family)
    for m in METRICS
  }


def _label(key) -> str:
  _, n, metric = key
  return f"N={n:,} {METRICS[metric]}"


def seeds_words(rec: dict) -> str:
  """Which seeds the record holds where: 'one seed' when every family and N has one, else per
  family (grouped) the Ns of each set of seeds."""
  per = {}
  for family in tt.families(rec):
    by_seeds: dict = {}
    for n in tt.ns(rec, family):
      seeds = tuple(tt.row_seeds(rec, family, n))
      if seeds:
        by_seeds.setdefault(seeds, []).append(n)
    per[family] = "; ".join(
      f"{'seed' if len(s) == 1 else 'seeds'} {tt.seeds_text(list(s))} at N = {_ns(ns)}"
      for s, ns in by_seeds.items()
    )
  if all(len(tt.row_seeds(rec, f, n)) <= 1 for f in per for n in tt.ns(rec, f)):
    return "one seed"
  groups: dict = {}
  for family, words in per.items():
    groups.setdefault(words, []).append(name(family))
  return "; ".join(f"{_join(fams)}: {words}" for words, fams in groups.items() if words)


def _missing_words(rec: dict) -> str:
  gone, total = len(tt.missing(rec)), len(tt.planned(rec)) * len(tt.arms(rec))
  return f"; {gone} of {total} planned runs not in the record yet" if gone else ""


def _why_not_run(rec: dict, other: str, steps: str) -> str:
  """Why a comparison has no cell: the arm not in the protocol, no scores where the rules
  differ, or its runs not in the record yet."""
  if other not in tt.arms(rec):
    return f"the record's protocol has no {tt.ARM_RUNS[other]}"
  if steps == "after" and not tt.has_after(rec):
    return "the record holds no scores from the first divergent ply on"
  return f"no fine-tuned run is scored beside its {tt.ARM_RUN[other]} yet"


def _status_words(rec: dict, c: verdict.Cells, other: str, steps: str, brief=False) -> str:
  """'STATUS: per family (which cells)', or the reason when no cell was run; `brief`: 'STATUS
  (per family STATUS, or the reason)'."""
  status = verdict.status(c)
  groups = verdict.by_group(c, lambda k: k[0]).items()
  if status == verdict.NOT_RUN:
    detail = _why_not_run(rec, other, steps)
  elif brief:
    detail = "; ".join(f"{verdict.status(g)} for {name(f)}" for f, g in groups)
  else:
    detail = "; ".join(
      f"{verdict.status(g)} for {name(f)} ({verdict.which(g, _label)})" for f, g in groups
    )
  return f"{status} ({detail})" if brief else f"{status}: {detail}"


# ------------------------------------------------------------------------------------------------
# docs/claims.md: chessjax's own findings


def _scale(rec: dict) -> str:
  p = rec["args"]
  return (
    f"d128; {seeds_words(rec)}; {p['steps']:,} fine-tune steps; random-uniform atomic games, "
    f"N = {_ns(tt.ns(rec))}{_missing_words(rec)}"
  )


def rules_row() -> list[str]:
  """The rules' finding: fine-tuned against the control, from the first divergent ply on."""
  rec = _rec()
  c = cells(rec, *RULES)
  return [
    "From each atomic test game's first divergent ply on (every step after atomic and standard "
    "rules first part, not only the steps a rule decides), a chess world model fine-tuned on N "
    "atomic games has a higher ExactState and a lower loss than the same chess source fine-tuned "
    "on N random-uniform chess games for the same steps (the control: the move to "
    "random-uniform play without the rule change).",
    f"chessjax's own runs: ExactState and loss from the first divergent ply on, "
    f"{rec['args']['test_games']:,} random-uniform atomic test games (docs/world_model.md, "
    "*World models across rules*)",
    f"{_status_words(rec, c, 'control', 'after')} ({_scale(rec)})",
    f"[{RECORD}.json](results/{RECORD}.json); `{COMMAND}`",
  ]


def start_row() -> list[str]:
  """The finding that prices the chess start: fine-tuned against from scratch at equal
  compute, on every atomic step."""
  rec = _rec()
  c = cells(rec, *START)
  return [
    "A chess start pays at equal compute: fine-tuned on N atomic games, a chess world model has "
    "a higher atomic ExactState and a lower atomic loss than the same model trained from scratch "
    "on those N games for the source's steps plus the fine-tune's.",
    f"chessjax's own runs: ExactState and loss on {rec['args']['test_games']:,} random-uniform "
    "atomic test games (docs/world_model.md, *World models across rules*)",
    f"{_status_words(rec, c, 'scratch_equal', 'all')} ({_scale(rec)})",
    f"[{RECORD}.json](results/{RECORD}.json); `{COMMAND}`",
  ]


def own_findings() -> str:
  """docs/claims.md's table of chessjax's own findings."""
  rows = [rules_row(), start_row()]
  out = [
    "| finding | evidence | chessjax: status (scale) | record; command |",
    "|---|---|---|---|",
  ]
  return "\n".join(out + ["| " + " | ".join(r) + " |" for r in rows])


# ------------------------------------------------------------------------------------------------
# docs/world_model.md: the reading, one bullet per function


def sources_bullet(rec: dict) -> str | None:
  """The chess-trained sources on both test sets, before any atomic game."""
  before, first = [], None
  for family in tt.families(rec):
    srcs = [tt.source(rec, family, seed) for seed in tt.seed_rows(rec, family)]
    srcs = [s for s in srcs if s and s.get("chess")]
    if not srcs:
      continue
    first = first or srcs[0]
    get = {(sp, m): [s[sp][m] for s in srcs] for sp in ("atomic", "chess") for m in METRICS}
    before.append(
      f"{name(family)} {_mean(get['atomic', 'exact_state'], _pct)} on atomic games against "
      f"{_mean(get['chess', 'exact_state'], _pct)} on chess games (loss "
      f"{_mean(get['atomic', 'loss'], _loss)} against {_mean(get['chess', 'loss'], _loss)})"
    )
  if not before:
    return None
  a, c = first["atomic"].get("steps"), first["chess"].get("steps")
  shorter = (
    f" The atomic games are shorter ({a:,} scored steps against {c:,} in as many chess games, "
    f"both cut at {rec['args']['max_len']} steps; an exploded king ends an atomic game): "
    "the two numbers are not like for like."
    if a and c
    else ""
  )
  return (
    "- **Before any atomic game** the chess-trained sources' ExactState on the two test sets: "
    f"{_join(before)}.{shorter}"
  )


def shared_plies_bullet(rec: dict) -> str:
  """How much of an atomic test game is chess: the steps it shares with its chess twin, its
  first divergent ply, and the share of scored steps from that ply on."""
  t = rec.get("test_sets", {}).get("twins")
  after = [
    (s["atomic"]["after_divergence"]["steps"], s["atomic"]["steps"])
    for f in tt.families(rec)
    for s in map(lambda seed, f=f: tt.source(rec, f, seed), tt.seed_rows(rec, f))
    if s and (s["atomic"].get("after_divergence") or {}).get("steps") is not None
  ]
  if not t and not after:
    return (
      "- **Where the rules differ**: the record holds neither the twin summary nor any score "
      "from the first divergent ply on, so how many steps of an atomic test game standard rules "
      "would produce from the same moves is not measured in it."
    )
  parts = []
  if t:
    sh, dv = t["shared_steps"], t["divergence_ply"]
    parts.append(
      f"{t['with_twin']:,} of {t['games']:,} atomic test games have their chess twin (the chess "
      f"game of the same per-game seed) in the chess test set and share with it a median of "
      f"{sh['median']:g} steps (quartiles {sh['q1']:g} / {sh['median']:g} / {sh['q3']:g}, "
      f"{sh['min']}-{sh['max']}); the first divergent ply (the first ply played from a position "
      "whose legal moves or next state differ between the rule sets) has a median of "
      f"{dv['median']:g} (quartiles {dv['q1']:g} / {dv['median']:g} / {dv['q3']:g}) in the "
      f"{t['diverged']:,} games that diverge within {t['max_len']} steps"
    )
  if after:
    k, n = after[0]
    parts.append(
      f"of the {n:,} scored atomic steps, {k:,} ({_pct(k / n)}) lie from the first divergent "
      "ply on; the others are states standard rules produce from the same moves"
    )
  return "- **Where the rules differ**: " + "; ".join(parts) + "."


def _count_words(ps: list[tuple]) -> str:
  """'the higher ExactState in a of n and the lower loss in b of n (c ties)'."""
  n = len(ps)
  won = {m: sum(better(m, a, b) == 1 for *_, a, b in ps) for m in METRICS}
  ties = sum(better(m, a, b) == 0 for *_, a, b in ps for m in METRICS)
  return (
    f"the higher ExactState in {won['exact_state']} of {n} and the lower loss in "
    f"{won['loss']} of {n}" + (f" ({ties} ties within the printed precision)" if ties else "")
  )


def _deltas(ps: list[tuple]) -> str:
  """ExactState differences in points, per family, N and seed."""
  seeds = len({s for _, _, s, _, _ in ps}) > 1
  return ", ".join(
    f"{name(f)} N={n:,}{f' seed {s}' if seeds else ''} "
    f"{100 * (a['exact_state'] - b['exact_state']):+.2f}"
    for f, n, s, a, b in ps
  )


def rules_bullet(rec: dict) -> str:
  """Fine-tuned against the control, from the first divergent ply on and on all steps."""
  after = pairs(rec, *RULES)
  if not after:
    return (
      f"- **Fine-tuned against the control**: {_why_not_run(rec, 'control', 'after')}. Without "
      "it the fine-tuned arm's gains on atomic games cannot be told apart from the move to "
      "random-uniform play: they say nothing yet of the rules themselves."
    )
  status = verdict.status(cells(rec, *RULES))
  allsteps = pairs(rec, "ft", "control", "all")
  held = (
    " On these cells, at this scale, the fine-tuned models track the atomic rules beyond what "
    "the control's random-uniform chess games give."
    if status == verdict.HOLDS
    else ""
  )
  return (
    "- **Fine-tuned against the control** (the same source fine-tuned on N random-uniform chess "
    "games for the same steps), per family, N and seed: from the first divergent ply on, the "
    f"fine-tuned run has {_count_words(after)}; on all steps {_count_words(allsteps)}. "
    f"ExactState from the first divergent ply on, fine-tuned minus control, in points: "
    f"{_deltas(after)}. By the claims' rule: {status}.{held}"
  )


def start_bullet(rec: dict) -> str:
  """Fine-tuned against from scratch at equal compute: what the chess start is worth."""
  ps = pairs(rec, *START)
  if not ps:
    return (
      f"- **Fine-tuned against from scratch at equal compute**: "
      f"{_why_not_run(rec, 'scratch_equal', 'all')}."
    )
  return (
    "- **Fine-tuned against from scratch at equal compute** (the source's steps plus the "
    f"fine-tune's, on the same N atomic games): the fine-tuned run has {_count_words(ps)}; "
    f"ExactState, fine-tuned minus from scratch, in points: {_deltas(ps)}. By the claims' rule: "
    f"{verdict.status(cells(rec, *START))}.{_overfit_words(rec)}"
  )


def _overfit_words(rec: dict) -> str:
  """Where the equal-compute run from scratch ends with a higher atomic test loss than the
  same family and seed from scratch for the fine-tune's steps alone, per N: there the longer run
  is past its best test loss, a weak baseline for the loss."""
  per_n = {}
  for family in tt.families(rec):
    for seed in tt.seed_rows(rec, family):
      for n in tt.ns(rec, family):
        short = tt.run(rec, family, seed, n, "scratch")
        long = tt.run(rec, family, seed, n, START[1])
        if short and long:
          worse = verdict.compare(short["atomic"]["loss"], long["atomic"]["loss"], "loss") == 1
          per_n.setdefault(n, []).append(worse)
  said = [f"{sum(w)} of {len(w)} runs at N = {n:,}" for n, w in sorted(per_n.items()) if any(w)]
  if not said:
    return ""
  return (
    " From scratch at equal compute ends with a higher atomic test loss than from scratch for the "
    f"fine-tune's steps alone in {_join(said)}: there the longer run is past its best test loss "
    "(it fits its N games), a weak baseline for the loss."
  )


def scratch_below(rec: dict) -> tuple[int, int, list[float]]:
  """(runs from scratch for the fine-tune's steps whose atomic ExactState is below their
  family's and seed's source's, such runs, their atomic ExactStates)."""
  rows = []
  for family in tt.families(rec):
    for seed in tt.seed_rows(rec, family):
      src = tt.source(rec, family, seed)
      for n in tt.ns(rec, family):
        r = tt.run(rec, family, seed, n, "scratch")
        if r:
          rows.append((r["atomic"]["exact_state"], src))
  under = sum(
    1 for x, src in rows if src and verdict.compare(x, src["atomic"]["exact_state"], "share") < 0
  )
  return under, len(rows), [x for x, _ in rows]


def scratch_bullet(rec: dict) -> str | None:
  """The runs from scratch for the fine-tune's steps: below the chess-only source."""
  under, total, xs = scratch_below(rec)
  if not total:
    return None
  return (
    f"- **From scratch, {rec['args']['steps']:,} steps** (the fine-tune's): atomic ExactState "
    f"{_range(xs)} at every N, below the chess-only source's in {under} of {total} runs. So "
    "fine-tuned against these runs measures what a chess start buys at this step budget, not "
    "what N atomic games buy trained to the end."
  )


def small_n_bullet(rec: dict) -> str | None:
  """At the smallest N: the atomic loss after fine-tuning (and after the control) against the
  source's of the same family and seed."""
  ns = tt.ns(rec)
  if not ns:
    return None
  n = ns[0]
  words, rose = [], {}
  for arm in ("ft", "control"):
    rises, said = [], []
    for family in tt.families(rec):
      for seed in tt.seed_rows(rec, family):
        src, r = tt.source(rec, family, seed), tt.run(rec, family, seed, n, arm)
        if src and r:
          a, b = src["atomic"]["loss"], r["atomic"]["loss"]
          rises.append(verdict.compare(a, b, "loss") == 1)  # The source's loss the lower.
          seed_words = f" seed {seed}" if len(_seeds(rec)) > 1 else ""
          said.append(f"{name(family)}{seed_words} {a:.4f} -> {b:.4f}")
    if rises:
      rose[arm] = sum(rises)
      what = "fine-tuning" if arm == "ft" else "the control's fine-tuning on chess games"
      words.append(
        f"{what} raises the atomic loss above the source's in {sum(rises)} of {len(rises)} runs "
        f"(source -> after, every run: {_join(said)})"
      )
  if not words:
    return None
  tail = ""
  if rose.get("ft") and "control" not in rose:
    tail = (
      " Without the control at this N the record cannot say whether the rise comes with the "
      "rules or with fine-tuning on few random-uniform games."
    )
  elif rose.get("ft") and rose.get("control"):
    tail = " The control's loss rises too: the rise is not the rule change's alone."
  return f"- **At N = {n:,}**: " + "; ".join(words) + "." + tail


def chess_after_bullet(rec: dict) -> str | None:
  """The chess test games after fine-tuning: the source against the fine-tuned arm (and the
  control, which moves to random-uniform chess play without the rule change)."""
  after = []
  for family in tt.families(rec):
    seeds = list(tt.seed_rows(rec, family))
    for n in tt.ns(rec, family):
      src = [tt.source(rec, family, s) for s in seeds if tt.run(rec, family, s, n, "ft")]
      ft = [tt.run(rec, family, s, n, "ft") for s in seeds if tt.run(rec, family, s, n, "ft")]
      src_ok = [s for s in src if s and s.get("chess")]
      if src_ok and ft:
        after.append(
          f"{name(family)} N={n:,} {_mean([s['chess']['exact_state'] for s in src_ok], _pct)} -> "
          f"{_mean([r['chess']['exact_state'] for r in ft], _pct)}"
        )
  if not after:
    return None
  ps = [
    (f, n, s, a["chess"], b["chess"])
    for f in tt.families(rec)
    for n in tt.ns(rec, f)
    for s in tt.seed_rows(rec, f)
    for a, b in [(tt.run(rec, f, s, n, "ft"), tt.run(rec, f, s, n, "control"))]
    if a and b
  ]
  if ps:
    tail = (
      " The control, fine-tuned on random-uniform chess games, separates the move to "
      f"random-uniform play from the rule change: against it the fine-tuned run has "
      f"{_count_words(ps)} on the chess test games."
    )
  else:
    tail = (
      " The chess test games are random-uniform, like the atomic training games, while the "
      "sources learned from real games: without the control a change here mixes what the rule "
      "change cost with the move from real to random-uniform play."
    )
  return (
    "- **Chess after fine-tuning** (ExactState on the chess test set, source -> fine-tuned): "
    f"{_join(after)}.{tail}"
  )


def _scored(rec: dict) -> list[dict]:
  """Every scored run with atomic strata: sources and arms, every family, seed and N."""
  out = []
  for family in tt.families(rec):
    for seed in tt.seed_rows(rec, family):
      runs = [tt.source(rec, family, seed)]
      runs += [tt.run(rec, family, seed, n, a) for n in tt.ns(rec, family) for a in tt.ARMS]
      out += [r for r in runs if r and "strata" in r.get("atomic", {})]
  return out


def strata_bullet(rec: dict) -> str | None:
  """The atomic strata under the claims' rule: each stratum's exact steps against those the
  other steps at the same plies predict, called only on at least `verdict.MIN_EXPECTED`."""
  scored = _scored(rec)
  if not scored:
    return None
  parts = []
  for st in strata.ATOMIC_STRATA:
    calls = [
      verdict.stratum_call(s["exact_state"], s.get("matched", {}).get("exact_state"), s["steps"])
      for s in (r["atomic"]["strata"][st] for r in scored)
    ]
    called = [c for c in calls if c is not None]
    if called:
      parts.append(
        f"`{st}` below them in {sum(c == -1 for c in called)} of the {len(called)} runs where "
        f"it can be called, above in {sum(c == 1 for c in called)}"
      )
    else:
      parts.append(f"`{st}` too thin to call in every run")
  top = max(
    r["atomic"]["strata"][s]["exact_state"] or 0 for r in scored for s in strata.ATOMIC_STRATA
  )
  return (
    "- **The atomic strata** (a stratum's exact steps against the number the other steps at the "
    "same plies predict, called only where at least "
    f"{verdict.MIN_EXPECTED} are predicted): " + "; ".join(parts) + f" ({len(scored)} scored "
    f"runs; the highest ExactState on a stratum's steps {_pct(top)})."
  )


def squares_bullet(rec: dict) -> str | None:
  """The 64 squares' accuracy on each stratum's steps against the run's over every step."""
  scored = _scored(rec)
  below = []
  for st in strata.ATOMIC_STRATA:
    gaps = [
      (r["atomic"]["pieces"], r["atomic"]["strata"][st]["pieces"])
      for r in scored
      if r["atomic"]["strata"][st].get("pieces") is not None
      and r["atomic"]["strata"][st]["steps"]
      and r["atomic"].get("pieces") is not None
    ]
    if gaps:
      lower = [a - b for a, b in gaps if verdict.compare(a, b, "share") == 1]
      below.append(
        f"`{st}` in {len(lower)} of {len(gaps)} runs"
        + (f" (by up to {100 * max(lower):.2f} points)" if lower else "")
      )
  if not below:
    return None
  return (
    "- **The squares on those steps** (the 64 squares' accuracy on a stratum's steps against the "
    f"run's over every step, not ply-matched): lower on {_join(below)}."
  )


def seeds_bullet(rec: dict) -> str:
  """What the seeds can say, and the scale of the numbers."""
  words = seeds_words(rec)
  if words == "one seed":
    out = (
      "- **What one seed at d128 says**: which way each pair went on this seed, with one set of "
      "N training games; not by how much it would go on another seed or set, which no run here "
      "measures."
    )
  else:
    out = (
      f"- **Seeds** ({words}): a cell holds only when every seed it has goes the same way; a "
      "cell with one seed says which way that seed went, and no more."
    )
  scored = _scored(rec)
  if scored:
    top = max(r["atomic"]["exact_state"] for r in scored)
    out += (
      f" The highest atomic ExactState of any run here is {_pct(top)}, so a difference of a "
      "point is one between small numbers."
    )
  return out


def reading() -> list[str]:
  """The section's reading, one bullet per function, in order; a bullet without its runs in the
  record is left out or says what is missing."""
  rec = _rec()
  bullets = (
    sources_bullet, shared_plies_bullet, rules_bullet, start_bullet, scratch_bullet,
    small_n_bullet, chess_after_bullet, strata_bullet, squares_bullet, seeds_bullet,
  )  # fmt: skip
  return [b for b in (f(rec) for f in bullets) if b]


# ------------------------------------------------------------------------------------------------
# README


def readme_line() -> str:
  """The README's line: each comparison's status by the rule, and the arms' atomic ExactState."""
  rec = _rec()
  if not any(tt.run(rec, f, s, n, a) for f, s, n in tt.planned(rec) for a in tt.ARMS):
    return "not run yet"
  parts = []
  for (arm, other, steps), words in (
    (RULES, "against the control (fine-tuned on random-uniform chess games), from each atomic "
     "test game's first divergent ply on"),
    (START, "against from scratch at equal compute"),
  ):  # fmt: skip
    c = cells(rec, arm, other, steps)
    parts.append(f"{words}: {_status_words(rec, c, other, steps, brief=True)}")
  same = pairs(rec, "ft", "scratch", "all")
  if same:
    under, total, _ = scratch_below(rec)
    parts.append(
      f"against from scratch for the same steps, atomic ExactState "
      f"{_range([a['exact_state'] for *_, a, _ in same])} fine-tuned and "
      f"{_range([b['exact_state'] for *_, b in same])} from scratch ({under} of {total} runs "
      "from scratch below the chess-only source: a chess start at that budget, not at "
      "convergence)"
    )
  p = rec["args"]
  return (
    f"fine-tuned on N = {_ns(tt.ns(rec))} random-uniform atomic games for {p['steps']:,} steps, "
    + "; ".join(parts)
    + f" (d128, {seeds_words(rec)}{_missing_words(rec)})"
  )


def command(rec: dict) -> str:
  """The command that made the record and continues it: the runs the record holds are not run
  again (`launch.transfer --record`), so every part of the experiment is this same line."""
  a = rec["args"]
  grids = [
    f"--grid {','.join(g['families'])}/{','.join(map(str, g['seeds']))}/"
    + ",".join(map(str, g["train_games"]))
    for g in a["grids"]
  ]
  flags = [f"--arms {','.join(a['arms'])}"] if a["arms"] != list(tt.ARMS) else []
  flags += [f"--steps {a['steps']}", f"--source-steps {a['source_steps']}"]
  flags += [f"--max-len {a['max_len']}", f"--batch-size {a['batch_size']}"]
  flags += [f"--test-games {a['test_games']}", f"--test-seed {a['test_seed']}"]
  flags += [f"--train-seed {a['train_seed']}", f"--checkpoint-every {a['checkpoint_every']}"]
  if a.get("lichess_atomic"):
    flags.append(f"--lichess-atomic {a['lichess_atomic']}")
  flags += [f"--sources {k}=RUN" for k in a.get("sources", {})]
  line = " ".join(["python -m launch.transfer --work runs/transfer", *grids, *flags])
  return (
    "The record's command (each part of the experiment runs it again and continues where the "
    "record ends: the runs it holds are not run again; add `--cores` or `--scheduler slurm`):\n\n"
    f"```\n{line} --record docs/results/transfer_atomic.json\n```"
  )


def register(spans: dict) -> None:
  spans["readme:TRANSFER"] = readme_line
  spans["tr:SETUP"] = lambda: tt.setup(_rec())
  spans["tr:ATOMIC_TABLE"] = lambda: tt.atomic_table(_rec(), "exact_state")
  spans["tr:ATOMIC_LOSS_TABLE"] = lambda: tt.atomic_table(_rec(), "loss")
  spans["tr:CHESS_TABLE"] = lambda: tt.chess_table(_rec())
  spans["tr:STRATA_TABLE"] = lambda: tt.strata_table(_rec(), seeds=[min(_seeds(_rec()))])
  spans["tr:TWINS"] = lambda: tt.twins_table(_rec())
  spans["tr:RUNS"] = lambda: "\n".join(tt.missing_lines(_rec()))
  spans["tr:COMMAND"] = lambda: command(_rec())
  spans["tr:READING"] = lambda: "\n".join(reading())
  spans["claims:OWN"] = own_findings


def _seeds(rec: dict) -> list[int]:
  return sorted({s for f in tt.families(rec) for s in tt.seed_rows(rec, f)}) or [0]
