"""Win%-loss scoring, prompts and move-pickers of the atomic track, without engines.

The engines are replaced by a scripted analyser with the `EnginePool` interface; the same code
paths run against the real engines in tests/atomic/test_end_to_end.py.
"""

import json
import math

import chess
import numpy as np
import pytest

from chessjax.atomic import pickers, prompts, report, scoring
from chessjax.atomic.engines import Analysis, EngineInfo, Line

START = chess.STARTING_FEN


def reference_win(cp: float) -> float:
  return 50 + 50 * (2 / (1 + math.exp(-0.00368208 * cp)) - 1)


class ScriptedPool:
  """`analyse_many` from a table {(fen, variant, root move or None): (move, cp, mate)}."""

  def __init__(self, table: dict, name: str = "Scripted 1.0"):
    self.table, self.requests = table, []
    self.info = EngineInfo(kind="scripted", path="-", name=name, version="1.0")
    self.stats = {"hits": 0, "misses": 0, "restarts": 0}

  def analyse(self, fen, *, variant="chess", depth=12, multipv=1, root_moves=None):
    self.requests.append((fen, variant, depth, root_moves))
    root = root_moves[0] if root_moves else None
    move, cp, mate = self.table[fen, variant, root]
    return Analysis(
      engine=self.info.name,
      version="1.0",
      variant=variant,
      fen=fen,
      depth=depth,
      multipv=multipv,
      root_moves=root_moves,
      lines=(Line(move=move, cp=cp, mate=mate, pv=(move,)),),
      cached=False,
    )

  def analyse_many(self, requests, progress=False):
    return [
      self.analyse(r.fen, variant=r.variant, depth=r.depth, root_moves=r.root_moves)
      for r in requests
    ]


def test_win_percent_matches_spec_values():
  assert round(scoring.win_percent(100), 2) == 59.10
  assert round(scoring.win_percent(300), 2) == 75.11
  assert round(scoring.win_percent(1000), 2) == 97.54
  assert scoring.win_percent(0) == 50.0
  cps = np.array([-1000, -250, -1, 0, 1, 250, 1000])
  got = scoring.win_percent(cps)
  np.testing.assert_allclose(got, [reference_win(c) for c in cps], rtol=0, atol=1e-12)
  np.testing.assert_allclose(got + got[::-1], 100.0, atol=1e-12)  # W(-c) = 100 - W(c)


def test_clamp_cp_and_mates():
  assert scoring.clamp_cp(35, None) == 35
  assert scoring.clamp_cp(2500, None) == 1000
  assert scoring.clamp_cp(-2500, None) == -1000
  assert scoring.clamp_cp(None, 3) == 1000
  assert scoring.clamp_cp(None, -1) == -1000
  with pytest.raises(ValueError, match="cp or mate"):
    scoring.clamp_cp(None, None)


@pytest.mark.parametrize(
  ("name", "edges"), [("paper", (30.0, 20.0, 10.0)), ("lichess", (15.0, 10.0, 5.0))]
)
def test_classify_at_threshold_edges(name, edges):
  thresholds = scoring.THRESHOLDS[name]
  assert thresholds == edges
  blunder, mistake, inaccuracy = edges
  below = np.nextafter
  assert scoring.classify(blunder, thresholds) == "BLUNDER"
  assert scoring.classify(below(blunder, 0), thresholds) == "MISTAKE"
  assert scoring.classify(mistake, thresholds) == "MISTAKE"
  assert scoring.classify(below(mistake, 0), thresholds) == "INACCURACY"
  assert scoring.classify(inaccuracy, thresholds) == "INACCURACY"
  assert scoring.classify(below(inaccuracy, 0), thresholds) == "GOOD"
  assert scoring.classify(0.0, thresholds) == "GOOD"
  assert scoring.classify(100.0, thresholds) == "BLUNDER"


def test_classify_rejects_unordered_thresholds():
  with pytest.raises(ValueError, match="decreasing"):
    scoring.classify(5.0, (10.0, 20.0, 30.0))


def test_bootstrap_is_reproducible_and_stratified():
  rng = np.random.default_rng(1)
  values = rng.uniform(0, 60, size=200)
  strata = np.repeat(["standard", "atomic"], 100)
  a = scoring.bootstrap_ci(values, strata, n_boot=2000, seed=7)
  b = scoring.bootstrap_ci(values, strata, n_boot=2000, seed=7)
  c = scoring.bootstrap_ci(values, strata, n_boot=2000, seed=8)
  assert a == b and a != c
  assert a[0] < values.mean() < a[1]
  # Constant within each stratum: every stratified resample has the same mean.
  flat = np.where(strata == "standard", 10.0, 30.0)
  lo, hi = scoring.bootstrap_ci(flat, strata, n_boot=500, seed=0)
  assert lo == pytest.approx(20.0) and hi == pytest.approx(20.0)
  # Unstratified resampling of the same data varies.
  lo, hi = scoring.bootstrap_ci(flat, None, n_boot=500, seed=0)
  assert lo < 20.0 < hi


def test_move_status_follows_each_variant():
  # White king e1 next to a black knight on e2 (protected by nothing): a standard king capture,
  # illegal in atomic (kings cannot capture).
  fen = "4k3/8/8/8/8/8/4n3/4K3 w - - 0 1"
  assert scoring.move_status(fen, "chess", "e1e2") == "ok"
  assert scoring.move_status(fen, "atomic", "e1e2") == "illegal"
  assert scoring.move_status(fen, "atomic", " E1D1 ") == "ok"
  for bad in ("Kxe2", "", None, "e1e9", "e1"):
    assert scoring.move_status(fen, "atomic", bad) == "unparsable"


def _scripted_pools():
  w = {
    (START, "chess", None): ("e2e4", 30, None),
    (START, "chess", "e2e3"): ("e2e3", 10, None),
    (START, "atomic", None): ("g1h3", 200, None),
    (START, "atomic", "e2e4"): ("e2e4", -50, None),
    (START, "atomic", "b1c3"): ("b1c3", 2000, None),  # deeper restricted search: loss clamps to 0
  }
  return {
    "chess": ScriptedPool({k: v for k, v in w.items() if k[1] == "chess"}),
    "atomic": ScriptedPool({k: v for k, v in w.items() if k[1] == "atomic"}),
  }


def test_score_answers_exact_values():
  pools = _scripted_pools()
  answers = [
    {"fen": START, "variant": "chess", "move": "e2e4", "model": "m"},
    {"fen": START, "variant": "chess", "move": "e2e3", "model": "m"},
    {"fen": START, "variant": "atomic", "move": "e2e4", "model": "m"},
    {"fen": START, "variant": "atomic", "move": "b1c3", "model": "m"},
    {"fen": START, "variant": "atomic", "move": "e1e2", "model": "m"},
    {"fen": START, "variant": "atomic", "move": "Nf3", "model": "m", "prompt": "no_rules"},
  ]
  positions = {START: {"fen": START, "source": "chess"}}
  scored = scoring.score_answers(answers, positions, pools, depth=9)
  loss = [s["win_loss"] for s in scored]
  assert loss[0] == 0.0 and scored[0]["best"] and scored[0]["category"] == "GOOD"
  assert loss[1] == pytest.approx(reference_win(30) - reference_win(10), abs=1e-12)
  assert scored[1]["cp_loss"] == 20 and not scored[1]["best"]
  assert loss[2] == pytest.approx(reference_win(200) - reference_win(-50), abs=1e-12)
  assert scored[2]["category"] == scoring.classify(loss[2])
  assert loss[3] == 0.0 and scored[3]["cp_loss"] == 0
  assert scored[4]["category"] == "ILLEGAL" and scored[4]["played_cp"] == -1000
  assert loss[4] == pytest.approx(reference_win(200) - reference_win(-1000), abs=1e-12)
  assert scored[5]["category"] == "UNPARSABLE" and scored[5]["condition"] == "atomic_no_rules"
  assert {s["source"] for s in scored} == {"chess"}
  assert {s["depth"] for s in scored} == {9}
  # One best-line request per (FEN, variant) and one restricted request per non-best legal move.
  assert sorted(r[3] or () for r in pools["chess"].requests) == [(), ("e2e3",)]
  assert sorted(r[3] or () for r in pools["atomic"].requests) == [(), ("b1c3",), ("e2e4",)]


def test_answers_with_the_old_ruleset_field_score_the_same():
  new = [
    {"fen": START, "variant": "chess", "move": "e2e3", "model": "m"},
    {"fen": START, "variant": "atomic", "move": "e2e4", "model": "m"},
    {"fen": START, "variant": "atomic", "move": "Nf3", "model": "m", "prompt": "no_rules"},
  ]
  old = [
    {"fen": START, "ruleset": "standard", "move": "e2e3", "model": "m"},
    {"fen": START, "ruleset": "atomic", "move": "e2e4", "model": "m"},
    {"fen": START, "ruleset": "atomic", "move": "Nf3", "model": "m", "prompt": "no_rules"},
  ]
  positions = {START: {"fen": START, "source": "chess"}}
  scored_new = scoring.score_answers(new, positions, _scripted_pools(), depth=9)
  scored_old = scoring.score_answers(old, positions, _scripted_pools(), depth=9)
  assert scored_old == scored_new
  assert [s["variant"] for s in scored_old] == ["chess", "atomic", "atomic"]
  assert [s["condition"] for s in scored_old] == ["chess", "atomic", "atomic_no_rules"]
  assert all("ruleset" not in s for s in scored_old)
  # Both fields may be present when they agree; "standard" is read as "chess" in either.
  assert scoring.answer_variant({"variant": "chess", "ruleset": "standard"}) == "chess"
  assert scoring.answer_variant({"variant": "standard"}) == "chess"
  with pytest.raises(ValueError, match="disagree"):
    scoring.answer_variant({"variant": "atomic", "ruleset": "standard"})
  with pytest.raises(ValueError, match="missing variant"):
    scoring.answer_variant({"fen": START})


def test_cli_reads_old_answer_files(tmp_path):
  positions = tmp_path / "p.jsonl"
  positions.write_text(json.dumps({"fen": START, "source": "standard", "depth": 5}) + "\n")
  answers = tmp_path / "old.jsonl"
  rows = [
    {"fen": START, "ruleset": "standard", "move": "e2e4", "model": "m"},
    {"fen": START, "ruleset": "atomic", "move": "e2e4", "model": "m", "prompt": "no_rules"},
    {"fen": START, "variant": "chess", "move": "d2d4", "model": "m"},
  ]
  answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
  args = report.parse_args(["--positions", str(positions), "--answers", str(answers), "--out", "x"])
  found, answers_ok, problems = report.load_inputs(args)
  assert problems == [] and len(answers_ok) == 3
  assert found[START]["source"] == "chess"  # an old positions file's "standard" source
  variants = [scoring.normalise_answer(a)["variant"] for a in answers_ok]
  assert variants == ["chess", "atomic", "chess"]


def test_summary_rates_ratio_and_markdown(tmp_path):
  pools = _scripted_pools()
  answers = [
    {"fen": START, "variant": v, "move": m, "model": "m", "reasoning_effort": "high"}
    for v, m in [("chess", "e2e4"), ("chess", "e2e3"), ("atomic", "e2e4"), ("atomic", "x")]
  ]
  scored = scoring.score_answers(
    answers,
    {START: {"source": "atomic"}},
    pools,
    depth=9,
    thresholds=scoring.THRESHOLDS["lichess"],
  )
  summary = report.summarise(scored, n_boot=200, seed=0)
  by_condition = {g["condition"]: g for g in summary["groups"]}
  assert by_condition["chess"]["n"] == 2 and by_condition["chess"]["best_rate"] == 0.5
  assert by_condition["atomic"]["rates"]["UNPARSABLE"] == 0.5
  expected_diff = np.mean([s["win_loss"] for s in scored if s["variant"] == "atomic"]) - np.mean(
    [s["win_loss"] for s in scored if s["variant"] == "chess"]
  )
  chess_loss = np.mean([s["win_loss"] for s in scored if s["variant"] == "chess"])
  assert chess_loss < report.RATIO_MIN_LOSS  # 0.9 Win% points: a ratio would mean nothing
  assert summary["ratios"][0]["atomic_over_chess"] is None
  assert summary["ratios"][0]["atomic_minus_chess"] == pytest.approx(expected_diff)
  data = {
    "n_answers": 4,
    "n_positions": 1,
    "depth": 9,
    "engines": {"atomic": "Scripted 1.0"},
    "summary": summary,
  }
  text = report.markdown(data)
  assert "| m | high | atomic | 2 |" in text and "| m | high | chess | 2 |" in text
  assert "standard" not in text and "- (chess loss 0.9 < 1)" in text
  report.save_figure(data, tmp_path / "fig.png")
  assert (tmp_path / "fig.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_prompts_follow_the_paper_templates():
  fen = "r1bqkbnr/1pp4p/4ppp1/3p4/3P3Q/2N1PN2/PPP2PPP/R1B1K2R w KQkq - 0 8"
  with_rules = prompts.render("atomic", fen)
  no_rules = prompts.render("atomic_no_rules", fen)
  standard = prompts.render("chess", fen)
  assert prompts.render("standard", fen) == standard  # the condition's old name
  assert with_rules.startswith("You are choosing the best move in Atomic chess.")
  assert "4. Kings cannot make captures." in with_rules and "Kings cannot" not in no_rules
  assert f"FEN: {fen}" in standard and "for White in chess using" in standard
  assert "best legal move in UCI notation for White in Atomic chess" in no_rules
  assert "best move in UCI notation for White in Atomic chess" in with_rules
  for text, variant in ((with_rules, "atomic"), (standard, "chess")):
    listed = text.rstrip().splitlines()[-1].split()
    assert listed == sorted(m.uci() for m in prompts.board_of(fen, variant).legal_moves)
  assert "<" not in with_rules + no_rules + standard
  with pytest.raises(ValueError, match="condition"):
    prompts.render("crazyhouse", fen)


def test_random_picker_is_reproducible_and_legal():
  picker = pickers.RandomPicker(seed=3)
  fen = "4k3/8/8/8/8/8/4n3/4K3 w - - 0 1"
  query = pickers.Query(fen, "atomic")
  picks = {picker.pick(query)["move"] for _ in range(5)}
  assert len(picks) == 1 and picks <= set(query.legal_moves)
  assert "e1e2" not in query.legal_moves  # kings cannot capture under atomic rules
  rows = pickers.answer_positions(picker, [{"fen": fen}], ["atomic_no_rules", "chess"])
  assert [(r["variant"], r["prompt"]) for r in rows] == [
    ("atomic", "no_rules"),
    ("chess", "rules"),
  ]
  assert all("ruleset" not in r for r in rows)
  assert all(r["model"] == "random-3" for r in rows)


class ScriptedPicker:
  """A `pickers.MovePicker` with scripted answers; records every query it is asked (no model)."""

  name = "scripted-model"

  def __init__(self, answers):
    self.answers, self.queries = list(answers), []

  def pick(self, query):
    self.queries.append(query)
    return self.answers.pop(0)


def test_answer_rows_carry_the_question_and_what_the_picker_recorded():
  answers = [
    {"move": "e2e4", "reasoning_effort": "high", "output_tokens": 42},
    {"move": "g1f3", "reasoning_effort": "high", "output_tokens": 7},
    {"move": "no idea", "reasoning_effort": "high", "output_tokens": 3},
  ]
  picker = ScriptedPicker(answers)
  rows = pickers.answer_positions(picker, [{"fen": START}], ["atomic", "chess", "chess"])
  assert [r["move"] for r in rows] == ["e2e4", "g1f3", "no idea"]
  first = rows[0]
  assert (first["fen"], first["variant"], first["prompt"]) == (START, "atomic", "rules")
  assert first["model"] == "scripted-model" and first["output_tokens"] == 42
  assert first["reasoning_effort"] == "high"
  asked = picker.queries[0]  # The picker sees the rendered prompt and the legal moves.
  assert "Atomic chess rules:" in asked.prompt and "g1h3" in asked.legal_moves
  assert scoring.move_status(START, "chess", rows[2]["move"]) == "unparsable"


def test_cli_rejects_bad_input_lines(tmp_path):
  positions = tmp_path / "p.jsonl"
  positions.write_text(json.dumps({"fen": START, "source": "standard", "depth": 5}) + "\n")
  answers = tmp_path / "a.jsonl"
  answers.write_text(
    "not json\n"
    + json.dumps({"fen": START, "move": "e2e4"})
    + "\n"
    + json.dumps({"fen": "8/8/8/8/8/8/8/K1k5 w - - 0 1", "variant": "atomic", "move": "a1a2"})
    + "\n"
    + json.dumps({"fen": START, "variant": "crazyhouse", "move": "e2e4"})
    + "\n"
  )
  args = report.parse_args(["--positions", str(positions), "--answers", str(answers), "--out", "x"])
  found, answers_ok, problems = report.load_inputs(args)
  assert list(found) == [START] and answers_ok == []
  assert len(problems) == 4
  assert any("not JSON" in p for p in problems) and any("missing variant" in p for p in problems)
  assert any("not in" in p for p in problems) and any("variant must be" in p for p in problems)
  assert (
    report.main(
      ["--positions", str(positions), "--answers", str(answers), "--out", str(tmp_path / "o")]
    )
    == 1
  )


def test_ratio_only_where_the_chess_loss_is_not_tiny():
  rows = [
    {"model": "a", "reasoning_effort": "-", "condition": "atomic", "mean_win_loss": 51.8},
    {"model": "a", "reasoning_effort": "-", "condition": "chess", "mean_win_loss": 0.3},
    {"model": "b", "reasoning_effort": "-", "condition": "atomic", "mean_win_loss": 40.0},
    {"model": "b", "reasoning_effort": "-", "condition": "chess", "mean_win_loss": 10.0},
  ]
  ratios = {r["model"]: r for r in report._ratios(rows)}
  assert ratios["a"]["atomic_over_chess"] is None  # not 172.67x
  assert ratios["a"]["atomic_minus_chess"] == pytest.approx(51.5)
  assert ratios["b"]["atomic_over_chess"] == pytest.approx(4.0)
  assert ratios["b"]["atomic_minus_chess"] == pytest.approx(30.0)


def test_missing_answer_file_is_a_clear_error(tmp_path, capsys):
  positions = tmp_path / "p.jsonl"
  positions.write_text(json.dumps({"fen": START, "source": "chess", "depth": 5}) + "\n")
  missing = tmp_path / "nowhere.jsonl"
  argv = ["--positions", str(positions), "--answers", str(missing), "--out", str(tmp_path / "o")]
  assert report.main(argv) == 1
  err = capsys.readouterr().err
  assert err.strip() == f"no such file: {missing}" and "Traceback" not in err
  assert report.main([*argv[2:], "--usage-only"]) == 1
  assert not (tmp_path / "o").exists()


def test_one_name_for_the_standard_rule_set():
  """ "chess" everywhere the track names the rule set; "standard" only read as an old name."""
  assert prompts.CONDITIONS == ("atomic", "atomic_no_rules", "chess")
  assert set(prompts.CONDITION_VARIANT.values()) == set(prompts.VARIANTS) == {"chess", "atomic"}
  assert prompts.condition_name("standard") == "chess" == prompts.variant_of("standard")
  assert report.variant_name("standard") == "chess"
  args = pickers.parse_args(["--positions", "p", "--out", "o", "--picker", "random"])
  assert args.conditions == ["atomic", "chess"]
  old = ["--positions", "p", "--out", "o", "--picker", "random", "--conditions", "standard"]
  assert pickers.parse_args(old).conditions == ["chess"]
