"""chessjax: exact chess state tracking benchmarks in JAX/Flax."""

__version__ = "0.1.0"
