"""The language-model report (`chessjax.lm.report`) and the appendix's error breakdowns it prints
(Toshniwal et al. 2022, Tables 13-14, `chessjax.lm.probing`).

Every number of tables.json must be the number of the run file it came from (eval/results.json,
config.json, eval/probes.jsonl), cells without a run "-", the paper's numbers those of
paper_results.json.
"""

import json
import shutil
from pathlib import Path

import chess
import numpy as np
import pytest

from chessjax.data import source
from chessjax.lm import evaluate, probing, report
from chessjax.lm import tokens as tk
from chessjax.workdir import SUMMARY

VOCAB = tk.Vocab.default()
PAPER = report.paper_results()
PNG = b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------------------------
# Table 13's classification and both breakdowns on hand-built positions


def _logits(*tokens: str) -> np.ndarray:
  out = np.zeros((len(tokens), len(VOCAB)), dtype=np.float32)
  for i, tok in enumerate(tokens):
    out[i, VOCAB.id(tok)] = 1.0
  return out


def _row(board: chess.Board, start: str) -> dict:
  sq = chess.parse_square(start)
  legal = [chess.SQUARE_NAMES[m.to_square] for m in board.legal_moves if m.from_square == sq]
  piece = board.piece_at(sq).symbol().upper()
  return {"prefix": "", "starting_square": start, "piece_type": piece, "legal_ending_square": legal}


# (FEN, prompt square, predicted square, category, Table 13 case)
POSITIONS = [
  # Black king in check from e1, and it steps along the checking file.
  ("4k3/8/8/8/8/8/8/4R2K b - - 0 1", "e8", "e7", "pseudo_legal", "check_king"),
  # Black in check; the a8 rook moves without answering it.
  ("r3k3/8/8/8/8/8/8/4R2K b - - 0 1", "a8", "a1", "pseudo_legal", "check_other"),
  # No check; the king steps onto the d-file the d1 rook holds.
  ("4k3/8/8/8/8/8/8/3R3K b - - 0 1", "e8", "d8", "pseudo_legal", "no_check_king"),
  # No check; the e7 knight is pinned against its king.
  ("4k3/4n3/8/8/8/8/8/4R2K b - - 0 1", "e7", "c6", "pseudo_legal", "no_check_other"),
  # No check; the a1 rook's own pawn on a2 is in the way.
  ("4k3/8/8/8/8/8/P7/R6K w - - 0 1", "a1", "a5", "path_obstruction", "no_check_other"),
  # A legal prediction (counts in the totals, not in the errors).
  ("4k3/8/8/8/8/8/P7/R6K w - - 0 1", "a1", "d1", None, "no_check_other"),
  # A syntax error: a rook sent diagonally (left out of both totals).
  ("4k3/8/8/8/8/8/P7/R6K w - - 0 1", "a1", "b2", "syntax", "no_check_other"),
  # Check + king again, legal this time.
  ("4k3/8/8/8/8/8/8/4R2K b - - 0 1", "e8", "d7", None, "check_king"),
]


def test_pseudo_legal_cases_and_breakdowns_on_hand_built_positions():
  boards = [chess.Board(fen) for fen, *_ in POSITIONS]
  rows = [_row(b, start) for b, (_, start, *_) in zip(boards, POSITIONS, strict=True)]
  for board, (fen, start, predicted, category, case) in zip(boards, POSITIONS, strict=True):
    assert probing.pseudo_legal_case(board, start) == case, fen
    move = chess.Move(chess.parse_square(start), chess.parse_square(predicted))
    assert board.is_legal(move) == (category is None), fen
    if category == "pseudo_legal":
      assert board.is_pseudo_legal(move), fen
  logits = _logits(*(p for _, _, p, _, _ in POSITIONS))
  details = probing.end_row_details(rows, "end_actual", logits, VOCAB, boards)
  assert [d["error"] for d in details] == [c for *_, c, _ in POSITIONS]
  assert [d["pseudo_legal_case"] for d in details] == [c for *_, c in POSITIONS]
  # Path length = king moves (Chebyshev distance); a rook's a1 -> a5 is 4, a king step 1.
  assert [d["path_length"] for d in details] == [1, 7, 1, 2, 4, 3, 1, 1]
  errors = probing.error_categories(rows, "end_actual", logits, VOCAB, boards)
  counts = {"unreachable": 0, "syntax": 1, "pseudo_legal": 4, "path_obstruction": 1}
  assert errors["counts"] == counts
  assert errors["pseudo_legal_by_case"] == {
    "check_king": {"errors": 1, "total": 2},
    "check_other": {"errors": 1, "total": 1},
    "no_check_king": {"errors": 1, "total": 1},
    # The path-obstruction and syntax rows are errors of another category: not in the total.
    "no_check_other": {"errors": 1, "total": 2},
    "total": {"errors": 4, "total": 6},
  }
  # Path obstruction by piece: the four pseudo-legal errors and the syntax one leave the totals.
  by_piece = errors["path_obstruction_by_piece"]
  assert by_piece["R"] == {"errors": 1, "total": 2} and by_piece["K"] == {"errors": 0, "total": 1}
  assert by_piece["N"] == {"errors": 0, "total": 0}
  assert by_piece["total"] == {"errors": 1, "total": 3}


def test_paper_results_are_consistent():
  t = PAPER["tables"]
  sizes = [len(t[k]["rows"]) for k in ("table3", "table4", "table5", "table6", "table7")]
  assert sizes == [9, 6, 9, 18, 12]
  assert t["table4"]["random_legal"]["exm_acc"] == 86.0
  assert t["table5"]["random_legal"]["exm_acc"] == 19.6
  cols = report.PROBE_COLUMNS
  # Table 6's GPT2 rows are Table 5's UCI rows; its Train-L Performer row is its GPT2 (w = 50)
  # row, digit for digit, and carries the flag.
  t5 = {r["train"]: r for r in t["table5"]["rows"] if r["notation"] == "uci"}
  t6 = {(r["train"], r["model"], r["notation"]): r for r in t["table6"]["rows"]}
  for size in "SML":
    assert [t6[(size, "gpt2", "uci")][c] for c in cols] == [t5[size][c] for c in cols]
  perf, w50 = t6[("L", "performer", "uci")], t6[("L", "gpt2_w50", "uci")]
  assert [perf[c] for c in cols] == [w50[c] for c in cols] and "flag" in perf
  assert PAPER["flags"][0]["model"] == "performer"
  # Tables 13 and 14 (GPT-2 UCI, Train-L): errors sum to Table 7's counts, each total row sums.
  cell = lambda r: (r["train"], r["model"], r["notation"])
  (t7,) = [r for r in t["table7"]["rows"] if cell(r) == ("L", "gpt2", "uci")]
  for key, category in (("table13", "pseudo_legal"), ("table14", "path_obstruction")):
    rows = {r["category"]: r for r in t[key]["rows"]}
    for task, short in (("end_actual", "actual"), ("end_other", "other")):
      for col in ("errors", "total"):
        parts = sum(r[f"{task}_{col}"] for c, r in rows.items() if c != "total")
        assert parts == rows["total"][f"{task}_{col}"]
      assert rows["total"][f"{task}_errors"] == t7[f"{short}_{category}"]
  assert report.TUNED_P == {"S": 0.25, "M": 0.25, "L": 0.15}


def test_the_launch_list_moved_to_launch(capsys):
  with pytest.raises(SystemExit):
    report.main(["--launch-list", "--data", "data/lm", "--sets", "data/probing"])
  err = capsys.readouterr().err
  assert "moved: python -m launch.lm_sweep --print --data data/lm --sets data/probing" in err


# ------------------------------------------------------------------------------------------------
# The report from real runs


@pytest.fixture(scope="module")
def lm_runs(trained_lm, lm_sample, tmp_path_factory):
  """Two copies of the suite's GPT-2 tiny UCI run on sample games (conftest.py `trained_lm`,
  Train-S), each evaluated on its dev and test splits and the 100-row probing set: one as trained,
  one whose config reads the same checkpoint as a UCI + RAP (p = 0.25) model, evaluated as one
  (the report reads files: one training serves both); a directory with a broken config.json and a
  world-model workdir."""
  root = tmp_path_factory.mktemp("lm_report")
  data, sets, runs = lm_sample["data"], lm_sample["sets"], root / "runs"
  for name in ("gpt2_uci_S", "gpt2_rap_S"):
    shutil.copytree(trained_lm, runs / name)  # Evaluation writes WORKDIR/eval into the copies.
  cfg = json.loads((runs / "gpt2_rap_S" / "config.json").read_text())
  assert (cfg["family"], cfg["size"], cfg["lm"]["train"]) == ("gpt2", "tiny", "S")
  cfg["lm"].update(notation="rap", rap_p=0.25)
  (runs / "gpt2_rap_S" / "config.json").write_text(json.dumps(cfg))
  for name in ("gpt2_uci_S", "gpt2_rap_S"):
    evaluate.evaluate(runs / name, sets=sets)
  (runs / "broken").mkdir()
  (runs / "broken" / "config.json").write_text("{not json")
  (runs / "cwm").mkdir()
  (runs / "cwm" / "config.json").write_text(json.dumps({"task": "world_model", "family": "slice"}))
  out = root / "report"
  assert report.main(["--runs", str(runs), "--out", str(out)]) == 0
  return {"data": data, "sets": sets, "runs": runs, "out": out}


def _files(workdir) -> tuple[dict, dict, list[dict]]:
  w = Path(workdir)
  config = json.loads((w / "config.json").read_text())
  results = json.loads((w / "eval" / "results.json").read_text())
  probes = [json.loads(x) for x in (w / "eval" / "probes.jsonl").read_text().splitlines()]
  return config, results, probes


def _expected(key: str, row: dict, results: dict) -> dict:
  """The numbers a row must hold, read from its run's eval/results.json."""
  tasks = results["probes"]["tasks"]
  if key == "table3":
    return {f"{n}_perplexity": results["perplexity"][n]["perplexity"] for n in ("dev", "test")}
  if key in ("table4", "table5", "table6"):
    kind = "start" if key == "table4" else "end"
    if row["model"] == "random_legal":
      base = dict.fromkeys(report.PROBE_COLUMNS)
      return {**base, "exm_acc": results["probes"]["random_legal"][f"{kind}_actual"]}
    actual, other = tasks[f"{kind}_actual"], tasks[f"{kind}_other"]
    return {
      "lgm_actual_acc": actual["lgm"],
      "lgm_actual_r_prec": actual["r_precision"],
      "lgm_other_acc": other["lgm"],
      "lgm_other_r_prec": other["r_precision"],
      "exm_acc": actual["exm"],
    }
  if key == "table7":
    return {
      f"{short}_{c}": tasks[task]["errors"]["counts"][c]
      for short, task in (("actual", "end_actual"), ("other", "end_other"))
      for c in probing.ERROR_CATEGORIES
    }
  field = "pseudo_legal_by_case" if key == "table13" else "path_obstruction_by_piece"
  return {
    f"{task}_{col}": tasks[task]["errors"][field][row["category"]][col]
    for task in ("end_actual", "end_other")
    for col in ("errors", "total")
  }


def _paper_row(key: str, row: dict) -> dict | None:
  table = PAPER["tables"][key]
  if row["model"] == "random_legal":
    return table["random_legal"]
  for p in table["rows"]:
    if (p["train"], p["model"], p["notation"]) != (row["train"], row["model"], row["notation"]):
      continue
    if p.get("category", row.get("category")) != row.get("category"):
      continue
    return {k: v for k, v in p.items() if k not in ("train", "model", "notation", "category")}
  return None


def test_every_number_is_its_runs_own(lm_runs):
  out = lm_runs["out"]
  doc = json.loads((out / "tables.json").read_text())
  md = (out / "tables.md").read_text()
  uci, rap = (str(lm_runs["runs"] / n) for n in ("gpt2_uci_S", "gpt2_rap_S"))
  assert [r["workdir"] for r in doc["runs"]] == [rap, uci]
  for run in doc["runs"]:
    config, _, _ = _files(run["workdir"])
    summary = json.loads((Path(run["workdir"]) / SUMMARY).read_text())
    assert (run["steps"], run["params"]) == (summary["steps"], summary["params"])
    assert (run["model"], run["size"], run["train"]) == (
      config["family"],
      config["size"],
      config["lm"]["train"],
    )
    assert (run["notation"], run["rap_p"]) == (config["lm"]["notation"], config["lm"]["rap_p"])
  assert any("broken: skipped, unreadable (JSONDecodeError" in n for n in doc["notes"])
  assert any("cwm: skipped, task 'world_model', not a language model" in n for n in doc["notes"])
  checked = 0
  for key, table in doc["tables"].items():
    assert table["rows"], key
    for row in table["rows"]:
      cols = table["columns"]
      want_paper = _paper_row(key, row)
      if (row["train"], row["model"], row["notation"]) == ("S", "gpt2", "rap"):
        assert row["rap_p"] == 0.25  # The tuned p: the paper's row.
      assert row["paper"] == want_paper, (key, row)
      if row["workdir"] is None:
        assert all(row[c] is None for c in cols), (key, row)
        continue
      config, results, _ = _files(row["workdir"])
      if row["model"] != "random_legal":
        assert (row["model"], row["size"]) == (config["family"], config["size"])
        assert (row["notation"], row["rap_p"]) == (config["lm"]["notation"], config["lm"]["rap_p"])
        assert row["train"] == config["lm"]["train"]
      else:
        assert row["sets"] == results["probes"]["sets"] == str(lm_runs["sets"])
      want = _expected(key, row, results)
      assert {c: row[c] for c in cols} == want, (key, row)
      checked += sum(v is not None for v in want.values())
  assert checked >= 120
  assert doc["tables"]["table7"]["columns"][:3] == [
    "actual_syntax",
    "actual_path_obstruction",
    "actual_pseudo_legal",
  ]
  # Which runs each table holds: Start tasks only for RAP, Table 6 the GPT-2 UCI run alone.
  mine = lambda key: {r["workdir"] for r in doc["tables"][key]["rows"] if r["workdir"]}
  assert mine("table3") == mine("table5") == mine("table7") == mine("table13") == {uci, rap}
  assert mine("table4") == {rap} and mine("table6") == {uci}
  for key in ("table13", "table14"):
    paper_only = [r for r in doc["tables"][key]["rows"] if r["paper"] is not None]
    assert [r["workdir"] for r in paper_only] == [None] * (5 if key == "table13" else 6)
  # Markdown: ours / paper, "-" for the missing side, the Performer flag.
  assert "| M | GPT2 | UCI | - / 11.6 | - / 11.6 |" in md
  t3 = next(r for r in doc["tables"]["table3"]["rows"] if r["workdir"] == uci)
  assert f"| S | GPT2 tiny | UCI | {t3['dev_perplexity']:.2f} / 23.6 |" in md
  t5 = next(r for r in doc["tables"]["table5"]["rows"] if r["model"] == "random_legal")
  assert t5["workdirs"] == [rap, uci]
  assert (
    f"| Random Legal |  |  | - / - | - / - | - / - | - / - | {t5['exm_acc']:.1f} / 19.6 |" in md
  )
  assert "| L | Performer (†) | UCI | - / 95.8 |" in md and "(†) Train-L Performer:" in md
  assert "| Check + King | - / 1 | - / 27 | - / 2 | - / 20 |" in md
  assert "broken: skipped, unreadable" in md


def test_breakdowns_match_the_probe_records(lm_runs):
  """results.json's Tables 7, 13 and 14 recounted from probes.jsonl, whose case and category are
  checked against python-chess."""
  for name in ("gpt2_uci_S", "gpt2_rap_S"):
    _, results, probes = _files(lm_runs["runs"] / name)
    assert {x["task"] for x in probes} == set(results["probes"]["tasks"])
    for task in ("end_actual", "end_other"):
      recs = [x for x in probes if x["task"] == task]
      errors = results["probes"]["tasks"][task]["errors"]
      kinds = {x["error"] for x in recs}
      assert None in kinds and len(kinds) >= 3, kinds  # Legal answers and two error categories.
      for c in probing.ERROR_CATEGORIES:
        assert errors["counts"][c] == sum(x["error"] == c for x in recs)
      assert sum(x["error"] is None for x in recs) == sum(x["legal_match"] for x in recs)
      for field, group, names, cat in (
        ("pseudo_legal_by_case", "pseudo_legal_case", probing.PSEUDO_LEGAL_CASES, "pseudo_legal"),
        ("path_obstruction_by_piece", "piece", probing.TABLE11_PIECES, "path_obstruction"),
      ):
        for n in names:
          mine = [x for x in recs if x[group] == n and x["error"] in (None, cat)]
          assert errors[field][n] == {
            "errors": sum(x["error"] == cat for x in mine),
            "total": len(mine),
          }
        assert errors[field]["total"]["total"] == sum(x["error"] in (None, cat) for x in recs)
      for x in recs:
        board = probing.board_after(x["prefix"])
        piece = board.piece_at(chess.parse_square(x["start"]))
        assert piece.symbol().upper() == x["piece"]
        case = ("check" if board.is_check() else "no_check") + (
          "_king" if piece.piece_type == chess.KING else "_other"
        )
        assert x["pseudo_legal_case"] == case
    start = [x for x in probes if x["task"].startswith("start")]
    assert all(x["start"] is None and x["piece"] in "RNBQK" for x in start)


def test_figures_and_their_data(lm_runs):
  out = lm_runs["out"]
  doc = json.loads((out / "tables.json").read_text())
  for name in ("figure2", "figure4", "figure5", "figure8"):
    png = (out / f"{name}.png").read_bytes()
    assert png.startswith(PNG) and len(png) > 10_000, name
  figs = doc["figures"]
  # Figure 2: each point a Table 3 row (UCI at p = 0, RAP at 100 p).
  (line,) = figs["figure2"]["ours"]
  t3 = {r["workdir"]: r for r in doc["tables"]["table3"]["rows"] if r["workdir"]}
  assert [(p, w) for p, _, w in line["points"]] == [
    (0.0, str(lm_runs["runs"] / "gpt2_uci_S")),
    (25.0, str(lm_runs["runs"] / "gpt2_rap_S")),
  ]
  assert all(v == t3[w]["dev_perplexity"] for _, v, w in line["points"])
  assert {"train": "S", "points": [[0.0, 23.6], [25.0, 15.9]]} in figs["figure2"]["paper"]
  # Figure 4: the UCI token length of every training game (Train-S: all of the small split).
  (f4,) = figs["figure4"]
  games = list(source.read_games(lm_runs["data"], "train"))
  lengths = [len(tk.tokenize(tk.ucis_of_moves(g["moves"]), VOCAB)) for g in games]
  assert f4["count"] == len(games) and f4["mean"] == np.mean(lengths)
  assert (f4["min"], f4["max"], sum(f4["bins"])) == (min(lengths), max(lengths), len(games))
  # Figure 5: the probing set's prefix lengths in moves (both runs were probed on it).
  (f5,) = figs["figure5"]
  end_rows, _ = probing.read_rows(lm_runs["sets"])
  prefix = [len(r["prefix"].split()) for r in end_rows]
  assert (f5["count"], f5["min"], f5["max"]) == (len(prefix), min(prefix), max(prefix))
  assert f5["bins"] == np.bincount(np.array(prefix) - min(prefix)).tolist()
  assert len(f5["workdirs"]) == 2
  # Figure 8: mean Chebyshev distance of the legal and path-obstruction predictions per piece.
  assert len(figs["figure8"]) == 2 * 2 * 5
  for row in figs["figure8"]:
    _, _, probes = _files(row["workdir"])
    mine = [x for x in probes if x["task"] == row["task"] and x["piece"] == row["piece"]]
    dist = lambda x: chess.square_distance(
      chess.parse_square(x["start"]), chess.parse_square(x["top1"])
    )
    legal = [dist(x) for x in mine if x["legal_match"]]
    blocked = [dist(x) for x in mine if x["error"] == "path_obstruction"]
    assert row["legal_count"] == len(legal) and row["path_obstruction_count"] == len(blocked)
    assert row["legal_mean_path"] == (float(np.mean(legal)) if legal else None)
    assert row["path_obstruction_mean_path"] == (float(np.mean(blocked)) if blocked else None)
    if row["piece"] == "N":
      assert set(legal) <= {2}
