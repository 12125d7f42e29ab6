"""The LSTM language model (Toshniwal et al., Learning Chess Blindfolded, Table 12): exact
parameter counts, PyTorch's cell against a NumPy reference, init, streaming, causality, padding,
dropout, hidden states."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from chessjax.models import lstm
from chessjax.models.registry import abstract_model, count_params, create_model, model_config

VOCAB = 77


def _lm(size="tiny", *, seed=0, **overrides):
  return create_model("lstm", size, seed=seed, head="tokens", vocab_size=VOCAB, **overrides)


def _tokens(batch=2, steps=9, seed=0):
  return jax.random.randint(jax.random.PRNGKey(seed), (batch, steps), 0, VOCAB, jnp.int32)


@pytest.mark.parametrize("size, want", [("S", 24_279_885), ("M", 32_676_685), ("L", 32_676_685)])
def test_parameter_counts_match_the_paper(size, want):
  """Table 12: 24.28M (3 layers) and 32.68M (4 layers) at V = 77, with torch's two bias vectors."""
  model = abstract_model("lstm", size, head="tokens", vocab_size=VOCAB)
  assert count_params(model) == want
  e, h, n_layers = lstm.SIZES[size]
  embedding, decoder = VOCAB * e, h * VOCAB + VOCAB
  first = 4 * h * (e + h) + 8 * h  # W_ih 768 -> 4H, W_hh, b_ih, b_hh
  later = 4 * h * (h + h) + 8 * h
  assert want == embedding + first + (n_layers - 1) * later + decoder
  assert (embedding, first, later, decoder) == (59_136, 7_348_224, 8_396_800, 78_925)
  assert round(want / 1e6, 2) == {3: 24.28, 4: 32.68}[n_layers]
  layer = model.backbone.lstm[0]
  assert layer.w_ih.kernel.shape == (e, 4 * h) and layer.w_hh.kernel.shape == (h, 4 * h)
  assert layer.w_ih.bias.shape == layer.w_hh.bias.shape == (4 * h,)
  assert model.head.linear.kernel.shape == (h, VOCAB) and model.head.linear.bias.shape == (VOCAB,)


def test_configs():
  cfg = model_config("lstm", "S")
  assert (cfg.embed, cfg.hidden, cfg.layers, cfg.dropout, cfg.d) == (768, 1024, 3, 0.2, 1024)
  assert model_config("lstm", "M").layers == model_config("lstm", "L").layers == 4
  with pytest.raises(ValueError, match="unknown model size 'small' for lstm"):
    model_config("lstm", "small")
  with pytest.raises(ValueError, match="cannot tie"):  # embedding 32 != hidden 64
    _lm(tie_embeddings=True)
  tied = _lm(tie_embeddings=True, embed=64)  # Table 12's other option: embedding = hidden
  assert tied.head.tied is tied.backbone.embed


def test_init_follows_torch():
  model = _lm(hidden=256, embed=128)
  bound = 1 / 256**0.5
  for layer in model.backbone.lstm:
    for p in (layer.w_ih.kernel, layer.w_ih.bias, layer.w_hh.kernel, layer.w_hh.bias):
      x = np.asarray(p[...])
      assert np.abs(x).max() <= bound and np.abs(x).max() > 0.97 * bound
    np.testing.assert_allclose(np.std(layer.w_hh.kernel[...]), bound / 3**0.5, rtol=0.02)
  np.testing.assert_allclose(np.std(model.backbone.embed.embedding[...]), 1.0, rtol=0.05)
  head_bound = 1 / 256**0.5  # torch nn.Linear(hidden, V)
  assert np.abs(np.asarray(model.head.linear.kernel[...])).max() <= head_bound


def _numpy_lstm(x, layer):
  """PyTorch's nn.LSTM equations, gates i, f, g, o, in float64, one step at a time."""
  w_ih, b_ih = (np.asarray(p[...], np.float64) for p in (layer.w_ih.kernel, layer.w_ih.bias))
  w_hh, b_hh = (np.asarray(p[...], np.float64) for p in (layer.w_hh.kernel, layer.w_hh.bias))
  b, t, _ = x.shape
  h = c = np.zeros((b, layer.hidden))
  sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
  outs = []
  for s in range(t):
    gates = x[:, s] @ w_ih + b_ih + h @ w_hh + b_hh
    i, f, g, o = np.split(gates, 4, axis=-1)
    c = sig(f) * c + sig(i) * np.tanh(g)
    h = sig(o) * np.tanh(c)
    outs.append(h)
  return np.stack(outs, axis=1)


def test_layer_matches_torch_equations():
  model = _lm()
  x = np.asarray(jax.random.normal(jax.random.PRNGKey(1), (2, 7, 32)), np.float64)
  layer = model.backbone.lstm[0]
  with jax.default_matmul_precision("highest"):
    got = np.asarray(layer(jnp.asarray(x, jnp.float32)))
  np.testing.assert_allclose(got, _numpy_lstm(x, layer), rtol=1e-5, atol=1e-6)


def test_streaming_equals_parallel():
  model = _lm(seed=1)
  tokens = _tokens(seed=1)
  with jax.default_matmul_precision("highest"):
    want = model(tokens)
    state = model.init_state(tokens.shape[0])
    outs = []
    for t in range(tokens.shape[1]):
      state, out = model.step(state, tokens[:, t])
      outs.append(out)
  assert len(state) == 2 and state[0][0].shape == (2, 64)
  np.testing.assert_allclose(np.asarray(jnp.stack(outs, 1)), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_causality_and_padding():
  model = _lm(seed=2)
  tokens = _tokens(seed=2)
  t = 4
  later = tokens.at[:, t + 1 :].set(_tokens(seed=5)[:, t + 1 :])
  a, b = np.asarray(model(tokens)), np.asarray(model(later))
  np.testing.assert_array_equal(a[:, : t + 1], b[:, : t + 1])
  assert np.abs(a[:, t + 1 :] - b[:, t + 1 :]).max() > 0
  padded = jnp.concatenate([tokens, jnp.zeros((2, 5), jnp.int32)], axis=1)
  np.testing.assert_allclose(np.asarray(model(padded))[:, :9], a, rtol=1e-5, atol=1e-6)


def test_dropout_only_in_training():
  model = _lm()
  tokens = _tokens()
  eval_a, eval_b = np.asarray(model(tokens)), np.asarray(model(tokens))
  np.testing.assert_array_equal(eval_a, eval_b)
  train_a, train_b = np.asarray(model(tokens, train=True)), np.asarray(model(tokens, train=True))
  assert np.abs(train_a - eval_a).max() > 1e-3 and np.abs(train_a - train_b).max() > 1e-3
  off = _lm(dropout=0.0)
  np.testing.assert_array_equal(np.asarray(off(tokens, train=True)), np.asarray(off(tokens)))
  # With one layer, no embedding-side difference can come from between-layer dropout: the
  # last layer's output is dropped only with output_dropout.
  out = _lm(layers=1, output_dropout=True)
  h_train = np.asarray(out.backbone(tokens, train=True))
  assert (h_train == 0).mean() > 0.1  # about a fifth of the outputs zeroed
  assert (np.asarray(out.backbone(tokens)) == 0).mean() < 0.01


def test_hiddens():
  model = _lm()
  tokens = _tokens()
  logits = model(tokens)
  again, hiddens = model(tokens, return_hiddens=True)
  np.testing.assert_array_equal(np.asarray(again), np.asarray(logits))
  assert len(hiddens) == model.cfg.layers + 1 == 3
  assert hiddens[0].shape == (2, 9, 32) and all(h.shape == (2, 9, 64) for h in hiddens[1:])
  np.testing.assert_array_equal(np.asarray(hiddens[0]), np.asarray(model.backbone.embed(tokens)))
  with jax.default_matmul_precision("highest"):
    head = np.asarray(model.head(hiddens[-1]))
  np.testing.assert_allclose(head, np.asarray(logits), rtol=1e-5, atol=1e-6)
  assert isinstance(model.cfg, lstm.LSTMConfig)
