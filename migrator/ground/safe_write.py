"""The one writer for every file the tool writes (fixed sources, the fix record, reports, caches,
census, launch scripts, validation records). What happens is decided by what the target is (its
`stat`), never by where it is (a tree under /dev/shm is as regular as one under /home):

- a new path or a regular file: replaced atomically (temporary file in the same folder, fsync,
  rename), keeping the replaced file's mode (setuid/setgid included), owner and group (where
  permitted), and its extended attributes (POSIX ACLs are `system.posix_acl_*` attributes); when
  the mode bits or an attribute cannot be carried over, the write is refused for that file rather
  than the file silently losing them;
- a regular file with more than one hard link: refused (replacing it would split the links, the
  other names keeping the old text while the caller believes it written);
- a character device, FIFO or socket (`-o /dev/null`, a named pipe): written in place, never
  appended to; one of this process's own descriptors (`/dev/stdout`, `/proc/self/fd/1`) is written
  through that descriptor, so a shell's `>` or `>>` file gets the bytes as the shell opened it;
- a folder or block device: refused;
- with `root`: the path and the file a symlink at it points to must lie inside the root, else
  refused; without `root` (outputs the user named) a symlink is followed and its target written.

Only the standard library: the command line imports it on every run.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
from collections.abc import Callable
from pathlib import Path

TEMP_SUFFIX = ".migrate-tmp"
# what `write_bytes` names its temporary files: `.<name>.<writer pid>-<8 mkstemp characters>.migrate-tmp`
# (the writer also holds an flock on it); names without the pid are an older version's
TEMP_NAME = re.compile(r"^\..+\.(?:(?P<pid>[0-9]+)-)?[a-z0-9_]{8}" + re.escape(TEMP_SUFFIX) + r"$")
# links that name one of this process's open descriptors (never resolved: a pipe has no path)
_OWN_DESCRIPTOR = re.compile(r"^/(?:dev/(?P<std>stdin|stdout|stderr)|dev/fd/(?P<fd>\d+)|"
                             r"proc/(?:self|thread-self|(?P<pid>\d+))/fd/(?P<pfd>\d+))$")
_STD_FDS = {"stdin": 0, "stdout": 1, "stderr": 2}


class UnsafeWrite(OSError):
    """A write that would land outside the root, replace a symlink or a folder, split hard links or
    drop a file's mode bits or attributes; refused."""


def write_text(path: str | Path, text: str, *, root: Path | None = None, mode: int | None = None) -> None:
    write_bytes(path, text.encode("utf-8"), root=root, mode=mode)


def write_bytes(path: str | Path, data: bytes, *, root: Path | None = None, mode: int | None = None,
                before_replace: Callable[[], None] | None = None) -> None:
    """Write `data` to `path` as the module docstring says. `mode` is a new file's permission bits
    (default: what the umask gives); a replaced regular file keeps its own. `before_replace` runs
    right before the target changes (after the temporary file is synced) and may raise to keep it.
    Raises OSError."""
    path = Path(path)
    fd = _own_descriptor(path) if root is None else None
    if fd is not None:
        if before_replace is not None:
            before_replace()
        _write_descriptor(fd, data)
        return
    target = _target(path, root)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if root is not None and not stat.S_ISDIR(st.st_mode):  # a tree's own file: a FIFO there would block us
            raise UnsafeWrite(f"{path}: is not a regular file (a FIFO, device or socket in the tree); refused")
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode):
            if before_replace is not None:
                before_replace()
            _write_in_place(target, data)
            return
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise UnsafeWrite(f"{path}: is {kind}; refused")
    if st is not None and st.st_nlink > 1:
        raise UnsafeWrite(f"{path}: has {st.st_nlink} hard links; replacing it would leave the other names with "
                          "the old content; refused (break the link, or write a copy)")
    _atomic_replace(target, data, st, mode, before_replace)


def _own_descriptor(path: Path) -> int | None:
    """The descriptor of this process that `path` names through its chain of links (`/dev/stdout`
    -> /proc/self/fd/1), or None."""
    hop = path.absolute()
    for _ in range(40):  # the kernel's own limit on a chain of links
        found = _OWN_DESCRIPTOR.match(str(hop))
        if found:
            if found["pid"] is not None and int(found["pid"]) != os.getpid():
                return None
            number = found["fd"] or found["pfd"]
            return int(number) if number is not None else _STD_FDS[found["std"]]
        if not hop.is_symlink():
            return None
        hop = Path(os.path.normpath(hop.parent / os.readlink(hop)))
    return None


def _write_descriptor(fd: int, data: bytes) -> None:
    if fd in (1, 2):  # what Python buffered for the same descriptor goes first
        stream = sys.stdout if fd == 1 else sys.stderr
        if stream is not None:
            stream.flush()
    _write_all(fd, data)


def _target(path: Path, root: Path | None) -> Path:
    """The file the bytes go to (`path`, or where its links lead; checked against `root` if given)."""
    if root is None:
        return Path(os.path.realpath(path)) if path.is_symlink() else path
    real_root = Path(os.path.realpath(root))
    folder = Path(os.path.realpath(path.parent))
    if not folder.is_relative_to(real_root):
        raise UnsafeWrite(f"{path}: would be written to {folder / path.name}, outside the root {root}; refused")
    final = folder / path.name
    if final.is_symlink():
        real = Path(os.path.realpath(final))
        if not real.is_relative_to(real_root):
            raise UnsafeWrite(f"{path}: is a symlink to {real}, outside the root {root}; refused")
        return real
    return final


def _write_in_place(target: Path, data: bytes) -> None:
    # a device, FIFO or socket: no O_CREAT (it exists), no O_APPEND, O_NONBLOCK never (a reader comes)
    fd = os.open(target, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for a file since the stat: never written into
            raise UnsafeWrite(f"{target}: became a regular file while being written; refused")
        _write_all(fd, data)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _atomic_replace(path: Path, data: bytes, st: os.stat_result | None, mode: int | None,
                    before_replace: Callable[[], None] | None) -> None:
    import tempfile  # here: (shutil, random, bz2, lzma) only where a file is replaced, not for stdout or /dev/null

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}-", suffix=TEMP_SUFFIX)
    fh = os.fdopen(fd, "wb")
    try:
        _lock(fd)  # held until the rename: a sweep in another process sees a live writer (temp_writer_gone)
        fh.write(data)
        fh.flush()
        os.fsync(fd)
        if st is not None:
            _keep_owner(tmp, st)  # first: a chown clears setuid/setgid
            _keep_attributes(path, tmp)
            _keep_mode(tmp, st, path)
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
    finally:
        fh.close()
    _sync_folder(path.parent)


def _lock(fd: int) -> None:
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (ImportError, OSError):
        pass  # no flock here (Windows, some network mounts): the pid in the name still tells


def temp_writer_gone(path: Path, *, unstamped_gone: bool) -> bool:
    """Whether the run that wrote the temporary file `path` (a `TEMP_NAME`) is over, so the file may go:
    its pid (in the name) is not running here and no process holds its lock (the lock also speaks for a
    writer in another pid namespace or on another host sharing the tree). A name without a pid is an older
    version's: gone only when the caller says so (it holds the tree's fix lock)."""
    match = TEMP_NAME.match(path.name)
    if match is None or _locked(path):
        return False
    if match["pid"] is None:
        return unstamped_gone
    return not _running(int(match["pid"]))


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0  # another user's process (or a pid this system cannot have)
    return True


def _locked(path: Path) -> bool:
    try:
        import fcntl

        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (ImportError, OSError):
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


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


def _keep_mode(tmp: str, st: os.stat_result, path: Path) -> None:
    wanted = stat.S_IMODE(st.st_mode)
    os.chmod(tmp, wanted)
    got = stat.S_IMODE(os.stat(tmp).st_mode)
    if got != wanted:  # the kernel drops setgid for a group the user is not in
        raise UnsafeWrite(f"{path}: its mode {wanted:o} cannot be kept on a replacement (would be {got:o}: "
                          "not the file's owner or group); refused")


def _keep_attributes(path: Path, tmp: str) -> None:
    """Extended attributes, POSIX ACLs (`system.posix_acl_access`) included, onto the replacement."""
    if not hasattr(os, "listxattr"):
        return
    try:
        names = os.listxattr(path)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS):
            return  # the filesystem has none to keep
        raise
    for extra in set(os.listxattr(tmp)) - set(names):  # e.g. an ACL inherited from the folder's default
        _drop_attribute(tmp, extra)
    for name in names:
        try:
            value = os.getxattr(path, name)
            if _attribute(tmp, name) != value:  # an equal SELinux label needs no relabelling right
                os.setxattr(tmp, name, value)
        except OSError as exc:
            raise UnsafeWrite(f"{path}: its extended attribute {name} cannot be kept on a replacement "
                              f"({exc.strerror or exc}); refused") from exc


def _attribute(tmp: str, name: str) -> bytes | None:
    try:
        return os.getxattr(tmp, name)
    except OSError:
        return None


def _drop_attribute(tmp: str, name: str) -> None:
    try:
        os.removexattr(tmp, name)
    except OSError:
        pass  # a label the system insists on (security.*) stays what the system gave


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode(bits: int = 0o666) -> int:
    """The mode a new file with `bits` gets under the process's umask (0o777: an executable)."""
    return bits & ~_umask()
