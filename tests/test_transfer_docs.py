"""The across-rules section and chessjax's own findings (`docgen.transfer_spans`,
`launch.transfer_tables`) on synthetic `launch.transfer` records of the arms form (per family,
seed and N the arms `ft`, `control`, `scratch` and `scratch_equal`; partial ones too): the
findings' statuses follow `docgen.verdict`'s rule cell by cell (family, N, metric; one outcome per
seed), every number of the reading and the tables comes from the record, a run not in it is named
as missing, no sentence says the models track the atomic rules unless the control comparison
holds, and the committed record (the first form) renders."""

import copy
import re
import shlex

import pytest

from chessjax.world_model import strata
from docgen import transfer_spans, verdict
from docgen.findings import record
from launch import transfer_tables

FAMILIES = ("transformer", "gated_deltanet")
NS = (16, 64)


def _scores(exact: float, loss: float, after: tuple | None = None, stratum_steps=10) -> dict:
  """One run's scores: `exact` and `loss` on every atomic step, `after` (ExactState, loss) from
  the first divergent ply on (None: not scored there)."""
  stratum = {
    "steps": stratum_steps,
    "exact_state": exact / 2,
    "matched": {"steps": stratum_steps, "exact_state": exact},
    "transition_error": {"steps": 0, "error": None, "matched": {"steps": 0, "error": None}},
    "pieces": 0.7,
  }
  atomic = {"loss": loss, "labelwise": 0.8, "exact_state": exact, "trajectory": 0.0, "pieces": 0.8}
  atomic["strata"] = {s: dict(stratum) for s in strata.ATOMIC_STRATA}
  atomic["steps"] = 300
  if after is not None:
    atomic["after_divergence"] = {
      "games": 5, "games_without_divergence": 1, "steps": 120, "exact_state": after[0],
      "loss": after[1], "labelwise": 0.7, "trajectory": 0.0,
    }  # fmt: skip
  chess = {"loss": loss + 0.1, "labelwise": 0.8, "exact_state": exact / 2, "trajectory": 0.0}
  chess["steps"] = 500
  return {"atomic": atomic, "chess": chess, "steps": 100, "params": 1}


SOURCE = (0.02, 0.5, (0.01, 0.9))
WINS = (0.05, 0.4, (0.03, 0.6))  # Above the control's every way.
LOSES = (0.03, 0.6, (0.01, 0.8))


def _record(runs: dict, seeds=(0, 1), twins=True) -> dict:
  """A record of two families, `seeds`, N = 16 and 64; `runs[(family, seed, n, arm)]` is that
  run's `_scores` arguments, None (or absent) for a run not in the record yet."""
  families = {}
  for family in FAMILIES:
    by_seed = {}
    for seed in seeds:
      arms = {
        str(n): {a: (_scores(*runs[k]) if runs.get(k := (family, seed, n, a)) else None)
                 for a in transfer_tables.ARMS}
        for n in NS
      }  # fmt: skip
      by_seed[str(seed)] = {"source": {"workdir": "w", **_scores(*SOURCE)}, "runs": arms}
    families[family] = {"seeds": by_seed}
  args = {
    "families": ",".join(FAMILIES), "source_steps": 10, "batch_size": 4, "max_len": 32,
    "test_games": 6, "test_seed": 0, "train_seed": 1, "train_games": "16,64", "lichess_atomic": "",
    "steps": 2, "seed": 0, "checkpoint_every": 1, "sources": {},
    "arms": list(transfer_tables.ARMS),
    "grids": [{"families": list(FAMILIES), "seeds": list(seeds), "train_games": list(NS)}],
  }  # fmt: skip
  q = {"mean": 12.5, "min": 3, "q1": 9.0, "median": 12.0, "q3": 16.0, "max": 30}
  sets = {"twins": {"games": 6, "with_twin": 5, "diverged": 6, "max_len": 32,
                    "shared_steps": q, "divergence_ply": dict(q, median=11.0)}}  # fmt: skip
  return {"args": args, "test_sets": sets if twins else {}, "families": families}


def _full(ft=WINS, control=LOSES, scratch=LOSES, scratch_equal=LOSES, seeds=(0, 1)) -> dict:
  arms = {"ft": ft, "control": control, "scratch": scratch, "scratch_equal": scratch_equal}
  return {(f, s, n, a): v for f in FAMILIES for s in seeds for n in NS for a, v in arms.items()}


def _use(monkeypatch, rec):
  monkeypatch.setattr(transfer_spans, "record", lambda name: rec)


def _all_text() -> str:
  return "\n".join(
    [transfer_spans.readme_line(), transfer_spans.own_findings(), *transfer_spans.reading()]
  )


def test_every_seed_beats_the_control_and_equal_compute_scratch(monkeypatch):
  rec = _record(_full())
  _use(monkeypatch, rec)
  rules = transfer_spans.cells(rec, *transfer_spans.RULES)
  assert len(rules) == 8 and all(v == [1, 1] for v in rules.values())
  assert transfer_spans.rules_row()[2].startswith(f"{verdict.HOLDS}: holds for Transformer")
  assert transfer_spans.start_row()[2].startswith(f"{verdict.HOLDS}: holds for Transformer")
  said = "\n".join(transfer_spans.reading())
  assert (
    "from the first divergent ply on, the fine-tuned run has the higher ExactState in 8 of 8"
    in said
  )
  assert "Transformer N=16 seed 0 +2.00" in said  # 3% against 1% after divergence.
  assert "track the atomic rules beyond what the control's random-uniform chess games give" in said
  assert "5 of 6 atomic test games have their chess twin" in said
  assert "a median of 12 steps (quartiles 9 / 12 / 16, 3-30)" in said
  assert "of the 300 scored atomic steps, 120 (40.00%) lie from the first divergent ply on" in said
  assert (
    "seeds 0, 1" in transfer_spans.rules_row()[2] or "seeds 0-1" in transfer_spans.rules_row()[2]
  )
  assert "planned runs not in the record" not in _all_text()


def test_gains_on_all_steps_but_not_where_the_rules_differ_say_nothing_of_the_rules(monkeypatch):
  # Fine-tuned above the control on every atomic step, below it from the first divergent ply on.
  ft = (0.05, 0.4, (0.01, 0.9))
  control = (0.03, 0.6, (0.02, 0.7))
  rec = _record(_full(ft=ft, control=control))
  _use(monkeypatch, rec)
  assert transfer_spans.rules_row()[2].startswith(verdict.CONTRADICTED)
  text = _all_text()
  assert not re.search(r"\btrack", text), "a sentence says the models track the rules"
  said = "\n".join(transfer_spans.reading())
  assert "on all steps the higher ExactState in 8 of 8 and the lower loss in 8 of 8" in said


def test_a_partial_record_names_what_is_missing(monkeypatch):
  runs = _full()
  for k in list(runs):
    f, s, n, a = k
    if s == 1 and (a == "control" or (f == "gated_deltanet" and n == 64)):
      runs[k] = None  # Seed 1 has no control yet, nor any Gated DeltaNet N=64 arm.
  rec = _record(runs)
  _use(monkeypatch, rec)
  rules = transfer_spans.cells(rec, *transfer_spans.RULES)
  assert rules["transformer", 16, "loss"] == [1]  # Seed 0 only.
  row = transfer_spans.rules_row()[2]
  assert row.startswith(verdict.HOLDS)  # Every cell run holds on the seeds it has.
  assert "7 of 32 planned runs not in the record yet" in row
  runs_text = "\n".join(transfer_tables.missing_lines(rec))
  assert "transformer seed 1 N=16 control" in runs_text
  assert "gated_deltanet seed 1 N=64 from scratch, equal compute" in runs_text
  table = transfer_tables.atomic_table(rec)
  assert (
    "| transformer | 16 | 0, 1 | all | 2.00 | 5.00 | 3.00 [1 of 2 seeds] | 3.00 | 3.00 |" in table
  )
  assert (
    "| gated_deltanet | 64 | 0 | after divergence | 1.00 | 3.00 | 1.00 | 1.00 | 1.00 |" in table
  )


def test_nothing_run_yet(monkeypatch):
  rec = _record({}, twins=False)
  _use(monkeypatch, rec)
  assert transfer_spans.rules_row()[2].startswith(verdict.NOT_RUN)
  assert transfer_spans.readme_line() == "not run yet"
  said = "\n".join(transfer_spans.reading())
  assert "twin" not in said and "of the 300 scored atomic steps, 120" in said  # The sources'.
  assert "no fine-tuned run is scored beside its control run yet" in said
  assert "32 of 32 planned runs" in transfer_spans.rules_row()[2]
  for scores in (s for f in rec["families"].values() for s in f["seeds"].values()):
    scores["source"] = {"workdir": "w"}  # Not scored either.
  said = "\n".join(transfer_spans.reading())
  assert "the record holds neither the twin summary nor any score" in said
  assert transfer_tables.atomic_table(rec).count("| - | - | - | - |") == 4


def test_a_difference_within_the_printed_precision_is_a_tie(monkeypatch):
  # ExactState from the first divergent ply on 0.004 points above the control's: a tie.
  rec = _record(_full(ft=(0.05, 0.4, (0.01004, 0.6)), control=(0.03, 0.6, (0.01, 0.8))))
  c = transfer_spans.cells(rec, *transfer_spans.RULES)
  assert c["transformer", 16, "exact_state"] == [0, 0] and c["transformer", 16, "loss"] == [1, 1]
  assert verdict.cell(c["transformer", 16, "exact_state"]) == "mixed"
  assert verdict.status(c) == verdict.PARTLY
  _use(monkeypatch, rec)
  assert "(8 ties within the printed precision)" in "\n".join(transfer_spans.reading())


def test_the_small_n_loss_rise_and_the_runs_from_scratch(monkeypatch):
  runs = _full(ft=(0.05, 0.6, (0.03, 0.6)), scratch=(0.01, 0.7, (0.01, 0.9)))
  for f, s, _, _ in list(runs):
    runs[f, s, 64, "ft"] = WINS  # Below the source's 0.5 loss at N = 64 only.
  rec = _record(runs)
  _use(monkeypatch, rec)
  said = "\n".join(transfer_spans.reading())
  assert (
    "**At N = 16**: fine-tuning raises the atomic loss above the source's in 4 of 4 runs" in said
  )
  assert "Transformer seed 0 0.5000 -> 0.6000" in said
  assert (
    "the control's fine-tuning on chess games raises the atomic loss above the source's in 4 of 4"
    in said
  )
  assert "below the chess-only source's in 8 of 8 runs" in said


def test_strata_are_called_only_on_enough_expected_exact_steps(monkeypatch):
  runs = _full()
  rec = _record(runs)
  _use(monkeypatch, rec)
  said = "\n".join(transfer_spans.reading())
  # 10 steps at the matched ExactState of 2-5%: at most 0.5 expected, never called.
  assert "`explosion` too thin to call in every run" in said
  table = transfer_tables.strata_table(rec)
  assert "| transformer | 0 | ft N=16 | 0 / 0.5; 70.00 / 80.00 (10) |" in table
  # 0 exact steps against 1.3 expected: still not called below.
  thin = copy.deepcopy(rec)
  st = thin["families"]["transformer"]["seeds"]["0"]["source"]["atomic"]["strata"]["explosion"]
  st.update(steps=13, exact_state=0.0, matched={"steps": 13, "exact_state": 0.1})
  assert verdict.stratum_call(0.0, 0.1, 13) is None
  _use(monkeypatch, thin)
  assert "`explosion` too thin to call in every run" in "\n".join(transfer_spans.reading())
  # 0 against 50 expected is called below.
  st.update(steps=500, matched={"steps": 500, "exact_state": 0.1})
  said = "\n".join(transfer_spans.reading())
  assert "`explosion` below them in 1 of the 1 runs where it can be called, above in 0" in said


def test_tables_and_figure_of_a_record_with_seeds(tmp_path):
  runs = _full()
  runs["transformer", 1, 16, "ft"] = (0.07, 0.3, (0.05, 0.5))
  rec = _record(runs)
  table = transfer_tables.atomic_table(rec)
  assert "| transformer | 16 | 0, 1 | all | 2.00 | 6.00 (5.00-7.00) | 3.00 | 3.00 | 3.00 |" in table
  loss = transfer_tables.atomic_table(rec, "loss")
  assert "| transformer | 16 | 0, 1 | after divergence | 0.9000 | 0.5500 (0.5000-0.6000) |" in loss
  chess = transfer_tables.chess_table(rec)
  assert (
    "| transformer | 16 | 0, 1 | 1.00 / 0.6000 | 3.00 (2.50-3.50) / 0.4500 (0.4000-0.5000) |"
    in chess
  )
  twins = transfer_tables.twins_table(rec)
  assert "5 of 6 atomic test games have their chess twin" in twins
  assert "| first divergent ply | 12.5 | 3 | 9 | 11 | 16 | 30 |" in twins
  text = transfer_tables.tables_markdown(rec)
  assert "## Shared plies" in text and "Every planned run is in the record." in text
  transfer_tables.figure(rec, tmp_path / "f.png")
  assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


def test_the_committed_record_renders():
  rec = record(transfer_spans.RECORD)
  c = transfer_spans.cells(rec)
  assert {k[0] for k in c} == set(rec["args"]["families"].split(","))
  assert {k[1] for k in c} == {n for g in rec["args"]["grids"] for n in g["train_games"]}
  for row in (transfer_spans.rules_row(), transfer_spans.start_row()):
    assert row[2].split(":")[0] in verdict.STATUSES
  said = "\n".join(transfer_spans.reading())
  assert said and transfer_spans.readme_line()
  if verdict.status(transfer_spans.cells(rec, *transfer_spans.RULES)) != verdict.HOLDS:
    assert not re.search(
      r"\btrack", transfer_spans.readme_line() + transfer_spans.own_findings() + said
    )


@pytest.mark.parametrize("metric", ["exact_state", "loss"])
def test_better_compares_the_right_way(metric):
  ft, sc = _scores(0.05, 0.5)["atomic"], _scores(0.03, 0.6)["atomic"]
  assert transfer_spans.better(metric, ft, sc) == 1
  assert transfer_spans.better(metric, sc, ft) == -1


def test_the_rendered_command_continues_the_committed_record():
  """The command world_model.md gives is this record's protocol: `launch.transfer` reads the
  record back (`recorded`) instead of running its runs again."""
  from launch import transfer

  rec = record(transfer_spans.RECORD)
  text = transfer_spans.command(rec)
  line = re.search(r"```\n(python -m launch.transfer .*)\n```", text).group(1)
  argv = shlex.split(line)[3:]
  args = transfer.parse_args(argv)
  assert args.record.endswith("docs/results/transfer_atomic.json")
  args.record = str(transfer.REPO / "docs/results/transfer_atomic.json")  # Run from the root.
  ours = transfer.protocol(args)
  for key in (*transfer.RECORD_KEYS, "grids", "arms"):
    assert ours[key] == rec["args"][key], key
  done = transfer.recorded(args)
  assert done and all(v for v in done.values())


def test_an_equal_compute_baseline_past_its_best_test_loss_is_named(monkeypatch):
  runs = _full(scratch=(0.01, 0.7, (0.01, 0.9)), scratch_equal=(0.02, 0.6, (0.01, 0.8)))
  for f, s, _, _ in list(runs):
    runs[f, s, 16, "scratch_equal"] = (0.02, 0.9, (0.01, 1.1))  # Above 500 steps' 0.7 at N = 16.
  _use(monkeypatch, _record(runs))
  said = "\n".join(transfer_spans.reading())
  assert (
    "higher atomic test loss than from scratch for the fine-tune's steps alone in 4 of 4 runs at "
    "N = 16: there the longer run is past its best test loss" in said
  )
  assert "runs at N = 64" not in said
  _use(monkeypatch, _record(_full(scratch=(0.01, 0.7, (0.01, 0.9)))))  # 0.6 < 0.7: not named.
  assert "past its best test loss" not in "\n".join(transfer_spans.reading())
