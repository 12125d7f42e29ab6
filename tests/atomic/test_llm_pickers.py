"""The API move-pickers against a local fake of each provider's wire format (`fake_llm_api`).

Requests go to 127.0.0.1 only: the OpenAI and Anthropic SDKs are pointed at the fake by
`base_url` (the `--base-url` flag, or the SDKs' own OPENAI_BASE_URL / ANTHROPIC_BASE_URL, which
stand for the official endpoints). Keys are fake and set in the environment only.
"""

import json
import os
import signal
import subprocess
import sys
import time

import chess
import pytest
from conftest import REPO
from fake_llm_api import FakeAPI, answer_move, usage_of

from chessjax.atomic import llm, pickers, prompts, report, scoring
from chessjax.atomic.answer_log import AnswerLog, answer_key

A = chess.STARTING_FEN
B = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"
C = "rnbqkb1r/pppp1ppp/5n2/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"
KEYS = {"OPENAI_API_KEY": "sk-fake-CANARY-0penai-7f3e", "ANTHROPIC_API_KEY": "sk-ant-CANARY-a9c1"}


@pytest.fixture
def keys(monkeypatch):
  for name, value in KEYS.items():
    monkeypatch.setenv(name, value)
  monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
  monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
  return monkeypatch


def _read(path):
  return [json.loads(line) for line in open(path)]


def _provider(kind, api, effort, env, timeout=5.0):
  if kind == "openai":  # the official endpoint, reached through the SDK's environment override
    env.setenv("OPENAI_BASE_URL", api.openai_url)
    return llm.OpenAIChat("gpt-5.4", effort, timeout=timeout)
  if kind == "compatible":
    return llm.OpenAIChat("local-model", effort, base_url=api.openai_url, timeout=timeout)
  return llm.AnthropicMessages(
    "claude-opus-4-6", effort, base_url=api.anthropic_url, timeout=timeout
  )


def _expected(query, provider, effort, *, move, failure, reply, attempts, thinking):
  usage = usage_of(query.prompt, thinking)
  kind = provider.provider
  reasons = f"I think about {query.fen}."
  return {
    "fen": query.fen,
    "variant": query.variant,
    "prompt": query.prompt_kind,
    "model": provider.model,
    "reasoning_effort": effort or "",
    "move": move,
    "failure": failure,
    "reply": reply,
    "reasoning": reasons if (kind == "openai" or thinking) else "",
    "input_tokens": usage["input"],
    "output_tokens": usage["output"],
    "reasoning_tokens": usage["reasoning"],
    "model_id": provider.model + "-2026-01-01",
    "stop_reason": (
      {"openai": "tool_calls", "anthropic": "tool_use"}[kind]
      if failure in (None, "move_not_in_list", "malformed_arguments")
      else {"openai": "stop", "anthropic": "end_turn"}[kind]
    ),
    "attempts": attempts,
    "provider": kind,
  }


@pytest.mark.parametrize(
  "kind,effort",
  [
    ("openai", "none"),
    ("openai", "high"),
    ("compatible", None),
    ("anthropic", "none"),
    ("anthropic", "high"),
  ],
)
def test_answers_retries_and_failures_exactly(tmp_path, keys, kind, effort):
  """Every scripted behaviour ends in the row it should: 429 (after exactly its retry-after),
  500, a timeout, no tool call, a move outside the enum, malformed arguments."""
  slept = []
  with FakeAPI() as api:
    api.script = {
      (A, "atomic"): [("429", 7)],
      (A, "chess"): [("500",), ("500",)],
      (A, "atomic_no_rules"): [("malformed",)],
      (B, "atomic"): [("no_tool",)],
      (B, "chess"): [("ok", "e2e5")],
      (B, "atomic_no_rules"): [("slow", 1.5)],
    }
    provider = _provider(kind, api, effort, keys, timeout=0.4)
    queries = [prompts.Query(f, c) for f in (A, B) for c in prompts.CONDITIONS]
    backoff = llm.Backoff(base_s=0.01, max_s=0.02, seed=0, sleep=slept.append)
    with AnswerLog(tmp_path / "a.jsonl") as log:
      result = llm.answer_all(
        provider, queries, log, concurrency=3, max_attempts=4, backoff=backoff
      )
    requests = list(api.requests)
  assert (result.answered, result.skipped, result.unanswered) == (6, 0, [])
  rows = {(r["fen"], r["variant"], r["prompt"]): r for r in _read(tmp_path / "a.jsonl")}
  assert len(rows) == 6
  thinking = effort == "high" and kind != "compatible"
  provider_kind = "anthropic" if kind == "anthropic" else "openai"
  bad_args = {"openai": 'submit_move({"move": "', "anthropic": 'submit_move({"mv": '}[provider_kind]
  for q in queries:
    row = rows[q.fen, q.variant, q.prompt_kind]
    latency = row.pop("latency_s")
    assert isinstance(latency, float) and 0 <= latency < 1.0
    legal = q.legal_moves
    text = f"Playing in {q.fen}."
    case = (q.fen, q.condition)
    move, failure, reply, attempts = answer_move(legal), None, text, 1
    if case == (A, "atomic"):
      attempts = 2
    elif case == (A, "chess"):
      attempts = 3
    elif case == (A, "atomic_no_rules"):
      move, failure = "", "malformed_arguments"
      reply = (
        text
        + "\n"
        + bad_args
        + (
          json.dumps(answer_move(legal)) + "})"
          if provider_kind == "anthropic"
          else answer_move(legal) + ")"
        )
      )
    elif case == (B, "atomic"):
      move, failure = "", "no_tool_call"
    elif case == (B, "chess"):
      move, failure = "e2e5", "move_not_in_list"
      reply = text + "\nsubmit_move(" + json.dumps({"move": "e2e5"}) + ")"
    elif case == (B, "atomic_no_rules"):
      attempts = 2  # the first try timed out
    want = _expected(
      q,
      provider,
      effort,
      move=move,
      failure=failure,
      reply=reply,
      attempts=attempts,
      thinking=thinking,
    )
    assert row == want, case
  # The 429 waited exactly its retry-after (7 s, longer than any backoff); other retries backed off.
  assert sorted(slept)[-1] == 7.0 and len(slept) == 4 and all(s <= 0.02 for s in sorted(slept)[:-1])
  # Failed answers score as failures, as the paper counts them.
  statuses = {
    scoring.move_status(r["fen"], r["variant"], r["move"]) for r in rows.values() if r["failure"]
  }
  assert statuses == {"unparsable", "illegal"}
  # The requests: the paper's prompt, one sample, the tool's enum = the condition's legal moves.
  for r in requests:
    body = r["body"]
    assert r["key"] == (
      KEYS["ANTHROPIC_API_KEY"] if provider_kind == "anthropic" else KEYS["OPENAI_API_KEY"]
    )
    prompt = body["messages"][0]["content"]
    q = next(q for q in queries if q.prompt == prompt)
    tool = body["tools"][0]
    if provider_kind == "openai":
      assert tool["function"]["name"] == "submit_move" and tool["function"]["strict"] is True
      assert tool["function"]["parameters"]["properties"]["move"]["enum"] == q.legal_moves
      assert body["tool_choice"] == "required" and body["n"] == 1
      assert body.get("reasoning_effort") == effort
      assert body.get("temperature") == (0 if effort != "high" else None)
    else:
      assert tool["input_schema"]["properties"]["move"]["enum"] == q.legal_moves
      if effort == "high":
        assert body["thinking"]["type"] == "adaptive" and body["output_config"] == {
          "effort": "high"
        }
        assert body["tool_choice"] == {"type": "auto"} and "temperature" not in body
      else:
        assert body["thinking"] == {"type": "disabled"} and body["temperature"] == 0
        assert body["tool_choice"] == {"type": "tool", "name": "submit_move"}


def test_attempts_run_out_and_the_rerun_asks_again(tmp_path, keys):
  with FakeAPI() as api:
    api.script = {(A, "chess"): [("500",)] * 3}
    provider = _provider("compatible", api, None, keys)
    queries = [prompts.Query(A, "chess"), prompts.Query(A, "atomic")]
    backoff = llm.Backoff(base_s=0.0, max_s=0.0, sleep=lambda s: None)
    with AnswerLog(tmp_path / "a.jsonl") as log:
      first = llm.answer_all(provider, queries, log, max_attempts=3, backoff=backoff)
    assert first.answered == 1 and [q for q, _ in first.unanswered] == [queries[0]]
    assert "HTTP 500" in first.unanswered[0][1] and "after 3 attempts" in first.unanswered[0][1]
    with AnswerLog(tmp_path / "a.jsonl") as log:
      second = llm.answer_all(provider, queries, log, max_attempts=3, backoff=backoff)
  assert (second.answered, second.skipped, second.unanswered) == (1, 1, [])
  rows = _read(tmp_path / "a.jsonl")
  assert sorted(r["variant"] for r in rows) == ["atomic", "chess"] and len(api.requests) == 5


def test_a_cut_last_line_is_repaired(tmp_path):
  path = tmp_path / "a.jsonl"
  row = {"fen": A, "variant": "chess", "prompt": "rules", "model": "m", "reasoning_effort": ""}
  path.write_text(json.dumps(row) + "\n" + '{"fen": "cut mid-wri')
  with AnswerLog(path) as log:
    assert log.repaired_bytes == len('{"fen": "cut mid-wri') and log.count == 1
    assert log.has(answer_key(row)) and not log.append(row)
    assert log.append({**row, "variant": "atomic"})
  assert [r["variant"] for r in _read(path)] == ["chess", "atomic"]


def _positions(tmp_path, fens):
  path = tmp_path / "positions.jsonl"
  path.write_text(
    "".join(json.dumps({"fen": f, "source": "chess", "depth": 5}) + "\n" for f in fens)
  )
  return path


def _fens(n):
  """n distinct positions: the first n+1 plies of a fixed game."""
  board, out = chess.Board(), []
  for uci in "e2e4 e7e5 g1f3 b8c6 f1b5 a7a6 b5a4 g8f6 e1g1 f8e7 f1e1 b7b5 a4b3 d7d6".split()[:n]:
    out.append(board.fen())
    board.push_uci(uci)
  return out


def _env(**extra):
  env = {k: v for k, v in os.environ.items() if not k.endswith("_BASE_URL")}
  env.update(JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO), **KEYS, **extra)
  return env


def _cli(args, env):
  return [sys.executable, "-m", "chessjax.atomic.pickers", *args]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["compatible", "anthropic"])
def test_killed_mid_run_and_restarted(tmp_path, keys, kind):
  """SIGKILL after a few rows, rerun: every question answered once, the first rows kept."""
  fens = _fens(8)
  positions, out = _positions(tmp_path, fens), tmp_path / "answers.jsonl"
  with FakeAPI(delay=0.15) as api:
    if kind == "compatible":
      args = ["--picker", "openai", "--model", "local", "--base-url", api.openai_url]
      env = _env()
    else:
      args = ["--picker", "anthropic", "--model", "claude-opus-4-6", "--effort", "high"]
      env = _env(ANTHROPIC_BASE_URL=api.anthropic_url)
    args += ["--positions", str(positions), "--out", str(out), "--concurrency", "2"]
    proc = subprocess.Popen(
      _cli(args, env), env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not out.exists() or out.read_text().count("\n") < 4):
      time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = _read(out)
    assert 4 <= len(before) < 16, "the run finished before it was killed"
    done = subprocess.run(
      _cli(args, env), env=env, cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert f"{len(before)} answered before" in done.stdout
  after = _read(out)
  keys_after = [answer_key(r) for r in after]
  assert len(after) == 16 and len(set(keys_after)) == 16
  assert after[: len(before)] == before
  assert {(r["fen"], r["variant"]) for r in after} == {
    (f, v) for f in fens for v in ("atomic", "chess")
  }
  for r in after:
    legal = prompts.legal_moves(r["fen"], r["variant"])
    assert r["move"] == answer_move(legal) and r["failure"] is None


@pytest.mark.slow
def test_no_key_reaches_disk_or_output(tmp_path, keys):
  """Runs of both providers, a server that echoes the key in an error, and a report: the key is in
  no file written and no stream printed."""
  fens = _fens(2)
  positions = _positions(tmp_path, fens)
  streams = []
  with FakeAPI() as api:
    api.script = {(fens[0], "chess"): [("401_echo",)], (fens[1], "atomic"): [("429", 0)]}
    runs = [
      (
        ["--picker", "openai", "--model", "gpt-5.4", "--effort", "none"],
        _env(OPENAI_BASE_URL=api.openai_url),
      ),
      (
        ["--picker", "anthropic", "--model", "claude-opus-4-6"],
        _env(ANTHROPIC_BASE_URL=api.anthropic_url),
      ),
    ]
    for i, (args, env) in enumerate(runs):
      args += [
        "--positions",
        str(positions),
        "--out",
        str(tmp_path / f"a{i}.jsonl"),
        "--backoff-base",
        "0",
      ]
      done = subprocess.run(
        _cli(args, env), env=env, cwd=REPO, capture_output=True, text=True, timeout=120
      )
      streams += [done.stdout, done.stderr]
    assert any("invalid key [redacted]" in s for s in streams)  # the echoed key, removed
    keys_seen = {r["key"] for r in api.requests}
  assert keys_seen == set(KEYS.values())  # the keys did reach the server, and only it
  rows = _read(tmp_path / "a0.jsonl") + _read(tmp_path / "a1.jsonl")
  assert len(rows) >= 3
  report_out = tmp_path / "usage"
  env = _env()
  argv = ["-m", "chessjax.atomic.report", "--positions", str(positions), "--usage-only"]
  argv += [
    "--answers",
    str(tmp_path / "a0.jsonl"),
    str(tmp_path / "a1.jsonl"),
    "--out",
    str(report_out),
  ]
  done = subprocess.run(
    [sys.executable, *argv], env=env, cwd=REPO, capture_output=True, text=True, timeout=120
  )
  assert done.returncode == 0, done.stderr
  streams += [done.stdout, done.stderr]
  files = [p for p in tmp_path.rglob("*") if p.is_file()]
  assert len(files) >= 5
  for key in KEYS.values():
    for text in streams:
      assert key not in text
    for path in files:
      assert key.encode() not in path.read_bytes(), path


def test_cli_refuses_without_key_or_model(tmp_path, monkeypatch, capsys):
  monkeypatch.delenv("OPENAI_API_KEY", raising=False)
  monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
  positions = _positions(tmp_path, [A])
  argv = ["--positions", str(positions), "--out", str(tmp_path / "a.jsonl"), "--picker", "openai"]
  with pytest.raises(SystemExit):
    pickers.main(argv)
  assert pickers.main([*argv, "--model", "gpt-5.4"]) == 1
  assert "OPENAI_API_KEY" in capsys.readouterr().err
  assert not (tmp_path / "a.jsonl").exists()


def test_usage_tables_from_recorded_answers():
  rows = [
    {
      "model": "m",
      "reasoning_effort": "high",
      "variant": "atomic",
      "latency_s": 2.0,
      "input_tokens": 100,
      "output_tokens": 300,
    },
    {
      "model": "m",
      "reasoning_effort": "high",
      "variant": "atomic",
      "latency_s": 4.0,
      "input_tokens": 100,
      "output_tokens": 500,
    },
    {
      "model": "m",
      "reasoning_effort": "high",
      "variant": "chess",
      "latency_s": 3.0,
      "input_tokens": 80,
      "output_tokens": 100,
    },
    {
      "model": "m",
      "reasoning_effort": "none",
      "ruleset": "standard",
      "latency_s": 1.0,
      "input_tokens": 80,
      "tokens": 10,
    },
    {"model": "random-0", "variant": "chess"},  # no usage: not in the tables
  ]
  usage = report.usage_summary(rows, prices={"m": (2.0, 10.0)})
  latency = {(r["model"], r["reasoning_effort"]): r for r in usage["latency"]}
  assert (
    latency["m", "high"]["mean_latency_s"] == pytest.approx(3.0) and latency["m", "high"]["n"] == 3
  )
  assert latency["m", "none"]["mean_latency_s"] == 1.0 and ("random-0", "-") not in latency
  tokens = {(r["model"], r["reasoning_effort"], r["condition"]): r for r in usage["tokens"]}
  assert tokens["m", "high", "atomic"]["mean_output_tokens"] == 400.0
  assert tokens["m", "high", "chess"]["mean_output_tokens"] == 100.0
  assert tokens["m", "none", "chess"]["mean_output_tokens"] == 10.0  # old `ruleset`/`tokens` rows
  cost = {r["model"]: r for r in usage["cost"]}
  assert cost["m"]["usd"] == pytest.approx((360 * 2.0 + 910 * 10.0) / 1e6)
  text = report.usage_markdown(usage)
  assert "Table 4" in text and "Table 5" in text and "| m | high | 3 | 3.00 |" in text
  assert "| m | high | atomic | 2 | 400.0 |" in text and "$0.0098" in text
