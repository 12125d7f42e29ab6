"""GPT-2 and GPT-2 (w = 50) (Toshniwal et al., Learning Chess Blindfolded; Hugging Face GPT-2):
exact parameter counts, init, causal and windowed masks against a dense reference, dropout,
hidden states, the n_positions limit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from chessjax.models import gpt2, registry
from chessjax.models.registry import abstract_model, count_params, create_model, model_config

VOCAB = 77


def _lm(family="gpt2", size="tiny", *, seed=0, tie=True, **overrides):
  return create_model(
    family, size, seed=seed, head="tokens", vocab_size=VOCAB, tie_embeddings=tie, **overrides
  )


@nnx.jit(static_argnames=("train",))
def _run(model, tokens, train=False):
  """The model's logits, jitted (one program per model structure and input shape instead of a
  compilation per eager primitive); the rng streams advance as in an eager call."""
  return model(tokens, train=train)


_attention = jax.jit(gpt2.attention, static_argnames=("window", "block"))


def _tokens(batch=2, steps=12, seed=0):
  return jax.random.randint(jax.random.PRNGKey(seed), (batch, steps), 0, VOCAB, jnp.int32)


def _expected_count(d, n_layers, vocab=VOCAB, positions=512):
  """(V + positions) d + layers (12 d^2 + 13 d) + 2 d: wte, wpe, blocks, ln_f (tied head)."""
  return (vocab + positions) * d + n_layers * (12 * d * d + 13 * d) + 2 * d


@pytest.mark.parametrize(
  "family, size, want",
  [
    ("gpt2", "micro", 868_736),  # the CPU Train-S experiment's model (README)
    ("gpt2", "small", 85_508_352),
    ("gpt2", "intermediate", 113_859_840),
    ("gpt2", "medium", 302_914_560),
    ("gpt2_w50", "small", 85_508_352),  # the window changes no parameter
  ],
)
def test_parameter_counts(family, size, want):
  model = abstract_model(family, size, head="tokens", vocab_size=VOCAB, tie_embeddings=True)
  assert count_params(model) == want  # the 85,508,352 for GPT2-small at V = 77
  assert count_params(model.backbone) == want  # the tied head adds nothing
  d, n_layers, _ = gpt2.SIZES[size]
  assert want == _expected_count(d, n_layers)
  b = model.backbone
  assert b.embed.embedding.shape == (VOCAB, d) and b.pos_embed.embedding.shape == (512, d)
  blk = b.blocks[0]
  assert blk.mixer.c_attn.kernel.shape == (d, 3 * d) and blk.mixer.c_proj.kernel.shape == (d, d)
  assert blk.mlp.c_fc.kernel.shape == (d, 4 * d) and blk.mlp.c_proj.kernel.shape == (4 * d, d)


def test_configs_and_sizes():
  small = model_config("gpt2", "small")
  assert (small.d, small.layers, small.heads, small.head_dim) == (768, 12, 12, 64)
  assert (small.n_positions, small.dropout, small.norm_eps, small.init_std) == (
    512,
    0.1,
    1e-5,
    0.02,
  )
  assert small.window is None and model_config("gpt2_w50", "small").window == 50
  medium = model_config("gpt2", "medium")
  assert (medium.d, medium.layers, medium.heads) == (1024, 24, 16)
  assert model_config("gpt2", "intermediate").layers == 16
  assert registry.family_sizes("gpt2") is gpt2.SIZES
  with pytest.raises(ValueError, match="unknown model size 'd128' for gpt2"):
    model_config("gpt2", "d128")
  with pytest.raises(ValueError, match="unknown model size 'small'"):
    model_config("transformer", "small")
  with pytest.raises(ValueError, match="unknown model family"):
    model_config("gpt3", "small")
  with pytest.raises(ValueError, match="heads"):
    model_config("gpt2", "tiny", heads=3)


def test_init_follows_hf_gpt2():
  model = _lm("gpt2", "mini", tie=False)  # d 256: weights of 65k-262k draws
  b, blk = model.backbone, model.backbone.blocks[1]
  for w in (b.embed.embedding, b.pos_embed.embedding, blk.mixer.c_attn.kernel, blk.mlp.c_fc.kernel):
    np.testing.assert_allclose(np.std(w[...]), 0.02, rtol=0.02)
    assert abs(float(np.mean(w[...]))) < 1e-3
  # transformers 4.2.2 (the paper's): c_proj drawn like every other weight.
  np.testing.assert_allclose(np.std(blk.mixer.c_proj.kernel[...]), 0.02, rtol=0.02)
  np.testing.assert_allclose(np.std(blk.mlp.c_proj.kernel[...]), 0.02, rtol=0.02)
  for bias in (
    blk.mixer.c_attn.bias,
    blk.mixer.c_proj.bias,
    blk.mlp.c_fc.bias,
    model.head.linear.bias,
  ):
    np.testing.assert_array_equal(bias[...], 0.0)
  for ln in (blk.norm1, blk.norm2, b.norm):
    np.testing.assert_array_equal(ln.scale[...], 1.0)
    np.testing.assert_array_equal(ln.bias[...], 0.0)
  np.testing.assert_allclose(np.std(model.head.linear.kernel[...]), 0.02, rtol=0.05)
  # Later transformers 4.x: c_proj ~ N(0, 0.02 / sqrt(2 layers)) = N(0, 0.02 / sqrt(8)).
  scaled = _lm("gpt2", "mini", scale_residual_init=True).backbone.blocks[1]
  np.testing.assert_allclose(np.std(scaled.mlp.c_proj.kernel[...]), 0.02 / 8**0.5, rtol=0.02)
  np.testing.assert_allclose(np.std(scaled.mixer.c_proj.kernel[...]), 0.02 / 8**0.5, rtol=0.03)
  np.testing.assert_allclose(np.std(scaled.mixer.c_attn.kernel[...]), 0.02, rtol=0.02)


def test_window_mask_semantics():
  t = np.arange(120)
  full = np.asarray(gpt2.attention_mask(t, t))
  np.testing.assert_array_equal(full, np.tril(np.ones((120, 120), bool)))
  w50 = np.asarray(gpt2.attention_mask(t, t, 50))
  i = 100
  assert w50[i, i] and w50[i, i - 50] and not w50[i, i - 51] and not w50[i, i + 1]
  assert w50.sum(axis=1).max() == 51  # the query itself and the 50 tokens before it


def _dense_reference(q, k, v, window):
  """softmax(q k^T / sqrt(K) masked with -inf) v over the full T x T, in float64."""
  q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
  t = q.shape[1]
  logits = np.einsum("bqhk,bshk->bhqs", q, k) / np.sqrt(q.shape[-1])
  i, j = np.arange(t)[:, None], np.arange(t)[None, :]
  visible = (i >= j) & ((i - j <= window) if window is not None else True)
  logits = np.where(visible, logits, -np.inf)
  w = np.exp(logits - logits.max(-1, keepdims=True))
  w /= w.sum(-1, keepdims=True)
  return np.einsum("bhqs,bshk->bqhk", w, v)


@pytest.mark.parametrize("window", [None, 50, 0])
def test_attention_matches_dense_reference(window):
  keys = jax.random.split(jax.random.PRNGKey(window or 1), 3)
  q, k, v = (jax.random.normal(key, (2, 140, 2, 8), jnp.float32) for key in keys)
  want = _dense_reference(q, k, v, window)
  with jax.default_matmul_precision("highest"):
    for block in (32, 512):  # several query blocks, with and without a key offset
      got = _attention(q, k, v, window=window, block=block)
      np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_masked_rows_stay_finite():
  """Masked logits are replaced by the finite -1e4: a fully masked row is uniform, not NaN."""
  logits = jnp.array([[3.0, -2.0, 7.0]])
  w = jax.nn.softmax(jnp.where(jnp.zeros((1, 3), bool), logits, gpt2.MASK_VALUE), axis=-1)
  np.testing.assert_allclose(np.asarray(w), 1 / 3, rtol=1e-6)


def test_causality_and_window_in_the_model():
  tokens = _tokens(2, 64, seed=1)
  changed_first = tokens.at[:, 0].set((tokens[:, 0] + 1) % VOCAB)
  # One layer of w = 50: position i reads tokens i-50..i only.
  w50 = _lm("gpt2_w50", layers=1)
  a, b = np.asarray(_run(w50, tokens)), np.asarray(_run(w50, changed_first))
  assert np.abs(a[:, :51] - b[:, :51]).max(axis=-1).min() > 0  # every i <= 50 sees token 0
  np.testing.assert_array_equal(a[:, 51:], b[:, 51:])  # no i >= 51 does
  # Full attention: the last position sees the first token; later tokens never change earlier.
  full = _lm("gpt2", layers=1)
  a, b = np.asarray(_run(full, tokens)), np.asarray(_run(full, changed_first))
  assert np.abs(a[:, -1] - b[:, -1]).max() > 0
  t = 20
  later = tokens.at[:, t + 1 :].set(_tokens(2, 64, seed=7)[:, t + 1 :])
  c = np.asarray(_run(full, later))
  np.testing.assert_array_equal(c[:, : t + 1], a[:, : t + 1])
  assert np.abs(c[:, t + 1 :] - a[:, t + 1 :]).max() > 0


def test_padding_invariance():
  model = _lm()
  tokens = _tokens(2, 10, seed=3)
  padded = jnp.concatenate([tokens, jnp.zeros((2, 6), jnp.int32)], axis=1)
  got, alone = np.asarray(_run(model, padded)), np.asarray(_run(model, tokens))
  np.testing.assert_allclose(got[:, :10], alone, rtol=1e-5, atol=1e-5)


def test_dropout_only_in_training():
  model = _lm()
  tokens = _tokens()
  eval_a, eval_b = np.asarray(_run(model, tokens)), np.asarray(_run(model, tokens))
  np.testing.assert_array_equal(eval_a, eval_b)
  train_a = np.asarray(_run(model, tokens, train=True))
  train_b = np.asarray(_run(model, tokens, train=True))
  assert np.abs(train_a - eval_a).max() > 1e-3 and np.abs(train_a - train_b).max() > 1e-3
  off = _lm(dropout=0.0)
  np.testing.assert_allclose(
    np.asarray(_run(off, tokens, train=True)), np.asarray(_run(off, tokens)), rtol=1e-6, atol=1e-6
  )


def test_hiddens_and_tied_head():
  model = _lm()
  tokens = _tokens()
  with jax.default_matmul_precision("highest"):
    logits = model(tokens)
    again, hiddens = model(tokens, return_hiddens=True)
    b = model.backbone
    np.testing.assert_array_equal(np.asarray(again), np.asarray(logits))
    assert len(hiddens) == model.cfg.layers + 1
    assert all(h.shape == (*tokens.shape, 64) and h.dtype == jnp.float32 for h in hiddens)
    embedded = b.embed(tokens) + b.pos_embed.embedding[...][: tokens.shape[1]]
    np.testing.assert_array_equal(np.asarray(hiddens[0]), np.asarray(embedded))
    # Hidden states are before ln_f; the tied head is ln_f(h) wte^T with no bias.
    want = b.norm(hiddens[-1]) @ b.embed.embedding[...].T
  assert logits.shape == (*tokens.shape, VOCAB) and logits.dtype == jnp.float32
  np.testing.assert_allclose(np.asarray(logits), np.asarray(want), rtol=1e-5, atol=1e-5)
  assert model.head.tied is b.embed


def test_sequence_limit_and_no_streaming():
  model = _lm(n_positions=16)
  assert _run(model, _tokens(1, 16)).shape == (1, 16, VOCAB)
  with pytest.raises(ValueError, match="16 learned positions"):
    _run(model, _tokens(1, 17))
  with pytest.raises(NotImplementedError, match="streaming"):
    model.init_state(1)


def test_state_head_is_allowed():
  """GPT-2 is a backbone like any other: as a world model it reads move ids into the 1878 head."""
  model = create_model("gpt2", "tiny")
  out = _run(model, jnp.zeros((1, 5), jnp.int32))
  assert out.shape == (1, 5, 1878)
