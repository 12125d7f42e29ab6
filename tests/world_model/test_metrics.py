"""Loss and metrics (Walker & Lyons, section 2.4) on hand-checkable predictions."""

import jax.numpy as jnp
import numpy as np
import pytest

from chessjax import labels
from chessjax.encoding import encode_game
from chessjax.world_model import metrics


def one_hot_logits(states: np.ndarray, scale: float = 10.0) -> np.ndarray:
  """Logits whose argmax is `states` everywhere."""
  out = np.zeros((*states.shape[:-1], labels.HEAD_DIM), np.float32)
  idx = labels.HEAD_OFFSETS + states.astype(np.int64)
  np.put_along_axis(out, idx, scale, axis=-1)
  return out


@pytest.fixture(scope="module")
def batch(sample_games_uci):
  games = [encode_game(g)[1] for g in sample_games_uci[:6]]
  T = max(len(s) for s in games)
  states = np.zeros((len(games), T, 75), np.uint8)
  mask = np.zeros((len(games), T), bool)
  for i, s in enumerate(games):
    states[i, : len(s)] = s
    mask[i, : len(s)] = True
  return states, mask


def test_perfect_predictions(batch):
  states, mask = batch
  m = metrics.state_metrics(one_hot_logits(states), states, mask)
  assert m["labelwise"] == m["exact_state"] == m["trajectory"] == 1.0
  assert m["steps"] == mask.sum() and m["games"] == len(states)
  assert all(v == 1.0 for v in m["groups"].values())
  assert m["first_error"]["games_with_error"] == 0 and m["nonfinite_logits"] == 0
  assert all(x == 1.0 for x in m["bins"]["exact_state"])
  # Cross-entropy of a 10-logit margin, computed by hand per group.
  expected = 0.0
  for _, _, count, classes in labels.GROUPS:
    expected += count * -np.log(np.exp(10) / (np.exp(10) + classes - 1))
  # float32 log-softmax near zero loses a few digits: 1e-3 relative is its precision here.
  assert m["loss"] == pytest.approx(expected / 75, rel=1e-3)
  assert float(metrics.loss_fn(one_hot_logits(states), states, mask)) == pytest.approx(m["loss"])


def test_single_wrong_label(batch):
  states, mask = batch
  wrong = states.copy()
  wrong[2, 25, 64] ^= 1  # Side to move wrong at step 25 of game 2.
  m = metrics.state_metrics(one_hot_logits(wrong), states, mask)
  n = mask.sum()
  assert m["exact_state"] == pytest.approx((n - 1) / n)
  assert m["labelwise"] == pytest.approx(1 - 1 / (75 * n))
  assert m["trajectory"] == pytest.approx(5 / 6)
  assert m["groups"]["side"] == pytest.approx(1 - 1 / n)
  assert m["first_error"]["games_with_error"] == 1 and m["first_error"]["median_step"] == 25
  assert m["bins"]["exact_state"][1] < 1.0 and m["bins"]["exact_state"][0] == 1.0


def test_streaming_equals_whole_batch_and_padding_is_ignored(batch):
  states, mask = batch
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(*states.shape[:2], labels.HEAD_DIM)).astype(np.float32)
  whole = metrics.state_metrics(logits, states, mask)
  acc = metrics.Accumulator()
  for lo, hi in ((0, 2), (2, 5), (5, 6)):
    T = int(mask[lo:hi].sum(1).max())  # Each chunk cut to its own length, like buckets.
    acc.add(metrics.batch_stats(jnp.asarray(logits[lo:hi, :T]), states[lo:hi, :T], mask[lo:hi, :T]))
  streamed = acc.result()
  for key in ("loss", "labelwise", "exact_state", "trajectory"):
    assert streamed[key] == pytest.approx(whole[key], rel=1e-6)
  assert streamed["bins"]["steps"] == whole["bins"]["steps"]
  # Garbage in padded positions changes nothing.
  noisy = logits.copy()
  noisy[~mask] = 1e6
  assert metrics.state_metrics(noisy, states, mask)["loss"] == pytest.approx(whole["loss"])


def test_non_finite_logits_are_counted_and_scored(batch):
  states, mask = batch
  logits = one_hot_logits(states)
  logits[0, 3, :5] = np.nan
  logits[1, 4, 100] = np.inf
  m = metrics.state_metrics(logits, states, mask)
  assert m["nonfinite_logits"] == 6
  assert 0.99 < m["labelwise"] < 1.0
  assert np.isnan(m["loss"]) or m["loss"] > 0


def test_empty_input_raises():
  with pytest.raises(ValueError, match="no valid steps"):
    metrics.state_metrics(
      np.zeros((1, 2, 1878), np.float32), np.zeros((1, 2, 75), np.uint8), np.zeros((1, 2), bool)
    )


def test_cross_entropy_and_its_hand_written_gradient_match_autodiff(batch):
  """label_cross_entropy's custom gradient equals autodiff of log_softmax + gather, float64."""
  import jax

  states, mask = batch
  rng = np.random.default_rng(0)
  with jax.enable_x64():
    logits = jnp.asarray(3.0 * rng.standard_normal((*states.shape[:-1], labels.HEAD_DIM)))
    weights = jnp.asarray(rng.random(states.shape))  # a non-uniform cotangent per label

    def reference(x):
      out = []
      for _, first, count, classes in labels.GROUPS:
        start = int(labels.HEAD_OFFSETS[first])
        group = x[..., start : start + count * classes].reshape(*x.shape[:-1], count, classes)
        target = jnp.asarray(states[..., first : first + count], jnp.int32)[..., None]
        out.append(-jnp.take_along_axis(jax.nn.log_softmax(group), target, -1)[..., 0])
      return jnp.concatenate(out, -1)

    def fast(x):
      return metrics.label_cross_entropy(x, jnp.asarray(states))

    # Jitted: the same computations as one program each, not hundreds of eager dispatches.
    np.testing.assert_allclose(
      jax.jit(fast)(logits), jax.jit(reference)(logits), rtol=1e-12, atol=1e-12
    )
    g_fast = jax.jit(jax.grad(lambda x: jnp.sum(fast(x) * weights)))(logits)
    g_ref = jax.jit(jax.grad(lambda x: jnp.sum(reference(x) * weights)))(logits)
    assert g_fast.dtype == jnp.float64
    np.testing.assert_allclose(g_fast, g_ref, rtol=1e-10, atol=1e-12)
    m = jnp.asarray(mask)
    g_loss = jax.jit(jax.grad(metrics.loss_fn))(logits, jnp.asarray(states), m)
    assert np.all(np.asarray(g_loss)[~mask] == 0.0) and np.abs(g_loss[mask]).max() > 0


def test_game_scores_sum_each_game_once_in_any_batch_order():
  """`GameScores` on three games in two batches (a pad row, games out of order): game 0 has one
  wrong label at step 1, a capture step; games 1 and 2 are exact."""
  from chessjax.world_model import strata

  sizes, never = strata.GROUP_SIZES, np.iinfo(np.int32).max
  scored = np.array([3, 2, 4])
  flags = [np.zeros((5, len(strata.NAMES)), bool) for _ in range(3)]  # Whole games: 5 steps.
  flags[0][1, strata.NAMES.index("capture")] = True
  hits = np.broadcast_to(sizes, (3, 4, len(sizes))).astype(np.uint8).copy()
  hits[0, 1, 0] -= 1
  pred = np.arange(3 * labels.NUM_LABELS).reshape(3, -1) % 13

  def batch(games):
    first = {0: 1, 1: never, 2: never}
    ce = {0: 0.5 * labels.NUM_LABELS * 3, 1: 1.0 * labels.NUM_LABELS * 2, 2: 0.0}
    pick = lambda x, pad: np.stack([x[g] if g >= 0 else pad for g in games])  # noqa: E731
    stats = {"first_error": np.array([first[g] if g >= 0 else -1 for g in games], np.int32)}
    extras = {
      "index": np.array(games, np.int32),
      "pred_first": pick(pred, pred[0] * 0),
      "group_hits": pick(hits, hits[0] * 0),
      "game_ce": np.array([ce[g] if g >= 0 else 0.0 for g in games], np.float32),
    }
    return stats, extras

  scores = metrics.GameScores(scored, flags)
  scores.add(*batch([2, 0, -1]))
  assert scores.unseen == 1
  scores.add(*batch([1]))
  assert scores.unseen == 0
  r = scores.result()
  assert r["first_error_steps"] == [1, -1, -1] and r["exact_steps"] == [2, 2, 4]
  assert r["game_loss"] == pytest.approx([0.5, 1.0, 0.0]) and r["max_game_loss"] == 1.0
  assert r["per_ply"] == {
    "steps": [3, 3, 2, 1],
    "exact": [3, 2, 2, 1],
    "correct": [3 * 75, 3 * 75 - 1, 2 * 75, 75],
  }
  assert list(r["failures"]) == [0] and r["failures"][0][0] == 1
  np.testing.assert_array_equal(r["failures"][0][1], pred[0])
  capture = r["strata"]["capture"]
  assert capture["steps"] == 1 and capture["exact_state"] == 0.0
  assert capture["groups"]["pieces"] == pytest.approx(63 / 64)
