"""Language models through their providers' APIs, as Co & Konuganti (2026) ran them (section 3,
appendix B): the paper's prompt (`chessjax.atomic.prompts`), one sample per position, temperature
0 where the API takes it, and a `submit_move` tool whose `move` argument is a JSON-schema enum of
the position's legal UCI moves under the condition's rules.

Two wire formats, each on its provider's official SDK (`pip install 'chessjax[llm]'`):

  OpenAIChat       OpenAI Chat Completions (`openai`); `base_url` points it at any
                   OpenAI-compatible server (vLLM, llama.cpp, Ollama). Effort: `reasoning_effort`
                   "none" or "high"; temperature 0 is sent with effort "none" (and to a
                   `base_url` server whatever the effort), not with "high" (OpenAI's reasoning
                   models refuse it). Tool choice "required". Visible reasoning: the message's
                   `reasoning_content` or `reasoning` field, which OpenAI-compatible servers
                   fill (OpenAI's own API returns none on Chat Completions).
  AnthropicMessages  Anthropic Messages (`anthropic`). Effort "none": thinking disabled, the tool
                   forced (`tool_choice` {"type": "tool"}), temperature 0; "high": adaptive
                   thinking with `output_config.effort` "high" and summarised thinking text,
                   tool choice "auto" (the API forbids forcing a tool while thinking) and no
                   temperature (thinking requires the default). The thinking blocks' text is the
                   visible reasoning.

API keys come only from the environment (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`), read by this
module into the SDK client and nowhere else; every text this module writes or prints passes
through `redact`, which removes them. SDK retries are off: `call_with_retries` retries 429 (after
`retry-after` / `retry-after-ms` when the server sends one, and never sooner than the backoff),
408, 409, 5xx, timeouts and connection errors with exponential backoff and jitter, at most
`max_attempts` tries. `answer_all` keeps `concurrency` requests in flight and appends each answer
to an `AnswerLog` as it arrives, skipping questions answered by an earlier run.

An answer row (read by `chessjax.atomic.report`): `fen`, `variant`, `prompt`, `model` (as asked),
`model_id` (as the API reports it), `reasoning_effort`, `move`, `failure` (None, or
`no_tool_call`, `malformed_arguments`, `move_not_in_list`: the report scores these as failures,
the paper's treatment of an answer without a legal move), `reply` (the visible text),
`reasoning` (the visible reasoning / thinking text, for the paper's trace analysis, section
4.5), `latency_s` (the answered request's wall time), `input_tokens`, `output_tokens` (reasoning
included, as both APIs bill it), `reasoning_tokens` (as the API reports them, else None),
`attempts`, `stop_reason`, `provider`.
"""

import json
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

from chessjax.atomic.answer_log import AnswerLog, answer_key
from chessjax.atomic.prompts import Query, answer_row

TOOL_NAME = "submit_move"
EFFORTS = ("none", "high")
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
FAILURES = ("no_tool_call", "malformed_arguments", "move_not_in_list")
RETRY_STATUS = frozenset({408, 409, 429})
FATAL_STATUS = frozenset({401, 403, 404})  # a wrong key or model: no later request can succeed
_TOOL_DESCRIPTION = "Submit your chosen move in UCI notation."


class MissingKeyError(RuntimeError):
  pass


class FatalAPIError(RuntimeError):
  pass


def redact(text) -> str:
  """`text` with every API key of the environment replaced by `[redacted]`."""
  text = "" if text is None else str(text)
  for name in KEY_ENV.values():
    key = os.environ.get(name)
    if key and len(key) >= 4:
      text = text.replace(key, "[redacted]")
  return text


def move_schema(legal_moves: Sequence[str]) -> dict:
  """The JSON schema of `submit_move`'s arguments: `move`, one of the legal UCI moves."""
  return {
    "type": "object",
    "properties": {"move": {"type": "string", "enum": list(legal_moves)}},
    "required": ["move"],
    "additionalProperties": False,
  }


def read_move(arguments, legal_moves: Sequence[str]) -> tuple[str, str | None]:
  """(move, failure) of a tool call's arguments, a JSON string or an object."""
  if isinstance(arguments, str):
    try:
      arguments = json.loads(arguments)
    except json.JSONDecodeError:
      return "", "malformed_arguments"
  if not isinstance(arguments, dict) or not isinstance(arguments.get("move"), str):
    return "", "malformed_arguments"
  move = arguments["move"]
  return move, None if move in legal_moves else "move_not_in_list"


@dataclass
class Reply:
  """One API response, parsed."""

  move: str
  failure: str | None
  text: str
  reasoning: str
  input_tokens: int | None
  output_tokens: int | None
  reasoning_tokens: int | None
  model_id: str
  stop_reason: str | None
  latency_s: float = 0.0


# ------------------------------------------------------------------------------------------------
# Providers


def _key(provider: str, base_url: str | None) -> str:
  key = os.environ.get(KEY_ENV[provider])
  if key:
    return key
  if base_url is not None:
    return "unused"  # a local OpenAI-compatible server usually takes any key
  raise MissingKeyError(f"set {KEY_ENV[provider]} in the environment (keys are read only there)")


def _status(exc) -> int | None:
  status = getattr(exc, "status_code", None)
  return status if isinstance(status, int) else None


def retry_after_s(exc) -> float | None:
  """The delay a rate-limited response asks for (`retry-after-ms`, `retry-after` in seconds or
  as an HTTP date), or None."""
  response = getattr(exc, "response", None)
  headers = getattr(response, "headers", None)
  if headers is None:
    return None
  for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
    value = headers.get(name)
    if value is None:
      continue
    try:
      return max(0.0, float(value) * scale)
    except ValueError:
      pass
    try:
      return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
      pass
  return None


class _Provider:
  provider = ""

  def retryable(self, exc) -> bool:
    status = _status(exc)
    if status is not None:
      return status in RETRY_STATUS or status >= 500
    return isinstance(exc, self._connection_errors)

  def fatal(self, exc) -> bool:
    return _status(exc) in FATAL_STATUS


class OpenAIChat(_Provider):
  """Chat Completions with the `submit_move` tool (module docstring)."""

  provider = "openai"

  def __init__(
    self,
    model: str,
    effort: str | None,
    *,
    base_url: str | None = None,
    timeout: float = 600.0,
    max_tokens: int | None = None,
    temperature: bool = True,
  ):
    import openai

    if effort is not None and effort not in EFFORTS:
      raise ValueError(f"effort must be one of {EFFORTS}, got {effort!r}")
    self.model, self.effort, self.timeout, self.max_tokens = model, effort, timeout, max_tokens
    self.temperature = temperature and (effort in (None, "none") or base_url is not None)
    self.client = openai.OpenAI(
      api_key=_key("openai", base_url), base_url=base_url, max_retries=0, timeout=timeout
    )
    self._connection_errors = (openai.APIConnectionError,)

  def params(self, query: Query) -> dict:
    legal = query.legal_moves
    params = {
      "model": self.model,
      "messages": [{"role": "user", "content": query.prompt}],
      "tools": [
        {
          "type": "function",
          "function": {
            "name": TOOL_NAME,
            "description": _TOOL_DESCRIPTION,
            "parameters": move_schema(legal),
            "strict": True,
          },
        }
      ],
      "tool_choice": "required",
      "n": 1,
    }
    if self.effort is not None:
      params["reasoning_effort"] = self.effort
    if self.temperature:
      params["temperature"] = 0
    if self.max_tokens is not None:
      params["max_completion_tokens"] = self.max_tokens
    return params

  def call(self, query: Query) -> Reply:
    legal = query.legal_moves
    start = time.perf_counter()
    response = self.client.chat.completions.create(**self.params(query), timeout=self.timeout)
    latency = time.perf_counter() - start
    choice = response.choices[0] if response.choices else None
    message = choice.message if choice is not None else None
    calls = [
      c
      for c in (getattr(message, "tool_calls", None) or [])
      if getattr(getattr(c, "function", None), "name", None) == TOOL_NAME
    ]
    move, failure = ("", "no_tool_call")
    if calls:
      move, failure = read_move(calls[0].function.arguments, legal)
    extra = (getattr(message, "model_extra", None) or {}) if message is not None else {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning") or ""
    text = (message.content or "") if message is not None else ""
    if calls and failure is not None:
      text = (text + "\n" if text else "") + f"{TOOL_NAME}({calls[0].function.arguments})"
    usage = response.usage
    details = getattr(usage, "completion_tokens_details", None)
    return Reply(
      move=move,
      failure=failure,
      text=text,
      reasoning=reasoning if isinstance(reasoning, str) else json.dumps(reasoning),
      input_tokens=getattr(usage, "prompt_tokens", None),
      output_tokens=getattr(usage, "completion_tokens", None),
      reasoning_tokens=getattr(details, "reasoning_tokens", None),
      model_id=response.model or self.model,
      stop_reason=getattr(choice, "finish_reason", None),
      latency_s=latency,
    )


class AnthropicMessages(_Provider):
  """Messages with the `submit_move` tool (module docstring)."""

  provider = "anthropic"

  def __init__(
    self,
    model: str,
    effort: str | None,
    *,
    base_url: str | None = None,
    timeout: float = 600.0,
    max_tokens: int = 32000,
    temperature: bool = True,
  ):
    import anthropic

    if effort is not None and effort not in EFFORTS:
      raise ValueError(f"effort must be one of {EFFORTS}, got {effort!r}")
    self.model, self.effort, self.timeout, self.max_tokens = model, effort, timeout, max_tokens
    self.thinking = effort == "high"
    self.temperature = temperature and not self.thinking
    self.client = anthropic.Anthropic(
      api_key=_key("anthropic", None), base_url=base_url, max_retries=0, timeout=timeout
    )
    self._connection_errors = (anthropic.APIConnectionError,)

  def params(self, query: Query) -> dict:
    params = {
      "model": self.model,
      "max_tokens": self.max_tokens,
      "messages": [{"role": "user", "content": query.prompt}],
      "tools": [
        {
          "name": TOOL_NAME,
          "description": _TOOL_DESCRIPTION,
          "input_schema": move_schema(query.legal_moves),
          "strict": True,
        }
      ],
    }
    if self.thinking:
      params["thinking"] = {"type": "adaptive", "display": "summarized"}
      params["output_config"] = {"effort": "high"}
      params["tool_choice"] = {"type": "auto"}
    else:
      if self.effort == "none":
        params["thinking"] = {"type": "disabled"}
      params["tool_choice"] = {"type": "tool", "name": TOOL_NAME}
    if self.temperature:
      params["extra_body"] = {"temperature": 0}  # the SDK no longer names it; the API takes it
    return params

  def call(self, query: Query) -> Reply:
    legal = query.legal_moves
    start = time.perf_counter()
    response = self.client.messages.create(**self.params(query), timeout=self.timeout)
    latency = time.perf_counter() - start
    blocks = list(response.content or [])
    texts = [b.text for b in blocks if getattr(b, "type", "") == "text"]
    thinking = [b.thinking for b in blocks if getattr(b, "type", "") == "thinking"]
    calls = [b for b in blocks if getattr(b, "type", "") == "tool_use"]
    calls = [b for b in calls if getattr(b, "name", "") == TOOL_NAME]
    move, failure = ("", "no_tool_call") if not calls else read_move(calls[0].input, legal)
    text = "\n".join(texts)
    if calls and failure is not None:
      text = (text + "\n" if text else "") + f"{TOOL_NAME}({json.dumps(calls[0].input)})"
    usage = response.usage
    details = getattr(usage, "output_tokens_details", None)
    return Reply(
      move=move,
      failure=failure,
      text=text,
      reasoning="\n".join(thinking),
      input_tokens=getattr(usage, "input_tokens", None),
      output_tokens=getattr(usage, "output_tokens", None),
      reasoning_tokens=getattr(details, "thinking_tokens", None),
      model_id=response.model or self.model,
      stop_reason=response.stop_reason,
      latency_s=latency,
    )


PROVIDERS = {"openai": OpenAIChat, "anthropic": AnthropicMessages}


# ------------------------------------------------------------------------------------------------
# Retries


@dataclass
class Backoff:
  """Delay before retry n (1-based): min(max_s, base_s * 2**(n-1)), jittered into [d/2, d], and
  never shorter than the server's `retry-after`."""

  base_s: float = 1.0
  max_s: float = 60.0
  seed: int | None = None
  sleep: Callable[[float], None] = time.sleep
  _rng: random.Random = field(init=False, repr=False)
  _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)

  def __post_init__(self):
    self._rng = random.Random(self.seed)

  def delay(self, retry: int, retry_after: float | None = None) -> float:
    d = min(self.max_s, self.base_s * 2 ** (retry - 1))
    with self._lock:
      d = d / 2 + self._rng.uniform(0, d / 2)
    return max(d, retry_after or 0.0)


@dataclass
class Outcome:
  reply: Reply | None
  attempts: int
  error: str = ""
  fatal: bool = False


def call_with_retries(provider, query: Query, *, max_attempts: int, backoff: Backoff) -> Outcome:
  """The provider's reply to `query`, retrying retryable errors (module docstring)."""
  error = ""
  for attempt in range(1, max_attempts + 1):
    try:
      return Outcome(provider.call(query), attempt)
    except Exception as exc:  # noqa: BLE001 - classified below; anything else is re-raised
      if not (hasattr(exc, "status_code") or provider.retryable(exc)):
        raise
      status = _status(exc)
      error = redact(f"{type(exc).__name__}" + (f" (HTTP {status})" if status else ""))
      if provider.fatal(exc):
        return Outcome(None, attempt, redact(f"{error}: {exc}"), fatal=True)
      if not provider.retryable(exc):
        return Outcome(None, attempt, redact(f"{error}: {exc}"))
      if attempt < max_attempts:
        backoff.sleep(backoff.delay(attempt, retry_after_s(exc)))
  return Outcome(None, max_attempts, f"{error} after {max_attempts} attempts")


# ------------------------------------------------------------------------------------------------
# A run


def answer(provider, outcome: Outcome) -> dict:
  """What an answered request adds to its answer row (`prompts.answer_row`; module docstring)."""
  reply = outcome.reply
  return {
    "reasoning_effort": provider.effort or "",
    "move": reply.move,
    "failure": reply.failure,
    "reply": redact(reply.text),
    "reasoning": redact(reply.reasoning),
    "latency_s": round(reply.latency_s, 4),
    "input_tokens": reply.input_tokens,
    "output_tokens": reply.output_tokens,
    "reasoning_tokens": reply.reasoning_tokens,
    "model_id": reply.model_id,
    "stop_reason": reply.stop_reason,
    "attempts": outcome.attempts,
    "provider": provider.provider,
  }


@dataclass
class RunResult:
  answered: int = 0  # rows written by this run
  skipped: int = 0  # questions answered by an earlier run
  unanswered: list[tuple[Query, str]] = field(default_factory=list)
  stopped: str = ""  # why the run stopped early (a fatal API error), else ""


def answer_all(
  provider,
  queries: Iterable[Query],
  log: AnswerLog,
  *,
  concurrency: int = 4,
  max_attempts: int = 6,
  backoff: Backoff | None = None,
  out=sys.stderr,
) -> RunResult:
  """Answers every query not yet in `log`, `concurrency` at a time, each row appended on arrival."""
  backoff = backoff or Backoff()
  result = RunResult()
  todo = []
  for q in queries:
    key = answer_key(answer_row(q, provider.model, {"reasoning_effort": provider.effort or ""}))
    if log.has(key):
      result.skipped += 1
    else:
      todo.append(q)
  total, start, last_print = len(todo), time.perf_counter(), 0.0
  stop = threading.Event()

  def one(q: Query) -> tuple[Query, Outcome | None]:
    if stop.is_set():
      return q, None
    return q, call_with_retries(provider, q, max_attempts=max_attempts, backoff=backoff)

  with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
    pending = {pool.submit(one, q) for q in todo[: max(1, concurrency)]}
    queue = iter(todo[max(1, concurrency) :])
    done_count = 0
    while pending:
      done, pending = wait(pending, return_when=FIRST_COMPLETED)
      for future in done:
        q, outcome = future.result()
        done_count += 1
        if outcome is None:
          result.unanswered.append((q, "not asked: the run stopped"))
        elif outcome.reply is None:
          result.unanswered.append((q, outcome.error))
          print(f"unanswered {q.condition} {q.fen}: {outcome.error}", file=out, flush=True)
          if outcome.fatal and not stop.is_set():
            stop.set()
            result.stopped = outcome.error
        elif log.append(answer_row(q, provider.model, answer(provider, outcome))):
          result.answered += 1
        nxt = next(queue, None)
        if nxt is not None:
          pending.add(pool.submit(one, nxt))
      now = time.perf_counter() - start
      if now - last_print >= 10 or not pending:
        last_print = now
        rate = done_count / now if now > 0 else 0.0
        left = (total - done_count) / rate if rate > 0 else float("nan")
        print(
          f"{done_count}/{total} asked ({result.skipped} answered before), {rate:.2f}/s, "
          f"{left:.0f} s left",
          file=out,
          flush=True,
        )
  return result
