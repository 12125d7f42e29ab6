"""Data parallelism: the 1-D device mesh and global batches built from each process's rows."""

import jax
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


def batch_sharding(mesh) -> NamedSharding:
  """Rows split over the data axis."""
  return NamedSharding(mesh, P("data"))


def global_batch(batch: dict, keys, sharding: NamedSharding) -> dict:
  """The process-local rows of a batch (`keys` of it) as global arrays sharded over the rows."""
  return {k: jax.make_array_from_process_local_data(sharding, batch[k]) for k in keys}
