"""A tiny headless-Chromium driver over `--remote-debugging-pipe` (the DevTools protocol on fds 3/4).

Used by the browser tests and by docs/make_screenshots.py: load a page at a given width, evaluate
JavaScript in it (DevTools evaluation is not subject to the page's Content-Security-Policy) and
capture PNG screenshots of regions. No extra packages: only Debian's `chromium` binary.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "") if p and Path(p).exists()), None)


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless Chromium with one page. Use as a context manager."""

    def __init__(self, width: int = 1400, height: int = 900, timeout: float = 60.0):
        if CHROMIUM is None:
            raise BrowserError("chromium is not installed")
        self.width, self.height, self.timeout = width, height, timeout
        self._profile = tempfile.TemporaryDirectory(prefix="migrate-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # the child reads commands on fd 3 and writes replies on fd 4
        os.set_inheritable(to_child_r, True)
        os.set_inheritable(from_child_w, True)
        cmd = [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
            "--hide-scrollbars", "--force-device-scale-factor=1", "--remote-debugging-pipe",
            f"--user-data-dir={self._profile.name}", f"--window-size={width},{height}", "about:blank",
        ]

        def wire_fds() -> None:  # in the child: duplicates first, so that neither end overwrites the other
            read_end, write_end = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self._log = Path(self._profile.name) / "chromium.log"  # a file, so that a chatty browser never blocks
        with self._log.open("wb") as log:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                                          preexec_fn=wire_fds, pass_fds=(3, 4))
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None
        target = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=target["targetId"], flatten=True, session=False)[
            "sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    # ------------------------------------------------------------------ protocol
    def _read_message(self) -> dict[str, Any]:
        import select

        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_child], [], [], self.timeout)
            if not ready:
                raise BrowserError(f"chromium did not answer within {self.timeout} s")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise BrowserError("chromium closed the pipe: " + self._stderr_tail())
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, session: bool = True, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read_message()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, event: str) -> dict[str, Any]:
        for i, seen in enumerate(self.events):
            if seen.get("method") == event:
                return self.events.pop(i)
        while True:
            message = self._read_message()
            if message.get("method") == event:
                return message
            self.events.append(message)

    # ------------------------------------------------------------------ page
    def open(self, url: str) -> None:
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"script failed: {result['exceptionDetails'].get('text')}: "
                               f"{result['exceptionDetails'].get('exception', {}).get('description', '')}")
        return result["result"].get("value")

    def console_errors(self) -> list[str]:
        """Console errors and uncaught exceptions seen so far."""
        out = []
        for e in self.events:
            if e.get("method") == "Runtime.exceptionThrown":
                out.append(str(e["params"]["exceptionDetails"].get("text")))
            elif e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") in ("error", "warning"):
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in e["params"]["args"]))
        return out

    def screenshot(self, path: Path, x: float, y: float, width: float, height: float) -> Path:
        """A PNG of the page region (CSS pixels, page coordinates)."""
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": x, "y": y, "width": width, "height": height, "scale": 1})
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    # ------------------------------------------------------------------ lifetime
    def _stderr_tail(self) -> str:
        return self._log.read_text(errors="replace")[-2000:] if self._log.exists() else ""

    def close(self) -> None:
        try:
            self.call("Browser.close", session=False)
        except (BrowserError, OSError):
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
