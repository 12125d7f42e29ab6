"""Linear probes of every layer's hidden state: the probe (`chessjax.probe`), the positions each
task gives it (`Task.probe_positions`) and the workdir command (`chessjax.lm.linear_probe`)."""

import json

import numpy as np
import pytest
from conftest import optimized_xla

from chessjax import cli, probe
from chessjax.data.source import GameSource
from chessjax.encoding import PAD_ID
from chessjax.lm import linear_probe as lp
from chessjax.lm import tokens as tk
from chessjax.lm.task import LanguageModelTask

RNG = np.random.default_rng(0)


@pytest.fixture(scope="module", autouse=True)
def _optimized():
  """This module's programs are few and run long (150 training steps; probes fitted for 300
  steps on thousands of positions): compiled with XLA's full optimisation (conftest.py
  `optimized_xla`), the module takes about a quarter less CPU."""
  with optimized_xla():
    yield


def _boards(n: int) -> np.ndarray:
  """Random boards uint8[n, 64]: every square empty with probability 0.6, else a random piece."""
  pieces = RNG.integers(1, 13, size=(n, 64))
  return np.where(RNG.random((n, 64)) < 0.6, 0, pieces).astype(np.uint8)


@pytest.mark.slow
def test_probe_fits_linearly_separable_features():
  # Features = a one-hot board code (64 * 13) seen through a random rotation and scaled: a linear
  # map recovers every square exactly.
  n_train, n_test = 2000, 500
  boards = _boards(n_train + n_test)
  onehot = np.eye(13, dtype=np.float32)[boards].reshape(len(boards), -1)
  mix = RNG.normal(size=(onehot.shape[1], 900)).astype(np.float32)
  x = 3.0 * onehot @ mix + 1.0
  fitted = probe.fit_probe(x[:n_train], boards[:n_train], steps=300, batch_size=512)
  acc = probe.accuracies(
    probe.predict_probe(fitted, x[n_train:]), boards[n_train:], np.ones_like(boards[n_train:], bool)
  )
  assert acc["all"] > 0.99 and acc["nonempty"] > 0.99 and acc["changed"] > 0.99


def test_probe_without_signal_is_majority():
  n_train, n_test = 2000, 500
  boards = _boards(n_train + n_test)
  x = RNG.normal(size=(len(boards), 32)).astype(np.float32)  # independent of the boards
  fitted = probe.fit_probe(x[:n_train], boards[:n_train], steps=300, batch_size=512)
  test = boards[n_train:]
  changed = RNG.random(test.shape) < 0.1
  acc = probe.accuracies(probe.predict_probe(fitted, x[n_train:]), test, changed)
  majority = probe.majority_classes(boards[:n_train])
  assert (majority == 0).all()
  base = probe.accuracies(np.broadcast_to(majority, test.shape), test, changed)
  assert base["nonempty"] == 0.0
  assert abs(acc["all"] - base["all"]) < 0.03  # ~0.6: the probe learns only the biases
  assert acc["nonempty"] < 0.05


def test_accuracies_subsets():
  labels = np.array([[0, 1, 2, 0]], np.uint8).repeat(16, 1)[:, :64]
  pred = labels.copy()
  pred[0, 16] = 0  # a non-empty square wrong
  changed = np.zeros_like(labels, bool)
  changed[0, 15:17] = True  # one right, one wrong
  acc = probe.accuracies(pred, labels, changed)
  assert acc["all"] == pytest.approx(63 / 64)
  assert acc["nonempty"] == pytest.approx(31 / 32)
  assert acc["changed"] == pytest.approx(0.5)
  assert probe.accuracies(pred, labels, np.zeros_like(changed))["changed"] is None


@pytest.mark.parametrize("notation", ["uci", "ap"])
def test_lm_move_ends(small_dataset, notation):
  # The probed token of each move is its to-square, or its promotion letter.
  task = LanguageModelTask(tk.Vocab.default(), notation, rap_p=0.0, seed=0, tie_embeddings=True)
  vocab = task.vocab
  source = GameSource(small_dataset, "train")
  promotions = 0
  for g in range(len(source)):
    game = source[g]
    ids, ends = task.probe_positions(game)
    _, to, promo = tk.decode_moves(game["moves"])
    assert len(ends) == len(to) and ends[-1] == len(ids) - 1  # the last input token ends a move
    expect = np.where(promo > 0, vocab.promo_ids[promo], vocab.square_ids[to])
    np.testing.assert_array_equal(ids[ends], expect)
    promotions += int((promo > 0).sum())
  assert promotions > 0 and task.pad_id == vocab.pad_id


def test_world_model_move_ends(small_dataset):
  from chessjax.world_model.task import WorldModelTask

  game = GameSource(small_dataset, "train")[0]
  ids, ends = WorldModelTask().probe_positions(game)
  np.testing.assert_array_equal(ids, game["moves"])
  np.testing.assert_array_equal(ends, np.arange(1, len(ids)))
  assert ids.dtype == np.int32 and WorldModelTask.pad_id == PAD_ID


def test_which_is_a_deprecated_alias_of_checkpoint(tmp_path, capsys):
  ap = cli.workdir_parser("chessjax.lm.linear_probe", "doc", deprecated_checkpoint=("--which",))
  assert ap.parse_args(["--workdir", "w", "--which", "latest"]).checkpoint == "latest"
  assert "warning: --which is deprecated; use --checkpoint latest" in capsys.readouterr().err
  assert ap.parse_args(["--workdir", "w", "--checkpoint", "best"]).checkpoint == "best"
  assert ap.parse_args(["--workdir", "w"]).checkpoint is None
  assert capsys.readouterr().err == ""
  with pytest.raises(SystemExit):
    ap.parse_args(["--workdir", "w", "--which", "newest"])  # The same choices.
  with pytest.raises(SystemExit):  # The command reads it, warns, then reports the bad workdir.
    lp.main(["--workdir", str(tmp_path / "missing"), "--which", "best"])
  err = capsys.readouterr().err
  assert "--which is deprecated" in err and "not a training workdir" in err


@pytest.fixture(scope="module")
def world_model_workdir(small_dataset, tmp_path_factory):
  """A d128 gated-DeltaNet world model trained for 150 steps at lr 3e-3 (its validation piece
  accuracy is ~75% against ~67% for the per-square majority class)."""
  from chessjax import train
  from configs import cwm

  config = cwm.get_config("family=gated_deltanet,size=d128,smoke=True")
  config.data.train = str(small_dataset)
  config.data.bucket_lengths = (128,)  # One training shape: one compilation.
  config.optim.lr = 3e-3
  config.train.steps = config.train.checkpoint_every = config.train.eval_every = 150
  wd = tmp_path_factory.mktemp("probe_run") / "wd"
  train.train_and_evaluate(config, wd)
  return wd


class _Stop(Exception):
  pass


def test_a_config_without_bucket_lengths_probes_at_the_spec_default(
  small_dataset, tmp_path, monkeypatch
):
  """A workdir whose config.json predates `data.bucket_lengths` batches its probe rows at the
  spec's default lengths, as its training did (`chessjax.spec.DataSpec`)."""
  from chessjax import workdir
  from chessjax.spec import DataSpec
  from configs import cwm

  config = cwm.get_config("family=gated_deltanet,size=d128,smoke=True")
  config.data.train = str(small_dataset)
  old = config.to_dict()
  del old["data"]["bucket_lengths"]
  (tmp_path / workdir.CONFIG).write_text(json.dumps(old))
  # No checkpoint to read: the model at its initialisation stands in for the trained one.
  monkeypatch.setattr(
    workdir, "restore", lambda w, which=None: workdir.initial(workdir.read_config(w))
  )
  seen = []

  def features(*args, buckets, **kwargs):
    seen.append(buckets)
    raise _Stop

  monkeypatch.setattr(lp, "extract_features", features)
  with pytest.raises(_Stop):
    lp.probe_workdir(tmp_path, max_games=2)
  assert seen == [DataSpec().bucket_lengths] and seen[0][0] == 64 and seen[0][-1] == 1024


@pytest.mark.slow
def test_probe_finds_the_board_in_a_world_model(world_model_workdir, tmp_path):
  out = tmp_path / "out"
  args = ["--workdir", str(world_model_workdir), "--out", str(out), "--max-games", "200"]
  args += ["--max-train-positions", "4000", "--steps", "300", "--batch-size", "512"]
  assert lp.main(args) == 0
  r = json.loads((out / "linear_probe.json").read_text())
  assert (out / "linear_probe.png").stat().st_size > 0
  md = (out / "linear_probe.md").read_text()
  assert "| block 1 |" in md and "| majority class |" in md
  assert r["layers"] == ["embedding", "block 1"] and r["test_split"] == "test"
  assert r["checkpoint"] == "best"  # The default, as chessjax.lm.evaluate's: WORKDIR/best exists.
  assert r["train_positions"] == 4000 and r["test_squares"]["all"] == 64 * r["test_positions"]
  model, control, majority = r["model"][-1], r["control"][-1], r["majority"]
  # Measured (CPU): all squares 73.0% (model) / 66.0% (control) / 67.1% (majority); non-empty
  # squares 44.4% / 36.8% / 29.0%.
  assert model["all"] > control["all"] + 0.03 and model["all"] > majority["all"] + 0.03
  assert model["nonempty"] > control["nonempty"] + 0.04
  assert model["nonempty"] > majority["nonempty"] + 0.08


def test_every_evaluation_defaults_to_the_best_checkpoint_and_writes_eval(tmp_path):
  import inspect

  from chessjax import workdir
  from chessjax.lm import evaluate, token_roles
  from chessjax.world_model import evaluate as wm_evaluate

  assert workdir.default_checkpoint(tmp_path) == "latest"  # No WORKDIR/best.
  (tmp_path / "best").mkdir()
  assert workdir.default_checkpoint(tmp_path) == "latest"  # An empty one holds no checkpoint.
  (tmp_path / "best" / "4").mkdir()
  assert workdir.default_checkpoint(tmp_path) == "best"
  # None: `default_checkpoint`, in every evaluation of a workdir.
  for fn in (lp.probe_workdir, evaluate.evaluate, token_roles.run, wm_evaluate.evaluate):
    assert inspect.signature(fn).parameters["which"].default is None
  assert lp.EVAL_DIR == workdir.EVAL_DIR == "eval"
