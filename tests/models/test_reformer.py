"""The Reformer (Toshniwal et al., Learning Chess Blindfolded, Table 12; Hugging Face's Reformer):
exact parameter counts against the reference, golden logits of tiny reference models with fixed
LSH rotations (tests/data/golden_reformer.npz, made by tests/data/make_golden_reformer.py),
init, local attention's chunk window, causality, hidden states, dropout, the sequence limit, and
a few steps of language-model training."""

import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from conftest import REPO, SAMPLE_PGN
from flax import nnx

from chessjax.lm import tokens as tk
from chessjax.lm.task import LanguageModelTask
from chessjax.models import reformer
from chessjax.models.registry import (
  abstract_model,
  count_params,
  create_model,
  model_config,
  streams,
)

FAMILY = "chessjax.models.reformer"  # until the registry lists it: its dotted module path
VOCAB = 77
PAPER_PARAMS = 83_445_069  # the paper's "83M" (Table 12); the reference's count is in the npz

_spec = importlib.util.spec_from_file_location(
  "make_golden_reformer", REPO / "tests" / "data" / "make_golden_reformer.py"
)
golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(golden)
GOLDEN = np.load(REPO / "tests" / "data" / "golden_reformer.npz")


def _lm(size="tiny", *, seed=0, **overrides):
  return create_model(FAMILY, size, seed=seed, head="tokens", vocab_size=VOCAB, **overrides)


@nnx.jit(static_argnames=("train",))
def _run(model, tokens, train=False):
  """The model's logits, jitted (eager dispatch of the hashed attention is slow on CPU); the rng
  streams advance as in an eager call."""
  return model(tokens, train=train)


@nnx.jit
def _run_fixed(model, tokens, rotations):
  """Logits with the LSH layers' rotations given (one array per LSH layer)."""
  return model.head(model.backbone(tokens, rotations=list(rotations)))


_lsh = jax.jit(reformer.lsh_attention, static_argnames=("chunk",))


def _tokens(batch=2, steps=12, seed=0):
  return jax.random.randint(jax.random.PRNGKey(seed), (batch, steps), 1, VOCAB, jnp.int32)


def _expected_count(hidden, ff, attn_layers, axial_shape, axial_dims, vocab=VOCAB):
  """Embedding, axial factors, layers (2 LNs, Q K V or shared QK + V, output, FF with biases),
  the final LN over both streams and the untied head with bias."""
  ln = 2 * hidden
  ff_params = hidden * ff + ff + ff * hidden + hidden
  local = ln + 3 * hidden * hidden + hidden * hidden + ln + ff_params
  lsh = local - hidden * hidden
  layers = sum(lsh if kind == "lsh" else local for kind in attn_layers)
  axial = axial_shape[0] * axial_dims[0] + axial_shape[1] * axial_dims[1]
  return vocab * hidden + axial + layers + 2 * 2 * hidden + 2 * hidden * vocab + vocab


@pytest.mark.parametrize("size", ["S", "M", "L"])
def test_parameter_counts_match_the_reference(size):
  model = abstract_model(FAMILY, size, head="tokens", vocab_size=VOCAB)
  assert count_params(model) == int(GOLDEN[golden.PAPER_PARAMS_KEY]) == PAPER_PARAMS
  cfg = model.cfg
  assert PAPER_PARAMS == _expected_count(768, 3072, cfg.attn_layers, (14, 25), (256, 512))
  b = model.backbone
  assert b.embed.embedding.shape == (VOCAB, 768)
  assert b.pos_embed.row.shape == (14, 256) and b.pos_embed.col.shape == (25, 512)
  local, lsh = b.layers[0], b.layers[2]
  assert local.attention.query.kernel.shape == (768, 768) and local.attention.query.bias is None
  assert lsh.attention.query_key.kernel.shape == (768, 768) and not hasattr(lsh.attention, "key")
  assert local.ff_in.kernel.shape == (768, 3072) and local.ff_out.kernel.shape == (3072, 768)
  assert b.norm.scale.shape == (1536,)
  assert model.head.linear.kernel.shape == (1536, VOCAB) and model.head.linear.bias.shape == (77,)


def test_configs_and_sizes():
  s = model_config(FAMILY, "S")
  assert (s.hidden, s.heads, s.head_dim, s.ff, s.layers, s.d) == (768, 12, 64, 3072, 12, 1536)
  assert s.attn_layers == reformer.ENWIK8_LAYERS and s.attn_layers.count("lsh") == 3
  assert (s.local_chunk_length, s.lsh_chunk_length, s.buckets) == (50, 50, 8)
  assert (s.axial_shape, s.axial_dims, s.max_positions) == ((14, 25), (256, 512), 350)
  assert (s.dropout, s.local_attn_dropout, s.lsh_attn_dropout, s.norm_eps) == (
    0.05,
    0.05,
    0.0,
    1e-12,
  )
  # Hashing rounds: 2 for Train-S, 4 for M, 1 for L (Table 12).
  assert [model_config(FAMILY, z).hashes for z in ("S", "M", "L")] == [2, 4, 1]
  assert model_config(FAMILY, "tiny", hidden=96, axial_dims=(32, 64)).d == 192
  with pytest.raises(ValueError, match="init=False"):
    model_config(FAMILY, "tiny", d=10)
  with pytest.raises(ValueError, match="sum to hidden"):
    model_config(FAMILY, "tiny", hidden=48)
  with pytest.raises(ValueError, match="attn_layers"):
    model_config(FAMILY, "tiny", attn_layers=("local", "full"))
  with pytest.raises(ValueError, match="unknown model size"):
    model_config(FAMILY, "small")
  # The reference's padding: longer than the smallest chunk -> a multiple of the chunks' lcm.
  assert [s.padded_length(t) for t in (1, 50, 51, 100, 349)] == [1, 50, 100, 100, 350]
  mixed = model_config(FAMILY, "tiny", local_chunk_length=4, lsh_chunk_length=6)
  assert [mixed.padded_length(t) for t in (4, 5, 12, 13)] == [4, 12, 12, 24]


def test_init_follows_the_reference():
  model = _lm("micro")
  b, blk = model.backbone, model.backbone.layers[2]
  for w in (
    b.embed.embedding,
    blk.attention.query_key.kernel,
    blk.ff_in.kernel,
    blk.attn_out.kernel,
  ):
    np.testing.assert_allclose(np.std(w[...]), 0.02, rtol=0.05)
  np.testing.assert_allclose(np.std(model.head.linear.kernel[...]), 0.02, rtol=0.05)
  np.testing.assert_allclose(np.std(b.pos_embed.col[...]), 1.0, rtol=0.05)  # axial_norm_std
  for bias in (blk.ff_in.bias, blk.ff_out.bias, model.head.linear.bias):
    np.testing.assert_array_equal(bias[...], 0.0)
  for ln in (blk.attn_norm, blk.ff_norm, b.norm):
    np.testing.assert_array_equal(ln.scale[...], 1.0)
    np.testing.assert_array_equal(ln.bias[...], 0.0)


def _golden_model(name: str):
  model = _lm("tiny", **golden.case_config(name))
  flat = nnx.to_flat_state(nnx.state(model, nnx.Param))
  for path, var in flat:
    var.set_value(golden.param_value(".".join(map(str, path)), tuple(var.get_value().shape)))
  nnx.update(model, nnx.from_flat_state(flat))
  return model


def _logits(model, tokens, rotations):
  with jax.default_matmul_precision("highest"):
    return np.asarray(_run_fixed(model, jnp.asarray(tokens), jnp.asarray(rotations)))


@pytest.mark.parametrize("name", list(golden.CASES))
def test_logits_equal_the_reference(name):
  """Local and LSH layers, 1-3 hashing rounds, the reference's own padding (extra bucket), a
  sequence of one chunk (no hashing) and different local / LSH chunk lengths."""
  tokens, rotations = GOLDEN[name + "/tokens"], GOLDEN[name + "/rotations"]
  np.testing.assert_array_equal(tokens, golden.tokens(name))
  np.testing.assert_array_equal(rotations, golden.rotations(name))
  model = _golden_model(name)
  assert count_params(model) == int(GOLDEN[name + "/params"])
  got, want = _logits(model, tokens, rotations), GOLDEN[name]
  assert got.shape == want.shape == (*tokens.shape, VOCAB)
  assert np.abs(want).max() > 1.0  # the logits are not trivially small
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5 * np.abs(want).max())
  hashed = tokens.shape[1] > golden.case_config(name)["lsh_chunk_length"]
  assert int(GOLDEN[name + "/rotations_used"]) == (len(rotations) if hashed else 0)
  if hashed:  # the rotations matter: others hash differently and change the logits
    other = _logits(model, tokens, rotations[:, :, :, :, ::-1])
    assert np.abs(other - want).max() > 100 * 2e-5 * np.abs(want).max()


def test_local_attention_sees_its_chunk_and_the_one_before():
  """One local layer of chunk 4: position i reads tokens of chunks c(i) - 1 and c(i), j <= i."""
  model = _lm(attn_layers=("local",), local_chunk_length=4, lsh_chunk_length=4)
  tokens = _tokens(2, 16, seed=1)
  base = np.asarray(_run(model, tokens))
  for j in (0, 5, 9):
    changed = np.asarray(_run(model, tokens.at[:, j].set(tokens[:, j] % (VOCAB - 1) + 1)))
    diff = np.abs(changed - base).max(axis=(0, 2))
    sees = [(i >= j) and (i // 4 - j // 4 <= 1) for i in range(16)]
    np.testing.assert_array_equal(diff > 0, sees)


def test_causality():
  """Later tokens never change earlier logits: local layers always, LSH layers on sequences of
  one chunk. Hashed LSH attention reads no later position for given buckets (a later token can
  only move the chunk boundaries of the sorted sequence, as in the reference)."""
  t = 7
  for model, steps in (
    (_lm(attn_layers=("local", "local"), local_chunk_length=4), 24),
    (_lm(), 50),
  ):
    tokens = _tokens(2, steps, seed=2)
    later = tokens.at[:, t + 1 :].set(_tokens(2, steps, seed=3)[:, t + 1 :])
    a, c = np.asarray(_run(model, tokens)), np.asarray(_run(model, later))
    np.testing.assert_array_equal(a[:, : t + 1], c[:, : t + 1])
    assert np.abs(a[:, t + 1 :] - c[:, t + 1 :]).max() > 0
  # Hashed attention with fixed buckets: changing later queries/keys/values changes nothing
  # before them, every round and chunk included.
  k1, k2, k3 = jax.random.split(jax.random.PRNGKey(4), 3)
  qk, v = (jax.random.normal(k, (2, 2, 24, 8)) for k in (k1, k2))
  buckets = jax.random.randint(k3, (2, 2, 3, 24), 0, 4)
  out = _lsh(qk, v, buckets, chunk=4)
  qk2 = qk.at[:, :, 10:].set(-qk[:, :, 10:] + 1.0)
  out2 = _lsh(qk2, v.at[:, :, 10:].set(0.5), buckets, chunk=4)
  np.testing.assert_array_equal(np.asarray(out)[:, :, :10], np.asarray(out2)[:, :, :10])
  assert np.abs(np.asarray(out - out2)[:, :, 10:]).max() > 0


def test_lsh_self_mask_and_first_token():
  """The first position sees only itself (the self mask yields when nothing else is visible);
  later positions never attend to themselves while another key is visible."""
  qk = jax.random.normal(jax.random.PRNGKey(5), (1, 1, 8, 4))
  v = jnp.eye(8)[None, None]  # value j is one-hot j: the output row is the attention weights
  buckets = jnp.zeros((1, 1, 1, 8), jnp.int32)  # one bucket: sorted order is position order
  w = np.asarray(_lsh(qk, v, buckets, chunk=4))[0, 0]
  np.testing.assert_allclose(w[0], np.eye(8)[0], atol=1e-6)
  assert np.all(np.diag(w)[1:] < 1e-30) and np.allclose(w.sum(-1), 1.0)
  assert np.all(np.triu(w, 1) == 0)
  full = np.asarray(reformer.lsh_full_attention(qk, v))[0, 0]  # one chunk: no hashing
  np.testing.assert_allclose(full[:4], w[:4], atol=1e-6)


def test_rotations_are_drawn_per_call_unless_given():
  model = _lm()
  tokens = _tokens(2, 60, seed=6)
  a, b = np.asarray(_run(model, tokens)), np.asarray(_run(model, tokens))
  assert np.abs(a - b).max() > 0  # fresh rotations (the reference's hash_seed=None)
  rotations = jax.random.normal(jax.random.PRNGKey(7), (1, 2, 32, 2, 4))
  fixed = [np.asarray(_run_fixed(model, tokens, rotations)) for _ in range(2)]
  np.testing.assert_array_equal(fixed[0], fixed[1])
  with pytest.raises(ValueError, match="rotations must have shape"):
    _run_fixed(model, tokens, rotations[:, :, :, :1])
  short = _tokens(2, 50, seed=6)  # one chunk: no hashing, deterministic
  np.testing.assert_array_equal(np.asarray(_run(model, short)), np.asarray(_run(model, short)))


def test_dropout_only_in_training():
  model = _lm()
  tokens = _tokens(2, 20)
  eval_a, eval_b = np.asarray(_run(model, tokens)), np.asarray(_run(model, tokens))
  np.testing.assert_array_equal(eval_a, eval_b)
  train_a = np.asarray(_run(model, tokens, train=True))
  train_b = np.asarray(_run(model, tokens, train=True))
  assert np.abs(train_a - eval_a).max() > 1e-3 and np.abs(train_a - train_b).max() > 1e-3
  off = _lm(dropout=0.0, local_attn_dropout=0.0)
  np.testing.assert_allclose(
    np.asarray(_run(off, tokens, train=True)), np.asarray(_run(off, tokens)), rtol=1e-6, atol=1e-6
  )


def test_hiddens_hold_both_streams():
  model = _lm()
  tokens = _tokens(2, 50)  # one chunk: no rotations drawn, so the two calls agree
  with jax.default_matmul_precision("highest"):
    logits = model(tokens)
    again, hiddens = model(tokens, return_hiddens=True)
    b = model.backbone
    e = b.embed(tokens) + b.pos_embed(2, 50)
    want = model.head(b.norm(hiddens[-1]))
  np.testing.assert_array_equal(np.asarray(again), np.asarray(logits))
  assert len(hiddens) == model.cfg.layers + 1
  assert all(h.shape == (2, 50, model.cfg.d) and h.dtype == jnp.float32 for h in hiddens)
  np.testing.assert_allclose(np.asarray(hiddens[0]), np.concatenate([e, e], -1), atol=1e-6)
  np.testing.assert_allclose(np.asarray(logits), np.asarray(want), rtol=1e-5, atol=1e-5)
  # Axial positions: position i W + j is [row[i], col[j]].
  pos = np.asarray(b.pos_embed(1, 350))[0]
  row, col = np.asarray(b.pos_embed.row[...]), np.asarray(b.pos_embed.col[...])
  np.testing.assert_array_equal(pos[3 * 25 + 7], np.concatenate([row[3], col[7]]))


def test_axial_dropout_drops_whole_columns():
  model = _lm(dropout=0.5)
  pos = np.asarray(model.backbone.pos_embed(3, 350, train=True))  # [3, 350, 64]
  grid = pos.reshape(3, 14, 25, 64)
  zero = np.all(grid == 0, axis=(1, 3))  # [3, 25]: a column is dropped for all rows and dims
  assert zero.any() and not zero.all()
  kept = ~np.any(grid == 0, axis=(1, 3))
  assert np.all(zero | kept)


def test_sequence_limit_and_no_streaming():
  with pytest.raises(ValueError, match="350 axial positions"):
    _run(_lm(), _tokens(1, 351))
  model = _lm(axial_shape=(3, 8), local_chunk_length=4, lsh_chunk_length=8)
  assert _run(model, _tokens(1, 21)).shape == (1, 21, VOCAB)  # padded to 24 inside
  with pytest.raises(ValueError, match=r"24 axial positions \(\(3, 8\)\).* 25 tokens"):
    _run(model, _tokens(1, 25))
  with pytest.raises(NotImplementedError, match="streaming"):
    model.init_state(1)
  assert not model.backbone.streams and not streams(FAMILY)


def test_trains_a_few_steps_with_the_lm_task():
  """The LM task's loss (mean NLL over scored tokens) falls on a fixed batch under AdamW, with
  dropout and fresh rotations at every step (60 tokens: hashed LSH attention)."""
  vocab = tk.Vocab.default()
  task = LanguageModelTask(vocab, "uci", rap_p=0.0, seed=0, tie_embeddings=False)
  model = _lm(seed=1)
  tokens = np.asarray(_tokens(4, 61, seed=8))
  weights = np.ones((4, 60), np.float32)
  weights[1, 45:] = 0.0
  batch = {"inputs": tokens[:, :-1], "targets": tokens[:, 1:], "weights": weights}
  optimizer = nnx.Optimizer(model, optax.adamw(3e-3, weight_decay=0.01), wrt=nnx.Param)

  @nnx.jit
  def step(model, optimizer):
    loss, grads = nnx.value_and_grad(lambda m: task.loss(m, batch, train=True))(model)
    optimizer.update(model, grads)
    return loss

  losses = [float(step(model, optimizer)) for _ in range(10)]
  assert all(np.isfinite(losses))
  assert losses[0] == pytest.approx(np.log(VOCAB), rel=0.1)
  assert losses[-1] < losses[0] - 0.5, losses


@pytest.mark.slow
def test_the_lm_recipe_trains_resumes_evaluates_and_probes(tmp_path):
  """The LM config (configs/lm.py, RAP) with the Reformer tiny: one epoch over 60 games, a
  resumed second epoch, then per-move perplexity and the four probing tasks."""
  import ml_collections

  from chessjax import train
  from chessjax.lm import evaluate
  from configs import lm as lm_config
  from data_prep import lm_data, probing_sets

  data, sets = tmp_path / "data", tmp_path / "sets"
  argv = ["--pgn", str(SAMPLE_PGN), "--out", str(data), "--train-size", "60"]
  argv += ["--pool-size", "100", "--dev-size", "10", "--test-size", "10", "--max-plies", "60"]
  assert lm_data.main(argv) == 0
  argv = ["--pool", str(data), "--train", str(data), "--out", str(sets), "--count", "20"]
  assert probing_sets.main(argv + ["--min-len", "8", "--max-len", "20"]) == 0

  config = lm_config.get_config("family=gpt2,size=tiny,notation=rap,train=all")
  config.family, config.size, config.model = FAMILY, "tiny", ml_collections.ConfigDict()
  config.lm.tie_embeddings = False
  config.data.train, config.data.batch_size = str(data), 20
  # One training shape (one compilation), a multiple of the chunk length (the reference's training
  # constraint); 60 plies with RAP letters need at most 181 tokens.
  config.data.max_len, config.data.bucket_lengths = 200, (200,)
  config.train.update(epochs=1, log_every=5, checkpoint_every=1000)
  first = train.train_and_evaluate(config, tmp_path / "run")
  assert first["steps"] == 3 and np.isfinite(first["validation"]["loss"])
  config.train.epochs = 2
  second = train.train_and_evaluate(config, tmp_path / "run")
  assert second["resumed_from"] == 3 and second["steps"] == 6

  result = evaluate.evaluate(tmp_path / "run", sets=sets, data={})
  assert result["family"] == FAMILY and result["notation"] == "rap"
  tasks = result["probes"]["tasks"]
  assert set(tasks) == {"end_actual", "end_other", "start_actual", "start_other"}
  assert all(0 <= scores["lgm"] <= 100 for scores in tasks.values())
