"""What every config file shares: the `data`, `train`, `optim` and `init` blocks the loop reads,
started from the defaults of `chessjax.spec` (each config file overrides only what differs), the
`key=value,...` argument of `--config=FILE:ARG`, and its `model.KEY=VALUE` items, overrides of the
family's own model config (`--config.model.KEY` on the command line can only change keys the
config file already set)."""

import dataclasses

import ml_collections

from chessjax import spec

MODEL_PREFIX = "model."


def data_block(**overrides) -> ml_collections.ConfigDict:
  """`config.data`: every key of `chessjax.spec.DataSpec` at its default, then `overrides`."""
  return _block(spec.DataSpec, overrides)


def train_block(**overrides) -> ml_collections.ConfigDict:
  """`config.train`: every key of `chessjax.spec.LoopSpec` at its default, then `overrides`."""
  return _block(spec.LoopSpec, overrides)


def optim_block(**values) -> ml_collections.ConfigDict:
  """`config.optim`: every key of `chessjax.spec.OptimSpec` (the learning rate, warmup, beta2,
  weight decay and floor given, the others at their defaults unless given)."""
  return _block(spec.OptimSpec, values)


def init_block(**overrides) -> ml_collections.ConfigDict:
  """`config.init`: every key of `chessjax.spec.InitSpec` at its default (a run starts from the
  model's own initialisation), then `overrides`."""
  return _block(spec.InitSpec, overrides)


def _block(cls, overrides: dict) -> ml_collections.ConfigDict:
  values = spec.defaults(cls)
  unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(cls)})
  if unknown:
    raise KeyError(f"{cls.__name__} has no {unknown}")
  return ml_collections.ConfigDict({**values, **overrides})


def parse_arg(arg: str | None, defaults: dict, types: dict | None = None) -> dict:
  """`defaults` updated by the `key=value` pairs of `arg` (comma-separated). Unknown keys and
  items without `=` raise; `types[key]` converts a value (default: kept as a string)."""
  out = dict(defaults)
  types = types or {}
  for item in filter(None, (arg or "").split(",")):
    if "=" not in item:
      raise ValueError(f"config arg {item!r} is not key=value (arg was {arg!r})")
    key, value = item.split("=", 1)
    if key.startswith(MODEL_PREFIX) and MODEL_PREFIX in defaults:
      out[MODEL_PREFIX] = {**out[MODEL_PREFIX], key[len(MODEL_PREFIX) :]: value}
      continue
    if key not in out:
      raise ValueError(f"unknown config arg {key!r}; expected one of {sorted(out)}")
    out[key] = types.get(key, str)(value)
  return out


def boolean(value: str) -> bool:
  return value.lower() in ("1", "true", "yes")


def model_overrides(family: str, size: str, items: dict[str, str]) -> dict:
  """The `model.KEY=VALUE` items of an arg, each value converted to the type of that key in the
  family's frozen config at `size` (bool, int, float or str; an int where the default is None).
  Unknown keys and values the model rejects (e.g. Mamba's heads x head_dim = expand x d) raise."""
  from chessjax.models import model_config

  base = model_config(family, size)
  known = {f.name for f in dataclasses.fields(base)}
  out = {}
  for key, text in items.items():
    if key not in known:
      raise ValueError(f"unknown {family} model key {key!r}; valid keys are {sorted(known)}")
    default = getattr(base, key)
    if isinstance(default, bool):
      convert = boolean
    elif default is None or isinstance(default, int):
      convert = int
    elif isinstance(default, float | str):
      convert = type(default)
    else:
      kind = type(default).__name__
      raise ValueError(f"{family} model key {key!r} ({kind}) cannot be set in the config arg")
    try:
      out[key] = convert(text)
    except ValueError:
      raise ValueError(f"model.{key}={text!r}: expected {convert.__name__}") from None
  model_config(family, size, **out)  # Fails now, not at the first training step.
  return out
