"""chessjax: exact chess state tracking benchmarks in JAX/Flax.

Importing chessjax raises Python's cyclic garbage collector thresholds to (100,000, 50, 100)
where they are lower, before jax, flax, optax, orbax and grain are imported by its modules.
Importing those, tracing, lowering and compiling programs and restoring checkpoints allocate
millions of short-lived objects, and the default thresholds (700, 10, 10) collect every few
thousand of them. A toy training command (`chessjax.population`, SLiCE d128, 3 steps, warm
compilation cache, pinned to one core) took 4.01-4.08 s against 4.26-4.43 s with the defaults
(user CPU 3.32-3.46 s against 3.60-3.82 s), 3 rounds each, interleaved (2 AMD EPYC vCPUs,
2026-11-29). Collection still runs, less often.
"""

import gc

__version__ = "0.1.0"

GC_THRESHOLDS = (100_000, 50, 100)
if gc.get_threshold()[0] < GC_THRESHOLDS[0]:
  gc.set_threshold(*GC_THRESHOLDS)
