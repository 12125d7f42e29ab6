"""The paper's grid is written once (`chessjax.world_model.grid`), and which family trains like
which, or ablates which, is said by the family's own module: a new ablation is one module."""

import sys

import pytest

from chessjax.models import FAMILIES, LM_FAMILIES, family_module, sizes
from chessjax.world_model import grid, report
from configs import cwm
from launch import cpu_runs, cwm_mini, sweep

ABLATION = "lab.slice_narrow"
# A new ablation of SLiCE, written as a family module of its own and nothing else: it names the
# Table 7 family it trains like and lists itself as that family's less expressive variant.
ABLATION_MODULE = '''"""SLiCE with diagonal blocks (the slice_diag backbone): an ablation."""
from chessjax.models import slice as _slice

SIZES, build_backbone = _slice.SIZES, _slice.build_backbone
RECIPE = "slice"
ABLATIONS = (__name__,)


def base_config(family, size):
  return _slice.base_config("slice_diag", size)
'''


def test_the_paper_grid():
  assert grid.MAIN == ("transformer", "slice", "mamba3", "gated_deltanet")
  assert grid.SIZES == ("d128", "d256", "d384", "d512") == tuple(sizes.SIZES)
  assert grid.STEPS_4_EPOCHS == 310_944 == 4 * grid.STEPS_1_EPOCH
  assert set(grid.FINAL) == set(grid.MAIN)
  assert all(set(row) == set(grid.SIZES) for row in grid.FINAL.values())
  # Mamba-3 MIMO trains like Mamba-3 but is no ablation of it (not in Tables 9-10).
  assert grid.ABLATIONS == {
    "slice_diag": "slice",
    "gated_deltanet_pos": "gated_deltanet",
    "mamba2": "mamba3",
  }
  assert grid.PAIRS == (
    ("slice", "slice_diag"),
    ("mamba3", "mamba2"),
    ("gated_deltanet", "gated_deltanet_pos"),
  )
  recipes = {f: grid.recipe_family(f) for f in FAMILIES + LM_FAMILIES}
  assert recipes == {
    "transformer": "transformer",
    "slice": "slice",
    "slice_diag": "slice",
    "gated_deltanet": "gated_deltanet",
    "gated_deltanet_pos": "gated_deltanet",
    "mamba2": "mamba3",
    "mamba3": "mamba3",
    "mamba3_mimo": "mamba3",
    **{f: grid.DEFAULT_RECIPE_FAMILY for f in LM_FAMILIES},
  }


def test_grid_families_are_marked_by_their_module():
  assert FAMILIES == (
    "transformer", "slice", "slice_diag", "gated_deltanet", "gated_deltanet_pos", "mamba2",
    "mamba3", "mamba3_mimo",
  )  # fmt: skip
  assert LM_FAMILIES == ("gpt2", "gpt2_w50", "lstm", "reformer", "performer")
  for family in FAMILIES:
    assert family_module(family).GRID is True and family_module(family).SIZES is sizes.SIZES
  for family in LM_FAMILIES:
    assert not hasattr(family_module(family), "GRID")


def test_readers_take_the_grid_from_one_place():
  assert sweep.FAMILIES == grid.MAIN
  assert report.MAIN == grid.MAIN and report.SIZES == grid.SIZES
  assert report.VARIANTS == ("slice_diag", "mamba2", "gated_deltanet_pos")
  assert cwm_mini.ABLATIONS == grid.ABLATIONS
  # The bench's table order (the README's): the registry's order of the main families.
  assert cwm_mini.MAIN == ("transformer", "slice", "gated_deltanet", "mamba3")
  assert cpu_runs.warmup("mamba2", 3110) == 100  # Mamba-3's d128 warmup, 10,000, scaled.


@pytest.fixture
def ablation_module(tmp_path, monkeypatch):
  (tmp_path / "lab").mkdir()
  (tmp_path / "lab" / "__init__.py").write_text("")
  (tmp_path / "lab" / "slice_narrow.py").write_text(ABLATION_MODULE)
  monkeypatch.syspath_prepend(str(tmp_path))
  yield ABLATION
  for name in (ABLATION, "lab", "examples.diagonal_recurrence"):
    sys.modules.pop(name, None)


def test_a_new_ablation_is_one_module(ablation_module):
  assert grid.main_family_of(ablation_module) == "slice"
  assert grid.ablations((*FAMILIES, ablation_module))[ablation_module] == "slice"
  for size in grid.SIZES:
    assert grid.recipe(ablation_module, size) == grid.FINAL["slice"][size]
  c = cwm.get_config(f"family={ablation_module},size=d256")
  assert (c.optim.lr, c.optim.warmup_steps, c.optim.b2) == grid.FINAL["slice"]["d256"][:3]
  # A family module that names no ablation is none, and trains like its RECIPE or the baseline.
  assert grid.main_family_of("examples.diagonal_recurrence") is None
  assert grid.main_family_of("mamba3_mimo") is None and grid.main_family_of("gpt2") is None
