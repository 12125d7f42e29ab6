"""The one implementation switch of every recurrence (chessjax.ops.impl)."""

import json

import jax
import pytest
from conftest import REPO

from benchmarks.bench_scans import layer_dims
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


def _entry(recurrence, backend, rows, length, width, choice):
  return {"recurrence": recurrence, "backend": backend, "rows": rows, "length": length,
          "width": width, "impl": Impl(choice)}  # fmt: skip


# A synthetic table: what the rule does with measured shapes, whatever the committed table holds.
TABLE = (
  _entry("affine_scan", "gpu", 2048, 256, 1024, "chunked"),
  _entry("affine_scan", "gpu", 128, 256, 1024, "sequential"),
  _entry("affine_scan", "gpu", 512, 256, 1024, "associative"),
  _entry("affine_scan", "gpu", 1024, 256, 512, "chunked"),  # as near as the row above: later
  _entry("delta_rule", "gpu", 2048, 256, 1024, "sequential"),
)


def test_auto_takes_the_nearest_measured_shape_within_a_factor_of_two():
  def auto(rows, length=256, width=1024, backend="gpu", recurrence="affine_scan"):
    return impl.resolve("auto", recurrence, backend, rows=rows, length=length, width=width,
                        table=TABLE)  # fmt: skip

  assert auto(2048) is Impl.CHUNKED and auto(128) is Impl.SEQUENTIAL  # measured there
  assert auto(4096) is Impl.CHUNKED and auto(1500) is Impl.CHUNKED  # nearest: 2048
  assert auto(200) is Impl.SEQUENTIAL and auto(300) is Impl.ASSOCIATIVE  # log2-nearest
  assert auto(724) is Impl.ASSOCIATIVE  # 512 and (1024, width 512) equally near: the first
  assert auto(8192) is Impl.SEQUENTIAL  # over a factor 2 from every shape: the GPU's fallback
  assert auto(2048, length=1024) is Impl.SEQUENTIAL and auto(2048, width=64) is Impl.SEQUENTIAL
  assert auto(2048, backend="cpu") is Impl.SEQUENTIAL  # no CPU row in this table
  assert auto(2048, backend="tpu") is Impl.CHUNKED  # the TPU's fallback
  assert auto(2048, recurrence="delta_rule") is Impl.SEQUENTIAL  # its own rows only
  assert auto(128, recurrence="delta_rule") is Impl.CHUNKED  # the delta rule's fallback
  # No shape (chessjax.flops), or a concrete choice: the table is not read.
  assert impl.resolve("auto", "affine_scan", "gpu", table=TABLE) is Impl.SEQUENTIAL
  assert impl.resolve("auto", "affine_scan", "gpu", rows=2048, table=TABLE) is Impl.SEQUENTIAL
  assert impl.resolve("sequential", "affine_scan", "gpu", rows=2048, length=256, width=1024,
                      table=TABLE) is Impl.SEQUENTIAL  # fmt: skip
  # Deterministic: the same answer every time, whatever the order of the questions.
  assert [auto(n) for n in (4096, 300, 724)] == [auto(n) for n in (4096, 300, 724)][::-1][::-1]


def test_a_population_counts_its_members_rows():
  """Inside a population's vmapped step a model sees one member's batch: `members(K)` counts K
  times its rows while the step is traced (nested, the counts multiply)."""

  def auto(rows):
    return impl.resolve("auto", "affine_scan", "gpu", rows=rows, length=256, width=1024,
                        table=TABLE)  # fmt: skip

  assert auto(128) is Impl.SEQUENTIAL
  with impl.members(16):
    assert auto(128) is Impl.CHUNKED  # 2048 rows
    with impl.members(2):
      assert auto(64) is Impl.CHUNKED
  assert auto(128) is Impl.SEQUENTIAL


def test_a_shape_leaves_the_fallback_only_for_a_clear_winner():
  def timings(**ratios):
    return {name: {"ratio": r[0], "worst": r[1]} for name, r in ratios.items()}

  clear = timings(sequential=(1.0, 1.0), chunked=(0.8, 0.95), associative=(0.85, 0.9))
  assert impl.choose("affine_scan", "gpu", clear) is Impl.CHUNKED
  close = timings(sequential=(1.0, 1.0), chunked=(0.95, 0.97))  # within the margin
  assert impl.choose("affine_scan", "gpu", close) is Impl.SEQUENTIAL
  noisy = timings(sequential=(1.0, 1.0), chunked=(0.7, 1.05))  # slower in one round
  assert impl.choose("affine_scan", "gpu", noisy) is Impl.SEQUENTIAL
  assert impl.choose("delta_rule", "cpu", timings(chunked=(1.0, 1.0))) is Impl.CHUNKED


def test_the_table_is_derived_from_the_record_later_runs_first():
  row = {"recurrence": "ssd", "rows": 8, "length": 64, "width": 32768}
  record = {"runs": [
    {"backend": "cpu", "rows": [{**row, "choice": "chunked"}, {**row, "rows": 32}]},
    {"backend": "cpu", "rows": [{**row, "choice": "sequential"}]},
    {"backend": "gpu", "rows": [{**row, "choice": "chunked"}]},
  ]}  # fmt: skip
  assert impl.derive(record) == [
    {**row, "backend": "cpu", "impl": "sequential"},
    {**row, "backend": "gpu", "impl": "chunked"},
  ]


def test_width_is_what_one_sequential_step_multiplies():
  assert impl.width_of("affine_scan", (16, 8)) == 1024  # SLiCE d128: d x b
  assert impl.width_of("affine_scan", (128, 1)) == 128  # the diagonal form: d
  assert impl.width_of("delta_rule", (2, 48, 96)) == 9216
  assert impl.width_of("ssd", (4, 64, 128)) == 32768
  with pytest.raises(ValueError, match="unknown recurrence"):
    impl.width_of("attention", (1,))


def test_the_committed_table_parses_and_is_its_records():
  """chessjax/ops/scan_table.json (package data) is `derive` of docs/results/scan_choice.json, and
  every entry names a recurrence, a backend and an implementation it has."""
  table = impl.load_table()
  assert table == impl.TABLE and len(table) >= 3
  record = json.loads((REPO / "docs/results/scan_choice.json").read_text())
  assert [{**e, "impl": str(e["impl"])} for e in table] == impl.derive(record)
  assert {e["backend"] for e in table} >= {"cpu", "gpu"}
  for e in table:
    assert e["impl"] in impl.RECURRENCES[e["recurrence"]]
  bad = REPO / "docs/results/scan_choice.json"  # a record, not a table: it does not parse
  with pytest.raises(KeyError):
    impl.load_table(bad)


RECURRENCE = {"slice": "affine_scan", "slice_diag": "affine_scan", "gated_deltanet": "delta_rule",
              "mamba2": "ssd", "mamba3": "ssd"}  # fmt: skip


# The shapes of the committed CPU runs and of the tests (d128 and d256, batches 2-32, games cut at
# 16-256 steps): `auto` there is what it was before the table (the fallback), so no record's or
# test's number moves.
@pytest.mark.parametrize("family", ["slice", "slice_diag", "gated_deltanet", "mamba2", "mamba3"])
def test_auto_on_the_cpu_keeps_the_choice_committed_runs_made(family):
  recurrence = RECURRENCE[family]
  for size in ("d128", "d256"):
    dims = layer_dims(recurrence, model_config(family, size))
    for rows in (2, 4, 8, 16, 32):
      for length in (16, 32, 64, 128, 192, 256):
        got = impl.resolve("auto", recurrence, "cpu", rows=rows, length=length,
                           width=impl.width_of(recurrence, dims))  # fmt: skip
        assert got is impl.fallback(recurrence, "cpu"), (size, rows, length, got)


@pytest.mark.parametrize("family", ["slice", "slice_diag", "gated_deltanet", "mamba2", "mamba3"])
def test_models_resolve_at_the_shape_they_run(family, monkeypatch):
  """Each mixer asks for its recurrence at its call's rows (the batch), length and width."""
  from chessjax.models import create_model

  seen = []
  resolve = impl.resolve

  def spy(value, recurrence, backend=None, **shape):
    seen.append((recurrence, shape))
    return resolve(value, recurrence, backend, **shape)

  monkeypatch.setattr(impl, "resolve", spy)
  model = create_model(family, "d128")
  moves = jax.numpy.zeros((3, 40), jax.numpy.int32)
  jax.eval_shape(lambda m: model(m), moves)
  width = impl.width_of(RECURRENCE[family], layer_dims(RECURRENCE[family], model.cfg))
  calls = [(r, s) for r, s in seen if s]
  assert calls and {r for r, _ in calls} == {RECURRENCE[family]}, seen
  for _, shape in calls:
    assert shape == {"rows": 3, "length": 40, "width": width}
