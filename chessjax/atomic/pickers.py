"""Move-pickers that answer the atomic-evaluation positions, so the harness runs offline end to end.

    python -m chessjax.atomic.pickers --positions P.jsonl --picker random --out A.jsonl
    python -m chessjax.atomic.pickers --positions P.jsonl --picker engine --variant chess \
        --depth 12 --conditions atomic standard --out A.jsonl

`--rules` (also spelled `--variant`) takes `chess` (or its old name `standard`) or `atomic`.
A picker sees a `Query` (FEN, prompt condition, the rendered prompt and the legal UCI moves under
the condition's variant) and returns an answer row for `chessjax.atomic.report`:

  RandomPicker   a uniformly random legal move, reproducible per (seed, FEN, condition)
  EnginePicker   an engine's best move at a fixed depth under ITS OWN rules, whatever the
                 condition: Stockfish answering atomic prompts is the pattern reliance of
                 Co & Konuganti (2026, section 4.5, O4: the standard-chess prior dominates) in its
                 purest form (standard-best moves played under atomic rules)
  LLMPicker      any language model behind the `LLMClient` interface (prompt in, text out); the
                 reply's last UCI-looking token is the move. No client ships here: wrap your
                 provider's SDK in a class with `complete` and pass it in.

Answers of external models need no picker: write them as answer JSONL (see
`chessjax.atomic.scoring`).
"""

import argparse
import hashlib
import json
import random
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from chessjax.atomic import prompts
from chessjax.atomic.engines import EngineMissingError, EnginePool, cache_arg, variant_pools
from chessjax.files import read_jsonl, write_text

_UCI_TOKEN = re.compile(r"\b([a-h][1-8][a-h][1-8][qrbn]?)\b")


@dataclass(frozen=True)
class Query:
  """One question: a position under a prompt condition."""

  fen: str
  condition: str

  @property
  def variant(self) -> str:
    return prompts.CONDITION_VARIANT[self.condition]

  @property
  def prompt(self) -> str:
    return prompts.render(self.condition, self.fen)

  @property
  def legal_moves(self) -> list[str]:
    return prompts.legal_moves(self.fen, self.variant)


class MovePicker(Protocol):
  name: str

  def pick(self, query: Query) -> dict:
    """{"move": uci, ...optional "reasoning_effort", "tokens", "reply"}."""


def answer_row(picker: MovePicker, query: Query) -> dict:
  """The answer JSON object `chessjax.atomic.report` reads."""
  out = picker.pick(query)
  prompt = "no_rules" if query.condition == "atomic_no_rules" else "rules"
  return {"fen": query.fen, "variant": query.variant, "prompt": prompt, "model": picker.name, **out}


class RandomPicker:
  """Uniformly random legal move; the choice depends only on (seed, FEN, condition)."""

  def __init__(self, seed: int = 0):
    self.seed, self.name = seed, f"random-{seed}"

  def pick(self, query: Query) -> dict:
    key = f"{self.seed}|{query.fen}|{query.condition}".encode()
    rng = random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "little"))
    return {"move": rng.choice(query.legal_moves)}


class EnginePicker:
  """The best move of an engine at a fixed depth under `variant`'s rules (`chess` or `atomic`)."""

  def __init__(self, pool: EnginePool, variant: str, depth: int):
    if variant not in prompts.VARIANTS:
      raise ValueError(f"variant must be one of {prompts.VARIANTS}, got {variant!r}")
    self.pool, self.variant, self.depth = pool, variant, depth
    self.name = f"{pool.info.name} d{depth} ({variant} rules)"

  def pick(self, query: Query) -> dict:
    try:
      analysis = self.pool.analyse(query.fen, variant=self.variant, depth=self.depth)
    except ValueError as e:  # The position is not valid under the engine's rules.
      return {"move": "", "reply": f"engine refused the position: {e}"}
    return {"move": analysis.best.move if analysis.lines else ""}


@dataclass(frozen=True)
class LLMReply:
  text: str
  output_tokens: int | None = None


class LLMClient(Protocol):
  def complete(self, prompt: str, *, legal_moves: Sequence[str]) -> LLMReply:
    """The model's reply to one prompt (legal_moves lets a client constrain a tool schema)."""


def parse_move(text: str) -> str:
  """The last UCI-looking token of a reply (lower-cased), or the stripped reply if there is none."""
  found = _UCI_TOKEN.findall(text.lower())
  return found[-1] if found else text.strip()


class LLMPicker:
  """A language model answering the paper's prompts through an `LLMClient`."""

  def __init__(self, client: LLMClient, model: str, reasoning_effort: str = ""):
    self.client, self.name, self.reasoning_effort = client, model, reasoning_effort

  def pick(self, query: Query) -> dict:
    reply = self.client.complete(query.prompt, legal_moves=query.legal_moves)
    return {
      "move": parse_move(reply.text),
      "reasoning_effort": self.reasoning_effort,
      "tokens": reply.output_tokens,
      "reply": reply.text,
    }


def answer_positions(
  picker: MovePicker, positions: Sequence[dict], conditions: Sequence[str]
) -> list[dict]:
  """One answer per position and condition, in file order."""
  return [answer_row(picker, Query(p["fen"], c)) for p in positions for c in conditions]


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description="Answer atomic-evaluation positions with a move-picker.")
  p.add_argument("--positions", required=True)
  p.add_argument("--out", required=True, help="answer JSONL to write")
  p.add_argument("--picker", choices=("random", "engine"), required=True)
  p.add_argument("--conditions", nargs="+", default=["atomic", "standard"])
  p.add_argument("--seed", type=int, default=0, help="random picker seed")
  p.add_argument(
    "--rules",
    "--variant",
    dest="variant",
    choices=("chess", "standard", "atomic"),
    default="chess",
    help="the engine picker's rules ('standard' is the old name of 'chess')",
  )
  p.add_argument("--depth", type=int, default=12, help="engine picker depth")
  p.add_argument("--cache", default=None, help="engine cache path, or 'none'")
  args = p.parse_args(argv)
  for c in args.conditions:
    if c not in prompts.CONDITIONS:
      p.error(f"condition must be one of {prompts.CONDITIONS}, got {c!r}")
  positions, problems = read_jsonl(args.positions, ("fen",))
  for problem in problems:
    print(f"skipped: {problem}", file=sys.stderr)
  if args.picker == "random":
    rows = answer_positions(RandomPicker(args.seed), positions, args.conditions)
  else:
    variant = prompts.variant_of(args.variant)
    try:
      with variant_pools([variant], cache_path=cache_arg(args.cache)) as pools:
        picker = EnginePicker(pools[variant], variant, args.depth)
        rows = answer_positions(picker, positions, args.conditions)
    except EngineMissingError as e:
      print(e, file=sys.stderr)
      return 1
  write_text(args.out, "".join(json.dumps(r) + "\n" for r in rows))
  print(f"wrote {len(rows)} answers to {args.out} ({len(problems)} bad position lines skipped)")
  return 0


if __name__ == "__main__":
  sys.exit(main())
