"""The Performer (Choromanski et al., Rethinking Attention with Performers; performer-pytorch as
Toshniwal et al., Learning Chess Blindfolded, trained it): parameter counts against the
reference's, golden logits of performer-pytorch 1.1.4 with the random features fixed, chunked
causal linear attention against the quadratic form, local attention's blocks, causality, the
random features and their redraw schedule, and LM training steps with a resume."""

import sys
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from chessjax.models import performer
from chessjax.models.registry import abstract_model, count_params, create_model, model_config

DATA = Path(__file__).resolve().parents[1] / "data"
sys.path.insert(0, str(DATA))
import make_golden_performer as golden  # noqa: E402

FAMILY = "chessjax.models.performer"
VOCAB = 77


@pytest.fixture(scope="module")
def reference():
  return np.load(DATA / "golden_performer.npz")


def _lm(size="tiny", **overrides):
  return create_model(FAMILY, size, head="tokens", vocab_size=VOCAB, **overrides)


@nnx.jit(static_argnames=("train",))
def _run(model, tokens, train=False):
  return model(tokens, train=train)


def _forward(model, tokens, train=False):
  """The model's logits, jitted once per model structure and shape (state updates, such as the
  feature-redraw counters, carried back to `model` as an eager call would)."""
  return _run(model, jnp.asarray(tokens), train=train)


_causal_linear_attention = jax.jit(performer.causal_linear_attention, static_argnames=("chunk",))
_local_attention = jax.jit(performer.local_attention, static_argnames=("window",))


@pytest.mark.parametrize(
  "size, positions, want",
  [
    ("S", "rotary", 85_137_485),  # performer-pytorch 1.1.4's default rotary embedding
    ("S", "learned", 85_530_701),  # learned absolute positions (512 x 768 more)
    ("M", "rotary", 85_137_485),  # local heads have no parameter (local-attention 1.11.2)
    ("L", "learned", 85_530_701),
  ],
)
def test_parameter_counts_match_the_reference(reference, size, positions, want):
  model = abstract_model(FAMILY, size, head="tokens", vocab_size=VOCAB, positions=positions)
  assert count_params(model) == want
  ref_key = f"paper/{'S' if size == 'S' else 'M'}_{positions}/params"
  assert count_params(model) == int(reference[ref_key])  # counted by the reference itself
  d, n_layers, v = 768, 12, VOCAB
  formula = v * d + n_layers * (12 * d * d + 9 * d) + 2 * d + d * v + v
  assert want == formula + (512 * d if positions == "learned" else 0)
  # The random projections are model state, not parameters: 266 x 64 per layer.
  assert model.backbone.blocks[0].attention.features.get_value().shape == (266, 64)


def test_configs_and_sizes():
  s, m = model_config(FAMILY, "S"), model_config(FAMILY, "M")
  assert (s.d, s.layers, s.heads, s.head_dim, s.local_heads, s.local_window) == (
    768,
    12,
    12,
    64,
    6,
    50,
  )
  assert m.local_heads == 0 and model_config(FAMILY, "L").local_heads == 0
  assert (s.features, s.feature_redraw_interval, s.kernel_epsilon, s.dropout) == (
    266,
    1000,
    0.001,
    0.1,
  )
  assert s.reversible and s.positions == "rotary" and not s.qkv_bias and not s.out_bias
  with pytest.raises(ValueError, match="local_heads"):
    model_config(FAMILY, "tiny", local_heads=5)
  with pytest.raises(ValueError, match="positions"):
    model_config(FAMILY, "tiny", positions="axial")


def _load_golden_params(model, name):
  state = nnx.state(model, nnx.Param)
  for path, var in nnx.to_flat_state(state):
    key = ".".join(str(p) for p in path)
    var.set_value(jnp.asarray(golden.param_value(key, tuple(var[...].shape))))
  nnx.update(model, state)
  model.backbone.set_features(golden.projections(name))


@pytest.mark.parametrize("name", list(golden.CASES))
def test_golden_logits_of_performer_pytorch(reference, name):
  """performer-pytorch 1.1.4 (float64, eval) with the same parameters and fixed projections."""
  model = _lm("tiny", chunk=4, **golden.case_config(name))
  _load_golden_params(model, name)
  # Every reference parameter has a chessjax counterpart (the script checks) and vice versa.
  assert count_params(model) == int(reference[f"{name}/params"])
  with jax.default_matmul_precision("highest"):
    got = np.asarray(_forward(model, golden.tokens(name)))
  want = reference[f"{name}/logits"]
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _quadratic(q, k, v, eps=performer.FEATURE_EPS):
  """The masked quadratic form of causal linear attention, in numpy float64."""
  q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
  a = np.tril(np.einsum("...im,...jm->...ij", q, k))
  den = a.sum(-1) + eps * q.sum(-1)
  return np.einsum("...ij,...je->...ie", a, v) / den[..., None]


@pytest.mark.parametrize("dtype, tol", [(jnp.float64, 1e-12), (jnp.float32, 2e-5)])
def test_chunked_causal_linear_attention_equals_the_quadratic_form(dtype, tol):
  rng = np.random.default_rng(0)
  t = 37
  q = np.abs(rng.standard_normal((2, 3, t, 11))) + 1e-3  # positive features, as phi gives
  k = np.abs(rng.standard_normal((2, 3, t, 11))) + 1e-3
  v = rng.standard_normal((2, 3, t, 5))
  want = _quadratic(q, k, v)
  with jax.enable_x64(dtype == jnp.float64), jax.default_matmul_precision("highest"):
    for chunk in (1, 4, 8, 37, 64):
      got = _causal_linear_attention(*(jnp.asarray(x, dtype) for x in (q, k, v)), chunk=chunk)
      assert got.dtype == dtype and got.shape == want.shape
      np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol, atol=tol)


def test_local_attention_blocks_and_rotary_match_a_dense_reference():
  """Query i sees keys (i // W - 1) W <= j <= i; rotary is relative (rotate-half form)."""
  rng = np.random.default_rng(1)
  t, w, kd = 23, 5, 8
  q, k, v = (rng.standard_normal((1, 2, t, kd)) for _ in range(3))
  got = np.asarray(_local_attention(*(jnp.asarray(x, jnp.float32) for x in (q, k, v)), window=w))
  half = kd // 2
  freq = 1.0 / 10000 ** (np.arange(0, kd, 2) / kd)

  def rot(x, p):
    ang = np.concatenate([p * freq, p * freq])
    return x * np.cos(ang) + np.concatenate([-x[half:], x[:half]]) * np.sin(ang)

  want = np.zeros_like(v)
  for h in range(2):
    for i in range(t):
      lo = max(0, (i // w - 1) * w)
      js = np.arange(lo, i + 1)
      logits = np.array([rot(q[0, h, i], i) @ rot(k[0, h, j], j) for j in js]) / np.sqrt(kd)
      p = np.exp(logits - logits.max())
      want[0, h, i] = (p / p.sum()) @ v[0, h, js]
  np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_causality_and_hidden_states():
  model = _lm("tiny", local_window=4, dropout=0.0)
  tokens = jax.random.randint(jax.random.PRNGKey(3), (2, 21), 0, VOCAB, jnp.int32)
  changed = tokens.at[:, 13].set((tokens[:, 13] + 1) % VOCAB)
  a, b = _forward(model, tokens), _forward(model, changed)
  np.testing.assert_array_equal(np.asarray(a[:, :13]), np.asarray(b[:, :13]))
  assert not np.allclose(np.asarray(a[:, 13:]), np.asarray(b[:, 13:]))
  logits, hiddens = nnx.jit(lambda m, x: m(x, return_hiddens=True))(model, tokens)
  assert len(hiddens) == 3 and all(h.shape == (2, 21, 64) for h in hiddens)
  np.testing.assert_allclose(np.asarray(logits), np.asarray(a), rtol=1e-6, atol=1e-6)


def test_random_features_are_gaussian_orthogonal():
  p = np.asarray(performer.gaussian_orthogonal_random_matrix(jax.random.PRNGKey(0), 266, 64))
  assert p.shape == (266, 64)
  directions = p / np.linalg.norm(p, axis=1, keepdims=True)
  for start in range(0, 256, 64):  # four full blocks of orthonormal directions
    block = directions[start : start + 64]
    np.testing.assert_allclose(block @ block.T, np.eye(64), atol=1e-4)
  # Row norms are chi(64) draws: mean about sqrt(63.5).
  assert abs(np.linalg.norm(p, axis=1).mean() - np.sqrt(63.5)) < 0.3


def test_features_redraw_like_the_reference_schedule():
  """Interval 2: the projections change before training forwards 2, 5, 8 (0-based); evaluation
  forwards neither count nor redraw; a redraw is a function of the key and the redraw count."""
  model = _lm("tiny", feature_redraw_interval=2, local_heads=0)
  tokens = jnp.zeros((1, 6), jnp.int32)
  train_step = partial(_forward, train=True)
  before = [np.asarray(p) for p in model.backbone.features()]
  changed_at = []
  for call in range(9):
    _forward(model, tokens)  # evaluation: no effect
    train_step(model, tokens)
    now = [np.asarray(p) for p in model.backbone.features()]
    if not np.array_equal(now[0], before[0]):
      changed_at.append(call)
      assert not np.array_equal(now[1], before[1])  # every layer, independently
    before = now
  assert changed_at == [2, 5, 8]
  assert int(model.backbone.redraws[...]) == 3 and int(model.backbone.redraw_calls[...]) == 0
  again = model.backbone.draw_features(3)
  np.testing.assert_array_equal(np.asarray(again[0]), before[0])
  fixed = _lm("tiny", feature_redraw_interval=0)
  start = np.asarray(fixed.backbone.features()[0])
  for _ in range(3):
    train_step(fixed, tokens)
  np.testing.assert_array_equal(np.asarray(fixed.backbone.features()[0]), start)


@pytest.fixture(scope="module")
def lm_dataset(tmp_path_factory):
  from conftest import SAMPLE_PGN

  from data_prep import lm_data

  out = tmp_path_factory.mktemp("perf_lm") / "ds"
  argv = ["--pgn", str(SAMPLE_PGN), "--out", str(out), "--train-size", "64"]
  argv += ["--pool-size", "8", "--dev-size", "16", "--test-size", "8", "--max-plies", "40"]
  assert lm_data.main(argv) == 0
  return out


def _lm_config(data, steps):
  import ml_collections

  from configs import lm as lm_config

  c = lm_config.get_config(f"family=slice,size=d128,notation=rap,train=all,steps={steps}")
  c.family, c.size = FAMILY, "tiny"
  c.model = ml_collections.ConfigDict({"feature_redraw_interval": 2})
  c.data.train, c.data.batch_size, c.data.max_len = str(data), 8, 128
  c.data.bucket_lengths = (128,)
  c.train.update(log_every=1, eval_every=3, checkpoint_every=3)
  return c


@pytest.mark.slow
def test_lm_trains_resumes_and_keeps_its_features(lm_dataset, tmp_path):
  """LM training steps through chessjax.train; the redraw state is checkpointed and resumed."""
  from chessjax import train, workdir

  run = tmp_path / "run"
  first = train.train_and_evaluate(_lm_config(lm_dataset, 3), run)
  assert first["steps"] == 3 and np.isfinite(first["validation"]["loss"])
  restored = workdir.restore(run, which="latest")
  backbone = nnx.merge(
    restored.fns.graphdef, restored.state["params"], restored.state["model_state"]
  ).backbone
  # Training forwards 0, 1, 2 with interval 2: one redraw before forward 2.
  assert int(backbone.redraws[...]) == 1 and int(backbone.redraw_calls[...]) == 0
  second = train.train_and_evaluate(_lm_config(lm_dataset, 6), run)
  assert second["steps"] == 6 and second["resumed_from"] == 3
  backbone = nnx.merge(
    *(lambda r: (r.fns.graphdef, r.state["params"], r.state["model_state"]))(
      workdir.restore(run, which="latest")
    )
  ).backbone
  # Forwards 3, 4, 5: counter 1, 2, then a redraw before forward 5.
  assert int(backbone.redraws[...]) == 2 and int(backbone.redraw_calls[...]) == 0
  np.testing.assert_array_equal(
    np.asarray(backbone.features()[0]), np.asarray(backbone.draw_features(2)[0])
  )
