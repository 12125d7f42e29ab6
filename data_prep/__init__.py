"""Offline data preparation: PGN -> shards, random-uniform games, coverage statistics."""
