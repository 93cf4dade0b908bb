"""Reading a file we did not write (sources, `.gitignore`, configs, `[tool.migrate]`, baselines, the fix
record): only a regular file, never more than a size cap, and where a root is given never one that
resolves outside it.

Opening is ``O_NONBLOCK`` (a FIFO never blocks, whoever swapped it in after the check) and
``O_NOCTTY``; the path is checked with ``stat`` before it is opened (a device is never opened: some
have side effects on open) and the open file again with ``fstat``; reading stops one byte past the cap
(``/dev/zero`` or a file that grows cannot exhaust memory). A refusal is an :class:`InputRefused`, an
``OSError`` whose text is the reason, so every caller that reports "cannot read FILE: why" already
handles it.
"""

from __future__ import annotations

import errno
import os
import stat

MIB = 1 << 20
MAX_SOURCE_BYTES = 2 * MIB  # a Python or text file; larger is generated code or data (2 MiB of `x = 1` parse in ~0.9 GB)
MAX_NOTEBOOK_BYTES = 32 * MIB  # notebooks carry their outputs (images) in the file
MAX_TOOL_FILE_BYTES = 64 * MIB  # baselines, fix records, censuses, validation results
MAX_SMALL_BYTES = 1 * MIB  # `.gitignore`, pyproject.toml


class InputRefused(OSError):
    """A file not read because of what it is (its text is the reason, without the path)."""

    def __init__(self, path: str | os.PathLike[str], reason: str, too_big: bool = False) -> None:
        super().__init__(errno.EINVAL, reason, os.fspath(path))
        self.reason = reason
        self.too_big = too_big

    def __str__(self) -> str:
        return self.reason


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


def _size(n: int) -> str:
    return f"{n / MIB:.1f} MiB" if n >= MIB else f"{n} bytes"


def inside_root(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """Whether ``path``, every link followed, lies in ``root`` (also followed)."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def read_bytes(path: str | os.PathLike[str], limit: int, root: str | os.PathLike[str] | None = None) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit``); :class:`InputRefused` for anything
    else, ``FileNotFoundError``/``PermissionError`` as ``open`` raises them."""
    if root is not None and not inside_root(path, root):
        raise InputRefused(path, f"resolves outside the project root {root} (through a link or '..'): not read")
    before = os.stat(path)
    if not stat.S_ISREG(before.st_mode):
        raise InputRefused(path, f"is {_kind(before.st_mode)}, not a regular file: not read")
    if before.st_size > limit:
        raise InputRefused(path, f"is {_size(before.st_size)}, over the {_size(limit)} limit for this kind of file: not read",
                           too_big=True)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode):  # swapped between the check and the open
            raise InputRefused(path, f"is {_kind(now.st_mode)}, not a regular file: not read")
        chunks, total = [], 0
        while total <= limit:
            # a byte more than the file holds (so growth shows) or 64 KiB, not a MiB buffer for every file
            chunk = os.read(fd, min(limit + 1 - total, MIB, max(now.st_size + 1 - total, 64 * 1024)))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    finally:
        os.close(fd)
    if total > limit:
        raise InputRefused(path, f"grew past the {_size(limit)} limit while read: not read", too_big=True)
    return b"".join(chunks)


def read_head(path: str | os.PathLike[str], size: int) -> bytes:
    """The first ``size`` bytes of the regular file ``path`` (however long it is)."""
    try:
        return read_bytes(path, size)
    except InputRefused as exc:
        if not exc.too_big:
            raise
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputRefused(path, "is not a regular file: not read")
        return os.read(fd, size)
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], limit: int, root: str | os.PathLike[str] | None = None,
              errors: str = "strict") -> str:
    """:func:`read_bytes` decoded as UTF-8 (``UnicodeDecodeError`` with ``errors="strict"``)."""
    return read_bytes(path, limit, root).decode("utf-8", errors)
