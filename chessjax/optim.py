"""Optimizer of the benchmark: AdamW with global-norm clipping and the paper's schedule
(Walker & Lyons, Chess-World-Model, section 3.3 and appendix B.2).

Schedule: linear warmup by factor `(step + 1) / warmup` (none if `warmup` is 0), then either
constant (stage-1 sweep) or cosine decay to a floor, `floor + (1 - floor) * 0.5 * (1 + cos(pi p))`
with `p` the fraction of post-warmup steps done: the released code's LambdaLR, step for step
(tests/test_step_parity.py); or linear decay to zero, `1 - p`, the schedule Toshniwal et al. train
their language models with (Hugging Face's `get_linear_schedule_with_warmup`). Weight decay applies
to every parameter except those a family marks as `NoWeightDecay`: Gated DeltaNet's A_log and
dt_bias only, the released code's optimizer groups (Mamba's A_log, dt_bias and D are decayed there:
`chessjax.models.mamba`).
"""

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from chessjax.models.layers import NoWeightDecay

SCHEDULES = ("cosine", "constant", "linear")


def lr_schedule(lr, warmup_steps, total_steps, schedule: str, floor):
  """The learning rate as a function of the (0-based) step. The numbers may be Python numbers or
  arrays (a population's members each have their own, `chessjax.population`): the same float32
  arithmetic either way."""
  if schedule not in SCHEDULES:
    raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
  if isinstance(warmup_steps, int | float) and warmup_steps < 0:
    raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
  warmup = warmup_steps
  decay_steps = jnp.maximum(total_steps - warmup, 1)

  def fn(step):
    step = jnp.asarray(step, jnp.float32)
    # No warmup (0): the factor is 1 from step 0, so the cosine starts at step 0, as the released
    # LambdaLR does.
    warm = jnp.minimum((step + 1.0) / jnp.maximum(warmup, 1), 1.0)
    if schedule == "constant":
      return lr * warm
    p = jnp.clip((step - warmup) / decay_steps, 0.0, 1.0)
    if schedule == "linear":
      return lr * jnp.where(step < warmup, warm, 1.0 - p)
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


def make_optimizer(optim, lr_at, params: nnx.State) -> optax.GradientTransformation:
  """AdamW + global-norm clipping with the schedule `lr_at` (`TrainSpec.lr_at`) and the numbers
  of `optim` (a `chessjax.spec.OptimSpec`; in a population, with arrays for the numbers)."""
  return optax.chain(
    optax.clip_by_global_norm(optim.clip_norm),
    optax.adamw(
      lr_at,
      b1=optim.b1,
      b2=optim.b2,
      eps=optim.eps,
      weight_decay=optim.weight_decay,
      # `decay_all` (Toshniwal et al.'s AdamW) decays every parameter, exemptions included.
      mask=None if optim.decay_all else decay_mask(params),
    ),
  )
