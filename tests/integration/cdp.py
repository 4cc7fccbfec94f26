"""A small Chrome DevTools Protocol client for the browser tests: headless Chromium, one page.

It starts Debian's ``chromium`` headless with a throw-away profile, opens one page target over
its websocket (``websocket-client``, which the Kubernetes client already depends on), and
records what the tests check: console errors, uncaught exceptions, and every URL the page
requested. Screenshots come back as PNG bytes.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from typing import Any

import websocket

__all__ = ["Browser", "chromium_path"]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """Headless Chromium with one page; use as a context manager."""

    def __init__(self, *, width: int = 1400, height: int = 900) -> None:
        path = chromium_path()
        if path is None:
            raise RuntimeError("no chromium on PATH")
        self._profile = tempfile.TemporaryDirectory(prefix="lahar-chromium-")
        self._proc = subprocess.Popen(
            [path, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--disable-background-networking", "--hide-scrollbars",
             f"--window-size={width},{height}", "--remote-debugging-port=0",
             f"--user-data-dir={self._profile.name}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = self._devtools_port()
        targets = json.loads(urllib.request.urlopen(
            f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        page = next(t for t in targets if t.get("type") == "page")
        self._ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=20,
                                               suppress_origin=True)
        self._next = 0
        self._lock = threading.Lock()
        self.console_errors: list[str] = []
        self.requests: list[str] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _devtools_port(self) -> int:
        assert self._proc.stderr is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self._proc.stderr.readline()
            found = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if found:
                threading.Thread(target=self._drain, daemon=True).start()
                return int(found.group(1))
            if not line and self._proc.poll() is not None:
                break
        raise RuntimeError("chromium did not start its DevTools endpoint")

    def _drain(self) -> None:
        assert self._proc.stderr is not None
        for _ in self._proc.stderr:
            pass

    def _event(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.console_errors.append(" ".join(str(a.get("value", a.get("description")))
                                                for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.console_errors.append(str(details.get("exception", {}).get("description")
                                           or details.get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.console_errors.append(params["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        with self._lock:
            self._next += 1
            ident = self._next
            self._ws.send(json.dumps({"id": ident, "method": method, "params": params}))
            while True:
                message = json.loads(self._ws.recv())
                if message.get("id") == ident:
                    if "error" in message:
                        raise RuntimeError(f"{method}: {message['error']}")
                    return dict(message.get("result", {}))
                self._event(message)

    def pump(self, seconds: float) -> None:
        """Take the events that arrive within ``seconds``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._ws.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                self._event(json.loads(self._ws.recv()))
            except websocket.WebSocketTimeoutException:
                break
        self._ws.settimeout(20)

    def open(self, url: str, *, settle: float = 0.5) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")
        self.pump(settle)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, *, timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {expression}")
            self.pump(0.2)

    def screenshot(self) -> bytes:
        return base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])

    def close(self) -> None:
        try:
            self._ws.close()
        finally:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
