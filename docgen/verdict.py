"""The one rule by which every claim of docs/claims.md, and every finding that says whether a
claim holds, gets its status: `RULE` is its statement (rendered into docs/claims.md), `status` its
implementation, `which` the words that say where a claim holds.

A claim is given as its cells: every combination of the families, sizes, splits and metrics it
names, each cell holding one outcome per seed (+1 the claim's way, -1 the opposite, 0 a tie), or
None where no record holds it (not run, or run at a scale where it could not show).
"""

from collections.abc import Callable, Hashable, Sequence

HOLDS = "holds"
PARTLY = "partly"
DOES_NOT_HOLD = "does not hold"
CONTRADICTED = "contradicted here"
NOT_RUN = "not run at a scale where it could show"
STATUSES = (HOLDS, PARTLY, DOES_NOT_HOLD, CONTRADICTED, NOT_RUN)

RULE = (
  "Every status below is computed by one rule (`docgen.verdict`). A claim is split into the "
  "cells it names: each family (or model) it speaks of, at each size, on each split and by each "
  "metric. In a cell every seed's run is compared as the claim says (for example a recurrent "
  "family's loss against the Transformer's of the same seed). A cell *holds* when every seed goes "
  "the claim's way and is *opposite* when every seed goes the other way (a tie is neither). The "
  "claim is **not run at a scale where it could show** when no record holds any of its cells; it "
  "**holds** when every cell holds; it is **contradicted here** when every cell that was run is "
  "opposite; **partly** when some cells hold and others do not or were not run (the row names "
  "which hold); it **does not hold** otherwise. A difference within the printed precision (less "
  "than 0.01 points of a percentage, 0.0001 of a loss, 0.01 of a ratio) is a tie. A stratum (the "
  "steps of one kind of event) is called above or below the other steps at the same plies only "
  "when the count their rate predicts for it (their ExactState, or their share of broken states, "
  "times the stratum's steps) is at least 5: below that the evidence is too thin to call either "
  "way. One seed is one seed: where a record has one seed, a cell holds or is opposite on that "
  "seed alone, and the row says one seed. A status at this repository's scale says nothing of "
  "the paper's."
)

# A difference smaller than the last printed digit is a tie: percentages print to 2 decimals
# (accuracies are stored as shares, so 0.01 points is 1e-4), losses to 4.
SHARE_TIE = 1e-4
LOSS_TIE = 1e-4
RATIO_TIE = 0.01  # A ratio printed to 2 decimals (x2.84).
# A stratum's expected count (the other steps' rate at the same plies x its steps) below this is
# too thin to call it above or below them: 0 observed against 1.3 expected is no evidence.
MIN_EXPECTED = 5

Cells = dict[Hashable, Sequence[int] | None]


def cell(outcomes: Sequence[int] | None) -> str | None:
  """One cell: "holds" (every seed the claim's way), "opposite" (every seed the other way),
  "mixed" (anything else, ties included), None (not run)."""
  if outcomes is None:
    return None
  if not outcomes:
    raise ValueError("a cell that was run has at least one seed")
  if any(o not in (-1, 0, 1) for o in outcomes):
    raise ValueError(f"a seed's outcome is +1, 0 or -1, not {outcomes}")
  if all(o == 1 for o in outcomes):
    return "holds"
  if all(o == -1 for o in outcomes):
    return "opposite"
  return "mixed"


def status(cells: Cells) -> str:
  """The claim's status under `RULE`."""
  if not cells:
    raise ValueError("a claim names at least one cell")
  states = [cell(c) for c in cells.values()]
  run = [s for s in states if s is not None]
  if not run:
    return NOT_RUN
  if all(s == "holds" for s in states):
    return HOLDS
  if all(s == "opposite" for s in run):
    return CONTRADICTED
  if any(s == "holds" for s in run):
    return PARTLY
  return DOES_NOT_HOLD


def outcomes(better: int, worse: int, seeds: int) -> list[int]:
  """A cell's outcomes from seed counts: `better` seeds the claim's way, `worse` the other way,
  the rest ties."""
  return [1] * better + [-1] * worse + [0] * (seeds - better - worse)


def sign(claim_way: bool, tie: bool = False) -> int:
  """One seed's outcome."""
  return 0 if tie else (1 if claim_way else -1)


def tolerance(metric: str) -> float:
  """The tie tolerance of a metric: `LOSS_TIE` for a loss (any name with "loss"), `RATIO_TIE` for
  a ratio (a name with "ratio"), else `SHARE_TIE` (an accuracy stored as a share, printed as a
  percentage to 2 decimals)."""
  if "loss" in metric:
    return LOSS_TIE
  return RATIO_TIE if "ratio" in metric else SHARE_TIE


def compare(a: float, b: float, metric: str, tol: float | None = None) -> int:
  """+1 when `a` is better than `b` on `metric` (lower for a loss or a ratio, higher for a
  share), -1 when worse, 0 when they differ by less than the printed precision (`tolerance`, or
  `tol`)."""
  d = b - a if "loss" in metric or "ratio" in metric else a - b
  tol = tolerance(metric) if tol is None else tol
  return 0 if abs(d) < tol else (1 if d > 0 else -1)


def stratum_call(rate: float | None, expected_rate: float | None, steps: int) -> int | None:
  """A stratum's rate (ExactState, or share of broken states) against the other steps' at the
  same plies: +1 above, -1 below, 0 a tie (`SHARE_TIE`), None when it cannot be called: no rate,
  or an expected count `expected_rate * steps` below `MIN_EXPECTED`."""
  if rate is None or expected_rate is None or expected_rate * steps < MIN_EXPECTED:
    return None
  d = rate - expected_rate
  return 0 if abs(d) < SHARE_TIE else (1 if d > 0 else -1)


def _join(items: list[str]) -> str:
  return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def names(keys: list, label: Callable[[Hashable], str], head=None) -> str:
  """The cells `keys` in words: each by `label`, or, given `head` (a key's prefix words), grouped
  by it ('real loss and ExactState, and on random-uniform loss')."""
  if head is None:
    return _join([label(k) for k in keys])
  groups: dict = {}
  for k in keys:
    groups.setdefault(head(k), []).append(label(k))
  return ", and on ".join(f"{h} {_join(v)}" for h, v in groups.items())


def which(cells: Cells, label: Callable[[Hashable], str], head=None) -> str:
  """Where the claim holds and where it is opposite: 'holds on A and B; opposite in every seed on
  C; not run: D' (the parts that have cells), each cell named by `label` (and `head`, `names`)."""
  parts = []
  for state, words in (
    ("holds", "holds on"),
    ("opposite", "opposite in every seed on"),
    ("mixed", "seeds split or tie on"),
    (None, "not run:"),
  ):
    keys = [k for k, c in cells.items() if cell(c) == state]
    if keys:
      parts.append(f"{words} {names(keys, label, head)}")
  return "; ".join(parts)


def by_group(cells: Cells, group: Callable[[Hashable], Hashable]) -> dict[Hashable, Cells]:
  """The cells split by `group` of their key, in order."""
  out: dict = {}
  for key, c in cells.items():
    out.setdefault(group(key), {})[key] = c
  return out
