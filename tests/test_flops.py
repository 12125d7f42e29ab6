"""chessjax.flops against the model it counts, component by component, and against XLA's count of
the whole train step; MFU's arithmetic.

Per component (one layer, d128, T = 64, batch 2, loop-free (chunked) recurrences): the
projections, MLP and head counts equal 2 x in x out of the Linears the model builds; the mixer
count equals, within 3%, the matrix products (`dot_general`) in the lowered forward of one
layer's mixer, its Linears' products taken out. A mixer term dropped, doubled or formed for the
wrong number of heads fails there whatever its share of the step. The diagonal SLiCE's recurrence
has no product (it is elementwise), so its mixer must lower to none beyond its Linears.

The whole step, the one training runs (`chessjax.step.build`: the non-finite guard included):
XLA's cost analysis counts every op (norms, activations, softmax, decays, the AdamW update, the
guard's checks and selects), the analytic count only the matrix products, so XLA's number is
higher. At batch 8 x 64 steps the band asserted is [1.0, 1.2] (measured 1.06-1.13); at batch 2
the per-parameter work of the optimizer and the guard alone takes the step to 1.16-1.41. The
count is that of the lowered program (the HLO XLA compiles): compiling each step would cost
25-45 s per family on this CPU, and the compiled step's count was 1.00-1.02 times the lowered
one's for every family (docs/performance.md).
"""

import math
import re

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

from benchmarks.harness import built_step, device_batches, random_batch, world_model_config
from chessjax import flops
from chessjax.models import FAMILIES, abstract_model, model_config

B, T = 2, 64
STEP_B = 8  # The whole step's batch: enough tokens that the per-parameter work stays small.


def chunked(family: str) -> dict:
  """Overrides giving the family's loop-free form at T steps (one chunk: no scan over chunks)."""
  fields = model_config(family, "d128").__dataclass_fields__
  out = {"mixer_impl": "chunked"} if "mixer_impl" in fields else {}
  if family.startswith("slice"):
    out["chunk_size"] = T
  return out


@pytest.mark.parametrize("family", FAMILIES)
def test_matches_xla_cost_analysis(family):
  config = world_model_config(
    family, "d128", batch=STEP_B, steps=T, dtype="float32", **chunked(family)
  )
  built = built_step(config)
  (batch,) = device_batches(built, [random_batch(STEP_B, T, 0)])
  xla = built.fns.train_step.lower(built.state, batch).cost_analysis()["flops"]
  analytic = flops.per_token(built.model.cfg, T) * STEP_B * T
  assert 1.0 <= xla / analytic <= 1.2, (family, xla, analytic)


# `stablehlo.dot_general %a, %b, ..., contracting_dims = [..] x [..] ... : (tensor<AxBxf32>, ..)
# -> tensor<..>`: the lhs contracting dimensions and the lhs and result shapes.
DOT = re.compile(
  r"stablehlo\.dot_general .*contracting_dims = \[([\d, ]*)\] x .*: "
  r"\(tensor<((?:\d+x)*)\w+>, tensor<(?:\d+x)*\w+>\) -> tensor<((?:\d+x)*)\w+>"
)


def dot_flops(hlo: str) -> float:
  """2 x (result size) x (contracted size) summed over the matrix products of a lowered program."""
  total = 0.0
  for line in hlo.splitlines():
    if "stablehlo.dot_general" not in line:
      continue
    match = DOT.search(line)
    assert match, line  # A product this parser cannot read would go uncounted.
    contracted = [int(i) for i in match.group(1).split(",") if i.strip()]
    lhs = [int(n) for n in match.group(2).split("x") if n]
    out = [int(n) for n in match.group(3).split("x") if n]
    total += 2.0 * math.prod(out) * math.prod(lhs[i] for i in contracted)
  return total


def linear_flops(module) -> float:
  """Forward FLOPs per token of the Linears inside `module`, from their shapes."""
  return sum(
    2.0 * m.in_features * m.out_features
    for _, m in nnx.iter_modules(module)
    if isinstance(m, nnx.Linear)
  )


@pytest.mark.parametrize("family", FAMILIES)
def test_each_component_matches_the_model(family):
  overrides = chunked(family)
  cfg = model_config(family, "d128", **overrides)
  count = flops.forward(cfg, T)
  model = abstract_model(family, "d128", **overrides)
  blocks = model.backbone.blocks
  assert len(blocks) == cfg.layers
  for name, part in (("projections", "mixer"), ("mlp", "mlp")):
    assert count[name] == sum(linear_flops(getattr(b, part)) for b in blocks), name
  assert count["head"] == linear_flops(model.head)

  mixer = blocks[0].mixer
  graphdef, state = nnx.split(mixer)
  x = jax.ShapeDtypeStruct((B, T, cfg.d), jnp.float32)
  lowered = jax.jit(lambda s, x: nnx.merge(graphdef, s)(x)).lower(state, x)
  products = dot_flops(lowered.as_text()) / (B * T) - linear_flops(mixer)
  if getattr(cfg, "block_size", None) == 1:  # Diagonal SLiCE: an elementwise recurrence.
    assert products == 0 and count["mixer"] < 0.02 * count["projections"]
  else:
    assert products == pytest.approx(count["mixer"] / cfg.layers, rel=0.03), family


def test_components_and_training_multiplier():
  cfg = model_config("transformer", "d128")
  d = cfg.d
  f = flops.forward(cfg, 64)
  assert set(f) == set(flops.COMPONENTS)
  assert f["projections"] == 8 * d * d  # qkv (3 d^2) and out (d^2), 2 FLOPs each
  assert f["mlp"] == 24 * d * d  # d -> 8d, 4d -> d
  assert f["mixer"] == 4 * 64 * d  # q k^T and weights v against all 64 keys
  assert flops.per_token(cfg, 64) == 3 * sum(f.values())
  assert flops.per_token(cfg, 64, train=False) == sum(f.values())


def test_attended_keys_blocks():
  assert flops.attended_keys(64) == 64  # one block: the full square
  # Two blocks of 128: 128 x 128 + 128 x 256 over 256 queries.
  assert flops.attended_keys(256) == (128 * 128 + 128 * 256) / 256


def test_sequential_and_chunked_counts_differ_where_the_work_does():
  seq = model_config("slice", "d128", mixer_impl="sequential")
  chk = model_config("slice", "d128", mixer_impl="chunked")
  assert flops.forward(chk, 256)["mixer"] > 4 * flops.forward(seq, 256)["mixer"]
  assert flops.forward(chk, 256)["mlp"] == flops.forward(seq, 256)["mlp"]


def test_mfu():
  assert flops.mfu(1000.0, 2e6, 4e9) == pytest.approx(0.5)
  assert flops.mfu(1000.0, 2e6, None) != flops.mfu(1000.0, 2e6, None)  # nan without a peak
