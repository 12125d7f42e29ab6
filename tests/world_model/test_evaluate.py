"""Evaluation reports and the game tracker, on a model trained for 4 steps.

The streamed evaluation must equal `metrics.state_metrics` on logits computed directly; boards and
first errors are checked against synthetic logits whose first wrong step is known per game.
"""

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import chess
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import REPO, SMOKE_FAMILY

from chessjax import encoding, labels, train, workdir
from chessjax.data import GameSource, read_manifest, source
from chessjax.encoding import PAD_ID
from chessjax.world_model import boards, eval_report, evaluate, metrics, strata, track
from configs import cwm
from data_prep import process_pgn

FAMILY = SMOKE_FAMILY  # Any family works.
FIXTURE_TIERS = {"run_dir": "slow"}  # It trains (tests/conftest.py).
SAMPLE = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"
OPENING = "e2e4 e7e5 g1f3 b8c6 f1b5 a7a6 e1g1".split()


def _prepare(out, *extra):
  args = ["--pgn", str(SAMPLE), "--out", str(out), *extra]
  process_pgn.run(process_pgn.parse_args(args))
  return out


@pytest.fixture(scope="module")
def data(tmp_path_factory, small_dataset):
  root = tmp_path_factory.mktemp("eval_data")
  real = small_dataset
  # One split not called `test`: evaluation must pick it by default.
  single = _prepare(root / "single", "--max-games", "10", "--split", "games")
  return {"real": real, "single": single}


@pytest.fixture(scope="module")
def run_dir(data, tmp_path_factory):
  config = cwm.get_config(f"family={FAMILY},size=d128,smoke=True")
  config.data.train = str(data["real"])
  config.data.bucket_lengths = (128,)  # One training shape: one compilation.
  config.train.steps = config.train.checkpoint_every = config.train.eval_every = 4
  wd = tmp_path_factory.mktemp("eval_run") / "wd"
  train.train_and_evaluate(config, wd)
  # Evaluation compiles its own shapes: two buckets exercise streaming across batch shapes.
  saved = json.loads((wd / "config.json").read_text())
  saved["data"]["bucket_lengths"] = [64, 128]
  (wd / "config.json").write_text(json.dumps(saved))
  return wd


@pytest.fixture(scope="module")
def restored(run_dir):
  return workdir.restore(run_dir, which="latest")


def _padded_games(path, split, max_len):
  """Every game of a split, cut to max_len steps and padded to max_len: moves, states, mask."""
  source = GameSource(path, split)
  n = len(source)
  moves = np.full((n, max_len), PAD_ID, np.int32)
  states = np.zeros((n, max_len, labels.NUM_LABELS), np.uint8)
  mask = np.zeros((n, max_len), bool)
  for i in range(n):
    g = source[i]
    k = min(len(g["moves"]), max_len)
    moves[i, :k], states[i, :k], mask[i, :k] = g["moves"][:k], g["states"][:k], True
  return moves, states, mask


def _first_errors(logits, states, mask):
  _, hit = metrics.per_label(jnp.asarray(logits), jnp.asarray(states))
  wrong = ~np.asarray(hit).all(-1) & mask
  return [int(np.argmax(w)) if w.any() else -1 for w in wrong]


def _captions(svg_path):
  root = ET.parse(svg_path).getroot()  # Also checks that the SVG is well-formed XML.
  return " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))


def _check_boards(result, out_dir, expected_first):
  for b in result["boards"]:
    assert b["step"] == expected_first[b["game"]]
    text = _captions(out_dir / b["svg"])
    assert f"game {b['game']} " in text and f"first wrong step {b['step']}," in text
    assert f"{len(b['wrong'])} wrong labels:" in text
  failing = [g for g, s in enumerate(expected_first) if s >= 0]
  assert [b["game"] for b in result["boards"]] == failing[: len(result["boards"])]


def test_streamed_metrics_equal_direct_metrics(run_dir, data, restored):
  config, fns, state, step = restored.config, restored.fns, restored.state, restored.step
  results = evaluate.evaluate(
    run_dir, {"real": (data["real"], None)}, batch_size=4, boards=3, restored=restored
  )
  out = run_dir / "eval"
  saved = json.loads((out / "real.json").read_text())
  r = results["real"]
  assert saved["exact_state"] == r["exact_state"] and saved["checkpoint_step"] == step == 4
  assert r["dataset"]["split"] == "test" and r["compiled_shapes"] == [64, 128]
  assert r["games_per_s"] > 0 and r["dataset"]["games"] == r["games"]

  moves, states, mask = _padded_games(data["real"], "test", config.data.max_len)
  logits = np.asarray(fns.predict(state["params"], state["model_state"], jnp.asarray(moves)))
  want = metrics.state_metrics(logits, states, mask)
  assert r["loss"] == pytest.approx(want["loss"], rel=1e-5)
  for key in ("labelwise", "exact_state", "trajectory", "groups"):
    assert r[key] == pytest.approx(want[key], rel=1e-6, abs=1e-9), key
  for key in ("start", "steps", "exact_state", "labelwise"):
    assert r["bins"][key] == pytest.approx(want["bins"][key], rel=1e-6, abs=1e-9), key
  assert (r["steps"], r["games"], r["first_error"]) == (
    want["steps"],
    want["games"],
    want["first_error"],
  )
  assert r["dataset"]["truncated_games"] == int((mask.sum(1) == config.data.max_len).sum())
  expected_first = _first_errors(logits, states, mask)
  assert r["first_error_steps"] == expected_first
  ce = np.asarray(metrics.per_label(jnp.asarray(logits), jnp.asarray(states))[0]).sum(-1)
  game_loss = (ce * mask).sum(1) / (labels.NUM_LABELS * mask.sum(1))
  np.testing.assert_allclose(r["game_loss"], game_loss, rtol=1e-5)
  assert r["max_game_loss"] == max(r["game_loss"])
  assert len(r["boards"]) == min(3, sum(s >= 0 for s in expected_first))
  _check_boards(r, out, expected_first)

  md = (out / "results.md").read_text()
  assert "| dataset | Loss | Labelwise % | ExactState % | Trajectory % |" in md
  row = f"| real | {eval_report.format_loss(r['loss'])} | {100 * r['labelwise']:.2f} |"
  assert row in md and "## Accuracy per label group" in md and "non-finite" in md
  assert (out / "prefix_bins.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _synthetic_logits(error_step, inf_game):
  """One-hot logits of the true labels, with square a8 wrong at `error_step(game)` (0: none) and
  +inf on the true class of a8 at step 0 of game `inf_game` (argmax still right, loss NaN)."""

  def logits_fn(params, model_state, batch):
    states = batch["states"].astype(jnp.int32)
    b, t, _ = states.shape
    cols = jnp.asarray(labels.HEAD_OFFSETS) + states
    rows_b, rows_t = jnp.arange(b)[:, None], jnp.arange(t)[None, :]
    logits = jnp.zeros((b, t, labels.HEAD_DIM)).at[rows_b[..., None], rows_t[..., None], cols]
    logits = logits.set(10.0)
    err = error_step(batch["index"])  # [B]; 0 = no injected error.
    wrong_class = (states[:, :, 0] + 1) % labels.NUM_PIECE_CLASSES
    hit = (rows_t == err[:, None]) & (err[:, None] > 0)
    logits = logits.at[rows_b, rows_t, wrong_class].add(jnp.where(hit, 20.0, 0.0))
    inf_at = (batch["index"] == inf_game)[:, None] & (rows_t == 0)
    return logits.at[rows_b, rows_t, states[:, :, 0]].add(jnp.where(inf_at, jnp.inf, 0.0))

  return logits_fn


def test_first_errors_boards_and_nonfinite_logits(run_dir, data, restored, monkeypatch):
  err = lambda g: jnp.where(g % 3 == 0, 0, 1 + (g * 7) % 20)  # Games have >= 21 steps.
  r = evaluate.evaluate(
    run_dir,
    {"fake": (data["real"], "test")},
    batch_size=4,
    boards=2,
    restored=restored,
    logits_fn=_synthetic_logits(err, inf_game=2),
  )["fake"]
  n = r["games"]
  expected = [int(err(g)) or -1 for g in range(n)]
  assert r["first_error_steps"] == expected
  assert r["trajectory"] == pytest.approx(sum(s < 0 for s in expected) / n)
  assert r["first_error"]["games_with_error"] == sum(s > 0 for s in expected)
  assert r["nonfinite_logits"] == 1 and np.isnan(r["loss"])
  _check_boards(r, run_dir / "eval", expected)
  first = r["boards"][0]
  assert first["wrong"] == [0]  # Only square a8 is wrong.
  assert "a8: model" in _captions(run_dir / "eval" / first["svg"])
  md = (run_dir / "eval" / "results.md").read_text()
  assert "| fake | nan |" in md and "(max_len 128) | 1 |" in md  # Loss and non-finite count.
  assert np.isnan(json.loads((run_dir / "eval" / "fake.json").read_text())["loss"])


def test_perfect_predictions_draw_no_boards(run_dir, data, restored, monkeypatch):
  logits_fn = _synthetic_logits(lambda g: 0 * g, inf_game=-5)
  r = evaluate.evaluate(
    run_dir, {"single": (data["single"], None)}, restored=restored, logits_fn=logits_fn
  )["single"]
  assert r["dataset"]["split"] == "games"  # The only split.
  assert r["exact_state"] == r["trajectory"] == 1.0 and r["nonfinite_logits"] == 0
  assert r["boards"] == [] and set(r["first_error_steps"]) == {-1}
  assert r["first_error"]["games_with_error"] == 0
  assert not list((run_dir / "eval" / "boards").glob("single_*.svg"))
  assert "| single | 10 | 0 | - |" in (run_dir / "eval" / "results.md").read_text()


def test_cli_prints_table_and_limits_games(run_dir, data, restored, monkeypatch, capsys):
  asked = []
  monkeypatch.setattr(workdir, "restore", lambda wd, which=None: asked.append(which) or restored)
  argv = ["--workdir", str(run_dir), "--data", f"a={data['real']}:train", f"b={data['single']}"]
  assert evaluate.main(argv + ["--max-games", "5", "--boards", "1", "--batch-size", "2"]) == 0
  out = capsys.readouterr().out
  assert "| a |" in out and "| b |" in out and "results.md" in out and "prefix_bins.png" in out
  a = json.loads((run_dir / "eval" / "a.json").read_text())
  assert a["games"] == 5 and a["dataset"]["split"] == "train" and len(a["boards"]) <= 1
  assert asked == [None]  # `restore`'s own choice: best when training validated, else latest.


def test_bad_arguments_fail_clearly(run_dir, data, tmp_path, capsys):
  with pytest.raises(ValueError, match=r"no split 'nope'; it has \['test', 'train'"):
    evaluate.evaluate(run_dir, {"x": (data["real"], "nope")})
  with pytest.raises(SystemExit):
    evaluate.main(["--workdir", str(run_dir), "--data", f"x={data['real']}:nope"])
  assert "no split 'nope'" in capsys.readouterr().err
  # Several splits and none called `test`: the error lists them.
  no_test = tmp_path / "no_test"
  shutil.copytree(data["real"], no_test)
  manifest = read_manifest(no_test)
  del manifest["splits"]["test"]
  (no_test / "manifest.json").write_text(json.dumps(manifest))
  with pytest.raises(ValueError, match=r"no 'test' split; name one of \['train'"):
    source.resolve_split(no_test, None)
  with pytest.raises(FileNotFoundError, match="not a training workdir"):
    evaluate.evaluate(tmp_path / "missing", {"x": (data["real"], None)})
  with pytest.raises(SystemExit):
    evaluate.main(["--workdir", str(tmp_path / "missing"), "--data", f"x={data['real']}"])
  assert "not a training workdir" in capsys.readouterr().err
  with pytest.raises(ValueError, match="NAME=PATH"):
    source.parse_data_arg("just/a/path")
  assert source.parse_data_arg("r=/d/x:test") == ("r", "/d/x", "test")
  assert source.parse_data_arg("r=/d/x") == ("r", "/d/x", None)


def test_track_prints_every_ply(run_dir, restored, monkeypatch, capsys, tmp_path):
  steps = track.track(run_dir, OPENING, restored=restored)
  assert [s["step"] for s in steps] == list(range(len(OPENING) + 1))
  assert steps[5]["san"] == "Bb5" and steps[0]["move"] is None
  assert all(s["exact"] == (s["wrong"] == []) for s in steps)

  monkeypatch.setattr(workdir, "restore", lambda wd, which=None: restored)
  assert track.main(["--workdir", str(run_dir), "--moves", " ".join(OPENING), "--ascii"]) == 0
  out = capsys.readouterr().out
  for rank in "87654321":
    assert out.count(f"\n  {rank} ") == len(OPENING) + 1
  assert "  1 R N B Q . R K .\n" in out  # The true board after castling, on the right.
  assert "castling" in out and "fullmove" in out and "exact steps:" in out
  pgn = tmp_path / "g.pgn"
  pgn.write_text('[Event "x"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. O-O *\n')
  assert track.main(["--workdir", str(run_dir), "--pgn", str(pgn)]) == 0
  assert capsys.readouterr().out.count("\n  8 ") == len(OPENING) + 1


def test_track_takes_every_evaluators_flags(run_dir, restored, monkeypatch, capsys, tmp_path):
  """`--checkpoint` as every evaluation of a workdir (`chessjax.cli`); a bad input is one line."""
  with pytest.raises(SystemExit):
    track.main(["--workdir", str(tmp_path / "missing"), "--moves", "e2e4"])
  err = capsys.readouterr().err
  assert "error: " in err and "not a training workdir" in err
  asked = []
  monkeypatch.setattr(workdir, "restore", lambda wd, which=None: asked.append(which) or restored)
  assert track.main(["--workdir", str(run_dir), "--moves", "e2e4", "--checkpoint", "latest"]) == 0
  assert track.main(["--workdir", str(run_dir), "--moves", "e2e4"]) == 0
  assert asked == ["latest", None]  # None: best if the workdir has it, else latest.
  assert capsys.readouterr().out.count("checkpoint step 4, 1 plies") == 2
  with pytest.raises(SystemExit):
    track.main(["--workdir", str(run_dir), "--moves", "e2e4", "--checkpoint", "newest"])
  assert "invalid choice: 'newest'" in capsys.readouterr().err
  corrupt = tmp_path / "game.pgn.gz"
  corrupt.write_bytes(b"not gzip data")
  with pytest.raises(SystemExit):
    track.main(["--workdir", str(run_dir), "--pgn", str(corrupt)])
  assert "error: Not a gzipped file" in capsys.readouterr().err
  assert asked == ["latest", None]  # Refused before the model is restored.


def test_track_names_the_illegal_ply(run_dir, restored, capsys):
  with pytest.raises(ValueError, match="ply 3: illegal move 'e1e3'"):
    track.track(run_dir, "e2e4 e7e5 e1e3", restored=restored)
  with pytest.raises(SystemExit):
    track.main(["--workdir", str(run_dir), "--moves", "e2e4 e7e5 e1e3"])
  assert "ply 3" in capsys.readouterr().err


def test_invalid_predicted_rows_still_draw():
  row = np.zeros(labels.NUM_LABELS, np.uint8)
  row[[0, 1, 2]] = 6  # Three white kings on a8, b8, c8.
  row[[8, 9]] = 1  # White pawns on the 7th rank.
  board = boards.board_of_labels(row)
  assert len(board.pieces(6, True)) == 3 and len(board.pieces(1, True)) == 2
  true = row.copy()
  true[1] = 0
  svg = boards.failure_svg(row, true, "t")
  assert "b8: model white king, true empty" in " ".join(
    t.text or "" for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")
  )


def test_a_second_evaluation_keeps_the_first_results(run_dir, data, restored):
  """Each dataset keeps its own NAME.json and NAME.md; results.md tables every one of them."""
  evaluate.evaluate(run_dir, {"first": (data["single"], None)}, restored=restored, boards=0)
  evaluate.evaluate(run_dir, {"second": (data["single"], None)}, restored=restored, boards=0)
  out = run_dir / "eval"
  md = (out / "results.md").read_text()
  assert "| first | " in md and "| second | " in md
  assert "| first | " in (out / "first.md").read_text()
  assert "| second | " not in (out / "first.md").read_text()
  assert json.loads((out / "first.json").read_text())["games"] == 10


def test_datasets_of_one_evaluation_share_their_compiled_shapes(
  run_dir, data, restored, monkeypatch
):
  """Two datasets with the same batch shapes in one `evaluate`: each shape is compiled once (the
  second dataset runs the first's executable), and each dataset scores as when evaluated alone."""
  from chessjax import evaluation

  lowered = []
  real = evaluation.CompiledLengths.__init__

  def counting(self, step_fn, *args, **kwargs):
    class Counted:
      def lower(self, *a):
        lowered.append(a[-1]["moves"].shape)
        return step_fn.lower(*a)

    real(self, Counted(), *args, **kwargs)

  monkeypatch.setattr(evaluation.CompiledLengths, "__init__", counting)
  both = {"a": (data["single"], None), "b": (data["single"], None)}
  together = evaluate.evaluate(run_dir, both, restored=restored, boards=0, verbose=False)
  assert len(lowered) == len(set(lowered)) == len(together["a"]["compiled_shapes"]) > 0
  monkeypatch.undo()
  alone = evaluate.evaluate(run_dir, {"b": both["b"]}, restored=restored, boards=0, verbose=False)
  timing = ("compile_seconds", "eval_seconds", "games_per_s", "steps_per_s")
  for result in (together["a"], together["b"], alone["b"]):
    for key in timing:
      result.pop(key)
  assert together["a"] == together["b"] == alone["b"]


# ------------------------------------------------------------------------------------------------
# Long games: scoring beyond the training cut, strata, the gallery page


def _flags_from_labels(moves, states):
  """capture, king_move, promotion and castling_lost of every step, read off the label rows
  and move ids alone (an oracle independent of `strata.game_flags`'s python-chess replay)."""
  t = len(moves)
  out = np.zeros((t, 4), bool)
  for i in range(1, t):
    uci = encoding.id_to_move(int(moves[i]))
    frm = (8 - int(uci[1])) * 8 + "abcdefgh".index(uci[0])
    to = (8 - int(uci[3])) * 8 + "abcdefgh".index(uci[2])
    piece = int(states[i - 1, frm])
    diagonal_pawn = piece in (1, 7) and uci[0] != uci[2]
    out[i, 0] = states[i - 1, to] != 0 or diagonal_pawn  # Diagonal to an empty square: e.p.
    out[i, 1] = piece in (6, 12)
    out[i, 2] = len(uci) == 5
    out[i, 3] = bool((states[i - 1, 65:69] > states[i, 65:69]).any())
  return out


def _random_game(rng, plies: int) -> list[str]:
  board, ucis = chess.Board(), []
  while len(ucis) < plies and not board.is_game_over():
    moves = sorted(board.legal_moves, key=chess.Move.uci)
    move = moves[rng.integers(len(moves))]
    ucis.append(move.uci())
    board.push(move)
  return ucis


def test_strata_flags_match_the_labels(data):
  """`game_flags` against the labels: captures, king moves, promotions, lost castling rights and
  e.p.-label changes from the stored label rows, at every step; checks and legal en passant from
  a board rebuilt from each label row, at every step flagged and 8 others per game. Every stratum
  has steps among those checked."""
  games = GameSource(data["real"], "test")
  rng = np.random.default_rng(0)
  random_games = [encoding.encode_game(_random_game(rng, 400)) for _ in range(3)]
  checked = np.zeros(len(strata.STRATA), int)
  real = [(games[i]["moves"], games[i]["states"]) for i in range(len(games))]
  for moves, states in real + random_games:
    flags = strata.game_flags(moves)
    assert flags.shape == (len(moves), len(strata.NAMES))
    np.testing.assert_array_equal(flags[:, [0, 2, 3, 4]], _flags_from_labels(moves, states))
    ep_changed = np.r_[False, (states[1:, 69:71] != states[:-1, 69:71]).any(-1)]
    np.testing.assert_array_equal(flags[:, 6], ep_changed)
    checked[[0, 2, 3, 4, 6]] += flags[:, [0, 2, 3, 4, 6]].sum(0)
    sample = rng.choice(len(moves), size=min(8, len(moves)), replace=False)
    for t in sorted(set(sample) | set(np.flatnonzero(flags[:, 1] | flags[:, 5]))):
      board = chess.Board(encoding.labels_to_fen(states[t]))
      assert flags[t, 1] == board.is_check()
      assert flags[t, 5] == board.has_legal_en_passant()
      checked[[1, 5]] += flags[t, [1, 5]]
    np.testing.assert_array_equal(flags[1:, len(strata.STRATA) :], flags[:-1, : len(strata.STRATA)])
    assert not flags[0, len(strata.STRATA) :].any()
  assert (checked > 0).all(), dict(zip(strata.STRATA, checked, strict=True))


# Games with each event, and the strata of every step (t: the state after ply t).
EVENT_GAMES = {
  "en passant": (
    "e2e4 a7a6 e4e5 d7d5 e5d6",
    {1: {"ep_label"}, 2: {"ep_label"}, 4: {"ep_label", "ep_available"}, 5: {"capture", "ep_label"}},
    {4: {"ep_label", "ep_available"}, 5: {"capture", "ep_label"}},  # legal e.p. labels
  ),
  "promotion taking a rook": (
    "a2a4 b7b5 a4b5 a7a6 b5a6 c8b7 a6b7 b8c6 b7a8q",
    {
      1: {"ep_label"},  # a3 set
      2: {"ep_label"},  # b6 in its place (a4 is no e.p. capturer: a pawn on the 4th rank)
      3: {"capture", "ep_label"},
      5: {"capture"},
      7: {"capture"},
      9: {"capture", "promotion", "castling_lost"},  # the a8 rook: black's queenside right
    },
    {
      3: {"capture"},
      5: {"capture"},
      7: {"capture"},
      9: {"capture", "promotion", "castling_lost"},
    },  # fmt: skip
  ),
  "check and castling": (
    "e2e4 d7d6 f1b5 c8d7 g1f3 g8f6 e1g1",
    {1: {"ep_label"}, 2: {"ep_label"}, 3: {"check"}, 7: {"king_move", "castling_lost"}},
    {3: {"check"}, 7: {"king_move", "castling_lost"}},
  ),
}


@pytest.mark.parametrize("name", sorted(EVENT_GAMES))
@pytest.mark.parametrize("ep_mode", encoding.EP_MODES)
def test_strata_of_games_with_each_event(name, ep_mode):
  """Every flag of every step of a game built around an event (double push, legal e.p. capture,
  promotion, castling, rook captured, check), under both e.p. label modes; the e.p.-label
  stratum is where the encoded labels change."""
  ucis, pseudo, legal = EVENT_GAMES[name]
  moves, states = encoding.encode_game(ucis.split(), ep_mode=ep_mode)
  events = pseudo if ep_mode == "pseudo" else legal
  want = np.zeros((len(moves), len(strata.NAMES)), bool)
  for t, names in events.items():
    for s in names:
      want[t, strata.NAMES.index(s)] = True
      if t + 1 < len(moves):
        want[t + 1, strata.NAMES.index(f"after_{s}")] = True
  got = strata.game_flags(moves, ep_mode=ep_mode)
  wrong = {(int(t), strata.NAMES[s]) for t, s in zip(*np.nonzero(got != want), strict=True)}
  assert not wrong, wrong
  changed = (states[1:, 69:71] != states[:-1, 69:71]).any(-1)
  np.testing.assert_array_equal(got[1:, strata.NAMES.index("ep_label")], changed)


# Atomic games with each rule-change event: the atomic strata of every step (t: after ply t).
ATOMIC_EVENT_GAMES = {
  # Nxf7 explodes the knight, the pawn and the pieces around f7: the king on e8 among them.
  "king exploded": ("g1f3 e7e6 f3e5 d7d6 e5f7", {5: {"explosion", "king_exploded"}}),
  # Qxa2 explodes the queen, the pawn and the rook on a1 (the pawn on b2 survives).
  "explosion": ("e2e4 d7d5 e4d5 d8d5 b1c3 d5a2", {6: {"explosion"}}),
  # Kc5 and Kb5 step next to the enemy king: legal in atomic, not in standard chess. A pawn
  # capture of a pawn (e4d5 above) removes the two pieces only: no explosion stratum.
  "kings side by side": (
    "e2e4 e7e5 e1e2 e8e7 e2e3 e7e6 e3d3 e6d6 d3c4 d6c5 c4b5",
    {10: {"rule_divergent"}, 11: {"rule_divergent"}},
  ),
}


@pytest.mark.parametrize("name", sorted(ATOMIC_EVENT_GAMES))
def test_atomic_strata_of_games_with_each_event(name):
  """The atomic strata (`strata.ATOMIC_STRATA`) of every step of an atomic game built around an
  event, and their `after_` steps; the other strata as the same replay gives them; a chess game
  has no atomic strata (its flags and names as before)."""
  ucis, events = ATOMIC_EVENT_GAMES[name]
  moves, _ = encoding.encode_game(ucis.split(), variant="atomic")
  names = strata.names("atomic")
  got = strata.game_flags(moves, "atomic")
  assert got.shape == (len(moves), len(names)) and names[: len(strata.STRATA)] == strata.STRATA
  own = [
    names.index(s) for s in (*strata.ATOMIC_STRATA, *(f"after_{a}" for a in strata.ATOMIC_STRATA))
  ]
  want = np.zeros((len(moves), len(names)), bool)
  for t, flagged in events.items():
    for s in flagged:
      want[t, names.index(s)] = True
      if t + 1 < len(moves):
        want[t + 1, names.index(f"after_{s}")] = True
  wrong = {(t, names[s]) for t in range(len(moves)) for s in own if got[t, s] != want[t, s]}
  assert not wrong, wrong
  assert (got[:, names.index("explosion")] <= got[:, names.index("capture")]).all()
  assert strata.names("chess") == strata.NAMES
  chess_moves, _ = encoding.encode_game("e2e4 d7d5 e4d5".split())
  assert strata.game_flags(chess_moves).shape == (4, len(strata.NAMES))
  acc = strata.StrataAccumulator(names)
  hits = np.broadcast_to(strata.GROUP_SIZES, (len(moves), len(strata.GROUP_SIZES)))
  acc.add(got, np.ones(len(moves), bool), hits)
  r = acc.result()
  assert list(r) == list(names)
  for s, n in ((a, sum(a in e for e in events.values())) for a in strata.ATOMIC_STRATA):
    assert r[s]["steps"] == n and r[s]["exact_state"] == (1.0 if n else None)


def test_strata_matched_weighs_the_other_steps_by_the_stratum_plies():
  """`matched`: the other steps at the stratum's plies, each ply weighted by its stratum steps."""
  capture, check = strata.NAMES.index("capture"), strata.NAMES.index("check")
  acc = strata.StrataAccumulator()

  def add(exact, captures=(), checks=()):
    flags = np.zeros((len(exact), len(strata.NAMES)), bool)
    flags[list(captures), capture] = True
    flags[list(checks), check] = True
    hits = np.broadcast_to(strata.GROUP_SIZES, (len(exact), len(strata.GROUP_SIZES))).copy()
    hits[~np.asarray(exact, bool), 0] -= 1  # one square wrong on each wrong step
    acc.add(flags, np.asarray(exact, bool), hits)

  add([1, 0, 1, 1], captures=[1, 3], checks=[0, 1, 2, 3])
  add([1, 1, 0], captures=[1])
  add([1, 1, 1, 0, 1])
  r = acc.result()
  c = r["capture"]
  assert (c["steps"], c["exact_state"]) == (3, pytest.approx(2 / 3))  # plies 1, 1, 3
  # Ply 1 (two capture steps): the other step there is exact; ply 3: the one other is wrong.
  assert (c["matched"]["steps"], c["matched"]["exact_state"]) == (3, pytest.approx(2 / 3))
  assert c["matched"]["groups"]["pieces"] == pytest.approx(1 - (1 / 3) / 64)
  # Every check is in the first game: the other games' steps at plies 0-3; none at ply 4.
  k = r["check"]
  assert (k["matched"]["steps"], k["matched"]["exact_state"]) == (4, pytest.approx(5 / 8))
  assert r["promotion"]["matched"] == {
    "steps": 0, "exact_state": None, "groups": dict.fromkeys(strata.GROUP_NAMES),
  }  # fmt: skip
  # transition_error: the steps whose previous step was exact. Captures: G1 ply 1 (broken), G1
  # ply 3 and G2 ply 1 (kept exact); the others at ply 1 (G3, kept) and ply 3 (G3, broken).
  assert c["transition_error"] == {
    "steps": 3, "error": pytest.approx(1 / 3),
    "matched": {"steps": 3, "error": pytest.approx((2 * 0 + 1 * 1) / 3)},
  }  # fmt: skip
  # Checks: ply 0 has no previous step, ply 2 follows a wrong step; plies 1 (broken) and 3 stay.
  assert k["transition_error"] == {
    "steps": 2, "error": pytest.approx(1 / 2),
    "matched": {"steps": 2, "error": pytest.approx((0 + 1) / 2)},
  }  # fmt: skip
  assert r["promotion"]["transition_error"] == {
    "steps": 0, "error": None, "matched": {"steps": 0, "error": None},
  }  # fmt: skip


def test_strata_cache_is_keyed_by_the_definitions(data, monkeypatch, tmp_path):
  """Flags cached under other definitions of the strata are not read back."""
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  calls = []
  real_flags = strata.game_flags
  monkeypatch.setattr(strata, "game_flags", lambda *a: calls.append(1) or real_flags(*a))
  first = strata.dataset_flags(data["single"], "games", 3)
  assert len(calls) == 3 and len(first) == 3
  strata.dataset_flags(data["single"], "games", 3)
  assert len(calls) == 3  # read back
  monkeypatch.setattr(strata, "definitions", lambda: "other definitions")
  again = strata.dataset_flags(data["single"], "games", 3)
  assert len(calls) == 6
  for a, b in zip(first, again, strict=True):
    np.testing.assert_array_equal(a, b)


def test_strata_of_an_evaluation(run_dir, data, restored):
  """With one wrong step per game at a known ply, every stratum counts exactly its steps and
  loses exactly the wrong steps that fall in it."""
  err = lambda g: jnp.where(g % 3 == 0, 0, 1 + (g * 7) % 20)
  r = evaluate.evaluate(
    run_dir,
    {"strata": (data["real"], "test")},
    restored=restored,
    boards=0,
    logits_fn=_synthetic_logits(err, inf_game=-5),
  )["strata"]
  games = GameSource(data["real"], "test")
  max_len = restored.config.data.max_len
  acc = strata.StrataAccumulator()
  for g in range(len(games)):
    flags = strata.game_flags(games[g]["moves"])[:max_len]
    exact = np.ones(len(flags), bool)
    if int(err(g)):
      exact[int(err(g))] = False
    hits = np.broadcast_to(strata.GROUP_SIZES, (len(flags), len(strata.GROUP_SIZES))).copy()
    hits[~exact, 0] -= 1  # Square a8 wrong.
    acc.add(flags, exact, hits)
  assert r["strata"] == acc.result()
  assert r["strata"]["capture"]["steps"] > 0 and r["strata"]["capture"]["exact_state"] < 1
  assert r["strata"]["ep_label"]["steps"] > 0 and r["strata"]["capture"]["matched"]["steps"] > 0
  assert sum(r["exact_steps"]) == round(r["exact_state"] * r["steps"])
  md = (run_dir / "eval" / "strata.md").read_text()
  assert "## Hard steps (strata)" in md and "| strata | after_capture |" in md


def test_scoring_beyond_the_training_cut(run_dir, data, restored):
  """`max_len` above the training cut scores longer prefixes: the same numbers as the model's
  logits on the games padded to that length, bins beyond the cut included."""
  config, fns, state = restored.config, restored.fns, restored.state
  longer = 2 * config.data.max_len
  r = evaluate.evaluate(
    run_dir, {"long": (data["real"], None)}, restored=restored, boards=0, max_len=longer
  )["long"]
  moves, states, mask = _padded_games(data["real"], "test", longer)
  logits = np.asarray(fns.predict(state["params"], state["model_state"], jnp.asarray(moves)))
  want = metrics.state_metrics(logits, states, mask)
  assert r["dataset"]["max_len"] == longer and r["steps"] == want["steps"]
  assert r["dataset"]["truncated_games"] == int((mask.sum(1) == longer).sum())
  assert len(r["bins"]["steps"]) > config.data.max_len // metrics.BIN_WIDTH
  assert r["bins"]["steps"] == want["bins"]["steps"]
  assert r["per_ply"]["steps"] == mask.sum(0)[: max(np.nonzero(mask.sum(0))[0]) + 1].tolist()
  bins = np.add.reduceat(r["per_ply"]["exact"], np.arange(0, len(r["per_ply"]["exact"]), 20))
  k = len(bins)  # Bins past the longest game (padding of the last bucket) hold no step.
  assert not any(r["bins"]["steps"][k:])
  want_bins = [np.nan if x is None else x for x in r["bins"]["exact_state"][:k]]
  np.testing.assert_allclose(bins / np.asarray(r["bins"]["steps"][:k]), want_bins)
  for key in ("exact_state", "labelwise"):
    assert r[key] == pytest.approx(want[key], rel=1e-6, abs=1e-9), key
    for got, expected in zip(r["bins"][key], want["bins"][key], strict=True):
      assert got == (None if expected is None else pytest.approx(expected, rel=1e-6, abs=1e-9))


def test_gallery_and_track_pages(run_dir, data, restored, monkeypatch, tmp_path):
  r = evaluate.evaluate(
    run_dir, {"g": (data["real"], None)}, restored=restored, boards=0, gallery=3
  )["g"]
  text = (run_dir / "eval" / "g_gallery.html").read_text()
  views = json.loads(text.split("const GAMES = ", 1)[1].split(";\n", 1)[0])
  assert len(views) == 3
  games = GameSource(data["real"], "test")
  lengths = np.minimum([len(games[g]["moves"]) for g in range(len(games))], 128)
  scores = np.asarray(r["exact_steps"]) / lengths
  assert [v["exact_state"] for v in views] == pytest.approx(sorted(scores)[:3])
  for v in views:
    assert len(v["true"]) == len(v["pred"]) == len(v["moves"]) == len(v["accuracy"])
  # Self-contained: no resource loaded from elsewhere (game ids may be lichess URLs: data).
  assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//|fetch\(|XMLHttpRequest""", text)

  monkeypatch.setattr(workdir, "restore", lambda wd, which=None: restored)
  out = tmp_path / "game.html"
  argv = ["--workdir", str(run_dir), "--moves", " ".join(OPENING), "--html", str(out)]
  assert track.main(argv) == 0
  view = json.loads(out.read_text().split("const GAMES = ", 1)[1].split(";\n", 1)[0])[0]
  steps = track.track(run_dir, OPENING, restored=restored)
  assert view["moves"] == [None, *OPENING]
  assert view["pred"] == [s["pred"].tolist() for s in steps]
  assert view["first_wrong"] == next((s["step"] for s in steps if not s["exact"]), -1)


def test_after_divergence_of_an_atomic_evaluation(run_dir, data, restored, tmp_path):
  """An atomic dataset's `after_divergence`: the model's metrics over the steps from each game's
  first divergent ply on (`divergence.first_divergent_ply`, checked against python-chess in
  tests/world_model/test_divergence.py), equal to the metrics of the logits computed directly
  with every other step masked out; a chess dataset's evaluation has no such key."""
  from chessjax.world_model import divergence
  from data_prep import random_uniform

  atomic = tmp_path / "atomic"
  random_uniform.generate(atomic, games=8, seed=0, variant="atomic", workers=1, progress=False)
  config, fns, state = restored.config, restored.fns, restored.state
  max_len = config.data.max_len
  r = evaluate.evaluate(
    run_dir, {"atomic": (atomic, None)}, restored=restored, boards=0, batch_size=4
  )["atomic"]
  moves, states, mask = _padded_games(atomic, "test", max_len)
  plies = [
    divergence.first_divergent_ply(m, "pseudo", k.sum()) for m, k in zip(moves, mask, strict=True)
  ]
  after = mask.copy()
  for g, k in enumerate(plies):
    after[g, : (max_len if k is None else k)] = False
  logits = np.asarray(fns.predict(state["params"], state["model_state"], jnp.asarray(moves)))
  want = metrics.state_metrics(logits, states, after)
  got = r["after_divergence"]
  assert got["steps"] == want["steps"] == after.sum() > 0
  assert got["games"] == want["games"] and got["games_without_divergence"] == 8 - want["games"]
  assert got["loss"] == pytest.approx(want["loss"], rel=1e-5)
  for key in ("labelwise", "exact_state", "trajectory"):
    assert got[key] == pytest.approx(want[key], rel=1e-6, abs=1e-9), key
  saved = json.loads((run_dir / "eval" / "atomic.json").read_text())
  assert saved["after_divergence"] == got
  chess_result = evaluate.evaluate(
    run_dir, {"chess": (data["single"], None)}, restored=restored, boards=0
  )["chess"]
  assert "after_divergence" not in chess_result
  assert "after_divergence" not in json.loads((run_dir / "eval" / "chess.json").read_text())


# Every module that draws, imported and drawing in a fresh process: a figure made by
# `chessjax.plotting.subplots` and written by `write_figure` is a PNG, and pyplot never loads.
DRAWS_WITHOUT_PYPLOT = """
import sys
from chessjax import plotting
from chessjax.files import write_figure
import chessjax.world_model.evaluate, chessjax.world_model.report, chessjax.lm.report
import chessjax.lm.linear_probe, chessjax.atomic.report, launch.cwm_tables, launch.transfer_tables
fig, axes = plotting.subplots(1, 2, figsize=(4, 2), dpi=50, sharey=True)
axes[0].plot([0, 1], [1, 0], color=plotting.tab10(3))
write_figure(sys.argv[1], fig)
assert "matplotlib.pyplot" not in sys.modules, "pyplot imported"
"""


@pytest.mark.multiprocess
def test_figures_are_drawn_without_pyplot(tmp_path):
  out = tmp_path / "f.png"
  r = subprocess.run(
    [sys.executable, "-c", DRAWS_WITHOUT_PYPLOT, str(out)], cwd=REPO, capture_output=True,
    text=True, timeout=120,
  )  # fmt: skip
  assert r.returncode == 0, r.stderr[-3000:]
  assert out.read_bytes().startswith(b"\x89PNG") and out.stat().st_size > 500
