"""The world-model config (configs/cwm.py) per family: precision and recipe rows."""

import pytest

from chessjax.models import FAMILIES, SIZES
from configs import cwm


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_only_mamba3_trains_in_bfloat16(family):
  # Walker & Lyons, appendix B.2: "Mamba-3 is trained with bfloat16 mixed precision, while the
  # other model families are trained without mixed-precision autocasting" (the released code
  # enables autocast only for the mamba-3 variant, so the Mamba-2 ablation trains in float32).
  expected = "bfloat16" if family in ("mamba3", "mamba3_mimo") else "float32"
  for size in SIZES:
    assert cwm.get_config(f"family={family},size={size}").model.dtype == expected
  assert cwm.get_config(f"family={family},smoke=true").model.dtype == "float32"
