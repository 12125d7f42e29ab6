"""Transformer, SLiCE and diagonal SLiCE models: counts, causality, padding, dropout, streaming."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from chessjax import encoding
from chessjax.models import abstract_model, count_params, create_model, model_config, transformer

FAMILIES = ("transformer", "slice", "slice_diag")

# Walker & Lyons, Chess-World-Model, Table 4 (exact).
PARAM_COUNTS = {
  "transformer": (3_128_150, 7_831_126, 18_048_726, 36_662_614),
  "slice": (3_144_662, 7_962_966, 18_641_238, 38_241_110),
  "slice_diag": (3_029_078, 7_041_878, 14_501_718, 27_209_558),
}
SIZES = ("d128", "d256", "d384", "d512")


def _moves(batch, steps, seed=0):
  """Random real move ids with START first (legality does not matter to the models)."""
  rng = np.random.default_rng(seed)
  moves = rng.integers(0, encoding.NUM_MOVE_IDS, (batch, steps), dtype=np.int32)
  moves[:, 0] = encoding.START_ID
  return jnp.asarray(moves)


@functools.partial(jax.jit, static_argnames=("graphdef", "train"))
def _run(graphdef, state, moves, train):
  model = nnx.merge(graphdef, state)
  return model(moves, train=train), nnx.state(model)


def _forward(model, moves, *, train=False):
  """The model's logits through one jitted pure function (as the training loop runs it); the
  compiled function is shared by models of the same structure."""
  graphdef, state = nnx.split(model)
  logits, state = _run(graphdef, state, moves, train)
  nnx.update(model, state)  # keeps the dropout RNG advancing between calls
  return np.asarray(logits)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("size_index", range(4), ids=SIZES)
def test_parameter_counts_match_the_paper(family, size_index):
  model = abstract_model(family, SIZES[size_index])
  assert count_params(model) == PARAM_COUNTS[family][size_index]


@pytest.mark.parametrize("family", FAMILIES)
def test_unknown_or_bad_config_raises(family):
  with pytest.raises(ValueError, match="unknown"):
    model_config(family, "d128", not_a_field=1)
  with pytest.raises(ValueError, match="dtype"):
    model_config(family, "d128", dtype="float16")
  bad = {"rope": "alibi"} if family == "transformer" else {"mixer_impl": "magic"}
  with pytest.raises(ValueError, match=next(iter(bad))):
    model_config(family, "d128", **bad)


def test_family_configs():
  assert model_config("slice", "d256").block_size == 8
  assert model_config("slice_diag", "d256").block_size == 1
  cfg = model_config("transformer", "d384")
  assert (cfg.d, cfg.layers, cfg.heads, cfg.head_dim) == (384, 4, 6, 64)
  assert cfg.rope == "reference"


def test_slice_init_follows_the_release():
  model = create_model("slice", "d128", seed=1)
  mixer = model.backbone.blocks[0].mixer
  assert mixer.w_a.kernel.shape == (129, 128 * 8) and mixer.w_a.bias is None
  assert mixer.w_b.kernel.shape == (129, 128) and mixer.w_b.bias is None
  np.testing.assert_allclose(np.std(mixer.w_a.kernel[...]), 0.1 / 8**0.5, rtol=0.02)
  np.testing.assert_allclose(np.std(mixer.w_b.kernel[...]), 0.1, rtol=0.05)
  assert mixer.y0.shape == (128,) and 0.05 < float(np.std(mixer.y0[...])) < 0.2
  np.testing.assert_allclose(np.std(model.backbone.embed.embedding[...]), 1.0, rtol=0.01)
  bound = 1 / 128**0.5
  assert float(np.abs(model.head.kernel[...]).max()) <= bound
  assert float(np.abs(model.head.kernel[...]).max()) > 0.99 * bound
  np.testing.assert_array_equal(model.backbone.blocks[0].norm1.scale[...], np.ones(128))
  assert model.backbone.norm is None  # no final norm in the release


@pytest.mark.parametrize("family", ["slice", "slice_diag"])
def test_parallel_mixers_match_sequential(family):
  moves = _moves(2, 19, seed=3)
  with jax.default_matmul_precision("highest"):
    ref_model = create_model(family, "d128", seed=5, mixer_impl="sequential", layers=2)
    want = _forward(ref_model, moves)
    for impl, chunk in (("chunked", 4), ("associative", 256)):
      model = create_model(family, "d128", seed=5, mixer_impl=impl, chunk_size=chunk, layers=2)
      jax.tree.map(
        np.testing.assert_array_equal, nnx.state(model, nnx.Param), nnx.state(ref_model, nnx.Param)
      )
      got = _forward(model, moves)
      np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("family", FAMILIES)
def test_causality(family):
  """Changing moves after step t never changes the logits at steps <= t."""
  overrides = {"mixer_impl": "chunked", "chunk_size": 4} if family != "transformer" else {}
  model = create_model(family, "d128", seed=2, **overrides)
  moves = _moves(2, 16, seed=4)
  t = 7
  changed = moves.at[:, t + 1 :].set(_moves(2, 16, seed=9)[:, t + 1 :])
  a, b = _forward(model, moves), _forward(model, changed)
  np.testing.assert_allclose(a[:, : t + 1], b[:, : t + 1], rtol=1e-5, atol=1e-5)
  assert np.abs(a[:, t + 1 :] - b[:, t + 1 :]).max() > 1e-3  # later steps do see the change


@pytest.mark.parametrize("family", FAMILIES)
def test_padding_invariance(family):
  """Right-padding with PAD leaves the valid steps' logits unchanged, game by game."""
  model = create_model(family, "d128", seed=6)
  moves = _moves(2, 12, seed=5)
  lengths = (12, 7)
  padded = moves.at[1, lengths[1] :].set(encoding.PAD_ID)
  padded = jnp.concatenate([padded, jnp.full((2, 5), encoding.PAD_ID, jnp.int32)], axis=1)
  got = _forward(model, padded)
  assert got.shape == (2, 17, 1878) and got.dtype == np.float32
  for i, n in enumerate(lengths):
    alone = _forward(model, moves[i : i + 1, :n])
    np.testing.assert_allclose(got[i : i + 1, :n], alone, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_dropout_only_in_training(family):
  model = create_model(family, "d128", seed=7)
  moves = _moves(2, 10, seed=6)
  eval_a, eval_b = _forward(model, moves), _forward(model, moves)
  np.testing.assert_array_equal(eval_a, eval_b)
  train_a, train_b = _forward(model, moves, train=True), _forward(model, moves, train=True)
  assert np.abs(train_a - eval_a).max() > 1e-3
  assert np.abs(train_a - train_b).max() > 1e-3  # fresh masks every step
  no_dropout = create_model(family, "d128", seed=7, dropout=0.0)
  np.testing.assert_allclose(
    _forward(no_dropout, moves, train=True), _forward(no_dropout, moves), rtol=1e-6, atol=1e-6
  )


@pytest.mark.parametrize("family", ["slice", "slice_diag"])
def test_streaming_matches_parallel(family):
  model = create_model(family, "d128", seed=8, layers=2, mixer_impl="chunked", chunk_size=4)
  moves = _moves(3, 9, seed=7)
  want = _forward(model, moves)
  step = nnx.jit(lambda m, s, x: m.step(s, x))
  state = model.init_state(3)
  for t in range(moves.shape[1]):
    state, logits = step(model, state, moves[:, t])
    np.testing.assert_allclose(np.asarray(logits), want[:, t], rtol=1e-4, atol=1e-4)


def test_slice_final_norm_option_adds_one_norm():
  plain = count_params(abstract_model("slice", "d128"))
  assert count_params(abstract_model("slice", "d128", final_norm=True)) == plain + 128


@pytest.mark.parametrize("family", FAMILIES)
def test_bfloat16_matmuls_stay_close(family):
  moves = _moves(2, 8, seed=8)
  ref = _forward(create_model(family, "d128", seed=9), moves)
  got = _forward(create_model(family, "d128", seed=9, dtype="bfloat16"), moves)
  assert got.dtype == np.float32 and np.isfinite(got).all()
  assert np.abs(got - ref).max() < 0.05 * np.abs(ref).max()


def _release_rope(x, steps, head_dim):
  """The release's RotaryEmbedding + apply_rope, in numpy (x: [T, K])."""
  inv_freq = 1.0 / 10000.0 ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim)
  freqs = np.outer(np.arange(steps, dtype=np.float32), inv_freq)
  emb = np.concatenate([freqs, freqs], axis=-1)
  rotated = np.stack([-x[..., 1::2], x[..., ::2]], axis=-1).reshape(x.shape)
  return x * np.cos(emb) + rotated * np.sin(emb)


def test_reference_rope_is_the_release_formula():
  steps, k = 37, 64
  x = np.random.default_rng(0).standard_normal((steps, k)).astype(np.float32)
  angles = transformer.rope_angles(steps, k, mode="reference")
  got = transformer.apply_rope(jnp.asarray(x)[:, None, :], angles)[:, 0]
  np.testing.assert_allclose(np.asarray(got), _release_rope(x, steps, k), rtol=1e-5, atol=1e-5)
  # The quirk: not norm preserving, unlike a rotation.
  assert np.abs(np.linalg.norm(np.asarray(got), axis=-1) - np.linalg.norm(x, axis=-1)).max() > 1e-2


def test_standard_rope_is_a_relative_rotation():
  steps, k = 20, 64
  rng = np.random.default_rng(1)
  q1, k1 = (jnp.asarray(rng.standard_normal((1, 1, k)), jnp.float32) for _ in range(2))
  angles = transformer.rope_angles(steps, k, mode="standard")
  q = transformer.apply_rope(jnp.broadcast_to(q1, (steps, 1, k)), angles)[:, 0]
  kk = transformer.apply_rope(jnp.broadcast_to(k1, (steps, 1, k)), angles)[:, 0]
  np.testing.assert_allclose(np.linalg.norm(q, axis=-1), np.linalg.norm(q1), rtol=1e-5)
  dots = np.asarray(q @ kk.T)  # depends on t - s only
  np.testing.assert_allclose(np.diag(dots, 3)[:-1], np.diag(dots, 3)[1:], rtol=1e-4, atol=1e-4)
  assert not np.allclose(
    transformer.rope_angles(steps, k, mode="standard"), transformer.rope_angles(steps, k)
  )


def test_explicit_attention_matches_fused():
  rng = np.random.default_rng(2)
  q, k, v = (jnp.asarray(rng.standard_normal((2, 13, 3, 64)), jnp.float32) for _ in range(3))
  with jax.default_matmul_precision("highest"):
    fused = transformer.causal_attention(q, k, v)
    explicit = transformer.causal_attention(q, k, v, drop=lambda w: w)
  np.testing.assert_allclose(np.asarray(explicit), np.asarray(fused), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("steps", [1, 3, 4, 5, 13])
def test_blocked_attention_equals_full_softmax_float64(steps):
  """Query blocks (block=4) give the full T x T causal softmax's values and gradients."""
  rng = np.random.default_rng(steps)
  with jax.enable_x64():
    q, k, v = (jnp.asarray(rng.standard_normal((2, steps, 3, 8))) for _ in range(3))
    cot = jnp.asarray(rng.standard_normal((2, steps, 3, 8)))

    def full(q, k, v):
      logits = jnp.einsum("bqhk,bshk->bhqs", q, k) / np.sqrt(8)
      logits = jnp.where(jnp.tril(jnp.ones((steps, steps), bool)), logits, -jnp.inf)
      return jnp.einsum("bhqs,bshk->bqhk", 0.9 * jax.nn.softmax(logits, -1), v)

    def blocked(q, k, v):
      return transformer.causal_attention(
        q, k, v, dtype=jnp.float64, drop=lambda w: 0.9 * w, block=4
      )

    # Jitted: a few programs instead of hundreds of eager float64 ones.
    np.testing.assert_allclose(
      jax.jit(blocked)(q, k, v), jax.jit(full)(q, k, v), rtol=1e-12, atol=1e-12
    )
    g_blocked = jax.jit(jax.grad(lambda *a: jnp.sum(blocked(*a) * cot), argnums=(0, 1, 2)))(q, k, v)
    g_full = jax.jit(jax.grad(lambda *a: jnp.sum(full(*a) * cot), argnums=(0, 1, 2)))(q, k, v)
    for got, want in zip(g_blocked, g_full, strict=True):
      np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
