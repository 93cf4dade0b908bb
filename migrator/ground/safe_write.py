"""The one writer for every file the tool writes (fixed sources, the fix record, reports, caches,
census, launch scripts, validation records).

- a new path or a regular file: replaced atomically (temporary file in the same folder, fsync,
  rename), keeping the replaced file's mode and, where permitted, its owner and group;
- a character device, FIFO or socket (`-o /dev/null`, `-o /dev/stdout`, a named pipe): written in
  place, so the target stays what it was (renaming over `/dev/null` as root destroys it);
- a folder or block device: refused;
- with `root`: the path and the file a symlink at it points to must lie inside the root, else
  refused; without `root` (outputs the user named) a symlink is followed and its target written.

Only the standard library: the command line imports it on every run.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

TEMP_SUFFIX = ".migrate-tmp"
# what `write_bytes` names its temporary files: `.<name>.<8 mkstemp characters>.migrate-tmp`
TEMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}" + re.escape(TEMP_SUFFIX) + r"$")
# devices and the open files of this process (`/dev/stdout` -> /proc/self/fd/1 -> a pipe or the
# shell's `>>` file): always written in place, never resolved nor renamed over
_IN_PLACE_PREFIXES = ("/dev/", "/proc/")


class UnsafeWrite(OSError):
    """A write that would land outside the root, replace a symlink or a folder; refused."""


def write_text(path: str | Path, text: str, *, root: Path | None = None, mode: int | None = None) -> None:
    write_bytes(path, text.encode("utf-8"), root=root, mode=mode)


def write_bytes(path: str | Path, data: bytes, *, root: Path | None = None, mode: int | None = None,
                before_replace: Callable[[], None] | None = None) -> None:
    """Write `data` to `path` as the module docstring says. `mode` is a new file's permission bits
    (default: what the umask gives); a replaced regular file keeps its own. `before_replace` runs
    right before the target changes (after the temporary file is synced) and may raise to keep it.
    Raises OSError."""
    path = Path(path)
    target, descriptor = _target(path, root)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode):
            if before_replace is not None:
                before_replace()
            _write_in_place(target, data, append=descriptor)
            return
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise UnsafeWrite(f"{path}: is {kind}; refused")
    if st is not None and descriptor:
        if before_replace is not None:
            before_replace()
        _write_in_place(target, data, append=True)  # the file behind one of our descriptors, as the shell opened it
        return
    _atomic_replace(target, data, st, mode, before_replace)


def _target(path: Path, root: Path | None) -> tuple[Path, bool]:
    """The file the bytes go to (`path`, or where its links lead; checked against `root` if given),
    and whether it is reached through /dev or /proc (`/dev/stdout`, a link to /proc/self/fd/1): then
    it is opened through the link, never resolved (a pipe has no name to resolve to)."""
    if root is None:
        absolute = path.absolute()
        hop = absolute
        for _ in range(40):  # the kernel's own limit on a chain of links
            if str(hop).startswith(_IN_PLACE_PREFIXES):
                return absolute, True
            if not hop.is_symlink():
                break
            hop = Path(os.path.normpath(hop.parent / os.readlink(hop)))
        return (Path(os.path.realpath(path)) if path.is_symlink() else path), False
    real_root = Path(os.path.realpath(root))
    folder = Path(os.path.realpath(path.parent))
    if not folder.is_relative_to(real_root):
        raise UnsafeWrite(f"{path}: would be written to {folder / path.name}, outside the root {root}; refused")
    final = folder / path.name
    if final.is_symlink():
        real = Path(os.path.realpath(final))
        if not real.is_relative_to(real_root):
            raise UnsafeWrite(f"{path}: is a symlink to {real}, outside the root {root}; refused")
        return real, False
    return final, False


def _write_in_place(target: Path, data: bytes, append: bool) -> None:
    # O_APPEND keeps what the shell already wrote to a file behind /dev/stdout; no O_CREAT: it exists
    flags = os.O_WRONLY | (os.O_APPEND if append else 0)
    fd = os.open(target, flags | getattr(os, "O_NOCTTY", 0))
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _atomic_replace(path: Path, data: bytes, st: os.stat_result | None, mode: int | None,
                    before_replace: Callable[[], None] | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if st is not None:
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
            _keep_owner(tmp, st)
        else:
            os.chmod(tmp, mode if mode is not None else new_file_mode())
        if before_replace is not None:
            before_replace()
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    """The rename itself survives a crash only once the folder is synced."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _keep_owner(tmp: str, st: os.stat_result) -> None:
    own = os.stat(tmp)
    if (own.st_uid, own.st_gid) == (st.st_uid, st.st_gid) or not hasattr(os, "chown"):
        return
    try:
        os.chown(tmp, st.st_uid, st.st_gid)
    except PermissionError:
        try:  # a user may still keep the group, if they belong to it
            os.chown(tmp, -1, st.st_gid)
        except PermissionError:
            pass


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode(bits: int = 0o666) -> int:
    """The mode a new file with `bits` gets under the process's umask (0o777: an executable)."""
    return bits & ~_umask()
