"""Gated DeltaNet families: exact parameter counts, fast vs sequential mixer, causality, padding,
streaming, inits and config errors."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from chessjax import encoding, labels, optim
from chessjax.models import abstract_model, count_params, create_model, model_config

# Walker & Lyons, Chess-World-Model, Table 4 (the sign ablation has the same count).
EXPECTED_PARAMS = {"d128": 3_161_402, "d256": 7_703_846, "d384": 16_886_406, "d512": 35_136_502}


def _moves(seed, b, t):
  """START followed by random move ids (the model does not need legal games)."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(0, encoding.NUM_MOVE_IDS, (b, t), dtype=np.int32)
  ids[:, 0] = encoding.START_ID
  return jnp.asarray(ids)


def _jit_forward(model):
  graphdef, state = nnx.split(model)
  fwd = jax.jit(lambda state, ids: nnx.merge(graphdef, state)(ids))
  return lambda ids: fwd(state, ids)


def _assert_close(actual, expected, rtol, what=""):
  actual, expected = np.asarray(actual), np.asarray(expected)
  assert np.all(np.isfinite(actual)), f"{what}: non-finite values"
  scale = max(float(np.max(np.abs(expected))), 1e-30)
  np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale, err_msg=what)


@pytest.mark.parametrize("family", ["gated_deltanet", "gated_deltanet_pos"])
@pytest.mark.parametrize("size", sorted(EXPECTED_PARAMS))
def test_exact_parameter_count(family, size):
  assert count_params(abstract_model(family, size)) == EXPECTED_PARAMS[size]


def test_configs_follow_spec():
  for size, heads in (("d128", 2), ("d256", 4), ("d384", 6), ("d512", 8)):
    cfg = model_config("gated_deltanet", size)
    assert (cfg.heads, cfg.head_k_dim, cfg.head_v_dim, cfg.conv_size) == (heads, 48, 96, 4)
    assert (
      cfg.negative_eigenvalues and not model_config("gated_deltanet_pos", size).negative_eigenvalues
    )
  widths = [
    model_config("gated_deltanet", s).intermediate for s in ("d128", "d256", "d384", "d512")
  ]
  assert widths == [512, 768, 1024, 1536]


def test_bad_config_raises():
  with pytest.raises(ValueError, match="unknown gated_deltanet config key"):
    model_config("gated_deltanet", "d128", headz=3)
  with pytest.raises(ValueError, match="mixer_impl"):
    model_config("gated_deltanet", "d128", mixer_impl="associative")
  with pytest.raises(ValueError, match="dtype"):
    model_config("gated_deltanet", "d128", dtype="float16")
  with pytest.raises(ValueError, match="no dropout"):
    model_config("gated_deltanet_pos", "d128", dropout=0.1)
  assert model_config("gated_deltanet", "d128", dropout=0.0).dropout == 0.0


def test_fast_matches_sequential_logits_and_grads():
  """Chunked (3 chunks of 16, the last partial) vs scan mixer: logits and parameter gradients."""
  ids = _moves(0, 2, 45)
  models = {
    impl: create_model("gated_deltanet", "d128", seed=1, mixer_impl=impl, chunk_size=16)
    for impl in ("chunked", "sequential")
  }
  cot = jnp.cos(jnp.arange(2 * 45 * labels.HEAD_DIM, dtype=jnp.float32)).reshape(2, 45, -1)
  results = {}
  with jax.default_matmul_precision("highest"):
    for impl, model in models.items():
      graphdef, params, rest = nnx.split(model, nnx.Param, ...)

      def loss(params, graphdef=graphdef, rest=rest):
        logits = nnx.merge(graphdef, params, rest)(ids)
        return jnp.sum(logits * cot), logits

      results[impl] = jax.jit(jax.grad(loss, has_aux=True))(params)
  (g_fast, l_fast), (g_seq, l_seq) = results["chunked"], results["sequential"]
  _assert_close(l_fast, l_seq, 1e-5, "logits")
  leaves_fast = jax.tree_util.tree_leaves_with_path(g_fast)
  leaves_seq = jax.tree.leaves(g_seq)
  assert len(leaves_fast) == len(leaves_seq) > 15
  for (path, a), e in zip(leaves_fast, leaves_seq, strict=True):
    _assert_close(a, e, 1e-4, jax.tree_util.keystr(path))


def test_causality_and_padding_invariance():
  model = create_model("gated_deltanet", "d128", seed=2, layers=2, chunk_size=16)
  fwd = _jit_forward(model)
  ids = _moves(3, 2, 40)
  base = fwd(ids)
  assert base.shape == (2, 40, labels.HEAD_DIM) and base.dtype == jnp.float32
  # Changing move t0 changes nothing before t0 (same chunk as t0 included), and does change t0.
  for t0 in (5, 16, 33):
    changed = fwd(ids.at[:, t0].set((ids[:, t0] + 7) % encoding.NUM_MOVE_IDS))
    np.testing.assert_array_equal(changed[:, :t0], base[:, :t0])
    assert not np.allclose(changed[:, t0], base[:, t0])
  # A game's logits do not depend on how much PAD follows it.
  length = 23
  padded = ids.at[:, length:].set(encoding.PAD_ID)
  np.testing.assert_array_equal(fwd(padded)[:, :length], base[:, :length])
  short = _jit_forward(model)(ids[:, :length])
  _assert_close(short, base[:, :length], 1e-6, "short vs padded")


def test_streaming_step_matches_forward():
  model = create_model("gated_deltanet", "d128", seed=4, layers=2)
  ids = _moves(5, 3, 70)  # crosses the default 64-step chunk
  graphdef, state = nnx.split(model)
  with jax.default_matmul_precision("highest"):
    ref = jax.jit(lambda state, ids: nnx.merge(graphdef, state)(ids))(state, ids)
    step = jax.jit(lambda state, carry, x: nnx.merge(graphdef, state).step(carry, x))
    carry = model.init_state(3)
    outs = []
    for t in range(ids.shape[1]):
      carry, logits = step(state, carry, ids[:, t])
      outs.append(logits)
  assert carry[1]["ssm"].shape == (3, 2, 96, 48) and carry[1]["ssm"].dtype == jnp.float32
  assert carry[0]["conv_v"].shape == (3, 3, 192)
  _assert_close(jnp.stack(outs, axis=1), ref, 1e-5, "streamed logits")


def test_init_distributions_and_weight_decay_mask():
  model = create_model("gated_deltanet", "d128", seed=0, layers=2)
  mixer = model.backbone.blocks[0].mixer
  a = np.exp(np.asarray(mixer.A_log[...]))
  assert a.shape == (2,) and np.all((a > 0) & (a < 16))
  dt = np.asarray(jax.nn.softplus(mixer.dt_bias[...]))
  assert np.all((dt >= 1e-4 * (1 - 1e-5)) & (dt <= 0.1 * (1 + 1e-5)))
  for w in (
    model.backbone.embed.embedding,
    mixer.q_proj.kernel,
    mixer.q_conv.kernel,
    model.head.kernel,
  ):
    assert abs(float(jnp.std(w[...])) - 0.02) < 0.002
  np.testing.assert_array_equal(model.head.bias[...], 0.0)
  np.testing.assert_array_equal(mixer.o_norm[...], 1.0)

  params = nnx.state(model, nnx.Param)
  mask = optim.decay_mask(params)
  flat = {jax.tree_util.keystr(p): m for p, m in jax.tree_util.tree_leaves_with_path(mask)}
  no_decay = sorted(k for k, m in flat.items() if not m)
  assert len(no_decay) == 2 * 2
  assert all(("A_log" in k) or ("dt_bias" in k) for k in no_decay)
  assert jax.tree.structure(mask) == jax.tree.structure(params)


def test_eigenvalue_sign_sets_beta_range():
  """beta = 2 sigmoid(.) for gated_deltanet (reaches above 1), sigmoid(.) for the ablation."""
  x = 10.0 * jax.random.normal(jax.random.PRNGKey(0), (64, 128))
  for family, upper in (("gated_deltanet", 2.0), ("gated_deltanet_pos", 1.0)):
    mixer = create_model(family, "d128", seed=0).backbone.blocks[0].mixer
    mixer.b_proj.kernel[...] = 50.0 * mixer.b_proj.kernel[...]  # saturate the sigmoid
    beta, g = mixer._gates(x)
    assert float(beta.max()) <= upper and float(beta.max()) > 0.99 * upper
    assert float(g.max()) <= 0.0


def test_bfloat16_matmuls_close_to_float32():
  ids = _moves(6, 2, 20)
  out32 = _jit_forward(create_model("gated_deltanet", "d128", seed=3))(ids)
  out16 = _jit_forward(create_model("gated_deltanet", "d128", seed=3, dtype="bfloat16"))(ids)
  assert out16.dtype == jnp.float32
  err = float(jnp.max(jnp.abs(out16 - out32)))
  assert math.isfinite(err) and err < 0.05 * float(jnp.max(jnp.abs(out32)))
