"""Backbone + head: the token head on every family (tied and untied), hidden states, causality,
streaming. The state head's values are pinned by test_init_fingerprints and test_golden_logits.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from chessjax.models import (
  FAMILIES,
  LM_FAMILIES,
  abstract_model,
  count_params,
  create_model,
  heads,
  streams,
)

VOCAB = 77
LAYERS = 2  # more than one block, so hiddens and streaming cover the stacking
STREAMING = sorted(f for f in FAMILIES if streams(f))  # each backbone says whether it streams


def _tokens(batch=2, steps=6, seed=0):
  return jax.random.randint(jax.random.PRNGKey(seed), (batch, steps), 0, VOCAB, jnp.int32)


# The forwards run jitted: one program per family and shape instead of hundreds of eager ones.
@nnx.jit(static_argnames=("return_hiddens",))
def _forward(model, tokens, return_hiddens=False):
  return model(tokens, return_hiddens=return_hiddens)


_step = nnx.jit(lambda model, state, token: model.step(state, token))


def _lm(family, *, tie, seed=0):
  return create_model(
    family, "d128", seed=seed, head="tokens", vocab_size=VOCAB, tie_embeddings=tie, layers=LAYERS
  )


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_token_head_parameter_counts(family):
  kw = {"head": "tokens", "vocab_size": VOCAB, "layers": LAYERS}
  tied = abstract_model(family, "d128", tie_embeddings=True, **kw)
  untied = abstract_model(family, "d128", **kw)
  d = tied.cfg.d
  assert count_params(tied) == count_params(tied.backbone)  # the head shares the embedding
  assert count_params(untied) == count_params(untied.backbone) + d * VOCAB + VOCAB
  assert tied.head.tied is tied.backbone.embed


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_token_head_forward_hiddens_and_causality(family):
  tokens = _tokens()
  for tie in (True, False):
    model = _lm(family, tie=tie)
    logits = _forward(model, tokens)
    assert logits.shape == (*tokens.shape, VOCAB) and logits.dtype == jnp.float32
    assert bool(jnp.all(jnp.isfinite(logits)))

    again, hiddens = _forward(model, tokens, return_hiddens=True)
    np.testing.assert_array_equal(np.asarray(again), np.asarray(logits))
    assert len(hiddens) == LAYERS + 1
    for h in hiddens:
      assert h.shape == (*tokens.shape, model.cfg.d) and h.dtype == jnp.float32
    embedded = model.backbone.embed(tokens).astype(jnp.float32)
    np.testing.assert_array_equal(np.asarray(hiddens[0]), np.asarray(embedded))

    # Changing the token at t never changes outputs before t.
    t = 3
    changed = tokens.at[:, t].set((tokens[:, t] + 1) % VOCAB)
    other = _forward(model, changed)
    np.testing.assert_array_equal(np.asarray(other[:, :t]), np.asarray(logits[:, :t]))
    assert float(jnp.abs(other[:, t] - logits[:, t]).max()) > 0.0


def test_tied_logits_are_hidden_states_times_embedding():
  model = _lm("slice", tie=True)
  tokens = _tokens()
  with jax.default_matmul_precision("highest"):
    h = model.backbone(tokens)
    got = model(tokens)
  # A float64 reference: float32 kernels may sum the 128-term dot products in another order (jax
  # 0.10.2's CPU matmul does: 5.7e-6 apart on logits up to 93), so the bound is float32 rounding
  # at the scale of the logits; an untied or biased head would be off by whole units.
  embedding = np.asarray(model.backbone.embed.embedding[...], np.float64)
  want = np.asarray(h, np.float64) @ embedding.T
  np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=1e-6 * np.abs(want).max())


@pytest.mark.parametrize("family", STREAMING)
def test_token_head_streaming_equals_parallel(family):
  model = _lm(family, tie=False, seed=1)
  tokens = _tokens(seed=1)
  with jax.default_matmul_precision("highest"):
    want = _forward(model, tokens)
    state = model.init_state(tokens.shape[0])
    outs = []
    for t in range(tokens.shape[1]):
      state, out = _step(model, state, tokens[:, t])
      outs.append(out)
  got = jnp.stack(outs, axis=1)
  assert got.dtype == jnp.float32
  scale = float(jnp.abs(want).max())
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4 * scale)


def test_state_head_is_the_default_and_validates():
  model = create_model("slice", "d128")
  assert isinstance(model, heads.Model) and isinstance(model.head, heads.StateHead)
  assert model.backbone.embed.num_embeddings == 20482
  with pytest.raises(ValueError, match="vocab_size"):
    create_model("slice", "d128", head="tokens")
  with pytest.raises(ValueError, match="state head"):
    create_model("slice", "d128", head="state", vocab_size=77)
  with pytest.raises(ValueError, match="head must be"):
    create_model("slice", "d128", head="pieces")


def test_untied_token_head_without_bias():
  model = create_model("gated_deltanet", "d128", head="tokens", vocab_size=VOCAB)
  no_bias = heads.TokenHead(model.cfg.d, VOCAB, rngs=nnx.Rngs(0), use_bias=False)
  assert no_bias.linear.bias is None
  assert count_params(no_bias) == model.cfg.d * VOCAB


@pytest.mark.parametrize("family", sorted(FAMILIES) + sorted(LM_FAMILIES))
def test_streaming_is_what_the_family_declares(family):
  size = "d128" if family in FAMILIES else "tiny"
  model = create_model(family, size, head="tokens", vocab_size=VOCAB)
  if streams(family):
    state = model.init_state(2)
    _, logits = model.step(state, jnp.zeros((2,), jnp.int32))
    assert logits.shape == (2, VOCAB)
  else:
    with pytest.raises(NotImplementedError, match="streaming"):
      model.init_state(2)
