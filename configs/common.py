"""What every config file shares: the `key=value,...` argument of `--config=FILE:ARG`."""


def parse_arg(arg: str | None, defaults: dict, types: dict | None = None) -> dict:
  """`defaults` updated by the `key=value` pairs of `arg` (comma-separated). Unknown keys and
  items without `=` raise; `types[key]` converts a value (default: kept as a string)."""
  out = dict(defaults)
  types = types or {}
  for item in filter(None, (arg or "").split(",")):
    if "=" not in item:
      raise ValueError(f"config arg {item!r} is not key=value (arg was {arg!r})")
    key, value = item.split("=", 1)
    if key not in out:
      raise ValueError(f"unknown config arg {key!r}; expected one of {sorted(out)}")
    out[key] = types.get(key, str)(value)
  return out


def boolean(value: str) -> bool:
  return value.lower() in ("1", "true", "yes")
