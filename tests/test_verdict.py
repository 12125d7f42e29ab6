"""The claims' one rule (`docgen.verdict`) on synthetic records: each status comes out where the
rule says, from cells filled the way docs/claims.md fills them (`docgen.findings.claim_cells`, the
same-seed comparison of two families' runs), and a wrong status fails."""

import pytest

from docgen import verdict
from docgen.findings import claim_cells


def _run(family: str, seed: int, loss: float, acc: float) -> dict:
  """A record row: the same loss and accuracies on both splits."""
  split = {"loss": loss, "labelwise": acc, "exact_state": acc}
  return {"family": family, "seed": seed, "real": dict(split), "random": dict(split)}


def _rows(other_better_by: dict[int, float]) -> list[dict]:
  """Transformer and SLiCE runs, SLiCE better by `d` (lower loss, higher accuracy) in seed s."""
  rows = []
  for seed, d in other_better_by.items():
    rows.append(_run("transformer", seed, 1.0, 0.5))
    rows.append(_run("slice", seed, 1.0 - d, 0.5 + d / 10))
  return rows


def test_better_in_every_seed_holds():
  cells = claim_cells(_rows({0: 0.1, 1: 0.2, 2: 0.05}), "transformer", "slice", "better")
  assert len(cells) == 6 and verdict.status(cells) == verdict.HOLDS


def test_worse_in_every_seed_is_contradicted():
  cells = claim_cells(_rows({0: -0.1, 1: -0.2, 2: -0.05}), "transformer", "slice", "better")
  assert verdict.status(cells) == verdict.CONTRADICTED
  # The same runs read as "worse": the claim's way.
  assert verdict.status(claim_cells(_rows({0: -0.1}), "transformer", "slice", "worse")) == (
    verdict.HOLDS
  )


def test_a_split_seed_does_not_hold():
  cells = claim_cells(_rows({0: 0.1, 1: -0.1}), "transformer", "slice", "better")
  assert {verdict.cell(c) for c in cells.values()} == {"mixed"}
  assert verdict.status(cells) == verdict.DOES_NOT_HOLD


def test_one_split_holds_the_other_split_seed_is_partly_and_named():
  rows = _rows({0: 0.1, 1: 0.1})
  for r in rows:
    if r["family"] == "slice" and r["seed"] == 1:
      r["real"] = dict(_run("slice", 1, 1.2, 0.4)["real"])
  cells = claim_cells(rows, "transformer", "slice", "better")
  assert verdict.status(cells) == verdict.PARTLY
  words = verdict.which(cells, lambda k: k[2], lambda k: k[1])
  assert (
    words == "holds on random loss, labelwise and exact_state; seeds split or tie on real "
    "loss, labelwise and exact_state"
  )


def test_a_missing_record_is_not_run():
  # No seed of the other family: every cell None.
  cells = claim_cells(_rows({0: 0.1})[:1], "transformer", "slice", "better")
  assert set(cells.values()) == {None}
  assert verdict.status(cells) == verdict.NOT_RUN


def test_cells_not_run_keep_a_claim_from_holding():
  cells = {("d128", "loss"): [1, 1, 1], ("d256", "loss"): None}
  assert verdict.status(cells) == verdict.PARTLY
  assert verdict.status({("d128", "loss"): [-1], ("d256", "loss"): None}) == verdict.CONTRADICTED


def test_one_seed_is_one_seed():
  assert verdict.status({"a": [1]}) == verdict.HOLDS
  assert verdict.status({"a": [-1]}) == verdict.CONTRADICTED
  assert verdict.status({"a": [0]}) == verdict.DOES_NOT_HOLD


def test_the_old_lenient_rule_is_gone():
  # One seed the claim's way on one cell, the opposite everywhere else: not "partly".
  cells = {("real", "loss"): [1, -1, -1], ("real", "acc"): [-1, -1, -1]}
  assert verdict.status(cells) == verdict.DOES_NOT_HOLD


def test_a_difference_within_the_printed_precision_is_a_tie():
  # Percentages print to 2 decimals: 0.004 points (4e-5 of a share) is a tie, 0.02 points is not.
  assert verdict.compare(0.50004, 0.5, "labelwise") == 0
  assert verdict.compare(0.5002, 0.5, "labelwise") == 1
  assert verdict.compare(0.4998, 0.5, "exact_state") == -1
  # Losses print to 4 decimals; lower is better.
  assert verdict.compare(0.70004, 0.7, "loss") == 0
  assert verdict.compare(0.6998, 0.7, "loss") == 1 and verdict.compare(0.7002, 0.7, "loss") == -1
  # SLiCE better by 0.004 points of Labelwise and ExactState in seed 0 (by 0.0004 of loss), by
  # more in seed 1: the accuracy cells are split (a tie and a win), the loss cells hold.
  cells = claim_cells(_rows({0: 0.0004, 1: 0.1}), "transformer", "slice", "better")
  assert cells["slice", "real", "labelwise"] == [0, 1] and cells["slice", "real", "loss"] == [1, 1]
  assert verdict.cell(cells["slice", "random", "exact_state"]) == "mixed"
  assert verdict.status(cells) == verdict.PARTLY


def test_a_stratum_is_called_only_on_enough_expected_events():
  # 0 exact steps of 13 where the other steps at the same plies are 10% exact: 1.3 expected.
  assert verdict.stratum_call(0.0, 0.1, 13) is None
  assert verdict.stratum_call(0.0, 0.1, 50) == -1  # 5 expected, none seen: below.
  assert verdict.stratum_call(0.3, 0.1, 50) == 1
  assert verdict.stratum_call(0.10004, 0.1, 1000) == 0  # 0.004 points: a tie.
  assert verdict.stratum_call(None, 0.1, 1000) is None
  assert str(verdict.MIN_EXPECTED) in verdict.RULE and "0.01 points" in verdict.RULE


@pytest.mark.parametrize("bad", [{}, {"a": []}, {"a": [2]}])
def test_bad_cells_are_refused(bad):
  with pytest.raises(ValueError):
    verdict.status(bad)


def test_the_rule_is_rendered_into_the_claims_page():
  from docgen import docs

  text = (docs.REPO / "docs" / "claims.md").read_text()
  assert f"<!-- claims:RULE -->\n{verdict.RULE}\n<!-- /claims:RULE -->" in text
  for st in verdict.STATUSES:
    assert f"**{st}**" in verdict.RULE


def test_every_claim_status_comes_from_the_rule():
  """Each row of the claims tables starts its chessjax cell with one of the rule's statuses, and
  no status word is a literal of docgen/claims.py."""
  import re

  from docgen import claims, docs

  for rows in (claims._cwm(), claims._lcb(), claims._atomic()):
    for row in rows:
      assert row[2].split(":")[0] in verdict.STATUSES, row[2]
  source = (docs.REPO / "docgen" / "claims.py").read_text()
  for st in verdict.STATUSES:
    assert not re.search(rf"[\"']{re.escape(st)}\b", source), st
