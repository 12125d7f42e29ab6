"""The language-model task in the training loop: rows, piece-logit masking, AP scoring, the paper's
recipe pieces (linear schedule, early stopping, best checkpoint), and a tiny LM that trains and is
evaluated (perplexity, probes)."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import SAMPLE_PGN, SMOKE_FAMILY

from chessjax import optim, train, workdir
from chessjax.data import source
from chessjax.lm import tokens as tk
from chessjax.lm.task import LanguageModelTask, TokenRows
from chessjax.spec import TrainSpec
from configs import cwm
from configs import lm as lm_config
from data_prep import lm_data


@pytest.fixture(scope="module")
def lm_dataset(tmp_path_factory):
  out = tmp_path_factory.mktemp("lm") / "ds"
  argv = ["--pgn", str(SAMPLE_PGN), "--out", str(out), "--train-size", "400"]
  argv += ["--pool-size", "50", "--dev-size", "40", "--test-size", "40", "--max-plies", "60"]
  assert lm_data.main(argv) == 0
  return out


@pytest.mark.parametrize("notation", tk.NOTATIONS)
def test_rows_hold_every_token_and_the_planned_length_bounds_it(lm_dataset, notation):
  vocab = tk.Vocab.default()
  games = list(source.read_games(lm_dataset, "train"))[:60]
  for train_rows in (True, False):
    rows = TokenRows(vocab, notation, rap_p=0.5, seed=3, train=train_rows)
    steps = np.array([len(g["moves"]) for g in games])
    bound = rows.lengths(steps)
    batch = rows.batch(list(enumerate(games)), int(bound.max()), max_len=None, epoch=2)
    for r, g in enumerate(games):
      want = rows.row(g, r, 2)
      n = len(want["inputs"])
      assert n <= bound[r]
      np.testing.assert_array_equal(batch["inputs"][r, :n], want["inputs"])
      np.testing.assert_array_equal(batch["targets"][r, :n], want["targets"])
      assert (batch["inputs"][r, n:] == vocab.pad_id).all() and not batch["mask"][r, n:].any()
      assert batch["moves"][r] == len(g["moves"])
      letters = np.isin(want["tokens"], vocab.piece_ids).any()
      assert letters == (notation == "ap" or (notation == "rap" and train_rows))


def test_non_ap_models_have_piece_logits_masked_and_ap_scores_them():
  vocab = tk.Vocab.default()
  targets = np.array([[vocab.square_ids[12], vocab.piece_ids[1]]], np.int32)
  logits = np.zeros((1, 2, 77), np.float32)
  logits[0, 0, vocab.piece_ids] = 5.0  # A model that likes piece letters.
  batch = {
    "inputs": jnp.zeros((1, 2), jnp.int32),
    "targets": jnp.asarray(targets),
    "weights": jnp.ones((1, 2), jnp.float32),
    "moves": jnp.ones((1,), jnp.float32),
  }
  model = lambda inputs, train: jnp.asarray(logits)  # noqa: E731
  stats = {}
  for notation in ("uci", "ap"):
    task = LanguageModelTask(vocab, notation, rap_p=0.0, seed=0, tie_embeddings=True)
    stats[notation] = jax.device_get(task.eval_stats(model, batch))
  # Masked: the square at position 0 has probability 1/71; the piece target at position 1 is
  # impossible (infinite loss) for a non-AP model, and a proper 1/77 for AP.
  assert stats["uci"]["nll"] == np.inf
  ap_want = -np.log(np.exp(0) / (6 * np.exp(5) + 71)) + np.log(77)
  assert stats["ap"]["nll"] == pytest.approx(ap_want, rel=1e-5)
  uci_task = LanguageModelTask(vocab, "uci", rap_p=0.0, seed=0, tie_embeddings=True)
  uci_first = tk.token_nll(uci_task.eval_logits(logits), targets)[0, 0]
  assert uci_first == pytest.approx(np.log(71), rel=1e-6)


def test_linear_schedule_warms_up_then_decays_to_zero():
  fn = optim.lr_schedule(5e-4, 10, 100, "linear", 0.0)
  assert float(fn(0)) == pytest.approx(5e-5) and float(fn(9)) == pytest.approx(5e-4)
  assert float(fn(10)) == pytest.approx(5e-4)
  assert float(fn(55)) == pytest.approx(2.5e-4)
  assert float(fn(100)) == pytest.approx(0.0, abs=1e-12)


def test_config_recipe_and_errors():
  c = lm_config.get_config("family=gpt2,notation=rap,train=S")
  assert (c.lm.rap_p, c.data.max_train_games, c.optim.lr, c.data.batch_size) == (
    0.25,
    15_000,
    5e-4,
    60,
  )
  assert lm_config.get_config("notation=rap,train=L").lm.rap_p == 0.15
  assert c.optim.schedule == "linear" and c.train.epochs == 10
  assert c.train.early_stopping_patience == 1 and c.optim.warmup_fraction == 0.1
  with pytest.raises(ValueError, match="notation"):
    lm_config.get_config("notation=san")
  with pytest.raises(ValueError, match="unknown model family 'nope'"):
    lm_config.get_config("family=nope")
  with pytest.raises(ValueError, match="unknown config arg 'model'.*'family'"):
    lm_config.get_config("model=gpt2")  # One key in both configs: family=, as in configs/cwm.py.


def tiny_lm_config(data, notation, **train):
  c = lm_config.get_config(f"family=slice,size=d128,notation={notation},train=all")
  c.data.train, c.data.batch_size, c.data.max_len = str(data), 16, 256
  c.data.bucket_lengths = (128, 256)
  c.optim.lr = 3e-3
  c.train.update(log_every=20, checkpoint_every=1000, **train)
  return c


@pytest.mark.slow
def test_early_stopping_keeps_the_best_checkpoint(small_dataset, tmp_path):
  """Validation losses 3, 2, 2.5: patience 1 stops at the third validation; WORKDIR/best holds
  the second's state, and a rerun of the stopped run trains no further."""
  from tasks import scripted

  from configs import cwm

  scripted.SCRIPT[:] = [3.0, 2.0, 2.5, 9.0]
  scripted.CALLS[0] = 0
  config = cwm.get_config(f"family={SMOKE_FAMILY},size=d128,smoke=True")
  config.task = "tasks.scripted"
  config.data.train, config.data.max_len, config.data.bucket_lengths = str(small_dataset), 32, (32,)
  # 8 steps (stopped at 6) of 32 plies: the train step of tests/test_train.py's 8-step smoke runs,
  # whose compiled program the suite's compilation cache then holds.
  config.train.update(steps=8, eval_every=2, checkpoint_every=100, early_stopping_patience=1)
  summary = train.train_and_evaluate(config, tmp_path / "w")
  assert summary["stopped_early"] and summary["steps"] == 6 and summary["best_step"] == 4
  best = workdir.restore(tmp_path / "w", which="best")
  assert best.step == 4 and workdir.restore(tmp_path / "w", which="latest").step == 6
  # Unless told, `restore` takes the best checkpoint when there is one, else the latest; a step
  # names a checkpoint under WORKDIR/checkpoints.
  chosen = workdir.restore(tmp_path / "w")
  assert (chosen.checkpoint, chosen.step) == ("best", 4)
  assert workdir.restore(tmp_path / "w", step=6).checkpoint == "latest"
  (tmp_path / "w" / "best").rename(tmp_path / "w" / "best.moved")
  assert workdir.restore(tmp_path / "w").checkpoint == "latest"
  (tmp_path / "w" / "best.moved").rename(tmp_path / "w" / "best")
  again = train.train_and_evaluate(config, tmp_path / "w")
  assert again["steps"] == 6 and again["resumed_from"] == 6


@pytest.fixture(scope="module")
def tiny_lm(lm_dataset, tmp_path_factory):
  """A SLiCE d128 language model trained with RAP for 1 epoch of 400 games (25 steps)."""
  run_dir = tmp_path_factory.mktemp("tiny_lm") / "run"
  summary = train.train_and_evaluate(tiny_lm_config(lm_dataset, "rap", epochs=1), run_dir)
  return run_dir, summary


@pytest.mark.slow
def test_a_tiny_lm_trains_and_reports_per_move_perplexity(lm_dataset, tiny_lm):
  _, summary = tiny_lm
  val = summary["validation"]
  assert summary["total_steps"] == 400 // 16 and summary["best_step"] is not None
  assert val["perplexity"] == pytest.approx(math.exp(val["loss"]))
  assert val["moves"] == sum(len(g["moves"]) for g in source.read_games(lm_dataset, "dev"))
  # Better than guessing uniformly among the 71 tokens a non-AP model may emit.
  assert val["token_loss"] < math.log(71)
  assert val["loss"] == pytest.approx(val["token_loss"] * val["scored_tokens"] / val["moves"])


@pytest.mark.slow
def test_evaluate_scores_perplexity_and_every_probe(lm_dataset, tiny_lm, tmp_path, capsys):
  from chessjax.lm import evaluate as lm_evaluate
  from chessjax.lm import probing
  from data_prep import probing_sets

  run_dir, summary = tiny_lm
  sets = tmp_path / "sets"
  argv = ["--pool", str(lm_dataset), "--train", str(lm_dataset), "--out", str(sets)]
  assert probing_sets.main(argv + ["--count", "40", "--min-len", "11", "--max-len", "40"]) == 0
  assert lm_evaluate.main(["--workdir", str(run_dir), "--sets", str(sets)]) == 0
  out = run_dir / "eval"
  result = json.loads((out / "results.json").read_text())
  assert result["step"] == summary["best_step"] and result["notation"] == "rap"
  # The dev perplexity of the best checkpoint is the one training reported for it.
  assert result["perplexity"]["dev"]["loss"] == pytest.approx(summary["validation"]["loss"])
  rows = [json.loads(x) for x in (out / "probes.jsonl").read_text().splitlines()]
  end_rows, _ = probing.read_rows(sets)
  assert len(rows) == 4 * len(end_rows)  # RAP models take all four tasks.
  for name, scores in result["probes"]["tasks"].items():
    mine = [r for r in rows if r["task"] == name]
    assert scores["lgm"] == pytest.approx(100 * np.mean([r["legal_match"] for r in mine]))
    if "exm" in scores:
      assert scores["exm"] == pytest.approx(100 * np.mean([r["exact_match"] for r in mine]))
  md = (out / "results.md").read_text()
  assert "| random legal |" in md and "End-Actual errors" in md
  assert "perplexity" in capsys.readouterr().out


@pytest.mark.parametrize(
  "arg,params",
  [
    ("family=gpt2", 85_508_352),
    ("family=lstm,train=S", 24_279_885),
    ("family=lstm,train=M", 32_676_685),
    ("family=reformer,train=S", 83_445_069),
    ("family=reformer,train=L", 83_445_069),
    ("family=performer,train=S", 85_137_485),
    ("family=performer,train=M", 85_137_485),
    ("family=performer,train=S,model.positions=learned", 85_530_701),
  ],
)
def test_lm_configs_build_the_papers_models(arg, params):
  from chessjax.lm.task import make_task
  from chessjax.models import abstract_model, count_params

  config = lm_config.get_config(arg)
  task = make_task(config)
  model = abstract_model(
    config.family, config.size, head=task.head, **task.model_kwargs, **config.model
  )
  assert count_params(model) == params


def test_run_length_keys_conflict_or_take_a_stated_precedence(lm_dataset, caplog):
  from chessjax.lm.task import check_config, make_task

  c = lm_config.get_config("family=slice,size=d128")
  assert (c.train.epochs, c.train.steps) == (10, 0)
  c = lm_config.get_config("family=slice,size=d128,steps=200")
  assert (c.train.epochs, c.train.steps) == (0, 200)
  assert TrainSpec.from_config(c, epoch_steps=7).total_steps == 200
  c = lm_config.get_config("family=slice,size=d128,epochs=2")
  assert (c.train.epochs, c.train.steps) == (2, 0)
  assert TrainSpec.from_config(c, epoch_steps=7).total_steps == 14
  assert TrainSpec.from_config(c).total_steps is None  # Read back without its training data.
  with pytest.raises(ValueError, match="both epochs=2 and steps=5"):
    lm_config.get_config("epochs=2,steps=5")
  # --config.train.steps=N on the command line without --config.train.epochs=0: refused.
  c = lm_config.get_config("family=slice,size=d128")
  c.train.steps = 300
  with pytest.raises(ValueError, match="--config.train.epochs=0 --config.train.steps=N"):
    make_task(c)
  c.train.epochs = 0
  make_task(c)
  # The same rule for every task: the world model's config too.
  c = cwm.get_config("family=slice,size=d128")
  c.train.epochs = 2
  with pytest.raises(ValueError, match="--config.train.epochs=0 --config.train.steps=N"):
    TrainSpec.from_config(c)
  # Train-S asks for 15,000 games; the split holds 400: trained on all 400, with a warning.
  c = lm_config.get_config("family=slice,size=d128,train=S")
  c.data.train = str(lm_dataset)
  with caplog.at_level("WARNING", logger="chessjax.lm.task"):
    check_config(c)
  assert "first 15,000 training games" in caplog.text and "holds 400" in caplog.text
  caplog.clear()
  c.data.max_train_games = 300
  with caplog.at_level("WARNING", logger="chessjax.lm.task"):
    check_config(c)
  assert not caplog.text


def test_target_roles_follow_the_move_layout():
  from chessjax.lm import token_roles

  vocab = tk.Vocab.default()
  ucis = ["e2e4", "g8f6", "a7a8q", "e1g1"]
  ids = tk.tokenize(ucis, vocab, pieces=["P", "N", "P", None]).tolist()  # AP-style letters
  targets = np.array([ids[1:] + [vocab.pad_id]], np.int32)
  weights = np.array([[1.0] * (len(ids) - 1) + [0.0]], np.float32)
  roles = token_roles.target_roles(targets, weights, vocab)[0]
  names = ["pad" if r < 0 else token_roles.ROLES[r] for r in roles]
  assert names == [
    *("piece", "from", "to"),
    *("piece", "from", "to"),
    *("piece", "from", "to", "promotion"),
    *("from", "to"),
    *("end", "pad"),
  ]


@pytest.mark.slow
def test_token_roles_add_up_to_the_per_move_loss(lm_dataset, tiny_lm, capsys):
  from chessjax.lm import token_roles

  run_dir, summary = tiny_lm
  assert token_roles.main(["--workdir", str(run_dir), "--max-games", "1000"]) == 0
  result = json.loads((run_dir / "eval" / "token_roles.json").read_text())
  dev = result["splits"]["dev"]
  games = list(source.read_games(lm_dataset, "dev"))
  plies = sum(len(g["moves"]) - 1 for g in games)
  roles = dev["roles"]
  # Every move has a from- and a to-square, every game one </s>; UCI dev rows carry no letters.
  assert roles["from"]["targets"] == roles["to"]["targets"] == plies
  assert roles["end"]["targets"] == len(games) and roles["piece"]["targets"] == 0
  assert dev["moves"] == plies + len(games)
  # The roles' shares add up to the per-move loss validation reported for the same checkpoint.
  assert sum(r["loss_per_move"] for r in roles.values()) == pytest.approx(dev["loss"])
  assert dev["loss"] == pytest.approx(summary["validation"]["loss"], rel=1e-5)
  for role in ("from", "to", "end"):
    assert 0.0 <= roles[role]["piece_mass"] <= 1.0
  assert "piece-letter mass" in capsys.readouterr().out
