"""Which parameters AdamW decays (chessjax.optim.decay_mask), family by family.

The released Chess-World-Model code (`training.py`, `build_optimiser`) exempts the parameters its
libraries mark `_no_weight_decay` for `--arch gated_deltanet` only: fla's A_log and dt_bias. For
`--arch mamba` it ignores mamba_ssm's marks (A_log, dt_bias, D), and the Transformer and SLiCE
have none: every one of their parameters is decayed.
"""

import jax
import pytest
from flax import nnx

from chessjax import optim
from chessjax.models import FAMILIES, abstract_model

# family -> the mixer parameters the release does not decay (none for a family not listed).
EXEMPT = {"gated_deltanet": ("A_log", "dt_bias"), "gated_deltanet_pos": ("A_log", "dt_bias")}


def _decayed(model) -> dict[str, bool]:
  mask = optim.decay_mask(nnx.state(model, nnx.Param))
  return {jax.tree_util.keystr(p): m for p, m in jax.tree_util.tree_leaves_with_path(mask)}


@pytest.mark.parametrize("family", FAMILIES)
def test_decayed_parameters_are_the_releases(family):
  model = abstract_model(family, "d128")
  decayed = _decayed(model)
  want_exempt = {
    f"['backbone']['blocks'][{i}]['mixer']['{name}'].value"
    for i in range(model.cfg.layers)
    for name in EXEMPT.get(family, ())
  }
  assert {k for k, m in decayed.items() if not m} == want_exempt
  assert want_exempt <= decayed.keys()


@pytest.mark.parametrize("family", ["mamba2", "mamba3"])
def test_mamba_decays_a_log_dt_bias_and_d(family):
  """mamba_ssm's `_no_weight_decay` marks are not honoured by the release's Mamba runs."""
  model = abstract_model(family, "d128")
  decayed = _decayed(model)
  names = ("A_log", "dt_bias", "D") if family == "mamba2" else ("dt_bias", "D")
  for name in names:
    assert decayed[f"['backbone']['blocks'][0]['mixer']['{name}'].value"] is True
