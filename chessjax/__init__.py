"""chessjax: exact chess state tracking benchmarks in JAX/Flax.

Importing chessjax raises Python's cyclic garbage collector thresholds to (100,000, 50, 100)
where they are lower, before jax, flax, optax, orbax and grain are imported by its modules.
Importing those, tracing, lowering and compiling programs and restoring checkpoints allocate
millions of short-lived objects, and the default thresholds (700, 10, 10) collect every few
thousand of them. A toy training command (`chessjax.population`, SLiCE d128, 3 steps, warm
compilation cache, pinned to one core) took 4.01-4.08 s against 4.26-4.43 s with the defaults
(user CPU 3.32-3.46 s against 3.60-3.82 s), 3 rounds each, interleaved (2 AMD EPYC vCPUs,
2026-11-29). Collection still runs, less often.

At exit, after every `atexit` handler registered later (jax's, orbax's, tensorboardX's) has run,
the objects still alive are frozen (`gc.freeze`): the interpreter's last collections then leave
the module graph of jax and flax to the operating system instead of traversing and freeing it
object by object, as they would for any process that ends. Nothing of ours waits on that: files
are written and closed (`chessjax.files`), checkpoints and logs closed, before a command returns.
A process that imported `chessjax.world_model.evaluate` took 1.15 s to start and end against
1.66 s without (one core, 2 AMD EPYC vCPUs, 2026-11-29).
"""

import atexit
import gc

__version__ = "0.1.0"

GC_THRESHOLDS = (100_000, 50, 100)
if gc.get_threshold()[0] < GC_THRESHOLDS[0]:
  gc.set_threshold(*GC_THRESHOLDS)
atexit.register(gc.freeze)  # Runs after the handlers registered later (last in, first out).
