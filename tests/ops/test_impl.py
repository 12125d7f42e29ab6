"""The one implementation switch of every recurrence (chessjax.ops.impl)."""

import jax
import pytest

from chessjax.models import model_config
from chessjax.ops import impl
from chessjax.ops.impl import Impl


def test_auto_resolves_per_recurrence_and_backend():
  assert impl.resolve("auto", "affine_scan", "cpu") is Impl.SEQUENTIAL
  assert impl.resolve("auto", "affine_scan", "gpu") is Impl.SEQUENTIAL
  assert impl.resolve("auto", "affine_scan", "tpu") is Impl.CHUNKED
  for recurrence in ("delta_rule", "ssd"):
    for backend in ("cpu", "gpu", "tpu"):
      assert impl.resolve(Impl.AUTO, recurrence, backend) is Impl.CHUNKED
  # Without a backend: JAX's default one.
  want = Impl.CHUNKED if jax.default_backend() == "tpu" else Impl.SEQUENTIAL
  assert impl.resolve("auto", "affine_scan") is want


def test_concrete_choices_pass_through_and_unsupported_ones_raise():
  assert impl.resolve("associative", "affine_scan", "cpu") is Impl.ASSOCIATIVE
  assert impl.resolve("sequential", "ssd", "tpu") is Impl.SEQUENTIAL
  assert impl.parse("fast", "delta_rule") is Impl.AUTO  # the name of AUTO in older configs
  with pytest.raises(ValueError, match="for ssd"):
    impl.parse("associative", "ssd")
  with pytest.raises(ValueError, match="mixer_impl"):
    impl.parse("magic", "affine_scan")


def test_ops_check_against_the_one_list():
  """The ops validate their `impl` with `check`, against `RECURRENCES`; `AUTO` is for configs."""
  for recurrence, supported in impl.RECURRENCES.items():
    for value in supported:
      assert impl.check(str(value), recurrence) is value
    with pytest.raises(ValueError, match="unknown impl 'auto'"):
      impl.check("auto", recurrence)
  with pytest.raises(ValueError, match="for ssd"):
    impl.check("associative", "ssd")


@pytest.mark.parametrize("family", ["slice", "gated_deltanet", "mamba3"])
def test_every_family_defaults_to_auto_and_checks_its_value(family):
  assert model_config(family, "d128").mixer_impl == "auto"
  assert model_config(family, "d128", mixer_impl="sequential").mixer_impl == "sequential"
  with pytest.raises(ValueError, match="mixer_impl"):
    model_config(family, "d128", mixer_impl="magic")
