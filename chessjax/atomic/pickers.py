"""Move-pickers that answer the atomic-evaluation positions, so the harness runs offline end to end.

    python -m chessjax.atomic.pickers --positions P.jsonl --picker random --out A.jsonl
    python -m chessjax.atomic.pickers --positions P.jsonl --picker engine --rules chess \
        --depth 12 --conditions atomic chess --out A.jsonl
    python -m chessjax.atomic.pickers --positions P.jsonl --picker openai --model gpt-5.4 \
        --effort high --concurrency 8 --out A.jsonl          # OPENAI_API_KEY from the environment
    python -m chessjax.atomic.pickers --positions P.jsonl --picker anthropic \
        --model claude-opus-4-6 --effort none --out A.jsonl  # ANTHROPIC_API_KEY
    python -m chessjax.atomic.pickers --positions P.jsonl --picker openai --model M \
        --base-url http://localhost:8000/v1 --out A.jsonl    # vLLM, llama.cpp, Ollama
    python -m chessjax.atomic.pickers --positions P.jsonl --picker lm --workdir RUN --out A.jsonl

`--rules` (also spelled `--variant`) and `--conditions` take `chess` (or its old name `standard`)
and `atomic` (`--conditions` also `atomic_no_rules`). A picker sees a `Query` (FEN, prompt
condition, the rendered prompt, the legal UCI moves under the condition's variant and the move
history from the source game's start) and returns an answer row for `chessjax.atomic.report`:

  RandomPicker   a uniformly random legal move, reproducible per (seed, FEN, condition)
  EnginePicker   an engine's best move at a fixed depth under ITS OWN rules, whatever the
                 condition: Stockfish answering atomic prompts is the pattern reliance of
                 Co & Konuganti (2026, section 4.5, O4: the standard-chess prior dominates) in its
                 purest form (standard-best moves played under atomic rules)
  openai, anthropic  the paper's language models through their APIs (`chessjax.atomic.llm`):
                 resumable (rerun the same command after a crash; answered questions are
                 skipped), `--concurrency` requests in flight, retries with backoff
  LMPicker       a chessjax language model's most likely legal move (`chessjax.atomic.lm_picker`)

Answers of external models need no picker: write them as answer JSONL (see
`chessjax.atomic.scoring`).
"""

import argparse
import hashlib
import json
import random
import sys
from collections.abc import Sequence
from typing import Protocol

from chessjax.atomic import prompts
from chessjax.atomic.engines import EngineMissingError, EnginePool, cache_arg, variant_pools
from chessjax.atomic.prompts import Query, answer_row
from chessjax.files import read_jsonl, write_text


class MovePicker(Protocol):
  name: str

  def pick(self, query: Query) -> dict:
    """{"move": uci, ...optional "reasoning_effort", "tokens", "reply"}."""


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


def answer_positions(
  picker: MovePicker, positions: Sequence[dict], conditions: Sequence[str]
) -> list[dict]:
  """One answer per position and condition, in file order."""
  return [answer_row(q, picker.name, picker.pick(q)) for q in queries(positions, conditions)]


def queries(positions: Sequence[dict], conditions: Sequence[str]) -> list[Query]:
  """One query per position and condition, in file order, with the position's move history."""
  out = []
  for p in positions:
    history = tuple(p.get("moves") or ())
    for c in conditions:
      out.append(Query(p["fen"], c, history, p.get("game_variant", "chess")))
  return out


def parse_args(argv=None) -> argparse.Namespace:
  p = argparse.ArgumentParser(description="Answer atomic-evaluation positions with a move-picker.")
  p.add_argument("--positions", required=True)
  p.add_argument("--out", required=True, help="answer JSONL to write (LLM pickers: append to)")
  p.add_argument(
    "--picker", choices=("random", "engine", "openai", "anthropic", "lm"), required=True
  )
  p.add_argument("--conditions", nargs="+", default=["atomic", "chess"])
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
  llm = p.add_argument_group("language models through an API (openai, anthropic)")
  llm.add_argument("--model", help="model name, e.g. gpt-5.4 or claude-opus-4-6")
  llm.add_argument("--effort", choices=("none", "high"), help="reasoning effort (default: unset)")
  llm.add_argument("--base-url", help="an OpenAI-compatible server, e.g. http://localhost:8000/v1")
  llm.add_argument("--concurrency", type=int, default=4, help="requests in flight")
  llm.add_argument("--max-attempts", type=int, default=6, help="tries per question")
  llm.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
  llm.add_argument("--backoff-base", type=float, default=1.0, help="first retry delay, seconds")
  llm.add_argument("--backoff-max", type=float, default=60.0, help="longest retry delay, seconds")
  llm.add_argument("--max-tokens", type=int, default=None, help="output token cap per request")
  llm.add_argument(
    "--no-temperature", action="store_true", help="never send temperature 0 (if an API refuses)"
  )
  lm = p.add_argument_group("a chessjax language model (lm)")
  lm.add_argument("--workdir", help="the language model's training workdir")
  lm.add_argument(
    "--checkpoint", default=None, help="best or latest (default: best if the workdir has it)"
  )
  args = p.parse_args(argv)
  try:
    args.conditions = [prompts.condition_name(c) for c in args.conditions]
  except ValueError as e:
    p.error(str(e))
  if args.picker in ("openai", "anthropic") and not args.model:
    p.error(f"--picker {args.picker} needs --model")
  if args.picker == "lm" and not args.workdir:
    p.error("--picker lm needs --workdir")
  if args.checkpoint is not None:
    from chessjax.workdir import CHECKPOINTS  # Here: it loads JAX, which the API pickers skip.

    if args.checkpoint not in CHECKPOINTS:
      p.error(f"--checkpoint must be one of {', '.join(CHECKPOINTS)}, got {args.checkpoint!r}")
  return args


def run_llm(args, positions: Sequence[dict]) -> int:
  """Answers through an API into `args.out`, resumably (`chessjax.atomic.llm`)."""
  from chessjax.atomic import llm
  from chessjax.atomic.answer_log import AnswerLog

  kwargs = {"base_url": args.base_url, "timeout": args.timeout}
  kwargs["temperature"] = not args.no_temperature
  if args.max_tokens is not None:
    kwargs["max_tokens"] = args.max_tokens
  try:
    provider = llm.PROVIDERS[args.picker](args.model, args.effort, **kwargs)
  except ImportError:
    print("the API pickers need the SDKs: pip install 'chessjax[llm]'", file=sys.stderr)
    return 1
  except llm.MissingKeyError as e:
    print(e, file=sys.stderr)
    return 1
  backoff = llm.Backoff(base_s=args.backoff_base, max_s=args.backoff_max)
  with AnswerLog(args.out) as log:
    if log.repaired_bytes:
      print(f"cut a partial last line ({log.repaired_bytes} bytes) of {args.out}", file=sys.stderr)
    for problem in log.problems:
      print(f"unreadable answer line: {problem}", file=sys.stderr)
    result = llm.answer_all(
      provider,
      queries(positions, args.conditions),
      log,
      concurrency=args.concurrency,
      max_attempts=args.max_attempts,
      backoff=backoff,
    )
    total = log.count
  print(
    f"{result.answered} new answers, {result.skipped} answered before, "
    f"{len(result.unanswered)} unanswered; {total} rows in {args.out}"
  )
  if result.stopped:
    print(f"stopped: {result.stopped}", file=sys.stderr)
  if result.unanswered:
    print("rerun the same command to ask the unanswered questions again", file=sys.stderr)
    return 1
  return 0


def main(argv=None) -> int:
  args = parse_args(argv)
  positions, problems = read_jsonl(args.positions, ("fen",))
  for problem in problems:
    print(f"skipped: {problem}", file=sys.stderr)
  if args.picker in ("openai", "anthropic"):
    return run_llm(args, positions)
  if args.picker == "random":
    rows = answer_positions(RandomPicker(args.seed), positions, args.conditions)
  elif args.picker == "lm":
    from chessjax.atomic.lm_picker import LMPicker

    if any("moves" not in p for p in positions):
      print(
        f"{args.positions} has positions without a move history (`moves`): "
        "regenerate them with data_prep.atomic_positions",
        file=sys.stderr,
      )
      return 1
    picker = LMPicker(args.workdir, which=args.checkpoint, name=args.model)
    rows = answer_positions(picker, positions, args.conditions)
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
