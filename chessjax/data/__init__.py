"""Prepared game datasets: ArrayRecord shards, their grain source, and batching pipelines.

`read_games`, `GameSource`, `read_manifest` and `shard_paths` are imported lazily so that the
data-preparation tools, which only write shards, do not pay for importing grain.
"""

import importlib

__all__ = ["GameSource", "read_games", "read_manifest", "shard_paths"]


def __getattr__(name):
  if name in __all__:
    return getattr(importlib.import_module("chessjax.data.source"), name)
  raise AttributeError(f"module 'chessjax.data' has no attribute {name!r}")
