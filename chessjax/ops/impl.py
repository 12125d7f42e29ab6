"""How a recurrence runs: one switch with the same meaning for every mixer (the model of
recurrentgemma's `ScanType`, resolved per backend in one place).

* `SEQUENTIAL`: the readable reference, a `lax.scan` over time steps.
* `CHUNKED`: the parallel form within chunks of `chunk_size` steps, the state carried between
  chunks (SLiCE's chunked associative scan, Gated DeltaNet's WY/UT form, Mamba's SSD).
* `ASSOCIATIVE`: one associative scan over the whole sequence (the affine scan only).
* `AUTO` (every family's default): the fastest of these for the recurrence on the backend that
  traces the model, measured (docs/performance.md): the affine scan of SLiCE runs `SEQUENTIAL` on
  CPU (3-4x faster than `CHUNKED` at d128 there) and on GPU (1.4-1.7x faster than every chunk size
  and the associative scan at the d512 layer's shapes on an H200, forward + backward), `CHUNKED`
  on TPU (not measured there); the delta rule and SSD run `CHUNKED` everywhere (9.4x and 17x
  faster than `SEQUENTIAL` on the H200). Every choice gives the same numbers up to rounding
  (tests/ops/).

A recurrence names itself by one of `RECURRENCES`, the one list of what each supports: `parse`
checks a config value against it, `resolve` turns `AUTO` into a concrete choice, and `check` is
how each op in `chessjax.ops` validates the concrete `impl` it is called with.
"""

import enum

import jax


class Impl(enum.StrEnum):
  AUTO = "auto"
  SEQUENTIAL = "sequential"
  CHUNKED = "chunked"
  ASSOCIATIVE = "associative"


# recurrence -> the concrete implementations it has.
RECURRENCES = {
  "affine_scan": (Impl.SEQUENTIAL, Impl.CHUNKED, Impl.ASSOCIATIVE),
  "delta_rule": (Impl.SEQUENTIAL, Impl.CHUNKED),
  "ssd": (Impl.SEQUENTIAL, Impl.CHUNKED),
}
# (recurrence, backend) -> what AUTO means there; CHUNKED where not listed.
_AUTO = {("affine_scan", "cpu"): Impl.SEQUENTIAL, ("affine_scan", "gpu"): Impl.SEQUENTIAL}
# The name AUTO had before this switch existed, still read from older configs.
_ALIASES = {"fast": Impl.AUTO}


def parse(value, recurrence: str) -> Impl:
  """`value` (an `Impl` or its string) as an `Impl` that `recurrence` supports; else ValueError."""
  valid = (Impl.AUTO, *RECURRENCES[recurrence])
  impl = _ALIASES.get(value, value)
  if impl not in valid:
    raise ValueError(
      f"mixer_impl must be one of {[str(v) for v in valid]} for {recurrence}, got {value!r}"
    )
  return Impl(impl)


def check(value, recurrence: str) -> Impl:
  """`value` as a concrete implementation `recurrence` supports (not `AUTO`); else ValueError."""
  if value not in RECURRENCES[recurrence]:
    valid = [str(v) for v in RECURRENCES[recurrence]]
    raise ValueError(f"unknown impl {value!r} for {recurrence}; expected one of {valid}")
  return Impl(value)


def resolve(value, recurrence: str, backend: str | None = None) -> Impl:
  """The concrete implementation `value` stands for on `backend` (default: JAX's default)."""
  impl = parse(value, recurrence)
  if impl is not Impl.AUTO:
    return impl
  return _AUTO.get((recurrence, backend or jax.default_backend()), Impl.CHUNKED)
