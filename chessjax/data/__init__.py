"""Prepared game datasets: ArrayRecord shards, their grain source, and batching pipelines."""

from chessjax.data.source import GameSource, read_games, read_manifest, shard_paths

__all__ = ["GameSource", "read_games", "read_manifest", "shard_paths"]
