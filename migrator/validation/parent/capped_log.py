"""A child's stdout/stderr log with a size cap on disk: the head and the tail are kept, the middle left out.

A validated program can print without end (12 GB in TMPDIR in 8 s, issue 38). The child writes into a
pipe; a thread here copies the first half of the cap to the log as it comes (readable while the child
runs) and keeps the last half in memory, written after the child's streams close.
"""

from __future__ import annotations

import os
import threading

LOG_LIMIT_BYTES = 8 * 1024 * 1024
_CHUNK = 1 << 16


class CappedLog:
    """Open `path` for a child's output; pass `fd` as its stdout, then `started()`; `close()` once it ended."""

    def __init__(self, path: str, limit: int | None = None) -> None:
        self.path = path
        self.limit = LOG_LIMIT_BYTES if limit is None else limit
        self._file = open(path, "wb")  # noqa: SIM115 - closed by the copying thread
        read_end, self.fd = os.pipe()
        self._thread = threading.Thread(target=self._copy, args=(read_end,), name=f"log {path}", daemon=True)
        self._thread.start()

    def started(self) -> None:
        """The child holds the pipe now: drop our write end, so its exit is the log's end."""
        os.close(self.fd)

    def close(self, timeout: float = 10.0) -> None:
        """Wait for the tail to be written (every writer gone); a process that escaped its scope and still
        holds the pipe is not waited for past `timeout` (its log then has the head only)."""
        self._thread.join(timeout)

    def _copy(self, read_end: int) -> None:
        head_left = self.limit // 2
        tail = bytearray()
        keep = self.limit - head_left
        dropped = 0
        try:
            while chunk := os.read(read_end, _CHUNK):
                if head_left:
                    part = chunk[:head_left]
                    self._file.write(part)
                    self._file.flush()
                    head_left -= len(part)
                    chunk = chunk[len(part):]
                tail += chunk
                if len(tail) > 2 * keep:
                    dropped += len(tail) - keep
                    del tail[:-keep]
            if len(tail) > keep:
                dropped += len(tail) - keep
                del tail[:-keep]
            if dropped:
                self._file.write(f"\n[migrate: {dropped} bytes of output left out here; the log keeps its first "
                                 f"and last {self.limit // 2} bytes]\n".encode())
            self._file.write(tail)
        finally:
            os.close(read_end)
            self._file.close()
