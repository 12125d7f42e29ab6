"""The across-rules section and chessjax's own finding (`docgen.transfer_spans`) on synthetic
`launch.transfer` records: the finding's status follows `docgen.verdict`'s rule cell by cell
(family, N, metric; one seed), the reading's counts and numbers come from the record, and the
committed record renders."""

import copy

import pytest

from chessjax.world_model import strata
from docgen import transfer_spans, verdict
from docgen.findings import record
from launch import transfer_tables


def _scores(exact: float, loss: float) -> dict:
  stratum = {
    "steps": 10,
    "exact_state": exact / 2,
    "matched": {"steps": 10, "exact_state": exact},
    "transition_error": {"steps": 0, "error": None, "matched": {"steps": 0, "error": None}},
  }
  stratum["pieces"] = 0.7
  atomic = {"loss": loss, "labelwise": 0.8, "exact_state": exact, "trajectory": 0.0, "pieces": 0.8}
  atomic["strata"] = {s: dict(stratum) for s in strata.ATOMIC_STRATA}
  atomic["steps"] = 300
  chess = {"loss": loss + 0.1, "labelwise": 0.8, "exact_state": exact / 2, "trajectory": 0.0}
  chess["steps"] = 500
  return {"atomic": atomic, "chess": chess, "steps": 100, "params": 1}


def _record(pairs: dict) -> dict:
  """A record of two families at N = 16 and 64; `pairs[(family, n)]` is (fine-tuned, scratch)
  (ExactState, loss), or None for a pair not run yet."""
  families = {}
  for family in ("transformer", "gated_deltanet"):
    runs = {}
    for n in (16, 64):
      pair = pairs.get((family, n))
      runs[str(n)] = (
        {"ft": _scores(*pair[0]), "scratch": _scores(*pair[1])}
        if pair
        else {"ft": None, "scratch": None}
      )
    families[family] = {"source": {"workdir": "w", **_scores(0.02, 0.9)}, "runs": runs}
  args = {
    "families": "transformer,gated_deltanet", "source_steps": 10, "batch_size": 4, "max_len": 32,
    "test_games": 6, "test_seed": 0, "train_seed": 1, "train_games": "16,64", "lichess_atomic": "",
    "steps": 2, "seed": 0, "checkpoint_every": 1, "sources": {},
  }  # fmt: skip
  return {"args": args, "families": families}


def _use(monkeypatch, rec):
  monkeypatch.setattr(transfer_spans, "record", lambda name: rec)


FT_WINS = ((0.05, 0.5), (0.03, 0.6))  # Higher ExactState and lower loss.
FT_LOSES = ((0.02, 0.7), (0.03, 0.6))


def test_every_cell_the_claims_way_holds(monkeypatch):
  rec = _record({(f, n): FT_WINS for f in ("transformer", "gated_deltanet") for n in (16, 64)})
  _use(monkeypatch, rec)
  c = transfer_spans.cells(rec)
  assert len(c) == 8 and all(v == [1] for v in c.values())
  row = transfer_spans.claim_row()
  assert row[2].startswith(f"{verdict.HOLDS}: holds for Transformer")
  assert "6 random-uniform atomic test games" in row[1]
  said = "\n".join(transfer_spans.reading())
  assert "higher atomic ExactState in 4 of 4 pairs and the lower loss in 4 of 4" in said
  assert "Transformer N=16 +2.00" in said
  assert "lower on `explosion` in 10 of 10 runs (by up to 10.00 points)" in said
  assert "below the chess-only source's in 0 of 4 runs" in said
  assert "300 scored steps against 500 in as many chess games, both cut at 32 steps" in said
  assert "the runs from scratch reach 3.00% atomic ExactState" in row[2]
  assert transfer_spans.readme_line().startswith(
    "atomic ExactState after N = 16, 64 random-uniform atomic games, 2 steps: Transformer 5.00% "
    "fine-tuned against 3.00% from scratch and Gated DeltaNet 5.00% fine-tuned against 3.00% "
    "from scratch (d128, one seed; 0 of 4 runs from scratch below the chess-only source"
  )


def test_a_family_the_other_way_and_a_pair_not_run(monkeypatch):
  rec = _record(
    {
      ("transformer", 16): FT_WINS,
      ("transformer", 64): FT_WINS,
      ("gated_deltanet", 16): FT_LOSES,
    }
  )
  _use(monkeypatch, rec)
  c = transfer_spans.cells(rec)
  assert c[("gated_deltanet", 16, "exact_state")] == [-1]
  assert c[("gated_deltanet", 16, "loss")] == [-1]
  assert c[("gated_deltanet", 64, "loss")] is None
  row = transfer_spans.claim_row()
  assert row[2].startswith(f"{verdict.PARTLY}: holds for Transformer")
  assert "contradicted here for Gated DeltaNet" in row[2]
  assert "not run: N=64 ExactState and N=64 loss" in row[2]
  said = "\n".join(transfer_spans.reading())
  assert "in 2 of 3 pairs" in said and "Gated DeltaNet N=16 -1.00" in said


def test_a_tie_is_neither_way(monkeypatch):
  tie = ((0.04, 0.5), (0.04, 0.6))  # Equal ExactState, lower loss.
  rec = _record({("transformer", 16): tie})
  c = transfer_spans.cells(rec)
  assert c[("transformer", 16, "exact_state")] == [0]
  assert c[("transformer", 16, "loss")] == [1]
  assert verdict.cell(c[("transformer", 16, "exact_state")]) == "mixed"


def test_nothing_run_yet_is_not_run(monkeypatch):
  rec = _record({})
  _use(monkeypatch, rec)
  assert transfer_spans.claim_row()[2].startswith(verdict.NOT_RUN)
  assert not any("Fine-tuned against from scratch" in x for x in transfer_spans.reading())


def test_tables_name_every_n_and_the_strata(monkeypatch):
  rec = _record({("transformer", 16): FT_WINS})
  text = transfer_tables.atomic_table(rec)
  assert "| transformer | 16 | 5.00 | 3.00 | 0.5000 | 0.6000 |" in text
  assert "| gated_deltanet | 64 | - | - | - | - |" in text
  strata_text = transfer_tables.strata_table(rec)
  assert all(s in strata_text for s in strata.ATOMIC_STRATA)
  assert "| transformer | ft N=16 | 2.50 / 5.00; 70.00 / 80.00 (10) |" in strata_text


def test_the_committed_record_renders():
  rec = record(transfer_spans.RECORD)
  cells = transfer_spans.cells(rec)
  assert {k[0] for k in cells} == set(rec["args"]["families"].split(","))
  assert {k[1] for k in cells} == {int(n) for n in rec["args"]["train_games"].split(",")}
  assert transfer_spans.claim_row()[2].split(":")[0] in verdict.STATUSES
  assert transfer_spans.reading()


@pytest.mark.parametrize("metric", ["exact_state", "loss"])
def test_better_compares_the_right_way(metric):
  ft, sc = copy.deepcopy(_scores(0.05, 0.5)["atomic"]), _scores(0.03, 0.6)["atomic"]
  assert transfer_spans.better(metric, ft, sc) == 1
  assert transfer_spans.better(metric, sc, ft) == -1
