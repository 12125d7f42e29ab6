"""Mamba-2 / Mamba-3 world models: parameter counts, inits, fast vs sequential mixers, causality,
padding invariance, streaming, dropout and precision options (Walker & Lyons, Chess-World-Model,
appendix B.2 and Table 4)."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from chessjax import encoding, labels, models
from chessjax.models import mamba

FAMILIES = ("mamba2", "mamba3", "mamba3_mimo")

# Walker & Lyons, Chess-World-Model, Table 4, to the unit.
PARAM_COUNTS = {
  "mamba2": (3_195_362, 8_230_534, 19_643_750, 40_648_822),
  "mamba3": (3_198_942, 8_250_998, 19_719_478, 40_826_902),
  "mamba3_mimo": (3_303_390, 8_668_790, 20_972_854, 43_333_654),
}

# Small but complete: 2 layers, 4 heads, every parameter kind, chunks shorter than the games.
SMALL = dict(d=32, heads=4, head_dim=16, d_state=16, layers=2, chunk_size=4)
T = 13


_forward = jax.jit(
  lambda graphdef, state, moves, train=False: nnx.merge(graphdef, state)(moves, train=train),
  static_argnums=(0, 3),
)


def _run(model, moves, train=False):
  graphdef, state = nnx.split(model)
  return np.asarray(_forward(graphdef, state, jnp.asarray(moves, jnp.int32), train))


@pytest.fixture(scope="module")
def small_models():
  """family -> (fast model, sequential model) with identical parameters."""
  out = {}
  for family in FAMILIES:
    fast = models.create_model(family, "d128", seed=0, **SMALL)
    seq = models.create_model(family, "d128", seed=0, mixer_impl="sequential", **SMALL)
    out[family] = (fast, seq)
  return out


def _moves(seed, batch=2, length=T):
  return (
    np.random.default_rng(seed).integers(0, encoding.START_ID, (batch, length)).astype(np.int32)
  )


# ------------------------------------------------------------------------------------------------
# Sizes and configs


@pytest.mark.parametrize("family", FAMILIES)
def test_parameter_counts_match_spec(family):
  counts = tuple(models.count_params(models.abstract_model(family, size)) for size in models.SIZES)
  assert counts == PARAM_COUNTS[family]


def test_base_configs():
  cfg2 = models.model_config("mamba2", "d384")
  cfg3 = models.model_config("mamba3", "d512")
  mimo = models.model_config("mamba3_mimo", "d256")
  assert (cfg2.version, cfg2.d, cfg2.layers, cfg2.heads, cfg2.mimo_rank) == (
    "mamba2",
    384,
    4,
    12,
    1,
  )
  assert (cfg3.version, cfg3.heads, cfg3.mimo_rank, cfg3.num_angles) == ("mamba3", 16, 1, 32)
  assert (mimo.version, mimo.heads, mimo.mimo_rank, mimo.chunk_size) == ("mamba3", 8, 4, 16)
  assert (cfg3.remat_segment, mimo.remat_segment) == (0, mamba.MIMO_REMAT_SEGMENT)
  for cfg in (cfg2, cfg3, mimo):
    assert (cfg.d_state, cfg.head_dim, cfg.expand, cfg.dropout, cfg.norm_eps) == (
      128,
      64,
      2,
      0.1,
      1e-5,
    )
    assert (cfg.mixer_impl, cfg.dtype, cfg.hidden) == ("auto", "float32", 4 * cfg.d)


def test_bad_configs_raise():
  with pytest.raises(ValueError, match="unknown mamba3 config key"):
    models.model_config("mamba3", "d128", not_a_field=1)
  with pytest.raises(ValueError, match="mixer_impl"):
    models.model_config("mamba3", "d128", mixer_impl="associative")
  with pytest.raises(ValueError, match="dtype"):
    models.model_config("mamba2", "d128", dtype="float16")
  with pytest.raises(ValueError, match="heads \\* head_dim"):
    models.model_config("mamba2", "d128", heads=3)
  with pytest.raises(ValueError, match="mimo_rank"):
    models.model_config("mamba2", "d128", mimo_rank=4)
  with pytest.raises(ValueError, match="remat_segment"):
    models.model_config("mamba2", "d128", remat_segment=64)
  with pytest.raises(ValueError, match="not a Mamba family"):
    mamba.base_config("transformer", "d128")


@pytest.mark.parametrize("family", ("mamba2", "mamba3_mimo"))
def test_initialisation(family):
  model = models.create_model(family, "d128", seed=0)
  cfg = model.cfg
  emb = np.asarray(model.backbone.embed.embedding[...])
  assert abs(emb.std() - 0.02) < 5e-4
  assert np.all(np.asarray(model.head.bias[...]) == 0)
  head_bound = 1 / math.sqrt(cfg.d)
  assert np.abs(np.asarray(model.head.kernel[...])).max() <= head_bound
  block = model.backbone.blocks[0]
  mixer = block.mixer
  # out_proj and fc2: kaiming-uniform(a=sqrt 5) / sqrt(2 L).
  for layer, fan_in in ((mixer.out_proj, cfg.inner), (block.mlp.fc_out, cfg.hidden)):
    w = np.abs(np.asarray(layer.kernel[...]))
    bound = 1 / math.sqrt(fan_in) / math.sqrt(2 * cfg.layers)
    assert w.max() <= bound and w.max() > 0.9 * bound
  w = np.abs(np.asarray(mixer.in_proj.kernel[...]))
  assert w.max() <= 1 / math.sqrt(cfg.d) and w.max() > 0.9 / math.sqrt(cfg.d)
  dt = np.asarray(jax.nn.softplus(mixer.dt_bias[...]))
  assert np.all((dt >= 1e-3 * 0.999) & (dt <= 0.1 * 1.001))
  np.testing.assert_array_equal(np.asarray(mixer.D[...]), np.ones(cfg.heads))
  if family == "mamba2":
    a = np.exp(np.asarray(mixer.A_log[...]))
    assert np.all((a >= 1) & (a <= 16))
    assert np.abs(np.asarray(mixer.conv_weight[...])).max() <= 0.5
    assert np.abs(np.asarray(mixer.conv_bias[...])).max() <= 0.5
  else:
    np.testing.assert_array_equal(np.asarray(mixer.B_bias[...]), 1.0)
    np.testing.assert_array_equal(np.asarray(mixer.C_bias[...]), 1.0)
    np.testing.assert_array_equal(np.asarray(mixer.mimo_x[...]), 0.25)
    np.testing.assert_array_equal(np.asarray(mixer.mimo_z[...]), 1.0)
    np.testing.assert_array_equal(np.asarray(mixer.mimo_o[...]), 0.25)


# ------------------------------------------------------------------------------------------------
# Mixer implementations, causality, padding, streaming


@pytest.mark.parametrize("family", FAMILIES)
def test_fast_matches_sequential(family, small_models):
  fast, seq = small_models[family]
  moves = _moves(0)
  with jax.default_matmul_precision("highest"):
    a, b = _run(fast, moves), _run(seq, moves)
  assert a.shape == (2, T, labels.HEAD_DIM) and a.dtype == np.float32
  np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max())


@pytest.mark.parametrize("family", FAMILIES)
def test_causal_and_padding_invariant(family, small_models):
  fast, _ = small_models[family]
  moves = _moves(1)
  changed = moves.copy()
  changed[:, 7:] = _moves(2)[:, 7:]
  base = _run(fast, moves)
  # Same program, later tokens changed: earlier logits are bit-for-bit unchanged.
  np.testing.assert_array_equal(_run(fast, changed)[:, :7], base[:, :7])
  assert not np.allclose(_run(fast, changed)[:, 7:], base[:, 7:])
  padded = np.concatenate([moves, np.full((2, 6), encoding.PAD_ID, np.int32)], axis=1)
  np.testing.assert_allclose(_run(fast, padded)[:, :T], base, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_streaming_step_matches_parallel(family, small_models):
  fast, _ = small_models[family]
  moves = _moves(3)
  graphdef, params = nnx.split(fast)

  @jax.jit
  def step(params, state, ids):
    return nnx.merge(graphdef, params).step(state, ids)

  state = fast.init_state(2)
  streamed = []
  for t in range(T):
    state, logits = step(params, state, jnp.asarray(moves[:, t]))
    streamed.append(np.asarray(logits))
  with jax.default_matmul_precision("highest"):
    want = _run(fast, moves)
  np.testing.assert_allclose(np.stack(streamed, 1), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_dropout_only_when_training(small_models):
  fast, _ = small_models["mamba3"]
  moves = _moves(4)
  eval_a, eval_b = _run(fast, moves), _run(fast, moves)
  np.testing.assert_array_equal(eval_a, eval_b)
  train = _run(fast, moves, train=True)
  assert np.all(np.isfinite(train)) and not np.allclose(train, eval_a)


@pytest.mark.slow
def test_rematerialised_segments_match_one_pass(small_models):
  """MIMO's mixer over segments of 5 tokens (two, then the remaining 3; rematerialised) against
  one pass over all 13: outputs and the gradients of every parameter and of the input, float32
  (the mixer computes in float32 whatever its inputs; tests/ops holds the chained ops, a
  `TrapezoidState` and `rotary_theta`'s `initial`, in float64)."""
  mixer = small_models["mamba3_mimo"][0].backbone.blocks[0].mixer
  graphdef, params = nnx.split(mixer)
  segmented = dataclasses.replace(mixer.cfg, remat_segment=5)
  graphdef_seg = nnx.graphdef(
    nnx.eval_shape(lambda: mamba.Mamba3Mixer(segmented, rngs=nnx.Rngs(0)))
  )
  u = jnp.asarray(np.random.default_rng(8).normal(size=(2, T, SMALL["d"])), jnp.float32)

  def outputs_and_grads(graphdef):
    @jax.jit
    def f(params, u):
      out = nnx.merge(graphdef, params)(u)
      return jnp.sum(out * jnp.cos(out)), out

    grads, out = jax.grad(f, argnums=(0, 1), has_aux=True)(params, u)
    return out, grads

  assert mixer.cfg.remat_segment >= T  # the fixture's model runs one pass
  with jax.default_matmul_precision("highest"):
    (o_one, g_one), (o_seg, g_seg) = outputs_and_grads(graphdef), outputs_and_grads(graphdef_seg)
  np.testing.assert_allclose(o_seg, o_one, rtol=1e-5, atol=1e-5 * np.abs(o_one).max())
  assert jax.tree.structure(g_seg) == jax.tree.structure(g_one)
  for a, b in zip(jax.tree.leaves(g_seg), jax.tree.leaves(g_one), strict=True):
    a, b = np.asarray(a), np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * max(np.abs(b).max(), 1e-12))


@pytest.mark.parametrize("family", ("mamba3",))
def test_bfloat16_matmuls_stay_close(family):
  f32 = models.create_model(family, "d128", seed=0, **SMALL)
  bf16 = models.create_model(family, "d128", seed=0, dtype="bfloat16", **SMALL)
  moves = _moves(5)
  a, b = _run(f32, moves), _run(bf16, moves)
  assert b.dtype == np.float32 and np.all(np.isfinite(b))
  assert np.abs(a - b).max() < 0.05 * np.abs(a).max()


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_released_size_fast_matches_sequential_with_gradients(family):
  """d128 at the released widths (N = 128, P = 64, default chunks); logits and parameter grads."""
  fast = models.create_model(family, "d128", seed=0)
  seq = models.create_model(family, "d128", seed=0, mixer_impl="sequential")
  moves = jnp.asarray(_moves(6, batch=2, length=40))
  cot = jnp.asarray(np.random.default_rng(7).normal(size=(2, 40, labels.HEAD_DIM)), jnp.float32)

  def grads(model):
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    @jax.jit
    def f(params):
      logits = nnx.merge(graphdef, params, rest)(moves)
      return jnp.sum(logits * cot), logits

    return jax.grad(f, has_aux=True)(params)

  with jax.default_matmul_precision("highest"):
    (g_fast, l_fast), (g_seq, l_seq) = grads(fast), grads(seq)
  np.testing.assert_allclose(l_fast, l_seq, rtol=1e-4, atol=1e-4 * np.abs(l_seq).max())
  for a, b in zip(jax.tree.leaves(g_fast), jax.tree.leaves(g_seq), strict=True):
    a, b = np.asarray(a), np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4 * max(np.abs(b).max(), 1e-12))
