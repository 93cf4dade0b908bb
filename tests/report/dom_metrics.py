"""Measure a rendered HTML report in headless Chromium without touching the report itself: a copy of the
page gets a measuring <script> appended (its hash added to the copy's Content-Security-Policy, so the
page's own script still runs under the policy it ships with), Chromium loads the copy with `--dump-dom`,
and the script's JSON is read back from the dumped DOM. Also a full-window screenshot."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "") if p and Path(p).exists()), None)
WIDTH, HEIGHT = 1280, 900

# Everything in its default state: nothing is opened or clicked before measuring.
MEASURE_JS = """
(function () {
  function box(el) {
    if (!el) { return null; }
    var r = el.getBoundingClientRect();
    return {top: r.top + window.scrollY, bottom: r.bottom + window.scrollY, width: r.width, height: r.height};
  }
  // the first manual action's heading: rule, name and effort (older pages: the first group's heading)
  var firstAction = document.querySelector("#manual-actions .action h3") || document.querySelector("section.group h3");
  // parts that must stay on one line: a path part or `file:line`, a rule code
  var split = Array.prototype.filter.call(document.querySelectorAll(".nb, a.code"), function (el) {
    return el.getClientRects().length > 1;
  }).map(function (el) { return el.textContent; });
  var out = {
    scrollHeight: document.documentElement.scrollHeight,
    scrollWidth: document.documentElement.scrollWidth,
    clientWidth: document.documentElement.clientWidth,
    ready: document.documentElement.getAttribute("data-report-ready"),
    error: document.documentElement.getAttribute("data-report-error"),
    verdict: box(document.getElementById("verdict")),
    cards: box(document.getElementById("cards")),
    firstAction: box(firstAction),
    firstActionText: firstAction ? firstAction.textContent.trim() : null,
    laidOutParts: Array.prototype.filter.call(document.querySelectorAll(".nb"), function (el) {
      return el.getClientRects().length > 0;
    }).length,
    split: split,
    performance: box(document.getElementById("performance")),
    manual: box(document.getElementById("manual")),
    ops: box(document.getElementById("ops")),
    sections: Array.prototype.map.call(document.querySelectorAll("main h2[id]"), function (h) { return h.id; })
  };
  var pre = document.createElement("pre");
  pre.id = "dom-metrics";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
"""


def _with_measuring_script(page: str) -> str:
    digest = base64.b64encode(hashlib.sha256(MEASURE_JS.encode("utf-8")).digest()).decode("ascii")
    page, n = re.subn(r"script-src ([^;\"]*)", lambda m: f"script-src {m.group(1)} 'sha256-{digest}'", page, count=1)
    assert n == 1, "the report has no script-src policy to extend"
    return page.replace("</body>", f"<script>{MEASURE_JS}</script>\n</body>", 1)


def _chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    assert CHROMIUM is not None
    cmd = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--hide-scrollbars", "--force-device-scale-factor=1", f"--window-size={WIDTH},{HEIGHT}",
           f"--user-data-dir={profile}", "--run-all-compositor-stages-before-draw", "--virtual-time-budget=5000",
           *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def measure(report: Path, work: Path) -> dict[str, Any]:
    """The measuring script's findings for the report at `report` (the file is left as it is)."""
    copy = work / f"{report.stem}.measured.html"
    copy.write_text(_with_measuring_script(report.read_text(encoding="utf-8")), encoding="utf-8")
    proc = _chromium(work / "chromium-profile", "--dump-dom", copy.as_uri())
    found = re.search(r'<pre id="dom-metrics">(.*?)</pre>', proc.stdout, re.S)
    assert proc.returncode == 0 and found, f"chromium gave no measurement: {proc.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


def screenshot(report: Path, png: Path, work: Path) -> bytes:
    """A WIDTHxHEIGHT PNG of the report's first screen."""
    proc = _chromium(work / "chromium-profile", f"--screenshot={png}", report.as_uri())
    assert proc.returncode == 0 and png.exists(), f"chromium wrote no screenshot: {proc.stderr[-2000:]}"
    return png.read_bytes()


def png_pixels(data: bytes) -> tuple[int, int, dict[tuple[int, ...], int]]:
    """(width, height, pixel count per (r, g, b) colour) of an 8-bit RGB or RGBA PNG, decoded with the
    standard library (the five scanline filters of the PNG specification). Sub and Up rows are undone a
    whole row at a time with byte-lane arithmetic on Python integers; Average and Paeth byte by byte."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, chunks, header = 8, [], b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    width, height, depth, colour_type = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour_type in (2, 6), f"unexpected PNG format: depth {depth}, colour type {colour_type}"
    step = 3 if colour_type == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * step
    lanes = _Lanes(stride)
    previous = bytes(stride)
    rows = []
    for y in range(height):
        kind, line = raw[y * (stride + 1)], raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)]
        if kind == 1:
            line = lanes.prefix_sum(line, step)
        elif kind == 2:
            line = lanes.add(line, previous)
        elif kind in (3, 4):
            line = _average_or_paeth(kind, bytearray(line), previous, step)
        rows.append(line)
        previous = line
    pixels = b"".join(rows)
    colours = Counter(zip(pixels[0::step], pixels[1::step], pixels[2::step]))
    return width, height, dict(colours)


class _Lanes:
    """Byte-wise addition modulo 256 of whole rows, as one addition of two Python integers whose carries are
    kept from crossing into the next byte."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.low7 = int.from_bytes(b"\x7f" * size, "little")
        self.high = int.from_bytes(b"\x80" * size, "little")
        self.all = (1 << (8 * size)) - 1

    def _add(self, a: int, b: int) -> int:
        return ((a & self.low7) + (b & self.low7)) ^ ((a ^ b) & self.high)

    def add(self, line: bytes, other: bytes) -> bytes:
        total = self._add(int.from_bytes(line, "little"), int.from_bytes(other, "little"))
        return total.to_bytes(self.size, "little")

    def prefix_sum(self, line: bytes, step: int) -> bytes:
        """Each byte plus the decoded byte ``step`` before it (the Sub filter): a running sum per channel."""
        value, shift = int.from_bytes(line, "little"), step
        while shift < self.size:
            value = self._add(value, (value << (8 * shift)) & self.all)
            shift *= 2
        return value.to_bytes(self.size, "little")


def _average_or_paeth(kind: int, line: bytearray, previous: bytes, step: int) -> bytes:
    for i in range(step):  # the first pixel: no left neighbour (left and corner are 0; Paeth predicts up)
        line[i] = (line[i] + (previous[i] // 2 if kind == 3 else previous[i])) & 255
    if kind == 3:
        for i in range(step, len(line)):
            line[i] = (line[i] + (line[i - step] + previous[i]) // 2) & 255
        return bytes(line)
    for i in range(step, len(line)):
        left, up, corner = line[i - step], previous[i], previous[i - step]
        if left == up == corner:  # flat colour, most of a screenshot: every predictor gives the same byte
            line[i] = (line[i] + left) & 255
            continue
        pa, pb, pc = abs(up - corner), abs(left - corner), abs(left + up - 2 * corner)
        line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
    return bytes(line)
