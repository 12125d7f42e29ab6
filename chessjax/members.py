"""The members of a population (`chessjax.population`): what a `--member NAME:KEY=VALUE,...`
says, each member's config, and which keys members may differ in.

* `MEMBER_KEYS`: the seed (initialisation, dropout and data order), the optimizer's numbers
  (learning rate, warmup, betas, epsilon, weight decay, the schedule's floor, clipping) and the
  run a member starts from (`init.*`, `chessjax.init_from`). They leave the compiled program
  alone, so the members share one.
* Any other key changes the shapes or the program (family, size, model fields, batch size,
  lengths, task, schedule kind, micro-batches, remat) or the loop the members share (data,
  cadence): `member_config` and `check_members` refuse it, with a message naming it.

Errors: `MemberError` for members the command refuses before anything starts, `ResumeError` for
members whose workdirs cannot resume together; `chessjax.population` reports each as one line.

A library module (`launch.sweep` groups runs by `MEMBER_KEYS` without importing a command).
"""

import ml_collections


class MemberError(ValueError):
  """A `--member` the population refuses: no name, not KEY=VALUE, a key a member may not set or a
  value of the wrong type, names given twice, or members that cannot share one program."""


class ResumeError(ValueError):
  """Members whose workdirs resume from different steps with no checkpoint in common
  (`chessjax.train`): they cannot go on as one population."""


# Keys each member may set (`--member NAME:KEY=VALUE,...`): they leave the program alone.
MEMBER_KEYS = (
  "seed",
  "optim.lr",
  "optim.warmup_steps",
  "optim.warmup_fraction",
  "optim.b1",
  "optim.b2",
  "optim.eps",
  "optim.weight_decay",
  "optim.floor",
  "optim.clip_norm",
  "init.workdir",
  "init.checkpoint",
  "init.parts",
)
# Why any other key cannot differ between members.
_SHAPES = "changes the model, the batch's shapes or the compiled step"
_WHY = {
  "task": _SHAPES,
  "family": _SHAPES,
  "size": _SHAPES,
  "model": _SHAPES,
  "lm": _SHAPES,
  "data.batch_size": _SHAPES,
  "data.max_len": _SHAPES,
  "data.bucket_lengths": _SHAPES,
  "optim.schedule": _SHAPES,
  "optim.decay_all": _SHAPES,
  "train.micro_batches": _SHAPES,
  "train.remat": _SHAPES,
}
_SHARED = "is the population's own (its data, length and cadence are shared by every member)"


def parse_member(text: str) -> tuple[str, dict[str, str]]:
  """`NAME:KEY=VALUE[,KEY=VALUE...]` (or just `NAME`) -> (name, {key: value text})."""
  name, _, items = text.partition(":")
  if not name or "/" in name or name.startswith("."):
    raise MemberError(f"--member {text!r}: a member needs a name (a directory name) before ':'")
  overrides = {}
  for item in filter(None, items.split(",")):
    key, eq, value = item.partition("=")
    if not eq:
      raise MemberError(f"--member {text!r}: {item!r} is not KEY=VALUE")
    overrides[key.strip()] = value.strip()
  return name, overrides


def member_config(base: ml_collections.ConfigDict, name: str, overrides: dict[str, str]):
  """`base` with a member's overrides (each converted to the type the key has in `base`);
  refuses keys a member may not set (`MEMBER_KEYS`), naming them."""
  config = base.copy_and_resolve_references()
  for key, text in overrides.items():
    if key not in MEMBER_KEYS:
      raise MemberError(f"member {name}: {key} {_reason(key)}; a member may set {MEMBER_KEYS}")
    *path, leaf = key.split(".")
    block = config
    for part in path:
      block = block[part]
    kind = type(block[leaf])
    try:
      block[leaf] = kind(float(text)) if kind is int else kind(text)
    except ValueError:
      raise MemberError(f"member {name}: {key}={text!r} is not a {kind.__name__}") from None
  return config


def _reason(key: str) -> str:
  for prefix, why in _WHY.items():
    if key == prefix or key.startswith(prefix + "."):
      return why
  return _SHARED


def _flat(tree, prefix="") -> dict:
  out = {}
  for key, value in tree.items():
    if isinstance(value, dict):
      out.update(_flat(value, f"{prefix}{key}."))
    else:
      out[f"{prefix}{key}"] = value
  return out


def check_members(configs: list[tuple[str, ml_collections.ConfigDict]]) -> None:
  """Refuses a population whose members differ in a key other than `MEMBER_KEYS` (configs
  built in code may have differed anywhere), naming the key and the members."""
  names = [name for name, _ in configs]
  if not configs:
    raise MemberError("a population needs at least one --member")
  duplicates = sorted({n for n in names if names.count(n) > 1})
  if duplicates:
    raise MemberError(f"member names must differ: {duplicates} given twice")
  first_name, first = configs[0][0], _flat(configs[0][1].to_dict())
  for name, config in configs[1:]:
    flat = _flat(config.to_dict())
    for key in sorted(set(first) | set(flat)):
      if key not in MEMBER_KEYS and first.get(key) != flat.get(key):
        raise MemberError(
          f"members {first_name} and {name} differ in {key} ({first.get(key)!r} against "
          f"{flat.get(key)!r}), which {_reason(key)}: they cannot share one program"
        )
