"""Optimizer of the benchmark: AdamW with global-norm clipping and the paper's schedule
(Walker & Lyons, Chess-World-Model, section 3.3 and appendix B.2).

Schedule: linear warmup by factor `(step + 1) / warmup`, then either constant (stage-1 sweep) or
cosine decay to a floor, `floor + (1 - floor) * 0.5 * (1 + cos(pi p))` with `p` the fraction of
post-warmup steps done. Weight decay applies to every parameter except those a family marks as
`NoWeightDecay` (Gated DeltaNet's A_log and dt_bias).
"""

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from chessjax.models.layers import NoWeightDecay


def lr_schedule(lr: float, warmup_steps: int, total_steps: int, schedule: str, floor: float):
  """The learning rate as a function of the (0-based) step."""
  if schedule not in ("cosine", "constant"):
    raise ValueError(f"schedule must be 'cosine' or 'constant', got {schedule!r}")
  warmup = max(int(warmup_steps), 1)
  decay_steps = max(int(total_steps) - warmup, 1)

  def fn(step):
    step = jnp.asarray(step, jnp.float32)
    warm = jnp.minimum((step + 1.0) / warmup, 1.0)
    if schedule == "constant":
      return lr * warm
    p = jnp.clip((step - warmup) / decay_steps, 0.0, 1.0)
    cosine = floor + (1.0 - floor) * 0.5 * (1.0 + jnp.cos(jnp.pi * p))
    return lr * jnp.where(step < warmup, warm, cosine)

  return fn


def decay_mask(params: nnx.State):
  """True where weight decay applies, shaped like `params` (an `nnx.State` of `nnx.Param`s)."""
  return jax.tree.map(
    lambda var: jax.tree.map(lambda _: not isinstance(var, NoWeightDecay), var),
    params,
    is_leaf=lambda x: isinstance(x, nnx.Variable),
  )


def make_optimizer(optim, total_steps: int, params: nnx.State) -> optax.GradientTransformation:
  """AdamW + clipping from the `optim` block of a config (see configs/cwm.py)."""
  schedule = lr_schedule(optim.lr, optim.warmup_steps, total_steps, optim.schedule, optim.floor)
  return optax.chain(
    optax.clip_by_global_norm(optim.clip_norm),
    optax.adamw(
      schedule,
      b1=optim.b1,
      b2=optim.b2,
      eps=optim.eps,
      weight_decay=optim.weight_decay,
      mask=decay_mask(params),
    ),
  )
