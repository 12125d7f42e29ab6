"""Probing with each row's shared prefix run once (`probing.task_logits`,
`chessjax.lm.continuations`) gives the outputs of the reference path, every prompt on its own
(`probing.reference_task_logits`, `evaluate.probe_reference`): the same top-1 token per row and
task, the same scores, logits equal up to float rounding."""

import dataclasses

import numpy as np
import pytest
from flax import nnx

from chessjax import workdir
from chessjax.lm import continuations, evaluate, probing
from chessjax.lm import tokens as tk
from configs import lm as lm_config
from data_prep import probing_sets

VOCAB = tk.Vocab.default()


def _ids(text: str) -> np.ndarray:
  return np.array([VOCAB.id(t) for t in text.split()], np.int32)


def test_plan_row_shares_the_prefix_and_reads_each_prompt():
  rap = [_ids("<s> e2 e4 e7 e5 " + last) for last in ("f1", "g1", "B", "N")]
  shared, conts, reads = probing.plan_row(rap)
  assert shared.tolist() == _ids("<s> e2 e4 e7 e5").tolist()
  assert [c.tolist() for c in conts] == [[VOCAB.id(t)] for t in ("f1", "g1", "B", "N")]
  assert reads == [(0, 0), (1, 0), (2, 0), (3, 0)]
  # AP: the Start prompt is the End prompt without its last token; both read one continuation.
  ap = [_ids("<s> P e2 e4 B f1"), _ids("<s> P e2 e4 N g1"), _ids("<s> P e2 e4 B")]
  ap.append(_ids("<s> P e2 e4 N"))
  shared, conts, reads = probing.plan_row(ap)
  assert shared.tolist() == _ids("<s> P e2 e4").tolist()
  assert [c.tolist() for c in conts] == [_ids("B f1").tolist(), _ids("N g1").tolist()]
  assert reads == [(0, 1), (1, 1), (0, 0), (1, 0)]
  # Identical prompts keep a one-token continuation.
  shared, conts, reads = probing.plan_row([_ids("<s> e2"), _ids("<s> e2")])
  assert len(shared) == 1 and len(conts) == 1 and reads == [(0, 0), (0, 0)]


def _fake_causal(tokens: np.ndarray) -> np.ndarray:
  """A causal 'model' in numpy: the logits at position i are a fixed function of tokens[:i+1]."""
  t = tokens.shape[-1]
  weights = np.cos(np.arange(1, t + 1)[:, None] * np.arange(1, len(VOCAB) + 1)[None])  # [T, V]
  onehot = np.eye(len(VOCAB), dtype=np.float64)[tokens]  # [..., T, V]
  mixed = np.cumsum(onehot * (1 + np.arange(t))[:, None], axis=-2)  # [..., T, V]
  return np.einsum("...tv,tv->...tv", mixed, weights).astype(np.float32)


def _fake_next_token(tokens, lengths):
  return _fake_causal(tokens)[np.arange(len(tokens)), lengths - 1]


def _fake_continuations(prefixes, lengths, conts):
  b, k, c = conts.shape
  out = np.zeros((b, k, c, len(VOCAB)), np.float32)
  for r in range(b):
    for j in range(k):
      seq = np.concatenate([prefixes[r, : lengths[r]], conts[r, j]])
      out[r, j] = _fake_causal(seq[None])[0, lengths[r] :]
  return out


@pytest.fixture(scope="module")
def lm_sets(lm_sample, tmp_path_factory):
  """The suite's LM dataset of the sample (conftest.py `lm_sample`) and a probing set of 24 rows
  drawn from its pool (prefixes of 8-40 plies)."""
  data, sets = lm_sample["data"], tmp_path_factory.mktemp("shared_prefix") / "sets"
  argv = ["--pool", str(data), "--train", str(data), "--out", str(sets), "--count", "24"]
  assert probing_sets.main(argv + ["--min-len", "8", "--max-len", "40"]) == 0
  return data, sets


@pytest.mark.parametrize("notation", tk.NOTATIONS)
def test_batching_and_order_match_the_reference_on_a_fake_model(lm_sets, notation):
  end, start = probing.read_rows(lm_sets[1])
  lengths = {len(e["prefix"].split()) for e in end}
  assert len(lengths) > 4  # Rows of many lengths: several buckets, sorted and put back.
  new = probing.task_logits(
    end, start, _fake_continuations, VOCAB, notation=notation, batch_size=5, width_multiple=8
  )
  ref = probing.reference_task_logits(
    end, start, _fake_next_token, VOCAB, notation=notation, batch_size=7
  )
  assert list(new) == list(ref) == list(probing.tasks_for(notation))
  for task in ref:
    np.testing.assert_allclose(new[task], ref[task], rtol=1e-6, atol=1e-5)


def _restored(config, state=None):
  fresh = workdir.initial(config)
  return fresh if state is None else dataclasses.replace(fresh, state=state)


def _assert_same(restored, sets):
  new, new_rows = evaluate.probe(restored, sets, batch_size=8)
  ref, ref_rows = evaluate.probe_reference(restored, sets, batch_size=16)
  assert [r["top1"] for r in new_rows] == [r["top1"] for r in ref_rows]
  assert new_rows == ref_rows
  assert list(new["tasks"]) == list(ref["tasks"]) == list(probing.tasks_for(restored.task.notation))
  for task, scores in ref["tasks"].items():
    mine, theirs = dict(new["tasks"][task]), dict(scores)
    assert mine.pop("r_precision") == pytest.approx(theirs.pop("r_precision"), abs=1e-9)
    assert mine == theirs  # rows, LgM, ExM, error categories
  # The raw logits agree up to float rounding.
  end, start = probing.read_rows(sets)
  task = restored.task
  fn = continuations.continuation_logits_fn(
    restored.fns.graphdef,
    restored.state["params"],
    restored.state["model_state"],
    pad_id=task.vocab.pad_id,
  )
  a = probing.task_logits(end, start, fn, task.vocab, notation=task.notation, batch_size=8)
  b = probing.reference_task_logits(  # probe_reference's batches: its compiled shapes again
    end, start, evaluate.next_token_fn(restored), task.vocab, notation=task.notation, batch_size=16
  )
  for name in b:
    scale = np.abs(b[name]).max()
    np.testing.assert_allclose(a[name], b[name], rtol=0, atol=1e-5 * max(scale, 1.0))


@pytest.mark.slow
@pytest.mark.parametrize(
  "model,notation",
  [("gpt2", "uci"), ("gpt2", "rap"), ("gpt2", "ap"), ("gpt2_w50", "ap"), ("transformer", "ap")],
)
def test_random_init_models_match_the_reference(lm_sets, model, notation):
  """GPT-2 tiny (full attention, then a 50-token window shorter than the prompts) takes the
  prefix-once path; a chessjax Transformer the generic one."""
  size = "tiny" if model.startswith("gpt2") else "d128"
  config = lm_config.get_config(f"family={model},size={size},notation={notation},train=all")
  if model == "transformer":
    config.model.layers = 2
  restored = _restored(config)
  state = restored.state
  merged = nnx.merge(restored.fns.graphdef, state["params"], state["model_state"])
  assert continuations.shares_prefix(merged) == model.startswith("gpt2")
  _assert_same(restored, lm_sets[1])


@pytest.fixture(scope="module")
def trained_gpt2(trained_lm):
  """GPT-2 tiny trained as a UCI language model (conftest.py `trained_lm`), its last checkpoint;
  each test reads it under one notation."""
  return workdir.restore(trained_lm, which="latest")


@pytest.mark.slow
@pytest.mark.parametrize("notation", tk.NOTATIONS)
def test_a_trained_gpt2_matches_the_reference(lm_sets, trained_gpt2, notation):
  config = trained_gpt2.config.copy_and_resolve_references()
  config.lm.notation = notation
  restored = _restored(config, trained_gpt2.state)
  assert restored.task.notation == notation
  _assert_same(restored, lm_sets[1])
