"""A local stand-in for the OpenAI Chat Completions and Anthropic Messages APIs, on 127.0.0.1.

It speaks each API's wire format (tool calls, reasoning / thinking text, usage fields, error
bodies) so the official SDKs parse its replies as they would a provider's. Replies are scripted
per question: `script[(fen, condition)]` is a list of behaviours taken in order, one per request
for that question, then `ok`:

  ("ok",)                 a `submit_move` call of `answer_move(legal moves)`
  ("ok", move)            a `submit_move` call of `move`, whatever the legal moves
  ("429", seconds)        HTTP 429 with `retry-after: seconds`
  ("500",)                HTTP 500
  ("no_tool",)            a text reply without a tool call
  ("malformed",)          a tool call whose arguments are not valid (OpenAI: not JSON)
  ("slow", seconds)       waits `seconds` (longer than the client's timeout), then replies ok
  ("401_echo",)           HTTP 401 whose error message echoes the request's key

Usage numbers are functions of the prompt (`usage_of`), so a test knows every row exactly.
"""

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_FEN = re.compile(r"^FEN: (.+)$", re.M)


def condition_of_prompt(prompt: str) -> str:
  if "Atomic chess rules:" in prompt:
    return "atomic"
  return "atomic_no_rules" if "in Atomic chess" in prompt else "chess"


def answer_move(legal: list[str]) -> str:
  return legal[len(legal) // 2]


def usage_of(prompt: str, thinking: bool) -> dict:
  """(input, output, reasoning) tokens the fake reports for a prompt."""
  return {
    "input": len(prompt) // 4,
    "output": 40 + (200 if thinking else 0),
    "reasoning": 200 if thinking else 0,
  }


class FakeAPI:
  def __init__(self, delay: float = 0.0):
    self.script: dict[tuple[str, str], list[tuple]] = {}
    self.delay = delay  # seconds before every reply
    self.requests: list[dict] = []  # (api, path, body, key) per request, in arrival order
    self.lock = threading.Lock()
    api = self

    class Handler(BaseHTTPRequestHandler):
      protocol_version = "HTTP/1.1"

      def log_message(self, *args):  # nothing on stderr
        pass

      def do_POST(self):
        try:
          body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
          api.handle(self, body)
        except (BrokenPipeError, ConnectionResetError):
          pass

    self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.server.daemon_threads = True
    self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

  @property
  def port(self) -> int:
    return self.server.server_address[1]

  @property
  def openai_url(self) -> str:
    return f"http://127.0.0.1:{self.port}/v1"

  @property
  def anthropic_url(self) -> str:
    return f"http://127.0.0.1:{self.port}"

  def __enter__(self):
    self.thread.start()
    return self

  def __exit__(self, *exc):
    self.server.shutdown()
    self.server.server_close()

  # ----------------------------------------------------------------------------------------------

  def handle(self, h, body: dict) -> None:
    path = h.path.split("?")[0]
    api = "openai" if path.endswith("/chat/completions") else "anthropic"
    key = h.headers.get("authorization", "").removeprefix("Bearer ") or h.headers.get("x-api-key")
    prompt = body["messages"][0]["content"]
    fen, condition = _FEN.search(prompt).group(1), condition_of_prompt(prompt)
    tool = body["tools"][0]
    schema = tool["function"]["parameters"] if api == "openai" else tool["input_schema"]
    legal = schema["properties"]["move"]["enum"]
    with self.lock:
      self.requests.append({"api": api, "path": path, "body": body, "key": key})
      steps = self.script.get((fen, condition), [])
      step = steps.pop(0) if steps else ("ok",)
    if self.delay:
      time.sleep(self.delay)
    kind = step[0]
    if kind == "slow":
      time.sleep(step[1])
      kind, step = "ok", ("ok",)
    if kind == "429":
      self._error(h, api, 429, "rate_limit_error", "slow down", {"retry-after": str(step[1])})
    elif kind == "500":
      self._error(h, api, 500, "api_error", "internal error", {})
    elif kind == "401_echo":
      self._error(h, api, 401, "authentication_error", f"invalid key {key}", {})
    else:
      thinking = (
        body.get("thinking", {}).get("type") == "adaptive"
        if api == "anthropic"
        else body.get("reasoning_effort") == "high"
      )
      move = step[1] if kind == "ok" and len(step) > 1 else answer_move(legal)
      reply = (self._openai if api == "openai" else self._anthropic)(
        body, kind, move, usage_of(prompt, thinking), fen
      )
      self._send(h, 200, reply, {})

  def _openai(self, body, kind, move, usage, fen) -> dict:
    message = {
      "role": "assistant",
      "content": f"Playing in {fen}.",
      "reasoning_content": f"I think about {fen}.",
    }
    if kind == "malformed":
      arguments = '{"move": "' + move
    else:
      arguments = json.dumps({"move": move})
    if kind != "no_tool":
      message["tool_calls"] = [
        {
          "id": "call_1",
          "type": "function",
          "function": {"name": "submit_move", "arguments": arguments},
        }
      ]
    return {
      "id": "chatcmpl-fake",
      "object": "chat.completion",
      "created": 0,
      "model": body["model"] + "-2026-01-01",
      "choices": [
        {
          "index": 0,
          "message": message,
          "finish_reason": "stop" if kind == "no_tool" else "tool_calls",
        }
      ],
      "usage": {
        "prompt_tokens": usage["input"],
        "completion_tokens": usage["output"],
        "total_tokens": usage["input"] + usage["output"],
        "completion_tokens_details": {"reasoning_tokens": usage["reasoning"]},
      },
    }

  def _anthropic(self, body, kind, move, usage, fen) -> dict:
    content = []
    if usage["reasoning"]:
      content.append({"type": "thinking", "thinking": f"I think about {fen}.", "signature": "c2ln"})
    content.append({"type": "text", "text": f"Playing in {fen}."})
    if kind != "no_tool":
      args = {"mv": move} if kind == "malformed" else {"move": move}
      content.append({"type": "tool_use", "id": "toolu_1", "name": "submit_move", "input": args})
    return {
      "id": "msg_fake",
      "type": "message",
      "role": "assistant",
      "model": body["model"] + "-2026-01-01",
      "content": content,
      "stop_reason": "end_turn" if kind == "no_tool" else "tool_use",
      "stop_sequence": None,
      "usage": {
        "input_tokens": usage["input"],
        "output_tokens": usage["output"],
        "output_tokens_details": {"thinking_tokens": usage["reasoning"]},
      },
    }

  def _error(self, h, api, status, kind, message, headers) -> None:
    if api == "openai":
      body = {"error": {"message": message, "type": kind, "code": None}}
    else:
      body = {"type": "error", "error": {"type": kind, "message": message}}
    self._send(h, status, body, headers)

  @staticmethod
  def _send(h, status, body, headers) -> None:
    data = json.dumps(body).encode()
    h.send_response(status)
    h.send_header("content-type", "application/json")
    h.send_header("content-length", str(len(data)))
    for k, v in headers.items():
      h.send_header(k, v)
    h.end_headers()
    h.wfile.write(data)
