"""`chessjax.sharding.global_batch`: one device takes the jit placement, several `jax.device_put`;
both give the same global arrays (values, dtypes, shardings), and the host arrays stay as they
were."""

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from chessjax import sharding

KEYS = ("moves", "states", "mask")


def host_batch(rows: int, length: int, seed: int) -> dict:
  rng = np.random.default_rng(seed)
  return {
    "moves": rng.integers(0, 1968, (rows, length), dtype=np.int32),
    "states": rng.integers(0, 256, (rows, length, 75), dtype=np.uint8),
    "mask": rng.random((rows, length)) < 0.7,
    "index": np.arange(rows, dtype=np.int32),  # Not among the keys: left out.
  }


@pytest.mark.parametrize("devices", [1, 4])
@pytest.mark.parametrize("stacked", [False, True])
def test_global_batch_equals_device_put(devices, stacked):
  mesh = sharding.make_mesh(jax.devices()[:devices])
  spec = P(None, "data") if stacked else P("data")  # A k-step call's input is stacked first.
  target = NamedSharding(mesh, spec)
  for seed, length in enumerate((16, 32, 16)):  # A second shape, then the first again.
    host = host_batch(8, length, seed)
    if stacked:
      host = {k: np.stack([x, x[::-1]]) for k, x in host.items()}
    kept = {k: x.copy() for k, x in host.items()}
    out = sharding.global_batch(host, KEYS, target)
    assert list(out) == list(KEYS)
    for k in KEYS:
      want = jax.device_put(host[k], target)
      assert out[k].dtype == want.dtype and out[k].shape == want.shape
      assert out[k].sharding == target
      np.testing.assert_array_equal(np.asarray(out[k]), host[k])
      np.testing.assert_array_equal(host[k], kept[k])


def test_global_batch_leaves_device_arrays_valid():
  """An input already on the device is not consumed (nothing donated)."""
  mesh = sharding.make_mesh(jax.devices()[:1])
  target = NamedSharding(mesh, P("data"))
  on_device = {k: jax.device_put(x, target) for k, x in host_batch(4, 8, 0).items()}
  out = sharding.global_batch(on_device, KEYS, target)
  for k in KEYS:
    np.testing.assert_array_equal(np.asarray(on_device[k]), np.asarray(out[k]))
