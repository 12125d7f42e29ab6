"""Data parallelism: the 1-D device mesh, replicated state and global batches built from each
process's rows.

With several processes (`chessjax.processes`) a global array spans devices this process cannot
address: it is made from process-local data (`jax.make_array_from_process_local_data`,
`jax.make_array_from_callback`), never by `jax.device_put` of an array committed to a local device.
"""

from functools import cache, partial

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def make_mesh(devices=None) -> jax.sharding.Mesh:
  """`devices` (default: all devices of all processes) on one `data` axis."""
  devices = jax.devices() if devices is None else list(devices)
  # Auto axis: shardings of batch-parallel code propagate through the model without per-op
  # annotations (Explicit mode would require them inside every model, e.g. at the embedding).
  return jax.make_mesh(
    (len(devices),), ("data",), axis_types=(jax.sharding.AxisType.Auto,), devices=devices
  )


def replicated(mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def put_replicated(tree, mesh):
  """`tree`'s arrays (equal in every process, e.g. the initial train state) replicated over every
  device of `mesh`. One process: `jax.device_put`. Several: each process supplies its devices'
  copies from its own host values (bit for bit the same arrays)."""
  target = replicated(mesh)
  if mesh.is_multi_process:
    return jax.tree.map(partial(_replicated_copy, target=target), tree)
  return jax.device_put(tree, target)


def _replicated_copy(x, target: NamedSharding) -> jax.Array:
  if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):  # Typed keys: via their raw bits.
    wrap = partial(jax.random.wrap_key_data, impl=jax.random.key_impl(x))
    return jax.jit(wrap, out_shardings=target)(_replicated_copy(jax.random.key_data(x), target))
  host = np.asarray(x)
  return jax.make_array_from_callback(host.shape, target, lambda index: host[index])


def batch_sharding(mesh) -> NamedSharding:
  """Rows split over the data axis."""
  return NamedSharding(mesh, P("data"))


def global_batch(batch: dict, keys, sharding: NamedSharding) -> dict:
  """The process-local rows of a batch (`keys` of it) as global arrays sharded over the rows. In
  one process the rows are the whole batch: on one device `_place` puts them there, on several
  one `jax.device_put` of every array (a third of the host time of an array at a time). The
  training loop's prefetch thread spends this per call."""
  if sharding.mesh.is_multi_process:
    return {k: jax.make_array_from_process_local_data(sharding, batch[k]) for k in keys}
  arrays = [batch[k] for k in keys]
  if sharding.mesh.size == 1:
    return dict(zip(keys, _place(sharding)(arrays), strict=True))
  return dict(zip(keys, jax.device_put(arrays, sharding), strict=True))


@cache
def _place(sharding: NamedSharding):
  """Host arrays onto `sharding`'s one device: jit's C++ dispatch moves its numpy arguments there
  (as `in_shardings` says) in about a seventh of `jax.device_put`'s Python time (9 against 73 us
  for a world-model batch's three arrays on a 2-core CPU; with several devices it is the slower,
  so `global_batch` uses it on one). Nothing is donated: an array already on the device stays
  valid (the program copies it)."""
  return jax.jit(lambda arrays: arrays, in_shardings=sharding, out_shardings=sharding)
