"""A real headless browser for tests: Debian's `chromium-headless-shell`, driven over the Chrome
DevTools Protocol on a pipe (`--remote-debugging-pipe`: JSON messages ended by NUL on fds 3 and
4), so no port, no network and no client library are involved. `make test` installs the browser
(`make browser`).
"""

import base64
import fcntl
import io
import json
import os
import shutil
import subprocess
import time

BROWSER = "chromium-headless-shell"
FLAGS = (
  "--headless",
  "--no-sandbox",  # The suite runs as root in CI.
  "--disable-gpu",
  "--no-first-run",
  "--disable-background-networking",  # This machine's closed network refuses the pings.
  "--disable-component-update",
  "--disable-sync",
  "--disable-extensions",
  "--remote-debugging-pipe",
)


def executable() -> str:
  path = shutil.which(BROWSER) or shutil.which(BROWSER, path="/usr/bin")
  if path is None:
    raise RuntimeError(f"{BROWSER} is not installed: run `make browser` (Debian package {BROWSER})")
  return path


class Browser:
  """One browser process with one page; `call` sends a command and returns its result, keeping
  every event it reads (console messages, exceptions) in `events`."""

  def __init__(self, user_data_dir, timeout: float = 30.0):
    self.timeout, self.events, self._id, self._buffer = timeout, [], 0, b""
    to_browser, self._write = os.pipe()
    self._read, from_browser = os.pipe()

    def fds():  # In the child: its end of each pipe as fd 3 (commands) and fd 4 (replies).
      a = fcntl.fcntl(to_browser, fcntl.F_DUPFD, 10)
      b = fcntl.fcntl(from_browser, fcntl.F_DUPFD, 10)
      os.dup2(a, 3)
      os.dup2(b, 4)

    self.proc = subprocess.Popen(
      [executable(), *FLAGS, f"--user-data-dir={user_data_dir}", "about:blank"],
      preexec_fn=fds,
      pass_fds=(3, 4),
      stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL,
    )
    os.close(to_browser)
    os.close(from_browser)
    self.session = None
    target = self.call("Target.createTarget", url="about:blank")["targetId"]
    attached = self.call("Target.attachToTarget", targetId=target, flatten=True)
    self.session = attached["sessionId"]
    for domain in ("Page", "Runtime", "Log"):
      self.call(f"{domain}.enable")
    self.call("Emulation.setDeviceMetricsOverride", width=1200, height=800, deviceScaleFactor=1,
              mobile=False)  # fmt: skip

  def _message(self) -> dict:
    deadline = time.monotonic() + self.timeout
    while b"\0" not in self._buffer:
      if time.monotonic() > deadline or self.proc.poll() is not None:
        raise TimeoutError(f"no reply from {BROWSER} (exit code {self.proc.poll()})")
      chunk = os.read(self._read, 1 << 16)
      if not chunk:
        raise RuntimeError(f"{BROWSER} closed its pipe (exit code {self.proc.wait(5)})")
      self._buffer += chunk
    text, self._buffer = self._buffer.split(b"\0", 1)
    return json.loads(text)

  def call(self, method: str, **params) -> dict:
    self._id += 1
    message = {"id": self._id, "method": method, "params": params}
    if self.session is not None:
      message["sessionId"] = self.session
    os.write(self._write, json.dumps(message).encode() + b"\0")
    while True:
      reply = self._message()
      if reply.get("id") == self._id:
        if "error" in reply:
          raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]
      self.events.append(reply)

  def wait_for(self, method: str) -> dict:
    for event in self.events:
      if event.get("method") == method:
        return event
    while True:
      event = self._message()
      self.events.append(event)
      if event.get("method") == method:
        return event

  def open(self, url: str) -> None:
    self.call("Page.navigate", url=url)
    self.wait_for("Page.loadEventFired")

  def evaluate(self, expression: str):
    result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
    if "exceptionDetails" in result:
      raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
    return result["result"].get("value")

  def key(self, key: str, code: int) -> None:
    for kind in ("keyDown", "keyUp"):
      self.call("Input.dispatchKeyEvent", type=kind, key=key, code=key, windowsVirtualKeyCode=code)

  def screenshot(self):
    """The page as an RGB array [height, width, 3]."""
    import numpy as np
    from PIL import Image

    png = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))

  def errors(self) -> list[str]:
    """Console errors, uncaught exceptions and error log entries seen so far."""
    out = []
    for e in self.events:
      method, params = e.get("method"), e.get("params", {})
      if method == "Runtime.exceptionThrown":
        out.append(json.dumps(params["exceptionDetails"])[:500])
      elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
        out.append(json.dumps(params.get("args"))[:500])
      elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
        out.append(params["entry"].get("text", "")[:500])
    return out

  def close(self) -> None:
    self.session = None  # Browser.close goes to the browser, not the page.
    try:
      self.call("Browser.close")
    except (RuntimeError, TimeoutError, OSError):
      pass
    try:
      self.proc.wait(10)
    except subprocess.TimeoutExpired:
      self.proc.kill()
      self.proc.wait()
    os.close(self._read)
    os.close(self._write)
